"""Sluice core: models, config, planning, and the git/store adapters."""
