"""Interleaved A/B runs: both interpreters run the benchmarks in turn on this machine."""

from __future__ import annotations

import enum
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from runners.compare.inputs import read_report
from runners.compare.model import CompareInputError
from runners.compare.sides import Side
from runners.report import Report

DEFAULT_ROUNDS = 10  # A/B rounds: 10 gives compile time MIN_SAMPLES samples per side


class Arm(enum.StrEnum):
    BASELINE = "baseline"
    CANDIDATE = "candidate"


class BenchRunner(Protocol):
    """Runs the benchmarks once with one interpreter and leaves a tier report at `out`."""

    def __call__(self, python: str, out: Path, *, config: Path | None) -> None: ...


@dataclass(frozen=True)
class SubprocessBenchRunner:
    """`<python> -m runners run --tier l3 --only bench --out FILE [--config FILE]` in `cwd`."""

    cwd: Path | None = None
    log: Callable[[str], None] = field(default=lambda line: print(line, file=sys.stderr))

    def __call__(self, python: str, out: Path, *, config: Path | None) -> None:
        argv = [python, "-m", "runners", "run", "--tier", "l3", "--only", "bench", "--out", str(out)]
        argv += ["--config", str(config)] if config else []
        try:
            proc = subprocess.run(argv, cwd=self.cwd, capture_output=True, text=True, check=False)
        except OSError as err:
            raise CompareInputError(f"cannot run {python}: {err.strerror}") from None
        if proc.returncode != 0 and not out.exists():
            tail = "\n".join(proc.stderr.strip().splitlines()[-10:])
            raise CompareInputError(f"`{' '.join(argv)}` failed with exit code {proc.returncode}:\n{tail}")
        if proc.returncode != 0:
            self.log(f"compare: `{' '.join(argv)}` exited {proc.returncode}; using the report it wrote")


def interleaved_order(rounds: int) -> list[tuple[int, Arm]]:
    """A B, B A, A B, …: each arm goes first in half the rounds, so a steady drift hits both alike."""
    order: list[tuple[int, Arm]] = []
    for round_ in range(rounds):
        pair = (Arm.BASELINE, Arm.CANDIDATE) if round_ % 2 == 0 else (Arm.CANDIDATE, Arm.BASELINE)
        order += [(round_, arm) for arm in pair]
    return order


def run_interleaved(
    pythons: Mapping[Arm, str],
    *,
    rounds: int,
    out_dir: Path,
    config: Path | None = None,
    runner: BenchRunner | None = None,
    log: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
) -> dict[Arm, Side]:
    """Run both arms `rounds` times each, interleaved on this machine, and pool each arm's reports."""
    run = runner or SubprocessBenchRunner()
    reports: dict[Arm, list[Report]] = {Arm.BASELINE: [], Arm.CANDIDATE: []}
    for round_, arm in interleaved_order(rounds):
        out = out_dir / f"round-{round_ + 1:02d}-{arm}.json"
        out.unlink(missing_ok=True)  # a report left from an earlier run must not stand in for this one
        log(f"compare: round {round_ + 1}/{rounds}: {arm} ({pythons[arm]})")
        run(pythons[arm], out, config=config)
        reports[arm].append(read_report(out, name=f"the {arm} round {round_ + 1}"))
    return {arm: Side.from_reports(reports[arm], name=str(arm)) for arm in Arm}
