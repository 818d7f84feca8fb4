"""The vocabulary and every decision: pure functions, no git, GitHub, database, clock or files."""
