"""Facts: what a machine has (Visual Studio, CUDA, Python, GPUs), probed here or read from a facts file."""
