"""The resolver hook: an external command (an agent) proposes a conflict resolution; nothing is trusted."""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError

from bot.core.errors import first_problem

log = logging.getLogger(__name__)

SCHEMA_VERSION: Literal[1] = 1
MAX_OUTPUT_BYTES = 10 * 1024 * 1024  # a proposal is one source file; more is a runaway command
STDERR_TAIL_BYTES = 2048
MAX_EXPLANATION_CHARS = 4000
# The only variables the command sees: never SLUICE_* or GITHUB_* secrets.
PASSED_ENVIRONMENT = ("PATH", "HOME", "LANG")
_READ_CHUNK = 65536
_KILL_GRACE_SECONDS = 5.0

# (path, proposed text) -> why it is unacceptable, or None; the caller passes conflicts.check_resolution.
Check = Callable[[str, str], str | None]


class ResolverStatus(enum.StrEnum):
    PROPOSED = "proposed"  # a checked proposal; it still needs a code owner's approval
    DECLINED = "declined"  # the command answered that it would not resolve this one
    REJECTED = "rejected"  # the command proposed something the check refused
    FAILED = "failed"  # the command broke: exit status, timeout, unreadable or oversize answer


class ResolverRequest(BaseModel):
    """What the command reads on stdin, as JSON: the whole file in every version and the diff3 merge."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, serialize_by_alias=True)

    schema_version: Literal[1] = SCHEMA_VERSION
    path: str
    upstream_sha: str
    base: str  # the file at the merge base ("" when both sides added it)
    ours: str  # the file on the fork side
    theirs: str  # the file in the upstream commit
    merged: str  # `git merge-file -p --diff3` output, conflict markers included
    class_: Literal["mechanical", "api", "semantic", "unknown"] = Field(alias="class")
    evidence: tuple[str, ...] = ()


class _Answer(BaseModel):
    """What the command prints on stdout; unknown keys are ignored so commands can add their own."""

    model_config = ConfigDict(extra="ignore")

    resolution: StrictStr | None
    explanation: StrictStr | None = None


@dataclass(frozen=True)
class ResolverOutcome:
    status: ResolverStatus
    text: str | None  # the full file text, only when status is PROPOSED
    explanation: str


@dataclass
class _Run:
    """What came back from one run of the command."""

    returncode: int | None = None
    stdout: bytearray = field(default_factory=bytearray)
    stderr_tail: bytearray = field(default_factory=bytearray)
    timed_out: bool = False
    oversize: bool = False


def run_resolver(
    command: Sequence[str],
    request: ResolverRequest,
    *,
    timeout: float,
    check: Check,
    cwd: Path | None = None,
) -> ResolverOutcome:
    """Run `command` with `request` as JSON on stdin and judge its answer; a proposal must pass `check`."""
    if not command:
        return ResolverOutcome(ResolverStatus.DECLINED, None, "no resolver command is configured")
    try:
        run = _execute(command, request.model_dump_json(by_alias=True).encode(), timeout=timeout, cwd=cwd)
    except OSError as err:
        return _failed(f"could not start {command[0]!r}: {err.strerror or err}")
    if run.timed_out:
        return _failed(f"did not answer within {timeout:g} s", run)
    if run.oversize:
        return _failed(f"printed more than {MAX_OUTPUT_BYTES // (1024 * 1024)} MB", run)
    if run.returncode:
        return _failed(_exit_reason(run.returncode), run)
    return _judge(run, request.path, check)


def _judge(run: _Run, path: str, check: Check) -> ResolverOutcome:
    try:
        answer = _Answer.model_validate_json(bytes(run.stdout))
    except ValidationError as err:
        return _failed(
            f"answered no valid JSON object with `resolution` and `explanation`: {_first(err)}", run
        )
    explanation = _clip(answer.explanation or "")
    if answer.resolution is None:
        return ResolverOutcome(ResolverStatus.DECLINED, None, explanation or "the resolver declined")
    problem = check(path, answer.resolution)
    if problem is not None:
        return ResolverOutcome(ResolverStatus.REJECTED, None, _clip(f"the proposal was rejected: {problem}"))
    return ResolverOutcome(ResolverStatus.PROPOSED, answer.resolution, explanation)


def _failed(reason: str, run: _Run | None = None) -> ResolverOutcome:
    explanation = f"the resolver failed: {reason}"
    if run is not None and run.stderr_tail:
        explanation += f"\nstderr (last {STDERR_TAIL_BYTES} bytes at most):\n"
        explanation += bytes(run.stderr_tail).decode("utf-8", "replace")
    log.warning("%s", explanation)
    return ResolverOutcome(ResolverStatus.FAILED, None, explanation)


def _exit_reason(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name}"
    return f"exited with status {returncode}"


def _first(err: ValidationError) -> str:
    where, why = first_problem(err)
    return f"{where}: {why}" if where else why


def _clip(text: str) -> str:
    return text if len(text) <= MAX_EXPLANATION_CHARS else text[: MAX_EXPLANATION_CHARS - 1] + "…"


def _environment() -> dict[str, str]:
    return {name: os.environ[name] for name in PASSED_ENVIRONMENT if name in os.environ}


# --- running the command ----------------------------------------------------------------------------------


def _execute(command: Sequence[str], payload: bytes, *, timeout: float, cwd: Path | None) -> _Run:
    """Run without a shell, in its own process group, reading at most MAX_OUTPUT_BYTES + 1 of stdout.

    Not `subprocess.run(capture_output=True)`: that buffers everything a runaway command prints, and after
    a timeout it waits for grandchildren that still hold the pipes. Here the whole group is killed.
    """
    process = subprocess.Popen(
        list(command),
        shell=False,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_environment(),
        cwd=cwd,
        start_new_session=True,
    )
    assert process.stdin and process.stdout and process.stderr
    run = _Run()
    full = threading.Event()
    threads = [
        threading.Thread(target=_feed, args=(process.stdin, payload), daemon=True),
        threading.Thread(target=_collect, args=(process.stdout, run.stdout, full), daemon=True),
        threading.Thread(target=_keep_tail, args=(process.stderr, run.stderr_tail), daemon=True),
    ]
    for thread in threads:
        thread.start()
    run.timed_out = _wait(process, full, timeout=timeout)
    for thread in threads:
        thread.join(_KILL_GRACE_SECONDS)
    run.oversize = full.is_set()
    run.returncode = process.returncode
    return run


def _wait(process: subprocess.Popen[bytes], full: threading.Event, *, timeout: float) -> bool:
    """Wait for the command to exit or overflow stdout, then kill its group; whether it timed out."""
    deadline = time.monotonic() + timeout
    while process.poll() is None and not full.is_set() and (remaining := deadline - time.monotonic()) > 0:
        full.wait(min(0.05, remaining))
    timed_out = process.poll() is None and not full.is_set()
    # Also after a clean exit: anything it left running would hold the pipes open.
    _kill_group(process)
    return timed_out


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    try:
        process.wait(_KILL_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        log.error("resolver process %d did not exit after SIGKILL", process.pid)


def _feed(pipe: IO[bytes], payload: bytes) -> None:
    # The command need not read the request, and a killed one cannot: a broken pipe is no error.
    with contextlib.suppress(OSError):
        pipe.write(payload)
    with contextlib.suppress(OSError):
        pipe.close()


def _collect(pipe: IO[bytes], into: bytearray, full: threading.Event) -> None:
    while chunk := os.read(pipe.fileno(), _READ_CHUNK):
        into += chunk
        if len(into) > MAX_OUTPUT_BYTES:
            full.set()
            return


def _keep_tail(pipe: IO[bytes], tail: bytearray) -> None:
    while chunk := os.read(pipe.fileno(), _READ_CHUNK):
        tail += chunk
        del tail[:-STDERR_TAIL_BYTES]
