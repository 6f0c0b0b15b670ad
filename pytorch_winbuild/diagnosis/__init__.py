"""Diagnosis: the first real error in a build log and what it means (rules in build_config/diagnosis.toml)."""
