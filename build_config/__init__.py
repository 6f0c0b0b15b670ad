"""Knowledge as data: read by pytorch_winbuild.knowledge.model, never imported for code."""
