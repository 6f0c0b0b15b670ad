"""Faces: the Invoke tasks, the console script and the renderers that show plans, reports and errors."""
