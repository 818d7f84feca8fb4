"""Rendering the dashboard and reading its ticks for a large fork: prints figures, asserts nothing.

PYTHONPATH=. python benchmarks/dashboard_bench.py [--backlog 5000] [--points 2000] [--chains 50]
"""

from __future__ import annotations

import argparse
import datetime as dt
import time

from bot.core import dashboard as d
from bot.core.config import DEFAULT_COMPONENTS
from bot.core.ingestion import Links
from bot.core.lag import LagPoint
from bot.core.models import PlannedCommit, RiskLevel, RiskyChain

NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


def sha(n: int) -> str:
    return f"{n:08x}" * 5


def history(points: int) -> list[LagPoint]:
    return [
        LagPoint(
            fork="meta/triton",
            at=NOW - dt.timedelta(hours=points - i),
            days_behind=float(i % 17),
            backlog_commits=i % 5,
            pending_commits=i % 40,
            oldest_missing_days=float(i % 23),
            open_ingestions=i % 8,
            ingestion_tip=sha(i // 3),
            upstream_head=sha(i),
        )
        for i in range(points)
    ]


def chain(n: int) -> RiskyChain:
    commits = tuple(
        PlannedCommit(
            sha=sha(10**6 + n * 10 + k),
            subject="[Pipeliner] change",
            author="a",
            committer_time=n,
            changed_lines=10,
            files=("lib/Dialect/TritonGPU/Transforms/Pipeliner.cpp", "python/triton/runtime/jit.py"),
            symbols=(),
            risk=RiskLevel.HIGH,
            reasons=(),
            depends_on=(),
        )
        for k in range(5)
    )
    return RiskyChain(id=f"chain-{n:010d}", root=commits[0].sha, risk=RiskLevel.HIGH, commits=commits)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backlog", type=int, default=5000)
    parser.add_argument("--points", type=int, default=2000)
    parser.add_argument("--chains", type=int, default=50)
    args = parser.parse_args()
    model = d.DashboardModel(
        fork="meta/triton",
        now=NOW,
        history=history(args.points),
        links=Links("https://github.com/triton-lang/triton", "x", "main"),
        chains=[chain(n) for n in range(args.chains)],
        components=DEFAULT_COMPONENTS,
        backlog=[
            d.BacklogCommit(sha(n), f"[Backend] commit {n} (#{n})", "deferred") for n in range(args.backlog)
        ],
    )
    started = time.perf_counter()
    body = d.render(model)
    rendered = time.perf_counter() - started
    ticked = body.replace("- [ ] ", "- [x] ", 10)
    started = time.perf_counter()
    found = d.newly_ticked(body, ticked)
    read = time.perf_counter() - started
    print(f"backlog {args.backlog}, lag points {args.points}, chains {args.chains}")
    print(
        f"render: {rendered * 1000:.1f} ms, body {len(body):,} characters, {len(d.ticks(body))} boxes shown"
    )
    print(f"newly_ticked: {read * 1000:.1f} ms, {len(found)} found")


if __name__ == "__main__":
    main()
