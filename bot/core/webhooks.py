"""GitHub's payloads parsed once at the edge, webhook deliveries and the REST answers Sluice reads: only the
fields Sluice uses, refs and SHAs validated."""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

from bot.core.errors import BadInput, GitError, Unavailable, first_problem
from bot.core.refs import non_ascii_problem, validate_ref

SHA = re.compile(r"^[0-9a-f]{40}\Z")
REPO_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}")
# A push delivery lists at most 2,048 of its commits, and 3,000 changed files of each (GitHub's schema).
PUSH_COMMITS_LISTED, PUSH_FILES_LISTED = 2048, 3000
MAX_JSON_DEPTH = 64  # GitHub's payloads nest 7 deep (tests/fixtures/octokit); json.loads recurses in C
# Installation, repository and PR ids: JSON integers (not "123", true or 1.0), positive, within 63 bits.
GitHubId = Annotated[int, Field(strict=True, gt=0, le=2**63 - 1)]


def _sha(value: str) -> str:
    if not SHA.match(value):
        raise ValueError(f"not a commit SHA: {value!r}")
    return value


CommitSha = Annotated[str, AfterValidator(_sha)]


class Payload(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


def _owner_slash_name(value: str) -> str:
    if (problem := non_ascii_problem(value)) is not None:
        raise ValueError(f"not an owner/name repository: {value!a}: {problem}")
    if not REPO_NAME.fullmatch(value) or any(part in (".", "..") for part in value.split("/")):
        raise ValueError(f"not an owner/name repository: {value!r}")
    return value


RepoName = Annotated[str, AfterValidator(_owner_slash_name)]  # "owner/name", as GitHub spells it


class Repository(Payload):
    full_name: RepoName
    default_branch: str | None = None


class Account(Payload):
    login: str


class User(Account):
    type: str | None = None  # "Bot" for an App's and other bots' accounts, "User" for people


class Installation(Payload):
    id: GitHubId
    account: Account | None = None  # present in installation events, absent from the stubs in others
    suspended_at: str | None = None  # set while an owner has suspended the installation


class PushCommit(Payload):
    added: tuple[str, ...] = ()
    modified: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()


class PushEvent(Payload):
    ref: str
    after: CommitSha
    deleted: bool = False
    forced: bool = False
    commits: tuple[PushCommit, ...] = ()

    def may_touch(self, path: str) -> bool:
        """Whether the push may have changed `path`: a listed commit changed it, or the lists cannot say
        (GitHub cuts them; a forced push may move the branch back past changes no listed commit holds)."""
        changed = [(*c.added, *c.modified, *c.removed) for c in self.commits]
        cut = len(self.commits) >= PUSH_COMMITS_LISTED or any(len(c) >= PUSH_FILES_LISTED for c in changed)
        return self.forced or cut or any(path in c for c in changed)

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


class BranchEnd(Payload):
    """A branch at one end of a pull request, and the repository that holds it."""

    repo: Repository | None = None  # None when the head's repository was deleted
    ref: str

    @property
    def repo_name(self) -> str | None:
        """The repository's `owner/name`; None when it was deleted."""
        return self.repo.full_name if self.repo is not None else None

    def is_branch_of(self, repo: str, prefixes: str | tuple[str, ...]) -> bool:
        """Whether this is a branch of `repo` itself named with one of `prefixes` (Sluice's own branches: the
        same name in another repository is someone else's PR)."""
        return self.repo_name == repo and self.ref.startswith(prefixes)


class PullRequestEnd(BranchEnd):
    sha: CommitSha

    @field_validator("ref")
    @classmethod
    def _branch(cls, value: str) -> str:
        try:
            return validate_ref(value)
        except GitError as exc:
            raise ValueError(exc.message) from exc


class PullRequest(Payload):
    number: GitHubId
    head: PullRequestEnd
    base: PullRequestEnd
    user: Account | None = None
    merged: bool | None = None  # on `closed`: whether it was merged

    def on_branch_of(self, repo: str, prefixes: str | tuple[str, ...]) -> bool:
        return self.head.is_branch_of(repo, prefixes)


class Change(Payload):
    # The field's value before the edit. A job keeps the payload as `model_dump` wrote it (`from_`), and the
    # worker reads it back from there: both names are accepted.
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    from_: str | None = Field(default=None, alias="from")


class BaseChange(Payload):
    ref: Change  # the base branch before the edit


class PullChanges(Payload):
    base: BaseChange | None = None  # present when the edit changed the PR's base branch


class PullRequestEvent(Payload):
    action: str
    number: GitHubId
    pull_request: PullRequest
    repository: Repository
    installation: Installation  # every App delivery about a repository names its installation
    sender: Account | None = None
    changes: PullChanges = PullChanges()  # on `edited` only

    @property
    def text_edit(self) -> bool:
        """An `edited` event that changed only the title or body: the PR's head and base are as they were, so
        it asks for nothing a move onto another base branch would (its `changes.base`)."""
        return self.action == "edited" and self.changes.base is None


class InstallationEvent(Payload):
    action: str  # created, deleted, suspend, unsuspend, new_permissions_accepted
    installation: Installation
    repositories: tuple[Repository, ...] = ()


class InstallationRepositoriesEvent(Payload):
    action: str  # added, removed
    installation: Installation
    repositories_added: tuple[Repository, ...] = ()
    repositories_removed: tuple[Repository, ...] = ()


class Comment(Payload):
    id: GitHubId
    body: str | None = None
    user: User


class PullRequestLink(Payload):
    """Present on an issue that is a pull request; its fields are not used."""


class Issue(Payload):
    number: GitHubId
    pull_request: PullRequestLink | None = None  # set when the issue is a pull request


class IssueCommentEvent(Payload):
    action: str  # created, edited, deleted
    issue: Issue
    comment: Comment
    repository: Repository
    installation: Installation  # every App delivery about a repository names its installation


class ReviewedPull(Payload):
    number: GitHubId


class PullRequestReviewEvent(Payload):
    """A review submitted, edited or dismissed: the gate counts code owners' approvals on the head."""

    action: str
    pull_request: ReviewedPull
    repository: Repository
    installation: Installation


class CheckRunPull(Payload):
    number: GitHubId


class Label(Payload):
    name: str


class Authored(Payload):
    """What an issue and a pull request share: who opened it, and its labels."""

    user: Account | None = None  # None when GitHub answers one of a deleted account without one
    labels: tuple[Label, ...] = ()

    @property
    def author(self) -> str | None:
        return self.user.login if self.user is not None else None

    @property
    def label_names(self) -> tuple[str, ...]:
        return tuple(label.name for label in self.labels)


class FullIssue(Issue, Authored):
    """An issue with its text, author and labels: an `issues` event's, and the REST API's issue lists."""

    title: str = ""
    body: str | None = None
    user: User | None = None
    state: str = "open"  # open | closed

    @property
    def text(self) -> str:
        return self.body or ""


class IssueChanges(Payload):
    body: Change | None = None  # absent when the edit left the body as it was (a title edit)
    title: Change | None = None


class IssuesEvent(Payload):
    """An issue opened, edited, closed…: Sluice reads the edits of its dashboard issue (ticked boxes)."""

    action: str
    issue: FullIssue
    changes: IssueChanges = IssueChanges()  # on `edited` only
    repository: Repository
    installation: Installation  # every App delivery about a repository names its installation
    sender: User

    @property
    def body_before(self) -> str | None:
        return self.changes.body.from_ if self.changes.body is not None else None


class WorkflowRun(Payload):
    id: GitHubId
    name: str | None = None
    path: str = ""  # .github/workflows/<file>
    display_title: str = ""  # the run's `run-name`: Sluice's tier workflows put the tier run's id in it
    event: str = ""
    status: str | None = None
    conclusion: str | None = None  # success, failure, cancelled, timed_out, ... once completed
    head_sha: CommitSha
    run_attempt: int = 1
    html_url: str | None = None


class WorkflowRunEvent(Payload):
    action: str  # requested, in_progress, completed
    workflow_run: WorkflowRun
    repository: Repository
    installation: Installation  # every App delivery about a repository names its installation


class CheckOutput(Payload):
    title: str | None = None
    summary: str | None = None


class CheckRun(Payload):
    """A check run, as a `check_run` event carries it and as the REST API lists a commit's."""

    id: GitHubId
    name: str
    head_sha: CommitSha
    status: str | None = None  # queued, in_progress, completed
    conclusion: str | None = None  # success, failure, timed_out, ... once completed
    pull_requests: tuple[CheckRunPull, ...] = ()  # the open PRs of this repository whose head it ran on
    details_url: str | None = None
    html_url: str | None = None
    completed_at: str | None = None
    output: CheckOutput = CheckOutput()

    @property
    def completed(self) -> bool:
        return self.status == "completed"

    @property
    def state(self) -> str:
        """Its conclusion once completed, else its status (what a table of tiers shows)."""
        return self.conclusion or self.status or "queued"

    @property
    def url(self) -> str | None:
        return self.details_url or self.html_url


class RequestedAction(Payload):
    identifier: str = Field(max_length=20)


class CheckRunEvent(Payload):
    action: str  # created, completed, rerequested, requested_action
    check_run: CheckRun
    requested_action: RequestedAction | None = None  # the button a person pressed (requested_action)
    repository: Repository
    installation: Installation
    sender: User | None = None


class CheckSuite(Payload):
    id: GitHubId
    head_sha: CommitSha
    pull_requests: tuple[CheckRunPull, ...] = ()


class CheckSuiteEvent(Payload):
    action: str  # requested, rerequested (GitHub's "Re-run all checks"), completed
    check_suite: CheckSuite
    repository: Repository
    installation: Installation
    sender: User | None = None


MODELS: dict[str, type[Payload]] = {
    "push": PushEvent,
    "pull_request": PullRequestEvent,
    "installation": InstallationEvent,
    "installation_repositories": InstallationRepositoriesEvent,
    "issue_comment": IssueCommentEvent,
    "issues": IssuesEvent,
    "pull_request_review": PullRequestReviewEvent,
    "check_run": CheckRunEvent,
    "check_suite": CheckSuiteEvent,
    "workflow_run": WorkflowRunEvent,
}


class RejectedPayload(BadInput):
    """A delivery that is well signed but unusable; `status` is the HTTP answer that says why."""

    status = 422  # the JSON is fine, a field is not

    def __init__(self, message: str) -> None:
        super().__init__(
            message, "GitHub never sends such a delivery: look at what sent it; nothing was recorded"
        )


class MalformedBody(RejectedPayload):
    """The body is not JSON Sluice reads: not UTF-8, not JSON, or nested deeper than GitHub ever sends."""

    status = 400


def parse(event: str, body: bytes) -> Payload:
    """The event's payload model; RejectedPayload with a clear reason for anything unusable."""
    data = _json(body)
    try:
        return MODELS[event].model_validate(data)
    except ValidationError as exc:
        where, why = first_problem(exc)
        raise RejectedPayload(f"{event} payload rejected at {where}: {why}") from exc


def _json(body: bytes) -> Any:
    too_deep = f"body is JSON nested deeper than {MAX_JSON_DEPTH} levels; GitHub never sends that"
    if nesting_exceeds(body, MAX_JSON_DEPTH):
        raise MalformedBody(too_deep)
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MalformedBody(f"body is not JSON: {exc}") from exc
    except RecursionError as exc:  # unbalanced brackets that `nesting_exceeds` could not pair up
        raise MalformedBody(too_deep) from exc
    if _LONE_SURROGATE.search(body) and _has_lone_surrogate(data):
        # JSON allows "\ud800" alone, UTF-8 (and so neither database) cannot hold it: the delivery could never
        # be recorded, and answering 503 would have GitHub send it again and again
        raise MalformedBody("body holds an unpaired UTF-16 surrogate escape (e.g. \\ud800), which is no text")
    return data


_LONE_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")  # a surrogate escape: checked below


def _has_lone_surrogate(data: Any) -> bool:
    """Whether a decoded JSON value holds a character UTF-8 cannot encode (an unpaired surrogate)."""
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


ONLY_BRACKETS = bytes.maketrans(b"{}", b"[]")
NOT_BRACKETS = bytes(b for b in range(256) if b not in b'[]{}"')


def nesting_exceeds(body: bytes, limit: int) -> bool:
    """Whether the JSON in `body` nests arrays and objects deeper than `limit`, decided with a few
    C-speed passes over the bytes (json.loads would recurse first and raise RecursionError)."""
    # Escapes first (`\\` before `\"`, as JSON reads them left to right), then the strings themselves.
    text = body.replace(b"\\\\", b"").replace(b'\\"', b"").translate(ONLY_BRACKETS, NOT_BRACKETS)
    brackets = b"".join(text.split(b'"')[::2])
    if b"[" * (limit + 1) in brackets:
        return True
    for _ in range(limit):  # each pass removes the innermost level
        shorter = brackets.replace(b"[]", b"")
        if shorter == brackets:
            return False  # balanced and shallow, or not JSON: json.loads says which
        brackets = shorter
    return bool(brackets)


def job_key(payload: Payload) -> str | None:
    """Jobs with the same key never run at once: one job per repository (one ingestion per fork)."""
    repository = getattr(payload, "repository", None)
    if isinstance(repository, Repository):
        return repository.full_name
    installation = getattr(payload, "installation", None)
    return f"installation:{installation.id}" if isinstance(installation, Installation) else None


class PullEnd(BranchEnd):
    """One end of a pull request as the REST API answers it. The branch is kept as GitHub names it (another
    repository's PR may come from any branch name GitHub allows): Sluice validates a ref where it uses one."""

    sha: CommitSha


class Pull(Authored):
    """A pull request as GitHub's REST API answers it (`GET /pulls/N`, the open list, the create)."""

    number: GitHubId
    state: str  # open, closed
    title: str = ""
    body: str | None = None
    head: PullEnd
    base: PullEnd
    draft: bool = False
    merged: bool = False  # `GET /pulls/N` says; the list leaves it out
    merged_at: dt.datetime | None = None
    merge_commit_sha: str | None = None
    commits: int | None = None  # `GET /pulls/N` only

    @property
    def is_open(self) -> bool:
        return self.state == "open"

    def from_branch_of(self, repo: str) -> bool:
        """Whether the head is a branch of `repo` itself (the same branch name in another repository is
        someone else's PR)."""
        return self.head.repo_name == repo

    def on_branch_of(self, repo: str, prefixes: str | tuple[str, ...]) -> bool:
        return self.head.is_branch_of(repo, prefixes)


class PullReview(Payload):
    """A review of a pull request as `GET /pulls/N/reviews` lists it."""

    user: Account | None = None  # None for a deleted account
    state: str  # APPROVED, CHANGES_REQUESTED, COMMENTED, DISMISSED, PENDING
    commit_id: str | None = None  # the head it reviewed
    submitted_at: dt.datetime | None = None  # None while pending


class CollaboratorPermission(Payload):
    """An account's access to a repository (`GET /collaborators/{user}/permission`)."""

    permission: str  # admin, write, read, none (maintain reads as write, triage as read)
    role_name: str | None = None  # admin, maintain, write, triage, read, or a custom role's name


class CommitLink(Payload):
    sha: CommitSha


class CommitMessage(Payload):
    message: str


class RepoCommit(Payload):
    """A commit as `GET /commits/{sha}` answers it: only its parents and message are read."""

    sha: CommitSha
    parents: tuple[CommitLink, ...]
    commit: CommitMessage

    def first_parent(self) -> str:
        """A trunk commit's first parent; a root commit (none) is no commit a merge left on trunk."""
        if not self.parents:
            raise Unavailable(
                f"commit {self.sha[:10]} has no parent, as GitHub answers it: no merge leaves a root commit",
                "nothing to do: the job is retried; if it persists, trunk's history is not what GitHub says",
            )
        return self.parents[0].sha


class Created(Payload):
    """What GitHub answers a create with, where only the new object's id is read (a comment, a check run)."""

    id: GitHubId


class Merged(Payload):
    """`PUT /pulls/N/merge`'s answer: the commit the merge left on the base."""

    sha: CommitSha


class RepoDefaults(Payload):
    """`GET /repos/{repo}`, where only its default branch is read."""

    default_branch: str


class Branch(Payload):
    """`GET /branches/{branch}`: the commit the branch points at."""

    commit: CommitLink


class PullFile(Payload):
    """One entry of `GET /pulls/N/files`."""

    filename: str
    previous_filename: str | None = None  # a rename's old path

    @property
    def paths(self) -> tuple[str, ...]:
        return (self.filename,) if self.previous_filename is None else (self.filename, self.previous_filename)


class RepoContent(Payload):
    """`GET /contents/{path}` for a path that is not a directory: a file (up to 1 MB its bytes in base64;
    above, `encoding` is `none` and `content` empty), a symlink or a submodule."""

    type: str
    size: int | None = None
    encoding: str | None = None
    content: str = ""


class Artifact(Payload):
    """One of a workflow run's artifacts, as `GET /actions/runs/N/artifacts` lists it."""

    id: GitHubId
    name: str
    size_in_bytes: int | None = None
    expired: bool = False


class DispatchAnswer(Payload):
    """A workflow dispatch's answer with `return_run_details`: the run it started."""

    workflow_run_id: GitHubId | None = None


class GitHubApp(Payload):
    """`GET /app`, as the App itself: its slug names its bot account (`<slug>[bot]`)."""

    id: GitHubId
    slug: str = Field(min_length=1)


class InstallationToken(Payload):
    """`POST /app/installations/{id}/access_tokens`: a token and when it expires. (Its text never reaches
    a message: a malformed answer names the field, never the value.)"""

    token: str = Field(min_length=1)
    expires_at: dt.datetime
