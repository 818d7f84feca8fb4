"""Command suites: run an argv (pytest, lit, anything) and read its JUnit XML, or its exit code alone; and the
benchmarks it timed, when it writes them to `{benchmarks}` (a JSON list of the report's benchmark objects)."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from xml.parsers import expat

from pydantic import TypeAdapter, ValidationError

from runners.report import Benchmark, Outcome, TestResult

JUNIT_PLACEHOLDER = "{junit}"
BENCHMARKS_PLACEHOLDER = "{benchmarks}"
MAX_BENCHMARKS_BYTES = 64 * 1024 * 1024
BENCHMARK_LIST = TypeAdapter(tuple[Benchmark, ...])
MAX_MESSAGE = 2000
MAX_JUNIT_BYTES = 256 * 1024 * 1024
OUTPUT_TAIL = 4000  # of the command's output, kept for the message when it fails without JUnit
RUNNING: set[subprocess.Popen[bytes]] = set()  # the commands running now, each its own process group


class JUnitError(ValueError):
    """The JUnit XML cannot be read; the message says why."""


@dataclass(frozen=True)
class CommandRun:
    tests: tuple[TestResult, ...]
    exit_code: int | None  # None: it never ran to the end (could not start, or timed out)
    problems: tuple[str, ...] = ()  # why the command itself failed, apart from failing tests
    benchmarks: tuple[Benchmark, ...] = ()  # what it wrote to `{benchmarks}`, each under this suite's name


def run_command(
    suite: str,
    argv: tuple[str, ...],
    *,
    timeout: float,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> CommandRun:
    """Run `argv` (never through a shell), `{junit}` in any argument replaced by a temporary XML path and
    `{benchmarks}` by a temporary JSON path."""
    with tempfile.TemporaryDirectory(prefix="sluice-junit-") as scratch:
        junit, timings = Path(scratch) / "junit.xml", Path(scratch) / "benchmarks.json"
        wants_junit = any(JUNIT_PLACEHOLDER in arg for arg in argv)
        wants_benchmarks = any(BENCHMARKS_PLACEHOLDER in arg for arg in argv)
        command = [
            arg.replace(JUNIT_PLACEHOLDER, str(junit)).replace(BENCHMARKS_PLACEHOLDER, str(timings))
            for arg in argv
        ]
        started = time.perf_counter()
        finished = _execute(command, timeout=timeout, cwd=cwd, env=env)
        duration = time.perf_counter() - started
        if isinstance(finished, str):
            return CommandRun((_whole(suite, Outcome.ERROR, duration, finished),), None, (finished,))
        exit_code, output = finished
        if not wants_junit:
            done = _by_exit_code(suite, exit_code, output, duration)
        else:
            done = _with_junit(suite, junit, exit_code, output, duration)
        return _with_benchmarks(suite, done, timings) if wants_benchmarks else done


def _with_benchmarks(suite: str, done: CommandRun, path: Path) -> CommandRun:
    """The run with the benchmarks the command wrote; a file that is missing or malformed is the suite's
    problem (it fails), never a silent absence of timings."""
    benchmarks, problem = read_benchmarks(suite, path)
    if problem is not None:
        return dataclasses.replace(done, problems=(*done.problems, problem))
    return dataclasses.replace(done, benchmarks=benchmarks)


def read_benchmarks(suite: str, path: Path) -> tuple[tuple[Benchmark, ...], str | None]:
    """The benchmarks in `path` (a JSON list), each under `suite`'s name; or why there are none usable."""
    if not path.is_file():
        return (), f"the command wrote no benchmarks to {BENCHMARKS_PLACEHOLDER}"
    if path.stat().st_size > MAX_BENCHMARKS_BYTES:
        return (), f"the benchmarks file is over {MAX_BENCHMARKS_BYTES // (1024 * 1024)} MiB: refused"
    try:
        found = BENCHMARK_LIST.validate_json(path.read_bytes())
    except ValidationError as err:
        first = " ".join(str(err).splitlines()[:3])
        return (), f"the benchmarks file is not a JSON list of benchmarks: {first}"[:MAX_MESSAGE]
    return tuple(b.model_copy(update={"suite": suite}) for b in found), None


def _execute(
    command: list[str], *, timeout: float, cwd: Path | None, env: Mapping[str, str] | None
) -> tuple[int, str] | str:
    """(exit code, output tail), or why the command did not run to the end."""
    try:
        process = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # so a timeout kills everything it started
        )
    except OSError as err:
        return f"cannot run {command[0]!r}: {err.strerror or err}"
    RUNNING.add(process)
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        return f"timed out after {timeout:g} s"
    finally:
        RUNNING.discard(process)
    text = output.decode("utf-8", errors="replace")[-OUTPUT_TAIL:]
    return process.returncode, text


def stop_running(signum: int, frame: object) -> None:
    """The runner's SIGTERM handler (the local backend's timeout, a cancelled job): the running commands'
    process groups are killed too, since each is a session of its own that a signal to the runner's group
    does not reach; then the runner exits."""
    for process in list(RUNNING):
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except OSError:
            process.kill()
    raise SystemExit(128 + signum)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        process.kill()
    process.communicate()


def _whole(suite: str, outcome: Outcome, duration: float, message: str | None) -> TestResult:
    """The suite as one test, for a command without JUnit."""
    return TestResult(
        suite=suite,
        name=suite,
        outcome=outcome,
        duration_s=duration,
        message=message[-MAX_MESSAGE:] if message else None,
    )


def _by_exit_code(suite: str, exit_code: int, output: str, duration: float) -> CommandRun:
    if exit_code == 0:
        return CommandRun((_whole(suite, Outcome.PASSED, duration, None),), exit_code)
    message = f"exited with status {exit_code}\n{output}".rstrip()
    return CommandRun((_whole(suite, Outcome.FAILED, duration, message),), exit_code)


def _with_junit(suite: str, junit: Path, exit_code: int, output: str, duration: float) -> CommandRun:
    try:
        tests = parse_junit(suite, junit)
    except JUnitError as err:
        problem = f"no usable JUnit XML: {err} (the command exited with status {exit_code})"
        return CommandRun(
            (_whole(suite, Outcome.ERROR, duration, f"{problem}\n{output}"),), exit_code, (problem,)
        )
    failing = any(t.outcome in (Outcome.FAILED, Outcome.ERROR) for t in tests)
    if exit_code != 0 and not failing:
        # pytest exits non-zero for collection errors and internal errors that JUnit may not show
        problem = f"the command exited with status {exit_code} but its JUnit XML shows no failure"
        return CommandRun(tests, exit_code, (f"{problem}; its output ends:\n{output[-MAX_MESSAGE:]}",))
    return CommandRun(tests, exit_code)


def parse_junit(suite: str, path: Path) -> tuple[TestResult, ...]:
    """The test cases in the JUnit XML at `path` (a <testsuites> or <testsuite> root)."""
    try:
        if path.stat().st_size > MAX_JUNIT_BYTES:
            raise JUnitError(f"{path.name} is larger than {MAX_JUNIT_BYTES // 2**20} MB")
        data = path.read_bytes()
    except FileNotFoundError:
        raise JUnitError("the command wrote none") from None
    except OSError as err:
        raise JUnitError(f"cannot read it: {err.strerror}") from None
    return parse_junit_bytes(suite, data)


def parse_junit_bytes(suite: str, data: bytes) -> tuple[TestResult, ...]:
    _refuse_declarations(data)
    try:
        root = ET.fromstring(data)
    except ET.ParseError as err:
        raise JUnitError(f"not well-formed XML ({err})") from None
    if root.tag not in ("testsuites", "testsuite"):
        raise JUnitError(f"the root element is <{root.tag}>, not <testsuites> or <testsuite>")
    return tuple(_test_case(suite, case) for case in root.iter("testcase"))


def _refuse_declarations(data: bytes) -> None:
    """ElementTree expands internal entities (a "billion laughs" file eats the machine): refuse any DTD.

    expat reports the DOCTYPE before it expands anything, so this pass stops at the first declaration.
    """

    def refuse(*_: object) -> None:
        raise JUnitError("it has a DOCTYPE or ENTITY declaration, which is refused")

    scanner = expat.ParserCreate()
    scanner.StartDoctypeDeclHandler = refuse
    scanner.EntityDeclHandler = refuse
    try:
        scanner.Parse(data, True)
    except expat.ExpatError as err:
        raise JUnitError(f"not well-formed XML ({expat.ErrorString(err.code)}, line {err.lineno})") from None


def _test_case(suite: str, case: ET.Element) -> TestResult:
    classname, name = case.get("classname", ""), case.get("name", "")
    outcome, message = Outcome.PASSED, None
    for tag, found in (("failure", Outcome.FAILED), ("error", Outcome.ERROR), ("skipped", Outcome.SKIPPED)):
        child = case.find(tag)
        if child is not None:
            outcome = found
            message = _message(child)
            break
    return TestResult(
        suite=suite,
        name=f"{classname}::{name}" if classname else name or "(unnamed)",
        outcome=outcome,
        duration_s=_seconds(case.get("time")),
        message=message,
    )


def _message(element: ET.Element) -> str | None:
    parts = [element.get("message") or "", (element.text or "").strip()]
    text = "\n".join(part for part in parts if part)
    return text[:MAX_MESSAGE] or None


def _seconds(value: str | None) -> float:
    try:
        seconds = float(value or 0)
    except ValueError:
        return 0.0
    return seconds if seconds >= 0 and seconds == seconds and seconds != float("inf") else 0.0
