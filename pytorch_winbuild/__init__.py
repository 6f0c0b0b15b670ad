"""pytorch-winbuild: plan and run PyTorch source builds on Windows."""

__version__ = "0.1.0"
