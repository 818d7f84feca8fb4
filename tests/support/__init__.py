"""Builders the tests and benchmarks share: the GitHub simulator, scenarios, cases."""
