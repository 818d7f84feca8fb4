"""Errors a person can act on: what went wrong and what to do next."""

from __future__ import annotations


class SluiceError(Exception):
    """A failure with a remedy; the CLI prints both and exits 2."""

    exit_code = 2

    def __init__(self, message: str, remedy: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.remedy = remedy

    def __str__(self) -> str:
        return f"{self.message}\n  → {self.remedy}" if self.remedy else self.message


class GitError(SluiceError):
    """A git command failed or a repository is not usable as given."""


class GitAuthRejected(GitError):
    """A remote refused the token git sent (revoked, or its installation gone): a new one must be minted."""
