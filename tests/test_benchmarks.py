"""The benchmark scripts still run (on a small history) and print their figures; timings are not asserted."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).parent.parent / "benchmarks"


def test_plan_bench_prints_plan_raw_ratio_and_the_plan_with_the_model() -> None:
    small = [
        "--files",
        "150",
        "--base-commits",
        "20",
        "--fork-commits",
        "20",
        "--ingested",
        "30",
        "--pending",
        "40",
    ]
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "plan_bench.py"), *small, "--runs", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"pending upstream commits", proc.stdout)
    plan = re.search(r"sluice plan:\s+([\d.]+) s", proc.stdout)
    raw = re.search(r"raw git merge-tree:\s+([\d.]+) s\s+\((\d+) calls", proc.stdout)
    ratio = re.search(r"ratio plan / raw:\s+([\d.]+)", proc.stdout)
    assert plan and raw and ratio, proc.stdout
    assert int(raw.group(2)) >= 40
    # The printed times are rounded to 10 ms, so the ratio recomputed from them is only close.
    assert float(plan.group(1)) / float(raw.group(1)) == pytest.approx(float(ratio.group(1)), rel=0.1)
    model = re.search(r"with the model:\s+([\d.]+) s .*; (\d+) of (\d+) commits scored\)", proc.stdout)
    assert model, proc.stdout
    assert int(model.group(2)) == int(model.group(3)) > 0  # the plan with the model scored every commit
    assert re.search(r"model's difference:\s+[-+][\d.]+ s", proc.stdout)


def test_real_cost_skips_without_a_repository() -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "real_cost.py")], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0 and "skipped: no repository given" in proc.stdout


def test_real_cost_prints_its_figures_on_a_merge_style_fork(tmp_path: Path) -> None:
    from tests.support.scenarios import Scenario, numbered

    s = Scenario(tmp_path)
    s.upstream("Initial import (#1)", {"docs/a.md": numbered("a", 30)})
    s.fork_here()
    s.fork("[XPU] own docs", {"docs/xpu.md": "xpu\n"})
    merged = s.upstream("[DOCS] one (#2)", {"docs/a.md": numbered("a", 31)})
    s.git("checkout", "-q", "main")
    s.git("merge", "-q", "--no-ff", "-m", f"Merge OpenAI Triton commit `{merged[:7]}` (#7)", merged)
    for n in range(3, 6):
        s.upstream(f"[DOCS] more (#{n})", {"docs/a.md": numbered("a", 30 + n)})
    before = s.git("count-objects", "-v")

    options = ["--upstream", "upstream/main", "--window", "3", "--runs", "1"]
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "real_cost.py"), str(s.path), *options],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "3 pending upstream commits" in proc.stdout
    for label in ("pick --dry-run (warm)", "plan of 3 commits (warm)", "ratio prediction / raw merge-tree"):
        assert re.search(rf"{re.escape(label)}: [\d.]+", proc.stdout), proc.stdout
    assert re.search(r"loose objects before: (\d+) .*\n.*after \d+ plans and dry runs: \1 ", proc.stdout)
    assert s.git("count-objects", "-v") == before  # the scenario itself is only read


def test_webhook_bench_prints_the_floor_and_both_backends_with_workers(
    request: pytest.FixtureRequest,
) -> None:
    try:
        request.getfixturevalue("postgres_server")  # skipped (or failed in CI) when PostgreSQL is missing
    except pytest.skip.Exception:
        backends = ["sqlite"]
    else:
        backends = ["sqlite", "postgresql"]
    args = ["--deliveries", "100", *([] if "postgresql" in backends else ["--no-postgres"])]
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "webhook_bench.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    figures = r"deliveries/s\s+p50\s+[\d.]+ ms\s+p99\s+[\d.]+ ms\s+max\s+[\d.]+ ms\s+\(100 deliveries"
    assert re.search(rf"bare aiohttp\s+[\d.]+ {figures}\)", proc.stdout), proc.stdout
    for backend in backends:
        line = re.search(
            rf"sluice {backend}\s+[\d.]+ {figures}, [\d.]+ CPU ms each, (\d+) jobs done", proc.stdout
        )
        assert line, proc.stdout
        assert int(line.group(1)) > 0  # the workers were running and took jobs off the queue


def test_simulate_bench_skips_without_a_repository() -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "simulate_bench.py")], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0 and "skipped: no repository given" in proc.stdout


def test_simulate_bench_prints_baselines_and_sluice_on_a_merge_style_fork(tmp_path: Path) -> None:
    from tests.test_calibrate import merge_history

    s, _ = merge_history(tmp_path)
    options = ["--upstream", "upstream/main", "--until", "2026-03-01", "--cache", str(tmp_path / "c.jsonl")]
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "simulate_bench.py"), str(s.path), *options],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    # real_risk's labels in the merge PR: the revert of a2, a3 by SHA, a4 by upstream PR number
    assert "windows: 2, upstream commits: 9, culprits: 3" in proc.stdout, proc.stdout
    assert re.search(r"per-commit testing: 1\.000 runs/commit \(anchor 1\.0\), 9 runs", proc.stdout)
    assert re.search(r"fixed batches of 20, prefix bisection: [\d.]+ runs/commit .*found 3/3", proc.stdout)
    assert re.search(r"information bound, batches of 20: [\d.]+ runs/commit", proc.stdout)
    assert re.search(r"^sluice: [\d.]+ runs/commit.*found 3/3", proc.stdout, re.M)
    assert "confirmation re-runs alone: 0.333 runs/commit" in proc.stdout  # 3 culprits in 9 commits
    assert re.search(r"goal: .*: (met|missed)", proc.stdout)
