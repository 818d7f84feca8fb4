"""The resolver hook with scripted resolvers: proposals are checked, failures are contained, secrets stay."""

from __future__ import annotations

import json
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bot.flows.resolver_hook import (
    MAX_OUTPUT_BYTES,
    STDERR_TAIL_BYTES,
    ResolverOutcome,
    ResolverRequest,
    ResolverStatus,
    run_resolver,
)

MERGED = """\
#include "triton/Dialect/TritonGPU/IR/Dialect.h"
<<<<<<< ours
#include "triton/Dialect/TritonGPU/Transforms/TLXUtils.h"
||||||| base
=======
#include "triton/Dialect/TritonGPU/Transforms/PipelineExpander.h"
>>>>>>> theirs
#include "llvm/Support/Debug.h"
"""
RESOLVED = """\
#include "triton/Dialect/TritonGPU/IR/Dialect.h"
#include "triton/Dialect/TritonGPU/Transforms/PipelineExpander.h"
#include "triton/Dialect/TritonGPU/Transforms/TLXUtils.h"
#include "llvm/Support/Debug.h"
"""

DIALECT, DEBUG = '#include "triton/Dialect/TritonGPU/IR/Dialect.h"\n', '#include "llvm/Support/Debug.h"\n'
REQUEST = ResolverRequest(
    path="lib/Dialect/TritonGPU/Transforms/Pipeliner/Schedule.cpp",
    upstream_sha="4f0c2a9e" * 5,
    base=DIALECT + DEBUG,
    ours=DIALECT + '#include "triton/Dialect/TritonGPU/Transforms/TLXUtils.h"\n' + DEBUG,
    theirs=DIALECT + '#include "triton/Dialect/TritonGPU/Transforms/PipelineExpander.h"\n' + DEBUG,
    merged=MERGED,
    class_="mechanical",
    evidence=["both sides added an #include at the same place"],
)


def no_markers(path: str, text: str) -> str | None:
    """A stand-in for conflicts.check_resolution: refuses conflict markers."""
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith(("<<<<<<<", "|||||||", "=======", ">>>>>>>")):
            return f"{path}:{number}: conflict marker left in the file"
    return None


def script(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "resolver.py"
    path.write_text("import json, os, sys, time\n" + textwrap.dedent(body))
    return [sys.executable, str(path)]


def resolve(command: list[str], *, timeout: float = 30) -> ResolverOutcome:
    return run_resolver(command, REQUEST, timeout=timeout, check=no_markers)


def test_a_good_proposal_is_returned_as_proposed(tmp_path: Path) -> None:
    command = script(
        tmp_path,
        f"""
        request = json.load(sys.stdin)
        assert request["schema_version"] == 1 and request["class"] == "mechanical", request
        assert request["merged"].count("<<<<<<<") == 1 and request["evidence"], request
        json.dump({{"resolution": {RESOLVED!r}, "explanation": "kept both includes, sorted"}}, sys.stdout)
        """,
    )

    outcome = resolve(command)

    assert outcome == ResolverOutcome(ResolverStatus.PROPOSED, RESOLVED, "kept both includes, sorted")


def test_the_request_is_sent_as_documented(tmp_path: Path) -> None:
    seen = tmp_path / "seen.json"
    command = script(
        tmp_path,
        f"""
        open({str(seen)!r}, "w").write(sys.stdin.read())
        print(json.dumps({{"resolution": None, "explanation": "just looking"}}))
        """,
    )

    resolve(command)

    sent = json.loads(seen.read_text())
    assert sorted(sent) == sorted(
        ["schema_version", "path", "upstream_sha", "base", "ours", "theirs", "merged", "class", "evidence"]
    )
    assert ResolverRequest.model_validate(sent) == REQUEST


def test_a_decline_is_declined_with_the_resolvers_reason(tmp_path: Path) -> None:
    command = script(
        tmp_path,
        """
        answer = {"resolution": None, "explanation": "semantic change to the pipeliner; needs a human"}
        json.dump(answer, sys.stdout)
        """,
    )

    outcome = resolve(command)

    assert outcome == ResolverOutcome(
        ResolverStatus.DECLINED, None, "semantic change to the pipeliner; needs a human"
    )


def test_a_proposal_with_conflict_markers_is_rejected(tmp_path: Path) -> None:
    command = script(
        tmp_path,
        """
        request = json.load(sys.stdin)
        json.dump({"resolution": request["merged"], "explanation": "looks fine to me"}, sys.stdout)
        """,
    )

    outcome = resolve(command)

    assert outcome.status is ResolverStatus.REJECTED
    assert outcome.text is None
    assert outcome.explanation == (
        f"the proposal was rejected: {REQUEST.path}:2: conflict marker left in the file"
    )


@pytest.mark.parametrize(
    ("stdout", "reason"),
    [
        ("I think you should keep both includes.", "no valid JSON object"),
        ("", "no valid JSON object"),
        ('["a", "list"]', "no valid JSON object"),
        ('{"resolution": 42, "explanation": "x"}', "resolution"),
        ('{"explanation": "forgot the resolution"}', "resolution"),
    ],
)
def test_garbage_on_stdout_fails(tmp_path: Path, stdout: str, reason: str) -> None:
    command = script(tmp_path, f"sys.stdout.write({stdout!r})\n")

    outcome = resolve(command)

    assert outcome.status is ResolverStatus.FAILED
    assert outcome.text is None
    assert outcome.explanation.startswith("the resolver failed: answered no valid JSON object")
    assert reason in outcome.explanation


def test_a_resolver_that_sleeps_past_the_timeout_fails_promptly(tmp_path: Path) -> None:
    command = script(tmp_path, "sys.stderr.write('thinking...\\n'); sys.stderr.flush(); time.sleep(60)\n")

    started = time.monotonic()
    outcome = resolve(command, timeout=1)

    assert time.monotonic() - started < 10
    assert outcome.status is ResolverStatus.FAILED
    assert "did not answer within 1 s" in outcome.explanation
    assert "thinking..." in outcome.explanation


def test_a_timeout_also_kills_what_the_resolver_started(tmp_path: Path) -> None:
    # The grandchild inherits stdout and stderr; waiting for their end would wait the whole minute.
    command = script(
        tmp_path,
        """
        import subprocess
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        time.sleep(60)
        """,
    )

    started = time.monotonic()
    outcome = resolve(command, timeout=1)

    assert time.monotonic() - started < 10
    assert outcome.status is ResolverStatus.FAILED


def test_a_non_zero_exit_fails_with_the_tail_of_stderr(tmp_path: Path) -> None:
    command = script(
        tmp_path,
        """
        sys.stderr.write("HEAD-OF-STDERR " + "x" * 10_000 + " Traceback: agent quota exceeded\\n")
        json.dump({"resolution": "int main() {}\\n", "explanation": "ignored"}, sys.stdout)
        sys.exit(3)
        """,
    )

    outcome = resolve(command)

    assert outcome.status is ResolverStatus.FAILED
    assert outcome.text is None
    assert outcome.explanation.startswith("the resolver failed: exited with status 3")
    assert "agent quota exceeded" in outcome.explanation
    assert "HEAD-OF-STDERR" not in outcome.explanation
    assert len(outcome.explanation) < STDERR_TAIL_BYTES + 200


def test_output_over_the_limit_fails(tmp_path: Path) -> None:
    command = script(
        tmp_path,
        f"""
        chunk = "y" * 65536
        for _ in range({MAX_OUTPUT_BYTES // 65536 + 2}):
            sys.stdout.write(chunk)
        """,
    )

    outcome = resolve(command)

    assert outcome.status is ResolverStatus.FAILED
    assert "printed more than 10 MB" in outcome.explanation


def test_a_missing_command_fails(tmp_path: Path) -> None:
    outcome = resolve([str(tmp_path / "no-such-agent")])

    assert outcome.status is ResolverStatus.FAILED
    assert "could not start" in outcome.explanation


def test_no_command_means_no_resolver() -> None:
    assert resolve([]).status is ResolverStatus.DECLINED


def test_a_resolver_that_ignores_a_large_request_still_answers(tmp_path: Path) -> None:
    big = REQUEST.model_copy(update={"base": "// padding\n" * 200_000})
    command = script(tmp_path, 'print(json.dumps({"resolution": None, "explanation": "did not read"}))\n')

    outcome = run_resolver(command, big, timeout=30, check=no_markers)

    assert outcome == ResolverOutcome(ResolverStatus.DECLINED, None, "did not read")


def test_the_resolver_sees_no_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLUICE_WEBHOOK_SECRET", "whsec-do-not-leak")
    monkeypatch.setenv("SLUICE_DATABASE_URL", "postgresql://sluice:pw@db/sluice")
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_do_not_leak")
    monkeypatch.setenv("LANG", "C.UTF-8")
    command = script(
        tmp_path,
        'print(json.dumps({"resolution": None, "explanation": json.dumps(dict(os.environ))}))\n',
    )

    outcome = resolve(command)

    assert outcome.status is ResolverStatus.DECLINED
    seen = json.loads(outcome.explanation)
    assert "SLUICE_WEBHOOK_SECRET" not in seen
    assert "do-not-leak" not in outcome.explanation
    assert set(seen) - {"PATH", "HOME", "LANG"} <= {"LC_CTYPE", "PWD"}  # what a Python child adds itself
    assert seen["LANG"] == "C.UTF-8"


def test_the_resolver_runs_in_the_given_directory_without_a_shell(tmp_path: Path) -> None:
    workdir = tmp_path / "work tree; echo pwned"
    workdir.mkdir()
    command = script(
        tmp_path,
        """
        where = os.getcwd() + " " + " ".join(sys.argv[1:])
        print(json.dumps({"resolution": None, "explanation": where}))
        """,
    )

    outcome = run_resolver([*command, "$HOME", "`id`"], REQUEST, timeout=30, check=no_markers, cwd=workdir)

    assert outcome.explanation == f"{workdir} $HOME `id`"
    assert not (tmp_path / "pwned").exists()
