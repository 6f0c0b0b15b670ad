"""Planning: facts + knowledge + the user's request -> one Plan (era, toolset, environment, commands)."""
