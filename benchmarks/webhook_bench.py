"""Webhook intake speed: signed deliveries from this process to `sluice serve` on loopback, at a fixed rate.

Prints throughput and p50/p99 acknowledgement latency for `sluice serve` (verify, record durably, 202)
beside a bare aiohttp handler that only answers 202, measured in the same run.

    python benchmarks/webhook_bench.py [--rate 200] [--seconds 10] [--database URL]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import aiohttp

SECRET = "bench-secret"
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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


async def wait_ready(session: aiohttp.ClientSession, url: str) -> None:
    for _ in range(200):
        try:
            async with session.get(url.replace("/webhook", "/healthz")) as response:  # any answer means up
                await response.read()
                return
        except aiohttp.ClientError:
            await asyncio.sleep(0.05)
    raise RuntimeError(f"{url} did not start")


async def load(url: str, *, rate: float, seconds: float) -> tuple[list[float], float]:
    latencies: list[float] = []
    async with aiohttp.ClientSession() as session:
        await wait_ready(session, url)

        async def one(n: int) -> None:
            body = push_body(n)
            headers = {
                "Content-Type": "application/json",
                "X-GitHub-Event": "push",
                "X-GitHub-Delivery": str(uuid.uuid4()),
                "X-Hub-Signature-256": "sha256="
                + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest(),
            }
            started = time.perf_counter()
            async with session.post(url, data=body, headers=headers) as response:
                await response.read()
                if response.status != 202:
                    raise RuntimeError(f"unexpected {response.status}")
            latencies.append(time.perf_counter() - started)

        tasks = []
        began = time.perf_counter()
        for n in range(int(rate * seconds)):
            await asyncio.sleep(max(0.0, began + n / rate - time.perf_counter()))
            tasks.append(asyncio.create_task(one(n)))
        await asyncio.gather(*tasks)
        return latencies, time.perf_counter() - began


def report(name: str, latencies: list[float], elapsed: float) -> None:
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    p50 = statistics.median(ordered)
    print(
        f"{name:<14} {len(ordered) / elapsed:8.1f} deliveries/s   p50 {1000 * p50:6.2f} ms"
        f"   p99 {1000 * p99:6.2f} ms   ({len(ordered)} deliveries)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=200.0, help="deliveries per second")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--database", help="SQLAlchemy URL for `sluice serve` (default: a fresh SQLite file)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sluice-webhook-bench-") as tmp:
        env = {
            **os.environ,
            "SLUICE_APP_ID": "1",
            "SLUICE_PRIVATE_KEY": "not used by intake",
            "SLUICE_WEBHOOK_SECRET": SECRET,
            "SLUICE_DATABASE_URL": args.database or f"sqlite:///{Path(tmp) / 'bench.db'}",
            "SLUICE_WORKERS": "0",  # the intake alone: what GitHub waits on
            "SLUICE_POLL_INTERVAL": "0",
            "SLUICE_DATA_DIR": str(Path(tmp) / "data"),
        }
        sluice_port, bare_port = free_port(), free_port()
        sluice = subprocess.Popen(
            [str(Path(sys.executable).parent / "sluice"), "serve", "--port", str(sluice_port)], env=env
        )
        bare = subprocess.Popen([sys.executable, "-c", BARE_SERVER, str(bare_port)])
        try:
            print(
                f"fixed rate {args.rate:.0f}/s for {args.seconds:.0f} s, signed push deliveries over loopback"
            )
            for name, port in (("bare aiohttp", bare_port), ("sluice serve", sluice_port)):
                latencies, elapsed = asyncio.run(
                    load(f"http://127.0.0.1:{port}/webhook", rate=args.rate, seconds=args.seconds)
                )
                report(name, latencies, elapsed)
        finally:
            for process in (sluice, bare):
                process.terminate()
                process.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
