"""GitHub's own webhook payloads (from @octokit/webhooks-examples) parse, and the intake queues them."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from bot.app.service import create_app
from bot.app.settings import Settings
from bot.core import webhooks
from bot.core.emergency import EMERGENCY_PREFIX
from bot.core.errors import Unavailable
from bot.core.ingestion import BRANCH_PREFIX
from bot.db.jobs import JobQueue
from bot.db.store import Store
from bot.flows import merge
from bot.github import answers
from bot.github.forge import parse_pull
from tests.support.webhooks import signed_headers

FIXTURES = Path(__file__).parent / "fixtures" / "octokit"
SECRET = "fixture-secret"


def examples() -> list[Any]:
    found = []
    for path in sorted(FIXTURES.glob("*.json")):
        event = path.stem
        assert event in webhooks.MODELS, f"{path.name}: Sluice does not subscribe to {event}"
        for index, payload in enumerate(json.loads(path.read_text())):
            name = f"{event}-{payload.get('action', index)}-{index}"
            found.append(pytest.param(event, payload, id=name))
    return found


def as_app_delivery(payload: dict[str, Any]) -> dict[str, Any]:
    """Repository webhooks in the examples lack `installation`; an App's deliveries always carry it."""
    return {"installation": {"id": 2311213, "node_id": "MDIz"}, **payload}


@pytest.mark.parametrize("index", range(4))
def test_githubs_pull_object_parses_as_the_pull_rest_answers_become(index: int) -> None:
    """The `pull_request` of GitHub's examples is the object `GET /pulls/N` answers."""
    pull = json.loads((FIXTURES / "pull_request.json").read_text())[index]["pull_request"]
    parsed = parse_pull(pull)
    assert (parsed.number, parsed.state, parsed.title) == (pull["number"], pull["state"], pull["title"])
    assert (parsed.head.ref, parsed.head.sha, parsed.base.sha) == (
        pull["head"]["ref"],
        pull["head"]["sha"],
        pull["base"]["sha"],
    )
    assert parsed.from_branch_of(pull["head"]["repo"]["full_name"])
    assert parsed.author == pull["user"]["login"] and parsed.commits == pull["commits"]
    assert parsed.merged is pull["merged"] and parsed.label_names == tuple(x["name"] for x in pull["labels"])


@pytest.mark.parametrize(
    ("head_repo", "ref", "ours"),
    [
        ("Codertocat/Hello-World", f"{BRANCH_PREFIX}bundle-1", True),
        ("Codertocat/Hello-World", f"{EMERGENCY_PREFIX}1872", True),
        ("Codertocat/Hello-World", "changes", False),  # a branch of the fork's, not Sluice's
        ("someone/Hello-World", f"{BRANCH_PREFIX}bundle-1", False),  # the same name in another repository
        (None, f"{BRANCH_PREFIX}bundle-1", False),  # the head's repository was deleted
    ],
)
def test_a_pull_is_sluices_only_from_its_own_branch_of_the_fork(
    head_repo: str | None, ref: str, ours: bool
) -> None:
    pull = json.loads((FIXTURES / "pull_request.json").read_text())[0]["pull_request"]
    pull["head"].update(
        ref=ref, repo=None if head_repo is None else {**pull["head"]["repo"], "full_name": head_repo}
    )
    parsed = parse_pull(pull)
    assert parsed.head.repo_name == head_repo
    assert parsed.on_branch_of("Codertocat/Hello-World", (BRANCH_PREFIX, EMERGENCY_PREFIX)) is ours
    assert parsed.from_branch_of("Codertocat/Hello-World") is (head_repo == "Codertocat/Hello-World")


@pytest.mark.parametrize(
    ("broken", "named"),
    [
        (lambda p: p["head"].pop("sha"), "head.sha"),
        (lambda p: p["base"].update(sha="HEAD~1"), "base.sha"),
        (lambda p: p.update(number="7"), "number"),
    ],
)
def test_a_pull_github_did_not_shape_so_is_retried_naming_the_field(
    broken: Callable[[dict[str, Any]], object], named: str
) -> None:
    pull = json.loads((FIXTURES / "pull_request.json").read_text())[0]["pull_request"]
    broken(pull)
    with pytest.raises(Unavailable) as refused:
        parse_pull(pull)
    assert refused.value.retryable and f"unusable {named}:" in refused.value.message


def objects(event: str, key: str) -> list[Any]:
    """The `key` objects of GitHub's `event` examples: the same objects its REST API answers."""
    return [payload[key] for payload in json.loads((FIXTURES / f"{event}.json").read_text())]


@pytest.mark.parametrize("run", objects("check_run", "check_run"))
def test_githubs_check_runs_parse_as_the_check_runs_rest_answers_become(run: dict[str, Any]) -> None:
    parsed = answers.parsed(webhooks.CheckRun, run, what="a check run")
    assert (parsed.id, parsed.name, parsed.head_sha) == (run["id"], run["name"], run["head_sha"])
    assert parsed.completed is (run["status"] == "completed")
    assert parsed.state == (run["conclusion"] or run["status"])
    assert parsed.url == (run.get("details_url") or run.get("html_url"))
    assert parsed.completed_at == run["completed_at"]
    assert (parsed.output.title, parsed.output.summary) == (run["output"]["title"], run["output"]["summary"])


@pytest.mark.parametrize("issue", objects("issues", "issue"))
def test_githubs_issues_parse_as_the_issue_lists_become(issue: dict[str, Any]) -> None:
    parsed = answers.parsed(webhooks.FullIssue, issue, what="an issue")
    assert (parsed.number, parsed.title, parsed.text) == (
        issue["number"],
        issue["title"],
        issue["body"] or "",
    )
    assert parsed.author == issue["user"]["login"] and (parsed.pull_request is None) is (
        "pull_request" not in issue
    )
    assert parsed.label_names == tuple(label["name"] for label in issue.get("labels", ()))


@pytest.mark.parametrize("run", objects("workflow_run", "workflow_run"))
def test_githubs_workflow_runs_parse_as_the_runs_rest_answers_become(run: dict[str, Any]) -> None:
    parsed = answers.parsed(webhooks.WorkflowRun, run, what="a workflow run")
    assert (parsed.id, parsed.status, parsed.conclusion) == (run["id"], run["status"], run["conclusion"])
    assert parsed.display_title == run.get("display_title", "")


@pytest.mark.parametrize("review", objects("pull_request_review", "review"))
def test_githubs_reviews_parse_and_only_submitted_ones_by_an_account_count(review: dict[str, Any]) -> None:
    parsed = answers.parsed(webhooks.PullReview, review, what="a review")
    counted = merge._review(parsed)
    assert counted is not None and counted.login == review["user"]["login"]
    assert counted.commit_id == review["commit_id"] and counted.state == review["state"]
    assert counted.submitted_at == dt.datetime(2019, 5, 15, 15, 20, 38, tzinfo=dt.UTC)
    pending = answers.parsed(webhooks.PullReview, {**review, "submitted_at": None}, what="a review")
    deleted = answers.parsed(webhooks.PullReview, {**review, "user": None}, what="a review")
    assert merge._review(pending) is None and merge._review(deleted) is None


@pytest.mark.parametrize(
    ("model", "answer", "named"),
    [
        (webhooks.CheckRun, {"id": 4, "name": "sluice/L1", "head_sha": "main"}, "head_sha"),
        (webhooks.CheckRun, {"id": "4", "name": "sluice/L1", "head_sha": "a" * 40}, "id"),
        (
            webhooks.PullReview,
            {"user": {"login": "x"}, "state": "APPROVED", "submitted_at": "yesterday"},
            "submitted_at",
        ),
        (webhooks.CollaboratorPermission, {"role_name": "write"}, "permission"),
        (webhooks.Merged, {"sha": None, "merged": True}, "sha"),
        (webhooks.Artifact, {"name": "sluice-report", "size_in_bytes": 12}, "id"),
        (webhooks.Created, {"id": 0}, "id"),
        (webhooks.RepoDefaults, {"full_name": "octo/fork"}, "default_branch"),
        (webhooks.RepoContent, {"path": ".github/sluice.yml", "size": 12, "content": "eA=="}, "type"),
        (
            webhooks.RepoCommit,
            {"sha": "a" * 40, "parents": [{"sha": "HEAD"}], "commit": {"message": ""}},
            "parents.0.sha",
        ),
    ],
)
def test_a_rest_answer_github_did_not_shape_so_is_retried_naming_the_field(
    model: type[webhooks.Payload], answer: dict[str, Any], named: str
) -> None:
    with pytest.raises(Unavailable) as refused:
        answers.parsed(model, answer, what="the thing asked for")
    assert refused.value.retryable
    assert refused.value.message.startswith(f"GitHub answered the thing asked for with an unusable {named}:")


@pytest.mark.parametrize("installation", objects("installation", "installation"))
def test_githubs_installations_parse_as_the_app_installation_answers_become(
    installation: dict[str, Any],
) -> None:
    parsed = answers.parsed(webhooks.Installation, installation, what="an installation")
    assert parsed.id == installation["id"] and parsed.account is not None
    assert parsed.account.login == installation["account"]["login"]
    assert parsed.suspended_at == installation.get("suspended_at")


def test_a_renamed_file_of_a_pull_names_both_its_paths() -> None:
    renamed = webhooks.PullFile.model_validate(
        {"filename": "b.py", "previous_filename": "a.py", "status": "renamed"}
    )
    edited = webhooks.PullFile.model_validate({"filename": "c.py", "status": "modified"})
    assert (renamed.paths, edited.paths) == (("b.py", "a.py"), ("c.py",))


def test_a_root_commit_has_no_first_parent_to_walk_to() -> None:
    root = webhooks.RepoCommit.model_validate({"sha": "a" * 40, "parents": [], "commit": {"message": "x"}})
    with pytest.raises(Unavailable, match="aaaaaaaaaa has no parent"):
        root.first_parent()


def test_every_subscribed_event_has_fixtures() -> None:
    assert {p.stem for p in FIXTURES.glob("*.json")} == set(webhooks.MODELS)


@pytest.mark.parametrize(("event", "payload"), examples())
def test_github_payloads_parse(event: str, payload: dict[str, Any]) -> None:
    parsed = webhooks.parse(event, json.dumps(as_app_delivery(payload)).encode())
    repository = payload.get("repository")
    if repository is not None:
        assert webhooks.job_key(parsed) == repository["full_name"]
    if event == "push":
        assert isinstance(parsed, webhooks.PushEvent) and parsed.after == payload["after"]
    if event == "pull_request":
        assert isinstance(parsed, webhooks.PullRequestEvent)
        assert parsed.pull_request.head.sha == payload["pull_request"]["head"]["sha"]
        assert parsed.pull_request.base.ref == payload["pull_request"]["base"]["ref"]
    if event == "installation_repositories":
        assert isinstance(parsed, webhooks.InstallationRepositoriesEvent)
        added = [r["full_name"] for r in payload["repositories_added"]]
        assert [r.full_name for r in parsed.repositories_added] == added


@pytest.mark.parametrize(("event", "payload"), examples())
async def test_the_intake_queues_github_payloads(
    aiohttp_client: Any, store: Store, event: str, payload: Any
) -> None:
    settings = Settings(app_id=1, private_key=SecretStr("pem"), webhook_secret=SecretStr(SECRET))
    client = await aiohttp_client(create_app(settings, store=store, clock=lambda: dt.datetime.now(dt.UTC)))
    body = json.dumps(as_app_delivery(payload)).encode()
    headers = signed_headers(body, secret=SECRET, event=event)
    response = await client.post("/webhook", data=body, headers=headers)
    assert response.status == 202, await response.text()
    assert JobQueue(store).counts()["queued"] == 1
