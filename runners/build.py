"""The tier's build (`tiers.build`): the commands that build the checkout under test before any suite runs,
so the suites test that commit's Triton, not a release installed beside the runner."""

from __future__ import annotations

import importlib
import math
import shlex
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from bot.core.config import BUILD_SUITE, BuildConfig, SuiteConfig
from bot.core.tiers import NOT_RUN
from runners import commands, environment
from runners.report import Outcome, SuiteResult, TestResult

FAILED = "the build failed"  # what bisection's BUILD_FAILURE reads: a prefix that does not build is a skip


@dataclass(frozen=True)
class Built:
    result: SuiteResult
    tests: tuple[TestResult, ...]

    @property
    def passed(self) -> bool:
        return self.result.outcome is Outcome.PASSED


def run_build(
    build: BuildConfig, *, env: Mapping[str, str] | None = None, say: Callable[[str], None] | None = None
) -> Built:
    """Run the build's commands in order in the working directory, all of them within its timeout; the
    first that fails (or cannot start, or runs out of time) stops it. Each command is a test of the
    `build` result, so the report shows which one failed and how its output ended."""
    started = time.perf_counter()
    tests: list[TestResult] = []
    problems: list[str] = []
    last: tuple[str, ...] = ()
    exit_code: int | None = 0
    for argv in build.commands:
        last = argv
        left = build.timeout_seconds - (time.perf_counter() - started)
        if say is not None:
            say(f"{BUILD_SUITE}: {shlex.join(argv)}")
        if left <= 0:  # the commands before it took all the build's time
            spent = f"not started: the build's {build.timeout_seconds} s were spent"
            test = _named(TestResult(suite=BUILD_SUITE, name="", outcome=Outcome.ERROR, message=spent), argv)
            exit_code = None
        else:
            done = commands.run_command(BUILD_SUITE, argv, timeout=math.ceil(left), env=env)  # whole seconds
            exit_code = done.exit_code
            test = _named(done.tests[0], argv)
        tests.append(test)
        if test.outcome is not Outcome.PASSED:
            problems.append((test.message or FAILED).splitlines()[0])
            break
    importlib.invalidate_caches()  # what the build installed is importable by the suites of this process
    if not problems and environment.editable_elsewhere("triton", Path.cwd()):
        problems.append(
            f"{FAILED}: it installed Triton editable (`pip install -e`), which the runner, already running, "
            "cannot import: install it with `pip install .`"
        )
    failed = sum(t.outcome is Outcome.FAILED for t in tests)
    errors = sum(t.outcome is Outcome.ERROR for t in tests)
    result = SuiteResult(
        name=BUILD_SUITE,
        kind="build",
        command=last,
        exit_code=exit_code,
        executed=len(tests),
        passed=len(tests) - failed - errors,
        failed=failed,
        errors=errors,
        outcome=Outcome.FAILED if problems else Outcome.PASSED,
        problems=tuple(problems),
        duration_s=time.perf_counter() - started,
    )
    return Built(result, tuple(tests))


def _named(test: TestResult, argv: tuple[str, ...]) -> TestResult:
    """The command's test, named by its command line; a failure's message says the build failed first."""
    line = shlex.join(argv)
    message = test.message
    if test.outcome is not Outcome.PASSED:
        said = f"{FAILED}: `{line}` "
        message = said + (message or "failed")[-max(commands.MAX_MESSAGE - len(said), 200) :]
    return test.model_copy(update={"name": line, "message": message})


def not_run(suite: SuiteConfig) -> SuiteResult:
    """A suite the failed build kept from running: an error, never a pass or a silent absence."""
    return SuiteResult(
        name=suite.name,
        kind="builtin" if suite.builtin else "command",
        command=suite.command,
        executed=0,
        outcome=Outcome.ERROR,
        problems=(f"{NOT_RUN}{FAILED}",),
    )
