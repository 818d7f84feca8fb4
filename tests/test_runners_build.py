"""The tier's build (`tiers.build`): it runs before the suites, a failure stops them, and the report says
which Triton the suites ran (built from the checkout under test, or installed apart from it)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.core.bisect_pr import is_build_failure
from bot.core.config import check_config, parse_config
from bot.core.tiers import Level, RunState, TierRun, Verdict, triage
from bot.flows.local_tier import run_local
from bot.flows.tiers import facts_of
from runners import environment
from runners.report import Environment, Outcome, Report
from runners.run import RunRequest, exit_code, run_tier

PY = sys.executable


def _config(build: list[list[str]], suites: list[dict[str, object]], timeout: int | None = None) -> str:
    section: dict[str, object] = {"commands": build}
    if timeout is not None:
        section["timeout_seconds"] = timeout
    return json.dumps({"tiers": {"build": section, "l1": {"suites": suites}}})  # JSON is YAML


def _touch(name: str, code: int = 0) -> list[str]:
    return [PY, "-c", f"import pathlib, sys; pathlib.Path({name!r}).write_text('x'); sys.exit({code})"]


def _exists(name: str) -> list[str]:
    return [PY, "-c", f"import pathlib, sys; sys.exit(0 if pathlib.Path({name!r}).exists() else 1)"]


def _run(text: str) -> Report:
    return run_tier(RunRequest(tier=Level.L1, config=parse_config(text)))


def test_the_build_runs_before_the_suites_and_leads_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    text = _config([_touch("one"), _touch("two")], [{"name": "sees-it", "command": _exists("two")}])

    report = _run(text)

    assert [(s.name, s.kind, s.outcome, s.executed) for s in report.suites] == [
        ("build", "build", Outcome.PASSED, 2),
        ("sees-it", "command", Outcome.PASSED, 1),
    ]
    assert [t.name for t in report.tests if t.suite == "build"] == [
        shlex.join(_touch("one")),
        shlex.join(_touch("two")),
    ]
    assert exit_code(report) == 0


def test_a_failed_build_stops_there_and_no_suite_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    failing = [PY, "-c", "import sys; print('lib/Pass.cpp:12: error: no member named x'); sys.exit(2)"]
    suites = [{"name": "unit", "command": _touch("suite-ran")}, {"name": "smoke", "builtin": "smoke"}]
    text = _config([_touch("first"), failing, _touch("third")], suites)

    report = _run(text)

    assert (tmp_path / "first").exists()
    assert not (tmp_path / "third").exists() and not (tmp_path / "suite-ran").exists()
    build, unit, smoke = report.suites
    assert (build.outcome, build.executed, build.passed, build.failed, build.exit_code) == (
        Outcome.FAILED,
        2,
        1,
        1,
        2,
    )
    assert build.command == tuple(failing)
    assert build.problems[0].startswith("the build failed: `")
    assert build.problems[0].endswith("exited with status 2")
    assert [(s.outcome, s.executed, s.problems) for s in (unit, smoke)] == [
        (Outcome.ERROR, 0, ("not run: the build failed",)),
    ] * 2
    assert exit_code(report) == 1
    message = report.tests[-1].message or ""
    assert message.startswith("the build failed: `") and message.endswith("no member named x")
    # What the bot makes of it: a real failure whose reason says the build failed, which a bisection
    # reads as a prefix that does not build (a skip), not as the culprit's failure.
    judged = triage("failure", facts_of(report))
    assert judged.verdict is Verdict.FAILED
    assert judged.reason.startswith("the build failed")
    assert is_build_failure(judged.reason)


def test_the_build_has_one_timeout_for_all_its_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    sleep = [PY, "-c", "import time; time.sleep(30)"]
    text = _config([sleep, _touch("after")], [{"name": "unit", "command": _touch("suite-ran")}], timeout=1)

    report = _run(text)

    assert report.suites[0].outcome is Outcome.FAILED
    assert report.suites[0].exit_code is None
    assert report.suites[0].problems[0].endswith("timed out after 1 s")
    assert report.suites[0].duration_s < 20
    assert not (tmp_path / "after").exists() and not (tmp_path / "suite-ran").exists()


def test_a_build_command_that_cannot_start_fails_the_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    report = _run(_config([["no-such-compiler-here"]], [{"name": "unit", "command": _touch("ran")}]))

    assert report.suites[0].outcome is Outcome.FAILED
    assert "cannot run 'no-such-compiler-here'" in report.suites[0].problems[0]
    assert report.suites[1].outcome is Outcome.ERROR


def test_without_a_build_the_report_is_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    report = _run(json.dumps({"tiers": {"l1": {"suites": [{"name": "unit", "command": _touch("ran")}]}}}))

    assert [s.name for s in report.suites] == ["unit"]
    assert report.environment.triton_origin == "installed"  # the Triton this machine has, from an index


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        ("tiers: {build: {commands: 'pip install .'}}", "tiers.build.commands", "a list of commands"),
        ("tiers: {build: {commands: ['pip install .']}}", "tiers.build.commands", "each a list of arguments"),
        ("tiers: {build: {commands: []}}", "tiers.build.commands", "must not be empty"),
        ("tiers: {build: {commands: [[]]}}", "tiers.build.commands.0", "must not be empty"),
        (
            "tiers: {build: {commands: [[make]], timeout_seconds: 0}}",
            "tiers.build.timeout_seconds",
            "at least 1",
        ),
        ("tiers: {build: {commands: [[make]], shell: true}}", "tiers.build.shell", ""),
        (
            "tiers: {build: {commands: [[make]]}, l2: {suites: [{name: build, builtin: numerics}]}}",
            "tiers",
            "l2 has a suite named 'build'",
        ),
    ],
)
def test_a_broken_build_section_is_reported_by_field(text: str, field: str, message: str) -> None:
    problems = check_config(text, filename="sluice.yml")

    assert [p.field for p in problems] == [field]
    assert message in problems[0].message


def test_a_suite_may_be_called_build_when_there_is_no_build() -> None:
    text = "tiers: {l1: {suites: [{name: build, command: [make]}]}}"
    assert check_config(text, filename="sluice.yml") == ()


# --- which Triton ----------------------------------------------------------------------------------------


def _package(root: Path, name: str, version: str) -> Path:
    """A pure-Python project `name` at `root`, as a checkout of it would be."""
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text(f"__version__ = {version!r}\n")
    (root / "pyproject.toml").write_text(
        textwrap.dedent(
            f"""\
            [build-system]
            requires = ["setuptools"]
            build-backend = "setuptools.build_meta"
            [project]
            name = "{name}"
            version = "{version}"
            [tool.setuptools]
            packages = ["{name}"]
            """
        )
    )
    return root


PIP_INSTALL_HERE = [PY, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "--quiet"]


def test_the_origin_of_a_distribution_is_where_pip_built_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkout = _package(tmp_path / "checkout", "sluice_origin_probe", "1.0")
    target = tmp_path / "site"
    subprocess.run([*PIP_INSTALL_HERE, "--target", str(target), str(checkout)], check=True)
    monkeypatch.syspath_prepend(str(target))

    assert environment.origin("sluice_origin_probe", checkout) == "checkout"
    assert environment.origin("sluice_origin_probe", tmp_path) == "checkout"  # a folder of the tree
    assert environment.origin("sluice_origin_probe", tmp_path / "elsewhere") == "installed"
    assert environment.origin("triton", checkout) == "installed"  # this machine's, from an index
    assert environment.origin("no-such-distribution-here", checkout) is None
    record = next(target.glob("sluice_origin_probe-1.0.dist-info")) / "direct_url.json"
    record.write_text("{not json")
    assert environment.origin("sluice_origin_probe", checkout) == "installed"


def test_a_package_installed_into_a_venv_inside_the_checkout_is_installed_not_built_from_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job may keep its virtual environment in the workspace (`./.venv`): what it installed there from
    elsewhere is not the checkout's own build."""
    source = _package(tmp_path / "elsewhere", "sluice_origin_probe2", "1.0")
    checkout = tmp_path / "checkout"
    target = checkout / ".venv" / "lib" / "python3.11" / "site-packages"
    subprocess.run([*PIP_INSTALL_HERE, "--target", str(target), str(source)], check=True)
    monkeypatch.syspath_prepend(str(target))

    assert environment.origin("sluice_origin_probe2", checkout) == "installed"


def test_a_triton_built_from_the_checkout_is_compared_not_part_of_the_context() -> None:
    base = environment.fingerprint(interpreter=True).model_dump()
    base.pop("context_hash")
    installed = {**base, "triton": "3.5.0", "triton_origin": "installed"}
    before_origins = {k: v for k, v in installed.items() if k != "triton_origin"}
    built = {**base, "triton": "3.5.0+git1a2b3c4d", "triton_origin": "checkout"}

    # an installed Triton hashes as it did before reports recorded origins, and its version counts
    assert environment.context_hash(installed) == environment.context_hash(before_origins)
    assert environment.context_hash(installed) != environment.context_hash({**installed, "triton": "3.6.0"})
    # a Triton built from the tree under test: each commit's version is another, the context is the same
    assert environment.context_hash(built) == environment.context_hash(
        {**built, "triton": "3.6.0+gitfeedbeef"}
    )
    assert environment.context_hash(built) != environment.context_hash(installed)


# --- the local backend ------------------------------------------------------------------------------------


OWN_TRITON = "3.5.0+git1a2b3c4d"
PIP_OFFLINE = ["install", "--no-deps", "--no-build-isolation", "--no-index"]


def _local_run(tmp_path: Path, build: list[list[str]], suites: list[dict[str, object]]) -> Report:
    """The local backend's tier run of a fork whose head carries its own `triton` (version 3.5.0+git…).
    Its builds use `python -m pip`, the overlay's own: were the overlay broken, that still never installs
    into the bot's environment."""
    return _local_run_of(_package(tmp_path / "fork", "triton", OWN_TRITON), build, suites)


def _local_run_of(repo: Path, build: list[list[str]], suites: list[dict[str, object]]) -> Report:
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "a Triton of its own"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    tier_run = TierRun(
        fork="o/fork",
        pull=1,
        ingestion="1",
        level=Level.L1,
        head_sha=head.stdout.strip(),
        attempt=1,
        state=RunState.DISPATCHED,
        dispatched_at=datetime.now(UTC),
    )
    config = parse_config(_config(build, suites))
    done = run_local(repo / ".git", tier_run, config=config, baseline_sha=tier_run.head_sha, timeout_s=240)
    assert done is not None and done.report is not None, done
    return Report.model_validate_json(done.report)


def _bots_triton() -> tuple[str, list[str]]:
    import importlib.metadata

    return importlib.metadata.version("triton"), sorted(
        str(f) for f in importlib.metadata.files("triton") or ()
    )


def test_the_local_backend_builds_the_head_into_an_environment_of_its_own(tmp_path: Path) -> None:
    """The build installs the head's Triton; the suites import it; the report says it came from the
    checkout; the bot's own Triton is untouched."""
    bots = _bots_triton()
    check = f"import sys, triton; print(triton.__file__); sys.exit(triton.__version__ != {OWN_TRITON!r})"

    report = _local_run(
        tmp_path,
        [["python", "-m", "pip", *PIP_OFFLINE, "."]],
        [{"name": "imports", "command": ["python", "-c", check]}],
    )

    assert [(s.name, s.outcome, s.problems) for s in report.suites] == [
        ("build", Outcome.PASSED, ()),
        ("imports", Outcome.PASSED, ()),
    ]
    assert (report.environment.triton, report.environment.triton_origin) == (OWN_TRITON, "checkout")
    assert _bots_triton() == bots
    import triton

    assert triton.__version__ == bots[0]


def test_the_local_backends_bare_pip_and_pytest_are_the_build_environments(tmp_path: Path) -> None:
    """A bare `pip` (a console script of the bot's) installs into the tier's environment, and a suite's
    `pytest` runs there too, so it imports what the build installed. (Not Triton itself: were this broken,
    that `pip` would replace the bot's own Triton.)"""
    repo = _package(tmp_path / "probe", "sluice_console_probe", "2.0")
    (repo / "check_probe.py").write_text(
        "import sluice_console_probe as probe\n\ndef test_it():\n    assert probe.__version__ == '2.0'\n"
    )
    report = _local_run_of(
        repo,
        [["pip", *PIP_OFFLINE, "."]],
        [{"name": "pytest", "command": ["pytest", "-q", "-p", "no:cacheprovider", "check_probe.py"]}],
    )

    assert [(s.name, s.outcome, s.problems) for s in report.suites] == [
        ("build", Outcome.PASSED, ()),
        ("pytest", Outcome.PASSED, ()),
    ]
    with pytest.raises(ImportError):
        import sluice_console_probe  # noqa: F401  # the tier's, never the bot's


def test_an_editable_build_the_running_runner_cannot_import_fails_the_build(tmp_path: Path) -> None:
    """`pip install -e` is wired up when Python starts: the runner, already running, would import the old
    Triton while the report named the new one. The build fails, saying so; no suite runs on the old one."""
    bots = _bots_triton()

    report = _local_run(
        tmp_path, [["python", "-m", "pip", *PIP_OFFLINE, "-e", "."]], [{"name": "unit", "command": ["true"]}]
    )

    build, unit = report.suites
    assert build.outcome is Outcome.FAILED and "editable (`pip install -e`)" in build.problems[0]
    assert build.problems[0].startswith("the build failed")
    assert (unit.outcome, unit.problems) == (Outcome.ERROR, ("not run: the build failed",))
    assert _bots_triton() == bots


def test_the_check_run_says_which_triton_the_suites_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bot.core.tier_checks import Shown, completed

    monkeypatch.chdir(tmp_path)
    report = _run(_config([_touch("built")], [{"name": "unit", "command": _exists("built")}]))
    tier_run = TierRun(
        fork="o/fork",
        pull=1,
        ingestion="1",
        level=Level.L1,
        head_sha="a" * 40,
        attempt=1,
        state=RunState.COMPLETED,
        dispatched_at=datetime.now(UTC),
        verdict=Verdict.PASSED,
    )
    facts = facts_of(report)
    summary = completed(tier_run, Shown(facts, triage("success", facts))).summary

    assert "| `build` | passed | 1 |" in summary
    assert f"triton `{report.environment.triton}` (installed, not built here)" in summary
    built = facts_of(
        report.model_copy(
            update={"environment": report.environment.model_copy(update={"triton_origin": "checkout"})}
        )
    )
    assert "(built from the checkout)" in completed(tier_run, Shown(built, triage("success", built))).summary


def _failed_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, said: str) -> Report:
    tmp_path.mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "said").write_text(said)  # one command whatever it says: one test key, as a real build's
    failing = [PY, "-c", "import pathlib, sys; print(pathlib.Path('said').read_text()); sys.exit(1)"]
    return _run(_config([failing], [{"name": "unit", "command": _touch("ran")}]))


@pytest.mark.parametrize(
    ("said", "verdict"),
    [
        (
            "ERROR: Could not install packages due to an OSError: [Errno 28] No space left on device",
            Verdict.INFRA,
        ),
        ("Could not resolve host: github.com", Verdict.INFRA),
        ("lib/Ops.cpp:12:5: error: no member named 'x'", Verdict.FAILED),
    ],
)
def test_a_build_that_failed_for_the_machine_is_retried_and_one_that_failed_for_the_code_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, said: str, verdict: Verdict
) -> None:
    """The suites the failed build kept from running add nothing: the build's own failure decides."""
    judged = triage("failure", facts_of(_failed_build(tmp_path, monkeypatch, said)))

    assert judged.verdict is verdict, judged


def test_a_heads_failed_build_is_its_own_even_when_trunks_build_failed_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trunk's build failed (the network); the head's fails to compile: the same build command, so the same
    test key, but not trunk's failure (a bisection would take it for a pass)."""
    trunk = facts_of(_failed_build(tmp_path / "trunk", monkeypatch, "Could not resolve host: x"))
    head = facts_of(_failed_build(tmp_path / "head", monkeypatch, "lib/Ops.cpp:12:5: error: no member"))

    judged = triage("failure", head, trunk=trunk)

    assert judged.verdict is Verdict.FAILED and judged.reason.startswith("the build failed")


def test_the_build_must_fit_in_every_tiers_time() -> None:
    too_long = "tiers: {build: {commands: [[make]], timeout_seconds: 3600}}"
    problems = check_config(too_long, filename="sluice.yml")
    assert [p.field for p in problems] == ["tiers"]
    assert (
        "`build.timeout_seconds` (3600 s) is not less than l1's `timeout_minutes` (60 min)"
        in problems[0].message
    )
    raised = (
        "tiers: {build: {commands: [[make]], timeout_seconds: 3600},"
        " l1: {suites: [{name: s, builtin: smoke}], timeout_minutes: 120}}"
    )
    assert check_config(raised, filename="sluice.yml") == ()
    assert parse_config("tiers: {build: {commands: [[make]]}}").tiers.build.timeout_seconds == 45 * 60  # type: ignore[union-attr]


def test_comparing_two_checkout_builds_names_what_differs_not_their_triton_versions() -> None:
    from runners.compare.sides import context_differences

    base = environment.fingerprint(interpreter=True).model_dump()
    base.pop("context_hash")
    a = {**base, "triton": "3.5.0+git1a2b3c4d", "triton_origin": "checkout", "gpu_model": "H100"}
    b = {**a, "triton": "3.5.0+gitfeedbeef", "gpu_model": "H200"}
    env_a = Environment(**a, context_hash=environment.context_hash(a))
    env_b = Environment(**b, context_hash=environment.context_hash(b))

    assert context_differences(env_a, env_b) == {"gpu_model": ("H100", "H200")}
    same_machine = Environment(
        **{**b, "gpu_model": "H100"}, context_hash=environment.context_hash({**b, "gpu_model": "H100"})
    )
    assert context_differences(env_a, same_machine) == {}
