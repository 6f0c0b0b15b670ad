"""Knowledge: what is true of PyTorch, CUDA and Visual Studio in general, read from build_config/."""
