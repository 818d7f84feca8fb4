"""What handlers do on a fork through GitHub's REST API: PRs, labels, sticky comments, check runs, issues."""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from gidgethub import BadRequest

from bot.core.errors import BadInput, DispatchRefused, MergeRefused, TooLarge
from bot.core.limits import fit_for_github
from bot.core.webhooks import (
    Artifact,
    Branch,
    CheckRun,
    CollaboratorPermission,
    Comment,
    Created,
    DispatchAnswer,
    FullIssue,
    Issue,
    Merged,
    Pull,
    PullFile,
    PullReview,
    RepoCommit,
    RepoContent,
    RepoDefaults,
    WorkflowRun,
)
from bot.github.answers import parsed, unusable
from bot.github.client import InstallationAPI

log = logging.getLogger("sluice.github")
BASE_MOVED = "Base branch was modified"  # GitHub's 405 while it recomputes a PR whose base just moved
BASE_MOVED_WAITS_S = (1.0, 2.0, 4.0)


def parse_pull(answer: object) -> Pull:
    number = answer.get("number") if isinstance(answer, Mapping) else None
    return parsed(
        Pull, answer, what=f"pull request #{number}" if isinstance(number, int) else "a pull request"
    )


class ForkGitHub:
    """One repository seen through one installation: a method per REST call (during ingestion, which calls
    to make is `bot.core.reconcile`'s decision and `bot.flows.ingest.apply` makes them)."""

    def __init__(self, api: InstallationAPI, repo: str, *, bot_login: str, app_id: int | None = None) -> None:
        self.api = api
        self.repo = repo
        self.owner = repo.split("/", 1)[0]
        self.bot_login = bot_login
        self.app_id = app_id  # Sluice's App: whose check runs count

    def _url(self, path: str) -> str:
        return f"/repos/{self.repo}{path}"

    async def open_pulls(self) -> list[Pull]:
        return [
            parse_pull(p) async for p in self.api.getiter(self._url("/pulls") + "?state=open&per_page=100")
        ]

    async def create_pull(self, *, title: str, body: str, head: str, base: str) -> Pull:
        # no maintainer_can_modify: it is for a PR from another repository, and Sluice's come from the fork
        data = {"title": title, "body": body, "head": head, "base": base}
        return parse_pull(await self.api.post(self._url("/pulls"), data=data))

    async def edit_pull(self, number: int, changes: Mapping[str, str]) -> None:
        await self.api.patch(self._url(f"/pulls/{number}"), data=dict(changes))

    async def close_pull(self, number: int, *, comment: str) -> None:
        await self.post_comment(number, comment)
        await self.api.patch(self._url(f"/pulls/{number}"), data={"state": "closed"})

    async def replace_labels(self, number: int, labels: Sequence[str]) -> None:
        await self.api.put(self._url(f"/issues/{number}/labels"), data={"labels": list(labels)})

    async def find_comment(self, number: int, *, marker: str) -> Comment | None:
        """The bot's first comment on the issue/PR that starts with `marker`, as each of Sluice's sticky
        comments does (a marker a person wrote in a command, which Sluice's reply quotes, does not count)."""
        async for answer in self.api.getiter(self._url(f"/issues/{number}/comments?per_page=100")):
            user = answer.get("user") or {}
            if user.get("login") == self.bot_login and (answer.get("body") or "").startswith(marker):
                return parsed(Comment, answer, what=f"a comment on #{number}")
        return None

    async def post_comment(self, number: int, body: str) -> int:
        created = await self.api.post(self._url(f"/issues/{number}/comments"), data={"body": body})
        return parsed(Created, created, what=f"a comment posted on #{number}").id

    async def edit_comment(self, comment_id: int, body: str) -> None:
        await self.api.patch(self._url(f"/issues/comments/{comment_id}"), data={"body": body})

    async def upsert_comment(self, number: int, *, marker: str, body: str) -> int:
        """Edit the bot's comment carrying `marker` in place, or post it; the comment's id."""
        comment = await self.find_comment(number, marker=marker)
        if comment is None:
            return await self.post_comment(number, body)
        if comment.body != body:
            await self.edit_comment(comment.id, body)
        return comment.id

    async def delete_branch(self, branch: str) -> None:
        """Delete one of Sluice's branches (a bisection's candidate); one already gone is fine."""
        try:
            await self.api.delete(self._url(f"/git/refs/heads/{branch}"))
        except BadRequest as exc:
            if exc.status_code.value not in (404, 422):
                raise

    async def react(self, comment_id: int, content: str) -> None:
        """A reaction of the App's on a comment (`+1`, `eyes`…): GitHub keeps one per content and user."""
        await self.api.post(self._url(f"/issues/comments/{comment_id}/reactions"), data={"content": content})

    async def permission(self, login: str) -> CollaboratorPermission | None:
        """`login`'s access to the repository, as GitHub's collaborator-permission API answers it; None for
        an account that is gone (or never was): GitHub's 404."""
        try:
            answer = await self.api.get(self._url("/collaborators/{login}/permission"), {"login": login})
        except BadRequest as exc:
            if exc.status_code == 404:
                return None
            raise
        return parsed(CollaboratorPermission, answer, what=f"@{login}'s permission")

    async def permission_level(self, login: str) -> str:
        """`login`'s permission on the repository as GitHub reports it: admin, write, read or none (a
        maintainer reads as write, triage as read)."""
        answer = await self.permission(login)
        return answer.permission if answer is not None else "none"

    async def check_runs(self, sha: str) -> dict[str, CheckRun]:
        """The latest check run per name on `sha`, of Sluice's App only: a workflow (or another App) can
        create a check run called `sluice/L1` too, and it must not count."""
        only = f"&app_id={self.app_id}" if self.app_id else ""
        url = self._url(f"/commits/{sha}/check-runs?filter=latest&per_page=100{only}")
        runs = [
            parsed(CheckRun, run, what=f"a check run on {sha[:10]}")
            async for run in self.api.getiter(url, iterable_key="check_runs")
        ]
        return {run.name: run for run in runs}

    async def create_check_run(self, sha: str, name: str, *, title: str) -> None:
        """A queued check run named `name` on `sha`."""
        output = {"title": title, "summary": f"{title}: queued by Sluice."}
        await self.new_check_run(sha, name, {"status": "queued", "output": output})

    async def report_check(self, sha: str, name: str, *, ok: bool, title: str, summary: str) -> None:
        """A completed check run on `sha`: how Sluice tells people about a commit it judged."""
        body = {
            "status": "completed",
            "conclusion": "success" if ok else "failure",
            "output": {"title": title, "summary": fit_for_github(summary, what="a check run's summary")},
        }
        await self.new_check_run(sha, name, body)

    async def open_issues(self, *, label: str) -> list[FullIssue]:
        """Sluice's open issues (not PRs) labelled `label`, newest first."""
        return await self._own_issues("open", label)

    async def closed_issues(self, *, label: str) -> list[FullIssue]:
        """Sluice's closed issues (not PRs) labelled `label`, newest first."""
        return await self._own_issues("closed", label)

    async def _own_issues(self, state: str, label: str) -> list[FullIssue]:
        """Only the ones the App opened: anyone who may label an issue could give a label of Sluice's to
        theirs, and Sluice edits, closes and reopens the issues it finds by label."""
        url = self._url(f"/issues?state={state}&labels={label}&per_page=100")
        issues = [parsed(FullIssue, issue, what=f"a {label} issue") async for issue in self.api.getiter(url)]
        return [i for i in issues if i.pull_request is None and i.author == self.bot_login]

    async def own_issue(self, number: int) -> FullIssue | None:
        """Issue `number` if the App opened it (any state), else None: one that is gone (GitHub's 404 or
        410), a pull request, or someone else's."""
        try:
            answer = await self.api.get(self._url(f"/issues/{number}"))
        except BadRequest as exc:
            if exc.status_code.value in (404, 410):
                return None
            raise
        issue = parsed(FullIssue, answer, what=f"issue #{number}")
        return issue if issue.pull_request is None and issue.author == self.bot_login else None

    async def add_labels(self, number: int, labels: Sequence[str]) -> None:
        """Add `labels` to the issue, keeping the ones it has."""
        await self.api.post(self._url(f"/issues/{number}/labels"), data={"labels": list(labels)})

    async def create_issue(self, *, title: str, body: str, labels: Sequence[str]) -> int:
        data = {"title": title, "body": body, "labels": list(labels)}
        return parsed(
            Issue, await self.api.post(self._url("/issues"), data=data), what="an issue opened"
        ).number

    async def edit_issue(self, number: int, *, title: str, body: str) -> None:
        await self.api.patch(self._url(f"/issues/{number}"), data={"title": title, "body": body})

    async def reopen_issue(self, number: int, *, title: str, body: str) -> None:
        await self.api.patch(
            self._url(f"/issues/{number}"), data={"state": "open", "title": title, "body": body}
        )

    async def close_issue(self, number: int, *, comment: str) -> None:
        await self.post_comment(number, comment)
        await self.api.patch(self._url(f"/issues/{number}"), data={"state": "closed"})

    async def default_branch(self) -> str:
        return parsed(RepoDefaults, await self.api.get(self._url("")), what=self.repo).default_branch

    async def branch_head(self, branch: str) -> str:
        """The commit `branch` points at."""
        answer = await self.api.get(self._url(f"/branches/{quote(branch)}"))
        return parsed(Branch, answer, what=f"branch {branch}").commit.sha

    # --- the gate and the merge

    async def get_pull(self, number: int) -> Pull:
        return parse_pull(await self.api.get(self._url(f"/pulls/{number}")))

    async def pull_reviews(self, number: int) -> list[PullReview]:
        """Every review of the PR, oldest first (GitHub's order), across pages."""
        url = self._url(f"/pulls/{number}/reviews?per_page=100")
        return [
            parsed(PullReview, review, what=f"a review of #{number}")
            async for review in self.api.getiter(url)
        ]

    async def pull_files(self, number: int) -> list[str]:
        """The paths the PR changes (a rename names its old path too), across pages."""
        url = self._url(f"/pulls/{number}/files?per_page=100")
        paths: list[str] = []
        async for entry in self.api.getiter(url):
            paths += parsed(PullFile, entry, what=f"a file of #{number}").paths
        return list(dict.fromkeys(paths))

    async def read_text(self, path: str, *, ref: str | None) -> str | None:
        """A file's text at `ref` (None: the default branch), or None when there is none. A byte that is not
        UTF-8 reads as U+FFFD (CODEOWNERS; `.github/sluice.yml` is read as bytes, and refused when it is not
        UTF-8, by `parse_config_bytes`)."""
        raw = await self.file(path, ref=ref)
        return None if raw is None else raw.decode("utf-8", "replace")

    async def in_team(self, team: str, login: str) -> bool:
        """Whether `login` is an active member of `@org/team`."""
        org, slug = team.removeprefix("@").split("/", 1)
        try:
            found = await self.api.get(f"/orgs/{org}/teams/{slug}/memberships/{login}")
        except BadRequest as exc:
            if exc.status_code == 404:
                return False
            raise
        return isinstance(found, dict) and found.get("state") == "active"

    async def merge_pull(self, number: int, *, sha: str, method: str, title: str) -> str:
        """Merge the PR at exactly `sha`; the new trunk head. MergeRefused when GitHub says no (never retried:
        a moved head must be validated again), but for GitHub's 405 "Base branch was modified", its answer
        while it recomputes a PR whose base just moved (a PR merged before it): tried again 1, 2, 4 s on."""
        data = {"sha": sha, "merge_method": method, "commit_title": title}
        for wait in (*BASE_MOVED_WAITS_S, None):
            try:
                merged = await self.api.put(self._url(f"/pulls/{number}/merge"), data=data)
            except BadRequest as exc:
                moved = exc.status_code == 405 and BASE_MOVED in str(exc)
                if moved and wait is not None:
                    await asyncio.sleep(wait)
                    continue
                if exc.status_code == 405 and (done := await self._merged_at(number, sha)) is not None:
                    return done  # an earlier try merged it and its answer was lost (a 5xx, retried)
                if exc.status_code in (405, 409, 422):
                    raise MergeRefused(int(exc.status_code), str(exc) or exc.status_code.phrase) from None
                raise
            return parsed(Merged, merged, what=f"the merge of #{number}").sha
        raise AssertionError("unreachable: the last try returns or raises")

    async def _merged_at(self, number: int, sha: str) -> str | None:
        """The commit the merge left on the base when the PR is merged already at exactly `sha`, else None."""
        pull = await self.get_pull(number)
        if pull.merged and pull.head.sha == sha and pull.merge_commit_sha:
            log.warning("#%d was merged already at %s (an earlier answer was lost)", number, sha[:10])
            return pull.merge_commit_sha
        return None

    async def get_commit(self, sha: str) -> RepoCommit:
        return parsed(RepoCommit, await self.api.get(self._url(f"/commits/{sha}")), what=f"commit {sha[:10]}")

    async def first_parent(self, sha: str) -> str:
        return (await self.get_commit(sha)).first_parent()

    async def create_tag(self, name: str, sha: str) -> bool:
        """A lightweight tag `name` on `sha`; False when the tag exists already."""
        try:
            await self.api.post(self._url("/git/refs"), data={"ref": f"refs/tags/{name}", "sha": sha})
        except BadRequest as exc:
            if exc.status_code == 422 and "already exists" in str(exc):
                return False
            raise
        return True

    # --- tier workflows

    async def dispatch_workflow(self, workflow: str, *, ref: str, inputs: Mapping[str, str]) -> int | None:
        """Start `workflow` on `ref`; the run's id when GitHub returns it (`return_run_details`), else None.
        Raises DispatchRefused for GitHub's 404 and 422."""
        data = {"ref": ref, "inputs": dict(inputs), "return_run_details": True}
        try:
            answer = await self.api.post(self._url(f"/actions/workflows/{workflow}/dispatches"), data=data)
        except BadRequest as exc:
            if exc.status_code in (404, 422):
                raise DispatchRefused(int(exc.status_code), str(exc) or exc.status_code.phrase) from None
            raise
        if not isinstance(answer, Mapping):  # 204 No Content: a GitHub that does not return run details
            return None
        return parsed(DispatchAnswer, answer, what=f"the dispatch of {workflow}").workflow_run_id

    async def dispatched_runs(self, *, created_since: str) -> list[WorkflowRun]:
        """The repository's `workflow_dispatch` runs created since then (ISO time), newest first."""
        url = self._url(f"/actions/runs?event=workflow_dispatch&created=>={created_since}&per_page=100")
        return [
            parsed(WorkflowRun, run, what="a dispatched workflow run")
            async for run in self.api.getiter(url, iterable_key="workflow_runs")
        ]

    async def workflow_run(self, run_id: int) -> WorkflowRun:
        answer = await self.api.get(self._url(f"/actions/runs/{run_id}"))
        return parsed(WorkflowRun, answer, what=f"workflow run {run_id}")

    async def run_artifact(self, run_id: int, name: str, *, max_bytes: int) -> bytes | None:
        """The zip of the run's artifact called `name`, or None when the run uploaded none; TooLarge when
        it is over `max_bytes` (as GitHub lists its size, or as the download turns out: never read whole)."""
        url = self._url(f"/actions/runs/{run_id}/artifacts?name={name}&per_page=100")
        what = f"the `{name}` artifact"
        async for answer in self.api.getiter(url, iterable_key="artifacts"):
            artifact = parsed(Artifact, answer, what=f"an artifact of workflow run {run_id}")
            if artifact.name == name and not artifact.expired:
                listed = artifact.size_in_bytes
                if listed is not None and listed > max_bytes:
                    raise TooLarge(what, listed, max_bytes)
                # by id on the API Sluice talks to (archive_download_url is absolute, on github.com's host)
                zipped = self._url(f"/actions/artifacts/{artifact.id}/zip")
                return await self.api.download(zipped, max_bytes=max_bytes, what=what)
        return None

    async def file(self, path: str, *, ref: str | None) -> bytes | None:
        """A file's bytes at `ref` (None: the default branch); None when there is no file there (nothing, a
        directory, a submodule). Over 1 MB GitHub's contents API sends no content: BadInput, never empty."""
        at = "" if ref is None else f"?ref={quote(ref, safe='')}"
        try:
            found = await self.api.get(self._url(f"/contents/{quote(path)}{at}"))
        except BadRequest as exc:
            if exc.status_code == 404:
                return None
            raise
        if isinstance(found, list):  # a directory's entries
            return None
        content = parsed(RepoContent, found, what=f"the contents of {path}")
        if content.type != "file":
            return None
        if content.encoding != "base64":
            size = "over 1,000,000" if content.size is None else content.size
            raise BadInput(
                f"{path} at {ref or 'the default branch'} is {size} bytes: "
                "GitHub's contents API serves no file over 1 MB",
                f"keep {path} under 1 MB",
            )
        try:
            return base64.b64decode(content.content)
        except binascii.Error:
            raise unusable(
                f"GitHub answered the contents of {path} with content that is not base64"
            ) from None

    async def new_check_run(self, sha: str, name: str, body: Mapping[str, Any]) -> int:
        """A check run named `name` on `sha` with `body`'s fields; its id."""
        created = await self.api.post(self._url("/check-runs"), data={"name": name, "head_sha": sha, **body})
        return parsed(Created, created, what=f"the check run {name} created").id

    async def update_check_run(self, check_run_id: int, body: Mapping[str, Any]) -> None:
        await self.api.patch(self._url(f"/check-runs/{check_run_id}"), data=dict(body))
