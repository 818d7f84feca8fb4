"""Code that runs on the CI runners: tier suites and their reports."""
