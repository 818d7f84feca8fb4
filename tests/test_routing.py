"""Job routing: payloads parsed once into their models, every callback run, failures recorded on the job."""

from __future__ import annotations

import datetime as dt
import logging
import traceback
from typing import Any

import pytest
from gidgethub.routing import Router
from gidgethub.sansio import Event
from pydantic import ValidationError
from sqlalchemy import select

from bot.app.context import Context
from bot.app.routing import Routes
from bot.app.worker import Worker
from bot.core.errors import BadInput
from bot.core.webhooks import PushEvent
from bot.db.jobs import Job, JobState, jobs
from handlers import ROUTES, requests
from tests.test_handlers import FORK, NOW, UPSTREAM, ctx, fork_record, push_payload, queued

__all__ = ["ctx"]  # the fixture, reused from the handlers' tests
LEASE = dt.timedelta(minutes=5)


def job_row(ctx: Context, job_id: int) -> Any:
    with ctx.store._engine.connect() as conn:
        return conn.execute(select(jobs).where(jobs.c.id == job_id)).one()


async def run_one(ctx: Context, worker: Worker) -> int:
    claimed = ctx.queue.claim("w", lease=LEASE, now=NOW)
    assert claimed is not None
    await worker.run_job(claimed)
    return claimed.id


async def test_a_failing_callback_does_not_stop_the_next_and_the_job_records_the_failure(
    ctx: Context, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[tuple[str, object]] = []
    router = Router()

    @router.register("push")
    async def a_fails(event: PushEvent, *, ctx: Context, job: Job) -> None:
        ran.append(("a_fails", event))
        raise ConnectionError("GitHub went away")

    @router.register("push")
    async def b_records(event: PushEvent, *, ctx: Context, job: Job) -> None:
        ran.append(("b_records", event))

    @router.register("push")
    async def c_refuses(event: PushEvent, *, ctx: Context, job: Job) -> None:
        ran.append(("c_refuses", event))
        raise BadInput("the fork's config is broken", "fix it")

    worker = Worker(ctx, Routes(router, ROUTES.payloads), name="w")
    payload = push_payload(ctx, UPSTREAM, "refs/heads/main")
    job_id = ctx.queue.enqueue("push", payload, key=UPSTREAM, now=NOW)
    with caplog.at_level(logging.WARNING):
        assert await run_one(ctx, worker) == job_id
    assert [name for name, _ in ran] == ["a_fails", "b_records", "c_refuses"]  # each ran after one raised
    assert all(isinstance(event, PushEvent) for _, event in ran)  # each got the parsed model, not a dict
    row = job_row(ctx, job_id)
    assert row.state == JobState.QUEUED.value and row.error == "ConnectionError: GitHub went away"  # retried
    # each failure logged once: the first by the worker (unknown, so with its traceback, which names the
    # callback), the later one by the router (a person's to act on, so by its message)
    logged = [r for r in caplog.records if f"job {job_id} (push)" in r.getMessage()]
    (first,) = [r for r in logged if r.name == "sluice.worker"]
    (later,) = [r for r in logged if r.name == "sluice.routing"]
    assert len(logged) == 2
    assert first.exc_info is not None and first.getMessage().startswith(f"job {job_id} (push) failed")
    assert "a_fails" in "".join(traceback.format_exception(first.exc_info[1]))
    assert later.exc_info is None and later.getMessage() == (
        f"job {job_id} (push) also failed in tests.test_routing.test_a_failing_callback_does_not_stop_the_"
        "next_and_the_job_records_the_failure.<locals>.c_refuses: the fork's config is broken\n  → fix it"
    )


async def test_every_callback_for_the_event_runs_and_a_clean_run_completes_the_job(ctx: Context) -> None:
    ran: list[str] = []
    router = Router()

    @router.register("pull_request", action="opened")
    async def on_opened(event: Any, *, ctx: Context, job: Job) -> None:
        ran.append("opened")

    @router.register("pull_request")
    async def on_any(event: Any, *, ctx: Context, job: Job) -> None:
        ran.append("any")

    worker = Worker(ctx, Routes(router, ROUTES.payloads), name="w")
    sim = ctx.sim  # type: ignore[attr-defined]
    trunk = sim.git(FORK, "rev-parse", "main").strip()
    sim.commit(FORK, "feature", {"a.txt": "a\n"}, message="a", parent=trunk)
    pull = sim.open_pull(FORK, head="feature", base="main", title="A")
    for action in ("opened", "closed"):
        payload = sim.pull_request_payload(FORK, pull["number"], action, sender="dev") | {
            "installation": {"id": 1}
        }
        ctx.queue.enqueue("pull_request", payload, key=FORK, now=NOW)
        job_id = await run_one(ctx, worker)
        assert job_row(ctx, job_id).state == JobState.DONE.value
    assert sorted(ran) == ["any", "any", "opened"]


@pytest.mark.parametrize(
    ("kind", "payload", "problem"),
    [
        pytest.param("ingest", {"fork": FORK}, "reason: Field required", id="ingest-missing-field"),
        pytest.param(
            "ingest", {"fork": FORK, "reason": "x", "force": True}, "force: Extra inputs", id="ingest-extra"
        ),
        pytest.param(
            "ingest", {"fork": "no-slash", "reason": "x"}, "fork: Value error", id="ingest-bad-repo"
        ),
        pytest.param(
            "register",
            {"repo": FORK, "installation_id": "7"},
            "installation_id: Input should be",
            id="reg-id",
        ),
        pytest.param("push", {"ref": "refs/heads/main"}, "after: Field required", id="webhook-job"),
    ],
)
async def test_a_malformed_job_payload_fails_for_good_at_once_saying_what_is_wrong(
    ctx: Context, kind: str, payload: dict[str, Any], problem: str
) -> None:
    fork_record(ctx)
    job_id = ctx.queue.enqueue(kind, payload, key=FORK, now=NOW)
    await run_one(ctx, Worker(ctx, ROUTES, name="w"))
    row = job_row(ctx, job_id)
    assert row.state == JobState.FAILED.value and row.attempts == 1  # not retried: it can never succeed
    assert f"{kind} job {job_id} has a malformed payload: {problem}" in row.error
    assert queued(ctx) == []  # and it started nothing


async def test_internal_requests_carry_their_models_and_coalesce(ctx: Context) -> None:
    await requests.ingest(ctx, FORK, reason="upstream moved")
    await requests.ingest(ctx, FORK, reason="upstream moved again")  # absorbed by the queued one
    await requests.register(ctx, FORK, installation_id=7)
    found = []
    while (claimed := ctx.queue.claim("t", lease=LEASE, now=NOW)) is not None:
        found.append(ROUTES.parse(claimed))
        ctx.queue.complete(claimed.id, "t", now=NOW)
    assert found == [
        requests.IngestRequest(fork=FORK, reason="upstream moved"),
        requests.RegisterRequest(repo=FORK, installation_id=7),
    ]


async def test_a_capped_ingestion_request_and_a_whole_one_never_answer_each_other(ctx: Context) -> None:
    """`/ingest <sha>` opens only the units up to that commit: a push while it waits must still get a whole
    run, and a cap asked while a whole run waits must not be dropped."""
    upto, other = "a" * 40, "b" * 40
    assert await requests.ingest(ctx, FORK, reason="/ingest by @alice", upto=upto)
    assert await requests.ingest(ctx, FORK, reason="upstream moved")  # not absorbed by the capped run
    assert not await requests.ingest(ctx, FORK, reason="upstream moved again")
    assert not await requests.ingest(ctx, FORK, reason="/ingest by @bob", upto=upto)  # the same cap
    assert await requests.ingest(ctx, FORK, reason="/ingest by @carol", upto=other)
    await requests.register(ctx, FORK, installation_id=7)
    await requests.register(ctx, FORK, installation_id=8)  # the App was installed again meanwhile
    found = []
    while (claimed := ctx.queue.claim("t", lease=LEASE, now=NOW)) is not None:
        found.append(ROUTES.parse(claimed))
        ctx.queue.complete(claimed.id, "t", now=NOW)
    assert found == [
        requests.IngestRequest(fork=FORK, reason="/ingest by @alice", upto=upto),
        requests.IngestRequest(fork=FORK, reason="upstream moved"),
        requests.IngestRequest(fork=FORK, reason="/ingest by @carol", upto=other),
        requests.RegisterRequest(repo=FORK, installation_id=7),
        requests.RegisterRequest(repo=FORK, installation_id=8),
    ]


async def test_a_request_sluice_could_never_run_is_refused_when_asked_not_later(ctx: Context) -> None:
    with pytest.raises(ValidationError, match="not an owner/name repository"):
        await requests.ingest(ctx, "../etc", reason="a bug in a caller")
    assert queued(ctx) == []


def test_every_job_kind_has_a_payload_model_and_a_callback() -> None:
    for kind in ROUTES.payloads:
        if kind == "pull_request":  # routed by action: the actions Sluice acts on
            data: dict[str, Any] = {"action": "opened"}
        elif kind == "issue_comment":
            data = {"action": "created"}
        elif kind == "pull_request_review":
            data = {"action": "submitted"}
        elif kind in ("check_run", "workflow_run"):  # a tier's check run; a tier workflow's result
            data = {"action": "completed"}
        else:
            data = {}
        assert ROUTES.router.fetch(Event(data, event=kind, delivery_id="d")), kind
