"""What handlers do on a fork through GitHub's REST API: PRs, labels, sticky comments, check runs, issues."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.github.client import InstallationAPI


class ForkGitHub:
    """One repository seen through one installation; every call is idempotent where GitHub allows."""

    def __init__(self, api: InstallationAPI, repo: str, *, bot_login: str) -> None:
        self.api = api
        self.repo = repo
        self.owner = repo.split("/", 1)[0]
        self.bot_login = bot_login

    def _url(self, path: str) -> str:
        return f"/repos/{self.repo}{path}"

    async def open_pull_for(self, branch: str) -> dict[str, Any] | None:
        """The open PR whose head is `branch` of this repository, if any."""
        url = self._url("/pulls") + f"?state=open&head={self.owner}:{branch}&per_page=100"
        async for pull in self.api.getiter(url):
            if pull["head"]["ref"] == branch:
                return dict(pull)
        return None

    async def open_pulls(self) -> list[dict[str, Any]]:
        return [dict(p) async for p in self.api.getiter(self._url("/pulls") + "?state=open&per_page=100")]

    async def create_pull(self, *, title: str, body: str, head: str, base: str) -> dict[str, Any]:
        data = {"title": title, "body": body, "head": head, "base": base, "maintainer_can_modify": True}
        return dict(await self.api.post(self._url("/pulls"), data=data))

    async def update_pull(self, pull: Mapping[str, Any], *, title: str, body: str, base: str) -> None:
        """Edit only what changed, so a re-plan that changes nothing writes nothing."""
        wanted = {"title": title, "body": body, "base": base}
        current = {"title": pull.get("title"), "body": pull.get("body") or "", "base": pull["base"]["ref"]}
        changed = {k: v for k, v in wanted.items() if current[k] != v}
        if changed:
            await self.api.patch(self._url(f"/pulls/{pull['number']}"), data=changed)

    async def close_pull(self, number: int, *, comment: str) -> None:
        await self.api.post(self._url(f"/issues/{number}/comments"), data={"body": comment})
        await self.api.patch(self._url(f"/pulls/{number}"), data={"state": "closed"})

    async def set_labels(self, number: int, labels: list[str], *, managed: frozenset[str]) -> None:
        """Make Sluice's labels on the issue/PR exactly `labels`, leaving other labels alone."""
        current = [lab["name"] async for lab in self.api.getiter(self._url(f"/issues/{number}/labels"))]
        wanted = [lab for lab in current if lab not in managed] + list(dict.fromkeys(labels))
        if sorted(wanted) != sorted(current):
            await self.api.put(self._url(f"/issues/{number}/labels"), data={"labels": wanted})

    async def upsert_comment(self, number: int, *, marker: str, body: str) -> int:
        """Edit the bot's comment carrying `marker` in place, or post it; the comment's id."""
        async for comment in self.api.getiter(self._url(f"/issues/{number}/comments?per_page=100")):
            if comment["user"]["login"] == self.bot_login and marker in (comment.get("body") or ""):
                if comment["body"] != body:
                    await self.api.patch(self._url(f"/issues/comments/{comment['id']}"), data={"body": body})
                return int(comment["id"])
        created = await self.api.post(self._url(f"/issues/{number}/comments"), data={"body": body})
        return int(created["id"])

    async def check_runs(self, sha: str) -> dict[str, dict[str, Any]]:
        """The latest check run per name on `sha`."""
        url = self._url(f"/commits/{sha}/check-runs?filter=latest&per_page=100")
        return {run["name"]: dict(run) async for run in self.api.getiter(url, iterable_key="check_runs")}

    async def ensure_check_runs(self, sha: str, titles: Mapping[str, str]) -> dict[str, str]:
        """Create the named check runs (queued) on `sha` unless they exist; {name: status or conclusion}."""
        existing = await self.check_runs(sha)
        states = {}
        for name, title in titles.items():
            run = existing.get(name)
            if run is None:
                output = {"title": title, "summary": f"{title}: queued by Sluice."}
                data = {"name": name, "head_sha": sha, "status": "queued", "output": output}
                run = dict(await self.api.post(self._url("/check-runs"), data=data))
            states[name] = run.get("conclusion") or run["status"]
        return states

    async def report_check(self, sha: str, name: str, *, ok: bool, title: str, summary: str) -> None:
        """A completed check run on `sha`: how Sluice tells people about a commit it judged."""
        data = {
            "name": name,
            "head_sha": sha,
            "status": "completed",
            "conclusion": "success" if ok else "failure",
            "output": {"title": title, "summary": summary[:65_000]},
        }
        await self.api.post(self._url("/check-runs"), data=data)

    async def find_issue(self, *, label: str, marker: str) -> dict[str, Any] | None:
        url = self._url(f"/issues?state=open&labels={label}&per_page=100")
        async for issue in self.api.getiter(url):
            if "pull_request" not in issue and marker in (issue.get("body") or ""):
                return dict(issue)
        return None

    async def upsert_issue(self, *, title: str, body: str, labels: list[str], marker: str) -> int:
        """The open issue carrying `marker` (Sluice's tracking issue), created or edited in place."""
        issue = await self.find_issue(label=labels[0], marker=marker)
        text = f"{marker}\n{body}"
        if issue is None:
            created = await self.api.post(
                self._url("/issues"), data={"title": title, "body": text, "labels": labels}
            )
            return int(created["number"])
        if issue["title"] != title or issue.get("body") != text:
            await self.api.patch(self._url(f"/issues/{issue['number']}"), data={"title": title, "body": text})
        return int(issue["number"])

    async def close_issue(self, number: int, *, comment: str) -> None:
        await self.api.post(self._url(f"/issues/{number}/comments"), data={"body": comment})
        await self.api.patch(self._url(f"/issues/{number}"), data={"state": "closed"})
