"""Replicas: real `sluice serve` processes sharing one database, and a worker killed in the middle of a job.

The GitHub simulator runs in the test's event loop; the bots are subprocesses configured only through
`SLUICE_*` variables, exactly as an operator runs them.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import pytest
from sqlalchemy import select

from bot.db.jobs import JobQueue, deliveries, jobs
from bot.db.registry import Registry
from bot.db.store import Store
from tests.support.github_sim import GitHubSim
from tests.support.net import free_port
from tests.support.rig import fork_config, installation_created, serve_sim, upstream_and_fork
from tests.support.webhooks import signed_headers

T = TypeVar("T")
SECRET = "replica-secret"
REPO_ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0


@dataclass
class Serve:
    """One `sluice serve` subprocess; its stderr (the log) goes to a file."""

    name: str
    proc: subprocess.Popen[bytes]
    url: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def worker_prefix(self) -> str:
        return f"{socket.gethostname()}:{self.proc.pid}:"

    async def stop(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM, then SIGKILL if it has not exited within `timeout`; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.to_thread(self.proc.wait, timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                await asyncio.to_thread(self.proc.wait, timeout)
        return self.proc.returncode

    async def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        await asyncio.to_thread(self.proc.wait, STOP_TIMEOUT_S)


@dataclass
class Replicas:
    """Starts `sluice serve` processes against the simulator and one database; stops them all at the end."""

    sim: GitHubSim
    sim_url: str
    database_url: str
    root: Path
    started: list[Serve] = field(default_factory=list)

    async def start(self, name: str, *, workers: int, lease_seconds: float = 30.0) -> Serve:
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
        env.update(
            SLUICE_APP_ID=str(self.sim.app_id),
            SLUICE_PRIVATE_KEY=self.sim.private_key_pem or "",
            SLUICE_WEBHOOK_SECRET=SECRET,
            SLUICE_DATABASE_URL=self.database_url,
            SLUICE_GITHUB_URL=self.sim_url,
            SLUICE_DATA_DIR=str(self.root / name / "data"),
            SLUICE_WORKERS=str(workers),
            SLUICE_POLL_INTERVAL="0",
            SLUICE_LEASE_SECONDS=str(lease_seconds),
            SLUICE_ALLOW_PRIVATE_UPSTREAMS="true",  # the simulator is on loopback, refused by default
            PYTHONUNBUFFERED="1",
        )
        log_path = self.root / f"{name}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "bot.app.cli", "serve", "--host", "127.0.0.1", "--port", str(port)]
        with log_path.open("wb") as log_file:
            proc = subprocess.Popen(
                command, cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file
            )
        serve = Serve(name, proc, f"http://127.0.0.1:{port}", log_path)
        self.started.append(serve)
        await self._until_ready(serve)
        return serve

    async def _until_ready(self, serve: Serve) -> None:
        """Until it answers /healthz and its workers have learnt the bot's login from GitHub."""

        async def ready() -> bool:
            try:
                async with (
                    aiohttp.ClientSession() as session,
                    session.get(f"{serve.url}/healthz", timeout=aiohttp.ClientTimeout(total=2)) as resp,
                ):
                    healthy = resp.status == 200
            except (aiohttp.ClientError, OSError, TimeoutError):
                return False
            return healthy and "workers started as sluice[bot]" in serve.log()

        await self.until(ready, timeout=START_TIMEOUT_S, what=f"{serve.name} to start")

    async def until(
        self, check: Callable[[], Any], *, timeout: float, what: str, interval: float = 0.1
    ) -> Any:
        """Poll `check` (sync or async) until it returns something truthy; fail with the logs on timeout,
        or at once when a process died that was not meant to."""
        deadline = time.monotonic() + timeout
        while True:
            result = check()
            if asyncio.iscoroutine(result):
                result = await result
            if result:
                return result
            died = [
                s for s in self.started if s.proc.poll() is not None and s.proc.returncode != -signal.SIGKILL
            ]
            if died or time.monotonic() > deadline:
                reason = (
                    f"{', '.join(s.name for s in died)} exited" if died else f"timed out after {timeout:g} s"
                )
                raise AssertionError(f"waiting for {what}: {reason}\n{self.logs_tail()}")
            await asyncio.sleep(interval)

    def logs_tail(self, lines: int = 40) -> str:
        return "\n".join(
            f"--- {s.name} (exit {s.proc.poll()}) ---\n" + "\n".join(s.log().splitlines()[-lines:])
            for s in self.started
        )

    async def stop_all(self) -> None:
        for serve in self.started:
            await serve.stop()


@asynccontextmanager
async def replicas(aiohttp_server: Any, tmp_path: Path, database_url: str) -> AsyncIterator[Replicas]:
    sim, sim_url = await serve_sim(aiohttp_server, tmp_path / "sim")
    group = Replicas(sim, sim_url, database_url, tmp_path / "serve")
    try:
        yield group
    finally:
        await group.stop_all()


async def deliver(
    session: aiohttp.ClientSession, url: str, event: str, payload: dict[str, Any], delivery_id: str
) -> tuple[int, dict[str, Any]]:
    """POST a signed webhook as GitHub does; the status and the JSON answer."""
    body = json.dumps(payload, separators=(",", ":")).encode()
    headers = {
        **signed_headers(body, secret=SECRET, event=event, delivery=delivery_id),
        "User-Agent": "GitHub-Hookshot/a1b2c3d",
    }
    async with session.post(f"{url}/webhook", data=body, headers=headers) as resp:
        return resp.status, await resp.json()


def job_rows(store: Store) -> list[Any]:
    with store._engine.connect() as conn:
        return list(conn.execute(select(jobs).order_by(jobs.c.id)))


def settled(store: Store) -> bool:
    counts = JobQueue(store).counts()
    return counts["queued"] == 0 and counts["running"] == 0


@pytest.mark.postgres
async def test_two_serve_processes_on_one_postgres_process_each_delivery_once(
    aiohttp_server: Any, tmp_path: Path, postgres_url: str
) -> None:
    store = Store.open(postgres_url)  # migrations run here, before the replicas race to open it
    try:
        async with replicas(aiohttp_server, tmp_path, postgres_url) as group:
            sim = group.sim
            repos = [f"org/repo{i}" for i in range(4)]
            issues = {}
            for repo in repos:
                sim.create_repo(repo)
                sim.install(repo)
                issues[repo] = sim.open_issue(repo, title="tracking", user="dev")
            ids = [f"d{i:03d}-{uuid.uuid4()}" for i in range(200)]
            payloads = {}
            for i, delivery_id in enumerate(ids):
                repo = repos[i % len(repos)]
                comment = sim.add_comment(repo, issues[repo], f"comment {i}", user="dev")
                payloads[delivery_id] = sim.issue_comment_payload(repo, comment)

            a, b = await asyncio.gather(group.start("a", workers=2), group.start("b", workers=2))
            urls = [a.url, b.url]
            semaphore = asyncio.Semaphore(20)
            answers: list[tuple[str, int, dict[str, Any]]] = []

            async def send(session: aiohttp.ClientSession, url: str, delivery_id: str) -> None:
                async with semaphore:
                    status, body = await deliver(
                        session, url, "issue_comment", payloads[delivery_id], delivery_id
                    )
                answers.append((delivery_id, status, body))

            async with aiohttp.ClientSession() as session:
                # Every delivery once, alternating replicas; every eighth also to the other replica at once.
                first = []
                for i, delivery_id in enumerate(ids):
                    first.append(send(session, urls[i % 2], delivery_id))
                    if i % 8 == 0:
                        first.append(send(session, urls[(i + 1) % 2], delivery_id))
                await asyncio.gather(*first)
                # Redeliveries of 25 more ids while the workers are busy: to either replica.
                again = [send(session, urls[i % 2], ids[i]) for i in range(3, 200, 8)]
                await asyncio.gather(*again)

            assert len(answers) == 250
            assert [a for a in answers if a[1] != 202] == []
            assert Counter(body["outcome"] for _, _, body in answers) == {"new": 200, "duplicate": 50}
            new_ids = sorted(d for d, _, body in answers if body["outcome"] == "new")
            assert new_ids == sorted(ids)  # each id was new exactly once
            assert all(body["delivery"] == d for d, _, body in answers)

            await group.until(lambda: settled(store), timeout=60, what="the queue to settle")
            rows = job_rows(store)
            assert len(rows) == 200
            assert sorted(r.delivery_id for r in rows) == sorted(ids)
            assert {(r.kind, r.state, r.attempts, r.error) for r in rows} == {
                ("issue_comment", "done", 1, None)
            }
            with store._engine.connect() as conn:
                linked = {d.id: d.job_id for d in conn.execute(select(deliveries))}
            assert linked == {r.delivery_id: r.id for r in rows}
            workers = Counter(r.worker.rsplit(":", 1)[0] + ":" for r in rows)
            assert set(workers) == {a.worker_prefix(), b.worker_prefix()}, workers

            logs = {s.name: s.log() for s in (a, b)}
            both = logs["a"] + logs["b"]
            for delivery_id in ids:
                assert both.count(f"delivery {delivery_id} (issue_comment on ") == 1, delivery_id
            for name, log in logs.items():
                recorded = log.count(") recorded")
                assert recorded >= 1, f"replica {name} did no work"
                assert "Traceback" not in log, log
            assert logs["a"].count(") recorded") + logs["b"].count(") recorded") == 200

            # A graceful stop: idle workers notice SIGTERM and the process exits cleanly.
            for serve in (a, b):
                assert await serve.stop() == 0, serve.log()
    finally:
        store.close()


FORK = "org/fork"
UPSTREAM = "upstream-org/project"


async def test_a_worker_killed_mid_job_loses_nothing(
    aiohttp_server: Any, tmp_path: Path, database_url: str
) -> None:
    store = Store.open(database_url)
    try:
        async with replicas(aiohttp_server, tmp_path, database_url) as group:
            sim = group.sim
            upstream_and_fork(sim, UPSTREAM, FORK, {"README.md": "project\n"})
            config = fork_config(group.sim_url, UPSTREAM)
            sim.commit(FORK, "main", {".github/sluice.yml": config}, message="fork: Sluice config")
            installation_id = sim.install(FORK)
            # The register job's first GET of the repository hangs; later ones answer at once.
            sim.slow(r"^/repos/org/fork$", 30, times=1)
            hang = sim._slows[-1]

            a = await group.start("a", workers=1, lease_seconds=5)
            async with aiohttp.ClientSession() as session:
                status, body = await deliver(
                    session,
                    a.url,
                    "installation",
                    installation_created(sim, FORK, installation_id),
                    "install-1",
                )
            assert (status, body["outcome"]) == (202, "new")

            def register_job() -> Any:
                return next((r for r in job_rows(store) if r.kind == "register"), None)

            def hanging() -> bool:  # the register job runs in A, inside the slow request
                job = register_job()
                return job is not None and job.state == "running" and hang.times == 0

            await group.until(hanging, timeout=30, what="the register job to hang in A")
            await a.kill()
            killed = register_job()
            assert (killed.state, killed.attempts) == ("running", 1)
            assert killed.worker.startswith(a.worker_prefix())
            assert Registry(store).fork(FORK) is None

            b = await group.start("b", workers=1, lease_seconds=5)

            def register_finished() -> bool:
                job = register_job()
                return job is not None and job.state in ("done", "failed")

            await group.until(register_finished, timeout=40, what="B to reclaim and finish the register job")
            await group.until(lambda: settled(store), timeout=40, what="the queue to settle")

            rows = job_rows(store)
            by_kind = {r.kind: r for r in rows}
            assert sorted(r.kind for r in rows) == ["ingest", "installation", "register"], rows
            assert [r.id for r in rows if r.delivery_id == "install-1"] == [by_kind["installation"].id]
            installation = by_kind["installation"]
            assert (installation.state, installation.attempts) == ("done", 1)
            register = by_kind["register"]
            assert (register.state, register.attempts, register.error) == ("done", 2, None)
            assert register.worker.startswith(b.worker_prefix())
            fork = Registry(store).fork(FORK)
            assert (
                fork is not None
                and fork.upstream_repo == UPSTREAM
                and fork.installation_id == installation_id
            )
            assert [r for r in rows if r.state == "running"] == []
            ingest = by_kind["ingest"]
            assert (ingest.state, ingest.error) == ("done", None), ingest.error
            assert f"{FORK} registered" in b.log() and f"{FORK} registered" not in a.log()
            assert await b.stop() == 0, b.log()
    finally:
        store.close()
