"""Webhook payloads parsed once at the edge: only the fields Sluice uses, refs and SHAs validated."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from bot.errors import GitError
from bot.gitio import validate_ref

SHA = re.compile(r"^[0-9a-f]{40}$")
REPO_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$")


class Payload(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Repository(Payload):
    full_name: str
    default_branch: str | None = None

    @field_validator("full_name")
    @classmethod
    def _owner_slash_name(cls, value: str) -> str:
        if not REPO_NAME.match(value) or any(part in (".", "..") for part in value.split("/")):
            raise ValueError(f"not an owner/name repository: {value!r}")
        return value


class Account(Payload):
    login: str


class Installation(Payload):
    id: int
    account: Account | None = None  # present in installation events, absent from the stubs in others


class PushCommit(Payload):
    added: tuple[str, ...] = ()
    modified: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()


class PushEvent(Payload):
    ref: str
    after: str
    deleted: bool = False
    commits: tuple[PushCommit, ...] = ()  # GitHub lists at most 20

    def touches(self, path: str) -> bool:
        return any(path in (*c.added, *c.modified, *c.removed) for c in self.commits)

    repository: Repository
    installation: Installation  # every App delivery about a repository names its installation
    sender: Account | None = None

    @field_validator("ref")
    @classmethod
    def _branch_or_tag(cls, value: str) -> str:
        name = value.removeprefix("refs/heads/").removeprefix("refs/tags/")
        if name == value:
            raise ValueError(f"not a branch or tag ref: {value!r}")
        try:
            validate_ref(name)
        except GitError as exc:
            raise ValueError(exc.message) from exc
        return value

    @field_validator("after")
    @classmethod
    def _sha(cls, value: str) -> str:
        if not SHA.match(value):
            raise ValueError(f"not a commit SHA: {value!r}")
        return value


class PullRequestEnd(Payload):
    sha: str
    ref: str
    repo: Repository | None = None  # None when the head's fork was deleted

    @field_validator("sha")
    @classmethod
    def _sha(cls, value: str) -> str:
        if not SHA.match(value):
            raise ValueError(f"not a commit SHA: {value!r}")
        return value

    @field_validator("ref")
    @classmethod
    def _branch(cls, value: str) -> str:
        try:
            return validate_ref(value)
        except GitError as exc:
            raise ValueError(exc.message) from exc


class PullRequest(Payload):
    number: int
    head: PullRequestEnd
    base: PullRequestEnd
    user: Account | None = None


class PullRequestEvent(Payload):
    action: str
    number: int
    pull_request: PullRequest
    repository: Repository
    installation: Installation  # every App delivery about a repository names its installation
    sender: Account | None = None


class InstallationEvent(Payload):
    action: str  # created, deleted, suspend, unsuspend, new_permissions_accepted
    installation: Installation
    repositories: tuple[Repository, ...] = ()


class InstallationRepositoriesEvent(Payload):
    action: str  # added, removed
    installation: Installation
    repositories_added: tuple[Repository, ...] = ()
    repositories_removed: tuple[Repository, ...] = ()


class RepositoryEvent(Payload):
    """Events Sluice records now and handles in later work (comments, check runs, workflow runs)."""

    repository: Repository
    installation: Installation  # every App delivery about a repository names its installation


MODELS: dict[str, type[Payload]] = {
    "push": PushEvent,
    "pull_request": PullRequestEvent,
    "installation": InstallationEvent,
    "installation_repositories": InstallationRepositoriesEvent,
    "issue_comment": RepositoryEvent,
    "pull_request_review": RepositoryEvent,
    "check_run": RepositoryEvent,
    "check_suite": RepositoryEvent,
    "workflow_run": RepositoryEvent,
}


class RejectedPayload(ValueError):
    """A delivery that is well signed but unusable: malformed JSON or fields Sluice refuses."""


def parse(event: str, body: bytes) -> Payload:
    """The event's payload model; RejectedPayload with a clear reason for anything unusable."""
    try:
        data: Any = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RejectedPayload(f"body is not JSON: {exc}") from exc
    try:
        return MODELS[event].model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise RejectedPayload(f"{event} payload rejected at {where}: {first['msg']}") from exc


def job_key(payload: Payload) -> str | None:
    """Jobs with the same key never run at once: one job per repository (one ingestion per fork)."""
    repository = getattr(payload, "repository", None)
    if isinstance(repository, Repository):
        return repository.full_name
    installation = getattr(payload, "installation", None)
    return f"installation:{installation.id}" if isinstance(installation, Installation) else None
