"""The git adapter: repositories, the mirror, the per-commit facts cache."""
