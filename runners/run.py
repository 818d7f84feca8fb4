"""`python -m runners run`: run one tier's suites and write its tier report."""

from __future__ import annotations

import functools
import os
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from bot.config_file import load_config
from bot.core.config import CONFIG_PATH, BuiltinSuite, ConfigError, SluiceConfig, SuiteConfig
from bot.core.tiers import Level, Selection, suites_for
from runners import build
from runners.report import Benchmark, Outcome, Report, RunInfo, SuiteResult, TestResult

if TYPE_CHECKING:
    from runners.suites import BuiltinSuiteFn

    Builtins = Mapping[BuiltinSuite, BuiltinSuiteFn]

EXIT_PASSED, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
NAMED_FAILURES = 3  # failing tests named in a suite's problem; the report lists them all


class BadInput(Exception):
    """The run cannot start: a broken config, an unreadable baseline, an unknown suite."""


@dataclass(frozen=True)
class RunRequest:
    tier: Level
    config: SluiceConfig
    only: tuple[str, ...] = ()  # suite names (or built-in kinds) to run; empty: all of the tier's
    baseline: Report | None = None  # a previous report: a suite that runs fewer tests than there fails
    head_sha: str | None = None
    baseline_sha: str | None = None
    upstream_range: str | None = None
    ingestion_id: str | None = None
    selection: Selection = Selection.FULL  # an ingestion's suites (with the extensions'), or a fork PR's
    suite: int | None = None  # only this suite of the tier, by index (an `/l3 <suite>` request)


@dataclass(frozen=True)
class Expectation:
    """How many tests a suite must run: its `expected_tests`, and what it ran in the baseline report."""

    configured: int | None = None
    baseline: int | None = None

    @property
    def count(self) -> int | None:
        known = [n for n in (self.configured, self.baseline) if n is not None]
        return max(known) if known else None


@dataclass(frozen=True)
class SuiteRun:
    """What one suite produced, before it is judged."""

    tests: tuple[TestResult, ...]
    benchmarks: tuple[Benchmark, ...] = ()
    notes: tuple[str, ...] = ()
    exit_code: int | None = None
    problems: tuple[str, ...] = ()  # the suite itself failed to run properly (crash, timeout)
    broken: bool = False  # it could not run at all: its outcome is `error`


# --- pure decisions ---------------------------------------------------------------------------------------


def select_suites(request: RunRequest) -> tuple[SuiteConfig, ...]:
    """The selection's suites of the tier, or those `--only` names (by name or built-in kind); BadInput for an
    unknown one."""
    suites = suites_for(request.config, request.tier, request.selection, suite=request.suite)
    if request.suite is not None and not suites:
        raise BadInput(f"tier {request.tier.value} has no suite {request.suite} (0-based; check the config)")
    if not request.only:
        return tuple(suites)
    unknown = [wanted for wanted in request.only if not any(wanted in (s.name, s.builtin) for s in suites)]
    if unknown:
        names = ", ".join(s.name for s in suites)
        raise BadInput(f"tier {request.tier.value} has no suite {unknown[0]!r} (its suites: {names})")
    return tuple(s for s in suites if s.name in request.only or s.builtin in request.only)


def expectation_for(suite: SuiteConfig, baseline: Report | None) -> Expectation:
    ran_before = None
    if baseline is not None:
        ran_before = next((s.executed for s in baseline.suites if s.name == suite.name), None)
    return Expectation(configured=suite.expected_tests, baseline=ran_before)


def judge(suite: SuiteConfig, run: SuiteRun, expectation: Expectation, *, duration_s: float) -> SuiteResult:
    """The suite's result: failed when a test failed, the command failed, or fewer tests ran than expected."""
    counts = {outcome: sum(t.outcome == outcome for t in run.tests) for outcome in Outcome}
    executed = counts[Outcome.PASSED] + counts[Outcome.FAILED] + counts[Outcome.ERROR]
    problems = [*run.problems, *_count_problems(executed, expectation)]
    problems += _test_problems(run.tests, Outcome.FAILED, "failed")
    problems += _test_problems(run.tests, Outcome.ERROR, "could not run")
    outcome = Outcome.ERROR if run.broken else Outcome.FAILED if problems else Outcome.PASSED
    return SuiteResult(
        name=suite.name,
        kind="builtin" if suite.builtin else "command",
        command=suite.command,
        exit_code=run.exit_code,
        expected=expectation.count,
        executed=executed,
        passed=counts[Outcome.PASSED],
        failed=counts[Outcome.FAILED],
        errors=counts[Outcome.ERROR],
        skipped=counts[Outcome.SKIPPED],
        outcome=outcome,
        problems=tuple(problems),
        notes=run.notes,
        duration_s=duration_s,
    )


def _count_problems(executed: int, expectation: Expectation) -> list[str]:
    # A suite that quietly runs fewer tests than before is how a team loses coverage without an alert.
    if executed == 0:
        return ["ran no tests"]
    problems = []
    if expectation.configured is not None and executed < expectation.configured:
        problems.append(f"ran {_tests(executed)}, expected {expectation.configured} (expected_tests)")
    if expectation.baseline is not None and executed < expectation.baseline:
        problems.append(f"ran {_tests(executed)}, the baseline ran {expectation.baseline}")
    return problems


def _test_problems(tests: tuple[TestResult, ...], outcome: Outcome, verb: str) -> list[str]:
    names = [t.name for t in tests if t.outcome == outcome]
    if not names:
        return []
    shown = ", ".join(names[:NAMED_FAILURES])
    more = f" and {len(names) - NAMED_FAILURES} more" if len(names) > NAMED_FAILURES else ""
    return [f"{_tests(len(names))} {verb}: {shown}{more}"]


def _tests(n: int) -> str:
    return f"{n} test" if n == 1 else f"{n} tests"


def exit_code(report: Report) -> int:
    return EXIT_PASSED if all(s.outcome == Outcome.PASSED for s in report.suites) else EXIT_FAILED


# --- running ----------------------------------------------------------------------------------------------


class Display:
    """Progress on stderr: a live bar on a terminal, a line per test in a CI log."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.live = console.is_terminal

    def suite_started(self, suite: SuiteConfig, total: int | None) -> Progress | None:
        what = " ".join(suite.command) if suite.command else f"built-in {suite.builtin}"
        if not self.live:
            line = f"{suite.name}: {what}" + (f", {_tests(total)}" if total else "")
            self.console.print(line, markup=False, highlight=False)
            return None
        progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}", markup=False),  # test names hold brackets
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.console,
        )
        progress.start()
        progress.add_task(suite.name, total=total)
        return progress

    def test_started(self, progress: Progress | None, name: str) -> None:
        if progress is not None:
            progress.update(progress.task_ids[0], description=name)

    def test_done(self, progress: Progress | None, index: int, total: int, test: TestResult) -> None:
        if progress is not None:
            progress.update(progress.task_ids[0], advance=1)
        else:
            line = f"  [{index}/{total}] {test.outcome.value:7} {test.name} ({test.duration_s:.2f} s)"
            self.console.print(line, markup=False, highlight=False)
        self.failure(test)

    def failure(self, test: TestResult) -> None:
        if test.outcome in (Outcome.FAILED, Outcome.ERROR):
            line = f"  {test.outcome.value.upper()}: {test.message or test.name}"
            self.console.print(line, markup=False, highlight=False)

    def suite_done(self, progress: Progress | None) -> None:
        if progress is not None:
            progress.stop()


def run_tier(
    request: RunRequest,
    *,
    builtins: Builtins | None = None,
    console: Console | None = None,
) -> Report:
    """Run the selected suites of the tier and return the report (the caller writes it)."""
    from runners import environment

    console = console or _console()
    selected = select_suites(request)
    started_at = datetime.now(UTC)
    display = Display(console)
    built = _build(request.config, display)
    env = environment.fingerprint(interpreter=_interpreter(selected))  # of the Triton the build installed
    suites: list[SuiteResult] = [built.result] if built is not None else []
    tests: list[TestResult] = list(built.tests) if built is not None else []
    benchmarks: list[Benchmark] = []
    for suite in selected:
        if built is not None and not built.passed:
            suites.append(build.not_run(suite))
            continue
        started = time.perf_counter()
        run = _run_suite(suite, request.config, builtins=builtins, display=display)
        result = judge(
            suite, run, expectation_for(suite, request.baseline), duration_s=time.perf_counter() - started
        )
        suites.append(result)
        tests += run.tests
        benchmarks += run.benchmarks
    _warn_about_missing_baseline_suites(request, selected, console)
    info = RunInfo(
        tier=request.tier,
        head_sha=request.head_sha,
        baseline_sha=request.baseline_sha,
        upstream_range=request.upstream_range,
        ingestion_id=request.ingestion_id,
        started_at=started_at,
        finished_at=datetime.now(UTC),
    )
    return Report(
        run=info, environment=env, suites=tuple(suites), tests=tuple(tests), benchmarks=tuple(benchmarks)
    )


def _build(config: SluiceConfig, display: Display) -> build.Built | None:
    """The tier's build, when `tiers.build` asks for one; before anything imports Triton."""
    from runners import backend

    if config.tiers.build is None:
        return None
    say = functools.partial(display.console.print, markup=False, highlight=False)
    built = build.run_build(config.tiers.build, env=backend.command_environment(), say=say)
    for test in built.tests:
        display.failure(test)
    return built


def _interpreter(suites: tuple[SuiteConfig, ...]) -> bool:
    """Whether Triton kernels run in the interpreter here (decided before any kernel is defined)."""
    from runners import backend

    if any(s.builtin for s in suites):
        try:
            return backend.select().interpreter
        except RuntimeError:  # triton loaded too early; the built-in suites will say so as their error
            pass
    return backend.interpret_requested()


def _run_suite(
    suite: SuiteConfig,
    config: SluiceConfig,
    *,
    builtins: Builtins | None,
    display: Display,
) -> SuiteRun:
    if suite.builtin is None:
        return _run_command_suite(suite, display)
    return _run_builtin_suite(suite, config, builtins=builtins, display=display)


def _run_command_suite(suite: SuiteConfig, display: Display) -> SuiteRun:
    from runners import backend, commands

    progress = display.suite_started(suite, None)
    try:
        env = backend.command_environment()
        done = commands.run_command(suite.name, suite.command, timeout=suite.timeout, env=env)
    finally:
        display.suite_done(progress)
    for test in done.tests:
        display.failure(test)
    return SuiteRun(
        tests=done.tests,
        benchmarks=done.benchmarks,
        exit_code=done.exit_code,
        problems=done.problems,
        broken=done.exit_code is None,
    )


def _run_builtin_suite(
    suite: SuiteConfig,
    config: SluiceConfig,
    *,
    builtins: Builtins | None,
    display: Display,
) -> SuiteRun:
    assert suite.builtin is not None
    try:
        from runners import suites as builtin_suites

        make_plan = (builtins or builtin_suites.BUILTINS)[suite.builtin]
        plan = make_plan(suite.name, config)
    except Exception as err:  # e.g. Triton or torch missing or broken: this suite errs, the others run
        problem = f"the built-in suite could not start: {type(err).__name__}: {err}"
        return SuiteRun(tests=(), problems=(problem,), broken=True)
    tests: list[TestResult] = []
    benchmarks: list[Benchmark] = []
    progress = display.suite_started(suite, len(plan.steps))
    try:
        for index, step in enumerate(plan.steps, 1):
            display.test_started(progress, step.name)
            result = step.run()
            tests.append(result.test)
            if result.benchmark is not None:
                benchmarks.append(result.benchmark)
            display.test_done(progress, index, len(plan.steps), result.test)
    finally:
        display.suite_done(progress)
    return SuiteRun(tests=tuple(tests), benchmarks=tuple(benchmarks), notes=plan.notes)


def _warn_about_missing_baseline_suites(
    request: RunRequest, selected: tuple[SuiteConfig, ...], console: Console
) -> None:
    if request.baseline is None or request.only:
        return
    names = {s.name for s in selected}
    for gone in (s.name for s in request.baseline.suites if s.name not in names):
        line = f"note: the baseline report has a suite {gone!r} that tier {request.tier.value} no longer runs"
        console.print(line, markup=False, highlight=False)


def _console() -> Console:
    """stderr, never wrapping a line; wide enough for the summary table in a CI log."""
    console = Console(stderr=True, soft_wrap=True)
    if not console.is_terminal:
        console.width = max(console.width, 120)
    return console


# --- the command ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunArgs:
    tier: Level
    out: Path
    config: Path | None = None
    only: tuple[str, ...] = ()
    baseline_report: Path | None = None
    head_sha: str | None = None
    baseline_sha: str | None = None
    upstream_range: str | None = None
    ingestion_id: str | None = None
    selection: Selection = Selection.FULL
    suite: int | None = None


def main(args: RunArgs, *, console: Console | None = None) -> int:
    """Run the tier and write the report; 0 all suites passed, 1 a suite failed, 2 bad input."""
    console = console or _console()
    try:
        request = _request(args, console)
        report = run_tier(request, console=console)
        _write(report, args.out)
    except BadInput as err:
        console.print(f"error: {err}", markup=False, highlight=False)
        return EXIT_BAD_INPUT
    _summarise(report, args.out, console)
    return exit_code(report)


def _request(args: RunArgs, console: Console) -> RunRequest:
    config_path = args.config
    if config_path is None and Path(CONFIG_PATH).is_file():
        config_path = Path(CONFIG_PATH)
    try:
        config = load_config(config_path)
    except ConfigError as err:
        raise BadInput(f"the configuration has problems:\n{err}") from None
    console.print(
        f"config: {config_path or 'the defaults (no ' + CONFIG_PATH + ')'}", markup=False, highlight=False
    )
    return RunRequest(
        tier=args.tier,
        config=config,
        only=args.only,
        baseline=_baseline(args.baseline_report),
        head_sha=args.head_sha or os.environ.get("GITHUB_SHA") or _git_head(),
        baseline_sha=args.baseline_sha,
        upstream_range=args.upstream_range,
        ingestion_id=args.ingestion_id,
        selection=args.selection,
        suite=args.suite,
    )


def _baseline(path: Path | None) -> Report | None:
    if path is None:
        return None
    try:
        return Report.read(path)
    except OSError as err:
        raise BadInput(f"cannot read the baseline report {path}: {err.strerror}") from None
    except (ValidationError, ValueError) as err:
        first = str(err).splitlines()[:3]
        raise BadInput(f"{path} is not a tier report: {' '.join(first)}") from None


def _git_head() -> str | None:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None


def _write(report: Report, out: Path) -> None:
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(out.name + ".partial")
        report.write(partial)
        partial.replace(out)
    except OSError as err:
        raise BadInput(f"cannot write the report to {out}: {err.strerror}") from None


def _summarise(report: Report, out: Path, console: Console) -> None:
    table = Table(title=f"tier {report.run.tier.value}", title_justify="left")
    for column in ("suite", "outcome", "ran", "expected", "pass", "fail", "error", "skip", "time"):
        table.add_column(column)
    for s in report.suites:
        colour = "green" if s.outcome == Outcome.PASSED else "red"
        table.add_row(
            s.name,
            f"[{colour}]{s.outcome.value}[/{colour}]",
            str(s.executed),
            "-" if s.expected is None else str(s.expected),
            str(s.passed),
            str(s.failed),
            str(s.errors),
            str(s.skipped),
            f"{s.duration_s:.1f} s",
        )
    console.print(table)
    for s in report.suites:
        for problem in s.problems:
            console.print(f"{s.name}: {problem}", markup=False, highlight=False)
        for note in s.notes:
            console.print(f"{s.name}: note: {note}", markup=False, highlight=False)
    console.print(f"report: {out}", markup=False, highlight=False)
