"""The webhook delivery record and job queue, on SQLite and on PostgreSQL."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, select

from bot.db.jobs import Delivery, DeliveryOutcome, Job, JobQueue, JobState, _take_key, deliveries, jobs
from bot.db.store import Store
from tests.conftest import fresh_schema

NOW = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
LEASE = timedelta(minutes=5)
FORK = "acme/triton"
OTHER_FORK = "acme/triton-xpu"
BODY = b'{"action": "opened", "note": "caf\xc3\xa9"}'


@pytest.fixture
def queue(store: Store) -> JobQueue:
    return JobQueue(store)


def accept(
    queue: JobQueue, delivery_id: str, *, key: str | None = FORK, now: datetime = NOW
) -> DeliveryOutcome:
    payload = {"delivery": delivery_id}
    return queue.accept_delivery(
        delivery_id, event="push", body=BODY, kind="ingest", key=key, payload=payload, now=now
    )


def claimed(queue: JobQueue, worker: str, *, now: datetime = NOW) -> Job:
    job = queue.claim(worker, lease=LEASE, now=now)
    assert job is not None
    return job


def job_rows(store: Store) -> list[dict[str, object]]:
    with store._engine.connect() as conn:
        return [dict(row._mapping) for row in conn.execute(select(jobs).order_by(jobs.c.id))]


# Deliveries


def test_a_new_delivery_is_recorded_and_its_job_queued(queue: JobQueue, store: Store) -> None:
    assert accept(queue, "d-1") is DeliveryOutcome.NEW

    assert queue.deliveries() == 1
    assert queue.counts() == {"queued": 1, "running": 0, "done": 0, "failed": 0}
    with store._engine.connect() as conn:
        stored = conn.execute(select(deliveries)).one()
    assert (stored.id, stored.event, stored.received_at, bytes(stored.body)) == ("d-1", "push", NOW, BODY)
    job = claimed(queue, "w1")
    assert stored.job_id == job.id
    assert (job.kind, job.key, job.payload, job.attempts, job.delivery_id) == (
        "ingest",
        FORK,
        {"delivery": "d-1"},
        1,
        "d-1",
    )


def test_a_redelivery_is_not_processed_twice(queue: JobQueue) -> None:
    accept(queue, "d-1")
    assert accept(queue, "d-1") is DeliveryOutcome.DUPLICATE
    job = claimed(queue, "w1")
    assert accept(queue, "d-1") is DeliveryOutcome.DUPLICATE  # while it runs
    assert queue.complete(job.id, "w1", now=NOW)
    assert accept(queue, "d-1") is DeliveryOutcome.DUPLICATE  # after it succeeded

    assert queue.deliveries() == 1
    assert queue.counts() == {"queued": 0, "running": 0, "done": 1, "failed": 0}


def test_a_redelivery_whose_job_failed_is_processed_again(queue: JobQueue) -> None:
    accept(queue, "d-1")
    first = claimed(queue, "w1")
    assert queue.fail(first.id, "w1", "boom", now=NOW, retry_after=None, max_attempts=1) is JobState.FAILED

    assert accept(queue, "d-1") is DeliveryOutcome.RETRY
    assert accept(queue, "d-1") is DeliveryOutcome.DUPLICATE  # the new job has not failed

    second = claimed(queue, "w1")
    assert second.id != first.id
    assert (second.delivery_id, second.attempts) == ("d-1", 1)
    assert queue.deliveries() == 1
    assert queue.counts() == {"queued": 0, "running": 1, "done": 0, "failed": 1}


def test_a_delivery_whose_job_cannot_be_queued_is_not_recorded(queue: JobQueue) -> None:
    payload = {"not json": object()}
    with pytest.raises(TypeError):
        queue.accept_delivery(
            "d-1", event="push", body=BODY, kind="ingest", key=FORK, payload=payload, now=NOW
        )

    assert queue.deliveries() == 0
    assert accept(queue, "d-1") is DeliveryOutcome.NEW  # GitHub's redelivery gets through


def test_a_batch_is_recorded_in_one_go_with_each_delivery_s_own_outcome(
    queue: JobQueue, store: Store
) -> None:
    accept(queue, "failed")
    job = claimed(queue, "w1")
    queue.fail(job.id, "w1", "boom", now=NOW, retry_after=None, max_attempts=1)
    accept(queue, "seen")
    ids = ["new-1", "seen", "failed", "new-1", "new-2", "failed"]
    batch = [Delivery(i, event="push", body=BODY, kind="ingest", key=FORK, payload={"d": i}) for i in ids]

    outcomes = queue.accept_deliveries(batch, now=NOW)

    new, dup, retry = DeliveryOutcome.NEW, DeliveryOutcome.DUPLICATE, DeliveryOutcome.RETRY
    assert outcomes == [new, dup, retry, dup, new, dup]  # a repeat within the batch is a duplicate
    with store._engine.connect() as conn:
        linked = conn.execute(
            select(deliveries.c.id, jobs.c.payload, jobs.c.state).join(jobs, jobs.c.id == deliveries.c.job_id)
        ).all()
    assert sorted((row.id, row.state) for row in linked) == [
        ("failed", "queued"),  # its new job
        ("new-1", "queued"),
        ("new-2", "queued"),
        ("seen", "queued"),
    ]
    assert all(f'"{row.id}"' in row.payload for row in linked if row.id.startswith("new"))
    assert queue.counts() == {"queued": 4, "running": 0, "done": 0, "failed": 1}


# Claims and leases


def test_jobs_are_claimed_oldest_first(queue: JobQueue) -> None:
    ids = [queue.enqueue("ingest", {"n": n}, key=f"fork-{n}", now=NOW) for n in range(3)]

    claims = [claimed(queue, "w1") for _ in ids]

    assert [job.id for job in claims] == ids
    assert [job.payload for job in claims] == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert queue.claim("w1", lease=LEASE, now=NOW) is None


def test_a_job_whose_worker_died_is_reclaimed_after_its_lease(queue: JobQueue) -> None:
    job_id = queue.enqueue("ingest", {}, key=FORK, now=NOW)
    claimed(queue, "dead")

    assert queue.claim("w2", lease=LEASE, now=NOW + LEASE) is None  # the lease still holds
    again = claimed(queue, "w2", now=NOW + LEASE + timedelta(seconds=1))

    assert (again.id, again.attempts) == (job_id, 2)


def test_a_worker_that_lost_its_lease_can_neither_heartbeat_nor_complete(queue: JobQueue) -> None:
    job_id = queue.enqueue("ingest", {}, key=FORK, now=NOW)
    claimed(queue, "slow")
    assert queue.heartbeat(job_id, "slow", lease=LEASE, now=NOW + timedelta(minutes=4))
    later = NOW + timedelta(minutes=4) + LEASE + timedelta(seconds=1)
    claimed(queue, "w2", now=later)

    assert not queue.heartbeat(job_id, "slow", lease=LEASE, now=later)
    assert not queue.complete(job_id, "slow", now=later)
    assert queue.fail(job_id, "slow", "late", now=later, retry_after=None) is JobState.RUNNING
    assert queue.complete(job_id, "w2", now=later)
    assert queue.counts()["done"] == 1


def test_a_heartbeat_keeps_the_job(queue: JobQueue) -> None:
    job_id = queue.enqueue("ingest", {}, key=FORK, now=NOW)
    claimed(queue, "w1")
    assert queue.heartbeat(job_id, "w1", lease=LEASE, now=NOW + timedelta(minutes=4))

    assert queue.claim("w2", lease=LEASE, now=NOW + timedelta(minutes=8)) is None


def test_one_running_job_per_key(queue: JobQueue) -> None:
    first = queue.enqueue("ingest", {}, key=FORK, now=NOW)
    second = queue.enqueue("ingest", {}, key=FORK, now=NOW)
    other = queue.enqueue("ingest", {}, key=OTHER_FORK, now=NOW)
    unkeyed = queue.enqueue("comment", {}, key=None, now=NOW)

    assert claimed(queue, "w1").id == first
    assert claimed(queue, "w2").id == other  # `second` waits for `first`
    assert claimed(queue, "w3").id == unkeyed
    assert queue.claim("w4", lease=LEASE, now=NOW) is None

    assert queue.complete(first, "w1", now=NOW)
    assert claimed(queue, "w4").id == second


def test_a_claim_never_waits_on_a_key_claimed_in_another_schema_of_the_database(
    postgres_url: str, postgres_server: Engine
) -> None:
    """PostgreSQL's advisory locks belong to the database: a claim of FORK's job in one schema (another
    deployment, or another test worker) once made a claim of FORK's job in this schema find nothing."""
    with fresh_schema(postgres_server) as other_url:
        here, there = Store.open(postgres_url), Store.open(other_url)
        try:
            job_id = JobQueue(here).enqueue("ingest", {}, key=FORK, now=NOW)
            with there._engine.begin() as conn:  # the other schema's claim of the same key, mid-transaction
                assert _take_key(conn, FORK, 0, NOW)
                claimed = JobQueue(here).claim("w", lease=LEASE, now=NOW)
            assert claimed is not None and claimed.id == job_id
        finally:
            here.close()
            there.close()


def test_a_failed_attempt_is_retried_after_its_delay(queue: JobQueue, store: Store) -> None:
    job_id = queue.enqueue("ingest", {}, key=FORK, now=NOW)
    claimed(queue, "w1")

    state = queue.fail(job_id, "w1", "x" * 10_000, now=NOW, retry_after=timedelta(minutes=1))

    assert state is JobState.QUEUED
    assert job_rows(store)[0]["error"] == "x" * 4096
    assert queue.claim("w2", lease=LEASE, now=NOW + timedelta(seconds=59)) is None
    again = claimed(queue, "w2", now=NOW + timedelta(minutes=1))
    assert (again.id, again.attempts) == (job_id, 2)


def test_errors_are_cut_on_a_character_boundary(queue: JobQueue, store: Store) -> None:
    job_id = queue.enqueue("ingest", {}, key=FORK, now=NOW)
    claimed(queue, "w1")
    queue.fail(job_id, "w1", "é" * 3000, now=NOW, retry_after=None)

    assert job_rows(store)[0]["error"] == "é" * 2048


def test_a_job_fails_for_good_after_max_attempts(queue: JobQueue) -> None:
    job_id = queue.enqueue("ingest", {}, key=FORK, now=NOW)
    states = []
    for attempt in range(1, 4):
        job = claimed(queue, "w1")
        assert job.attempts == attempt
        states.append(queue.fail(job_id, "w1", "boom", now=NOW, retry_after=None, max_attempts=3))

    assert states == [JobState.QUEUED, JobState.QUEUED, JobState.FAILED]
    assert queue.claim("w1", lease=LEASE, now=NOW + timedelta(days=1)) is None


def test_counts_jobs_by_state(queue: JobQueue) -> None:
    assert queue.counts() == {"queued": 0, "running": 0, "done": 0, "failed": 0}
    for key in ("a", "b", "c", "d"):
        queue.enqueue("ingest", {}, key=key, now=NOW)
    done, failed, _running = (claimed(queue, "w1") for _ in range(3))
    queue.complete(done.id, "w1", now=NOW)
    queue.fail(failed.id, "w1", "boom", now=NOW, retry_after=None, max_attempts=1)

    assert queue.counts() == {"queued": 1, "running": 1, "done": 1, "failed": 1}
    assert queue.deliveries() == 0


def test_naive_timestamps_are_rejected(queue: JobQueue) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        queue.enqueue("ingest", {}, key=FORK, now=NOW.replace(tzinfo=None))


# Replicas


def test_replicas_process_every_delivery_exactly_once(database_url: str) -> None:
    ids = [f"delivery-{n}" for n in range(50)]
    outcomes: Counter[DeliveryOutcome] = Counter()
    completed: list[int] = []
    running: set[str | None] = set()  # keys of the jobs replicas are running
    errors: list[BaseException] = []
    lock = threading.Lock()
    start = threading.Barrier(4)

    def replica(worker: str, seed: int) -> None:
        store = Store.open(database_url)
        try:
            queue = JobQueue(store)
            mine = ids + random.Random(seed).sample(ids, 10)  # GitHub redelivers some twice
            random.Random(seed).shuffle(mine)
            start.wait()
            for n, delivery_id in enumerate(mine):
                outcome = accept(queue, delivery_id, key=f"fork-{n % 5}")
                with lock:
                    outcomes[outcome] += 1
            _work_until_empty(queue, worker, completed=completed, running=running, lock=lock)
        except BaseException as exc:
            errors.append(exc)
        finally:
            store.close()

    threads = [threading.Thread(target=replica, args=(f"w{n}", n)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert errors == []
    assert outcomes[DeliveryOutcome.NEW] == 50
    assert outcomes[DeliveryOutcome.RETRY] == 0
    assert sorted(Counter(completed).values()) == [1] * 50
    check = Store.open(database_url)
    try:
        queue = JobQueue(check)
        assert queue.deliveries() == 50
        assert queue.counts() == {"queued": 0, "running": 0, "done": 50, "failed": 0}
        rows = job_rows(check)
        assert sorted(str(row["delivery_id"]) for row in rows) == sorted(ids)
        assert sorted(int(str(row["id"])) for row in rows) == sorted(completed)
    finally:
        check.close()


def test_replicas_retry_a_failed_delivery_once(database_url: str) -> None:
    setup = Store.open(database_url)
    try:
        queue = JobQueue(setup)
        accept(queue, "d-1")
        job = claimed(queue, "w0")
        queue.fail(job.id, "w0", "boom", now=NOW, retry_after=None, max_attempts=1)
    finally:
        setup.close()
    outcomes: list[DeliveryOutcome] = []
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def redeliver() -> None:
        store = Store.open(database_url)
        try:
            start.wait()
            outcomes.append(accept(JobQueue(store), "d-1"))
        except BaseException as exc:
            errors.append(exc)
        finally:
            store.close()

    threads = [threading.Thread(target=redeliver) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert errors == []
    assert Counter(outcomes) == {DeliveryOutcome.RETRY: 1, DeliveryOutcome.DUPLICATE: 3}


def _work_until_empty(
    queue: JobQueue, worker: str, *, completed: list[int], running: set[str | None], lock: threading.Lock
) -> None:
    """Claim and complete jobs until none is left; fails if two replicas ever run jobs of one key at once."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        job = queue.claim(worker, lease=LEASE, now=NOW)
        if job is None:
            counts = queue.counts()
            if counts["queued"] == counts["running"] == 0:
                return
            time.sleep(0.005)  # the rest belong to keys other replicas are running
            continue
        with lock:
            assert job.key not in running, f"two jobs for {job.key} ran at once"
            running.add(job.key)
        time.sleep(0.001)  # let the other replicas try this key meanwhile
        with lock:  # before complete(): the next claim of this key can only follow it
            running.discard(job.key)
        assert queue.complete(job.id, worker, now=NOW)
        with lock:
            completed.append(job.id)
    raise TimeoutError(f"{worker} still found work after 30 s")
