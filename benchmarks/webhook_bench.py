"""Webhook intake speed: concurrent signed deliveries over loopback to `sluice serve`, workers running.

Prints throughput and p50/p99/max acknowledgement latency of a bare aiohttp handler that only answers 202
(the floor), then of `sluice serve` (verify, record durably, 202) on SQLite and on PostgreSQL, each with
its default job workers and poll loop running against a stub GitHub, so the intake shares the database
with workers claiming and completing the jobs it queues, as in production.

    python benchmarks/webhook_bench.py [--deliveries 2000] [--concurrency 10] [--postgres URL | --no-postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import aiohttp
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.net import free_port
from tests.support.webhooks import signed_headers

SECRET = "bench-secret"
DEFAULT_POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
WARMUP = 50
BARE_SERVER = """
import sys
from aiohttp import web
async def accept(request):
    await request.read()
    return web.Response(status=202)
app = web.Application()
app.router.add_post("/webhook", accept)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None)
"""
# The GitHub the workers talk to: `GET /app` (the bot's login) is all a push job for an unknown repo needs.
GITHUB_STUB = """
import sys
from aiohttp import web
async def app_info(request):
    return web.json_response({"id": 1, "slug": "sluice-bench", "name": "Sluice bench"})
app = web.Application()
app.router.add_get("/app", app_info)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None)
"""


def push_body(n: int) -> bytes:
    payload = {
        "ref": "refs/heads/main",
        "before": "a" * 40,
        "after": f"{n:040x}",
        "repository": {"full_name": f"triton-fork/triton-{n % 8}", "name": "triton"},
        "installation": {"id": 1},
        "commits": [],
    }
    return json.dumps(payload).encode()


def signed(n: int) -> tuple[bytes, dict[str, str]]:
    body = push_body(n)
    return body, signed_headers(body, secret=SECRET)


async def wait_until(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if await check():
                return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.05)
    raise RuntimeError(f"{what} did not happen within {timeout:.0f} s")


async def metric(session: aiohttp.ClientSession, base: str, pattern: str) -> float:
    async with session.get(f"{base}/metrics") as response:
        found = re.search(pattern, await response.text())
    return float(found.group(1)) if found else 0.0


async def load(base: str, *, deliveries: int, concurrency: int, sluice: bool) -> tuple[list[float], float]:
    """Warm up, then `deliveries` signed pushes from `concurrency` clients back to back; latencies in s."""
    async with aiohttp.ClientSession() as session:
        await wait_until(lambda: _answers(session, f"{base}/healthz"), f"{base} answering")
        if sluice:  # the workers start once they know the App's login: wait for that GET /app
            calls = r'sluice_github_api_calls_total\{method="GET"\} ([\d.]+)'
            await wait_until(lambda: _positive(metric(session, base, calls)), "the workers starting")
        latencies: list[float] = []
        numbers = iter(range(WARMUP + deliveries))

        async def client() -> None:
            for n in numbers:
                body, headers = signed(n)
                started = time.perf_counter()
                async with session.post(f"{base}/webhook", data=body, headers=headers) as response:
                    await response.read()
                    if response.status != 202:
                        raise RuntimeError(f"unexpected {response.status}: {await response.text()}")
                if n >= WARMUP:
                    latencies.append(time.perf_counter() - started)

        began = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(concurrency)))
        return latencies, time.perf_counter() - began


async def _answers(session: aiohttp.ClientSession, url: str) -> bool:
    async with session.get(url) as response:  # any answer means it is up (the bare server has no /healthz)
        await response.read()
        return True


async def _positive(value: Awaitable[float]) -> bool:
    return await value > 0


async def jobs_done(base: str) -> int:
    """Jobs the workers finished by now (waiting up to 10 s for the first: proof that they run)."""
    done = r'sluice_jobs\{state="done"\} ([\d.]+)'
    async with aiohttp.ClientSession() as session:
        with contextlib.suppress(RuntimeError):
            await wait_until(lambda: _positive(metric(session, base, done)), "a job done", timeout=10)
        return int(await metric(session, base, done))


def report(name: str, latencies: list[float], elapsed: float, extra: str = "") -> None:
    ordered = sorted(latencies)
    p50, p99 = statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    print(
        f"{name:<18} {len(ordered) / elapsed:7.0f} deliveries/s   p50 {1000 * p50:6.2f} ms"
        f"   p99 {1000 * p99:6.2f} ms   max {1000 * ordered[-1]:7.2f} ms"
        f"   ({len(ordered)} deliveries{extra})",
        flush=True,
    )


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux), robust to what else the machine runs."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def process(
    argv: list[str], *, env: dict[str, str] | None = None, log: Path | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(log.open("wb")) if log else subprocess.DEVNULL
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=out)
        try:
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextmanager
def postgres_schema(url: str) -> Iterator[str | None]:
    """A fresh schema on `url` for one run (dropped after), or None when PostgreSQL is not reachable."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import SQLAlchemyError
    from sqlalchemy.pool import NullPool

    from bot.db.store import normalise_url

    schema = f"sluice_bench_{uuid.uuid4().hex[:12]}"
    engine = create_engine(normalise_url(url), poolclass=NullPool, connect_args={"connect_timeout": 5})
    try:
        with engine.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    except SQLAlchemyError as exc:
        print(f"postgresql: skipped, not reachable ({type(exc).__name__})")
        yield None
        return
    try:
        yield engine.url.update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(False)
    finally:
        with engine.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        engine.dispose()


def serve_env(tmp: Path, database: str, github_port: int, key: str, workers: int | None) -> dict[str, str]:
    env = {
        **os.environ,
        "SLUICE_APP_ID": "1",
        "SLUICE_PRIVATE_KEY": key,
        "SLUICE_WEBHOOK_SECRET": SECRET,
        "SLUICE_DATABASE_URL": database,
        "SLUICE_GITHUB_URL": f"http://127.0.0.1:{github_port}",
        "SLUICE_DATA_DIR": str(tmp / "data"),
    }
    for default in ("SLUICE_WORKERS", "SLUICE_POLL_INTERVAL"):  # the defaults, as a real start has them
        env.pop(default, None)
    if workers is not None:
        env["SLUICE_WORKERS"] = str(workers)
    return env


def run_sluice(
    name: str, database: str, *, tmp: Path, github_port: int, key: str, args: argparse.Namespace
) -> None:
    port = free_port()
    sluice = str(Path(sys.executable).parent / "sluice")
    env = serve_env(tmp, database, github_port, key, args.workers)
    with process([sluice, "serve", "--port", str(port)], env=env, log=tmp / f"{name}.log") as proc:
        base = f"http://127.0.0.1:{port}"
        before = cpu_seconds(proc.pid)
        latencies, elapsed = asyncio.run(
            load(base, deliveries=args.deliveries, concurrency=args.concurrency, sluice=True)
        )
        cpu_ms = 1000 * (cpu_seconds(proc.pid) - before) / (len(latencies) + WARMUP)
        done = asyncio.run(jobs_done(base))
        report(name, latencies, elapsed, f", {cpu_ms:.2f} CPU ms each, {done} jobs done by the workers")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--deliveries", type=int, default=2000, help="measured deliveries per target")
    parser.add_argument("--concurrency", type=int, default=10, help="deliveries in flight at once")
    parser.add_argument("--postgres", default=os.environ.get("SLUICE_TEST_POSTGRES_URL") or DEFAULT_POSTGRES)
    parser.add_argument("--no-postgres", action="store_true", help="SQLite and the floor only")
    parser.add_argument("--workers", type=int, help="job workers in sluice serve (default: its default)")
    args = parser.parse_args()
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    print(
        f"{args.concurrency} concurrent signed push deliveries over loopback, {args.deliveries} per target "
        f"after {WARMUP} unmeasured; sluice serve with its default workers and poll loop"
    )
    with tempfile.TemporaryDirectory(prefix="sluice-webhook-bench-") as tmp_name:
        tmp, bare_port, github_port = Path(tmp_name), free_port(), free_port()
        with process([sys.executable, "-c", BARE_SERVER, str(bare_port)]):
            base = f"http://127.0.0.1:{bare_port}"
            latencies, elapsed = asyncio.run(
                load(base, deliveries=args.deliveries, concurrency=args.concurrency, sluice=False)
            )
            report("bare aiohttp", latencies, elapsed)
        with process([sys.executable, "-c", GITHUB_STUB, str(github_port)]):
            sluice = functools.partial(
                run_sluice, tmp=tmp, github_port=github_port, key=key.decode(), args=args
            )
            sluice("sluice sqlite", f"sqlite:///{tmp / 'bench.db'}")
            if not args.no_postgres:
                with postgres_schema(args.postgres) as url:
                    if url is not None:
                        sluice("sluice postgresql", url)
    return 0


if __name__ == "__main__":
    sys.exit(main())
