"""Knowledge as data: read by pytorch_winbuild.knowledge, never imported for code."""
