"""The tier runner: command suites, expected counts and baselines, the environment, and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.core.config import ConfigError, SluiceConfig, SuiteConfig, check_config, parse_config
from bot.core.tiers import Level
from runners import cli, commands, environment
from runners import report as model  # not `import TestResult`: pytest would try to collect it
from runners.report import Environment, Outcome, Report, RunInfo, SuiteResult
from runners.run import BadInput, Expectation, RunRequest, SuiteRun, exit_code, judge, run_tier, select_suites
from tests.support.runner_reports import round_trip

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


# --- judging a suite (pure) -------------------------------------------------------------------------------


def _tests(*outcomes: Outcome) -> tuple[model.TestResult, ...]:
    return tuple(model.TestResult(suite="s", name=f"t{i}", outcome=o) for i, o in enumerate(outcomes))


P, F, E, S = Outcome.PASSED, Outcome.FAILED, Outcome.ERROR, Outcome.SKIPPED
SUITE = SuiteConfig(name="unit", command=("pytest",))


@pytest.mark.parametrize(
    ("outcomes", "expectation", "outcome", "problems"),
    [
        ((P, P, S), Expectation(), P, ()),
        ((), Expectation(), F, ("ran no tests",)),
        ((S, S), Expectation(), F, ("ran no tests",)),  # skipped tests do not count
        ((P, P, P), Expectation(configured=5), F, ("ran 3 tests, expected 5 (expected_tests)",)),
        ((P, P, P), Expectation(baseline=5), F, ("ran 3 tests, the baseline ran 5",)),
        (
            (P, P, P, S),
            Expectation(configured=4, baseline=5),
            F,
            ("ran 3 tests, expected 4 (expected_tests)", "ran 3 tests, the baseline ran 5"),
        ),
        ((P, P, P), Expectation(configured=3, baseline=2), P, ()),  # more than before is fine
        ((P, F, F, F, F), Expectation(), F, ("4 tests failed: t1, t2, t3 and 1 more",)),
        ((P, E), Expectation(), F, ("1 test could not run: t1",)),
    ],
)
def test_a_suite_fails_on_failed_tests_or_fewer_tests_than_expected(
    outcomes: tuple[Outcome, ...], expectation: Expectation, outcome: Outcome, problems: tuple[str, ...]
) -> None:
    result = judge(SUITE, SuiteRun(tests=_tests(*outcomes)), expectation, duration_s=1.0)

    assert (result.outcome, result.problems) == (outcome, problems)
    assert result.executed == sum(o != S for o in outcomes)
    assert result.expected == expectation.count


def test_a_suite_that_could_not_run_is_an_error() -> None:
    run = SuiteRun(tests=_tests(E), problems=("timed out after 5 s",), broken=True)

    result = judge(SUITE, run, Expectation(), duration_s=5.0)

    assert result.outcome == Outcome.ERROR
    assert result.problems == ("timed out after 5 s", "1 test could not run: t0")


TIERS = """
tiers:
  l1:
    suites:
      - {name: smoke, builtin: smoke}
      - {name: unit, command: [pytest]}
"""


@pytest.mark.parametrize(
    ("only", "selected"),
    [
        ((), ["smoke", "unit"]),
        (("unit",), ["unit"]),
        (("smoke",), ["smoke"]),
        (("unit", "smoke"), ["smoke", "unit"]),
    ],
)
def test_only_selects_suites_by_name_or_builtin_kind(only: tuple[str, ...], selected: list[str]) -> None:
    request = RunRequest(tier=Level.L1, config=parse_config(TIERS), only=only)

    assert [s.name for s in select_suites(request)] == selected


def test_only_an_unknown_suite_is_bad_input() -> None:
    request = RunRequest(tier=Level.L3, config=SluiceConfig(), only=("perf",))

    with pytest.raises(BadInput, match=r"tier l3 has no suite 'perf' \(its suites: bench\)"):
        select_suites(request)


TWO_L3 = (
    "tiers:\n  l3:\n    suites:\n      - {name: bench, builtin: bench}\n      - {name: sweep, command: [x]}\n"
)


def test_a_one_suite_selection_runs_only_that_suite_and_past_the_suites_is_bad_input(tmp_path: Path) -> None:
    config = TWO_L3
    request = RunRequest(tier=Level.L3, config=parse_config(config), suite=1)
    assert [s.name for s in select_suites(request)] == ["sweep"]
    with pytest.raises(BadInput, match="tier l3 has no suite 2"):
        select_suites(RunRequest(tier=Level.L3, config=parse_config(config), suite=2))
    (tmp_path / "c.yml").write_text(config)
    argv = ["run", "--tier", "l3", "--config", str(tmp_path / "c.yml"), "--out", str(tmp_path / "r.json")]
    assert cli.main([*argv, "--selection", "4"]) == 2 and not (tmp_path / "r.json").exists()  # no suite 2
    with pytest.raises(SystemExit):
        cli.main([*argv, "--selection", "-1"])


# --- command suites, for real -----------------------------------------------------------------------------

PYTEST_FILE = """
import pytest

def test_adds():
    assert 1 + 1 == 2

def test_subtracts():
    assert 3 - 1 == 1, "subtraction is broken"

@pytest.mark.skip(reason="not today")
def test_skipped():
    pass

def test_multiplies():
    assert 2 * 3 == 6
"""


def _pytest_project(tmp_path: Path, body: str = PYTEST_FILE) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pytest.ini").write_text("[pytest]\n")  # not this repository's settings
    (project / "test_sample.py").write_text(textwrap.dedent(body))
    return project


def _pytest_argv(project: Path, *extra: str) -> list[str]:
    return [PY, "-m", "pytest", str(project), "-c", str(project / "pytest.ini"), "-p", "no:cacheprovider",
            "-q", "--junitxml={junit}", *extra]  # fmt: skip


def _config(*suites: dict[str, object], tier: str = "l1") -> SluiceConfig:
    return SluiceConfig.model_validate({"tiers": {tier: {"suites": list(suites)}}})


def _run(config: SluiceConfig, *, tier: Level = Level.L1, baseline: Report | None = None) -> Report:
    report = run_tier(RunRequest(tier=tier, config=config, baseline=baseline))
    round_trip(report)
    return report


def test_a_pytest_suite_is_read_from_its_junit_xml(tmp_path: Path) -> None:
    project = _pytest_project(tmp_path)

    report = _run(_config({"name": "unit", "command": _pytest_argv(project)}))

    (suite,) = report.suites
    assert (suite.kind, suite.exit_code, suite.outcome) == ("command", 1, Outcome.FAILED)
    assert (suite.executed, suite.passed, suite.failed, suite.skipped) == (3, 2, 1, 1)
    assert suite.problems == ("1 test failed: test_sample::test_subtracts",)
    failed = next(t for t in report.tests if t.outcome == Outcome.FAILED)
    assert failed.message is not None and "subtraction is broken" in failed.message
    assert {t.name for t in report.tests} == {
        f"test_sample::test_{n}" for n in ("adds", "subtracts", "skipped", "multiplies")
    }
    assert exit_code(report) == 1


def test_a_suite_that_dropped_tests_since_the_baseline_fails(tmp_path: Path) -> None:
    project = _pytest_project(tmp_path)
    config = _config({"name": "unit", "command": _pytest_argv(project, "-k", "not subtracts")})
    before = _run(config)
    assert before.suites[0].outcome == Outcome.PASSED and before.suites[0].executed == 2
    baseline = before.model_copy(update={"suites": (before.suites[0].model_copy(update={"executed": 5}),)})

    report = _run(config, baseline=baseline)

    (suite,) = report.suites
    assert (suite.outcome, suite.expected) == (Outcome.FAILED, 5)
    assert suite.problems == ("ran 2 tests, the baseline ran 5",)


def test_a_suite_that_runs_fewer_tests_than_expected_tests_fails(tmp_path: Path) -> None:
    project = _pytest_project(tmp_path)
    argv = _pytest_argv(project, "-k", "not subtracts")

    report = _run(_config({"name": "unit", "command": argv, "expected_tests": 3}))

    assert report.suites[0].problems == ("ran 2 tests, expected 3 (expected_tests)",)
    assert report.suites[0].outcome == Outcome.FAILED


def test_a_suite_whose_tests_all_vanished_fails_even_without_a_baseline(tmp_path: Path) -> None:
    project = _pytest_project(tmp_path, "")  # a test file that lost every test

    report = _run(_config({"name": "unit", "command": _pytest_argv(project)}))

    (suite,) = report.suites
    assert (suite.executed, suite.outcome) == (0, Outcome.FAILED)
    assert "ran no tests" in suite.problems


def test_a_builtin_suite_that_ran_fewer_tests_than_the_baseline_fails() -> None:
    config = _config({"name": "smoke", "builtin": "smoke"})
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    env = Environment(python="3", cpu="x", os="y", interpreter=True, context_hash="0")
    previous = SuiteResult(name="smoke", kind="builtin", executed=12, passed=12, outcome=Outcome.PASSED)
    baseline = Report(
        run=RunInfo(tier=Level.L1, started_at=moment, finished_at=moment), environment=env, suites=(previous,)
    )

    report = _run(config, baseline=baseline)

    assert report.suites[0].problems == ("ran 10 tests, the baseline ran 12",)
    assert exit_code(report) == 1


@pytest.mark.parametrize(
    ("code", "outcome", "message"),
    [(0, Outcome.PASSED, None), (3, Outcome.FAILED, "exited with status 3\nbroke at step 2")],
)
def test_a_command_without_junit_is_judged_by_its_exit_code(
    code: int, outcome: Outcome, message: str | None
) -> None:
    script = f"import sys; print('broke at step 2' if {code} else 'fine'); sys.exit({code})"

    report = _run(_config({"name": "lit", "command": [PY, "-c", script]}))

    (suite,) = report.suites
    assert (suite.executed, suite.exit_code, suite.outcome) == (1, code, outcome)
    assert [(t.name, t.outcome, t.message) for t in report.tests] == [("lit", outcome, message)]


def test_a_command_that_cannot_start_is_an_error() -> None:
    report = _run(_config({"name": "lit", "command": ["/nonexistent/lit", "-v"]}))

    (suite,) = report.suites
    assert (suite.outcome, suite.exit_code) == (Outcome.ERROR, None)
    assert suite.problems[0].startswith("cannot run '/nonexistent/lit': No such file or directory")


def test_a_command_past_its_timeout_is_killed_with_its_children(tmp_path: Path) -> None:
    marker = tmp_path / "child-survived"
    child = f"import time, pathlib; time.sleep(3); pathlib.Path({str(marker)!r}).write_text('x')"
    script = (
        f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {child!r}]); time.sleep(60)"
    )
    started = time.monotonic()

    report = _run(_config({"name": "slow", "command": [PY, "-c", script], "timeout_seconds": 1}))

    assert time.monotonic() - started < 20
    assert report.suites[0].outcome == Outcome.ERROR
    assert report.suites[0].problems[0] == "timed out after 1 s"
    time.sleep(3.5)
    assert not marker.exists(), "the command's child outlived the timeout"


def test_junit_with_a_doctype_is_refused(tmp_path: Path) -> None:
    laughs = (
        '<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]>'
        '<testsuite><testcase name="t"><failure message="&b;"/></testcase></testsuite>'
    )
    script = f"import sys; open(sys.argv[1], 'w').write({laughs!r})"

    report = _run(_config({"name": "unit", "command": [PY, "-c", script, "{junit}"]}))

    (suite,) = report.suites
    assert suite.outcome == Outcome.FAILED
    assert suite.problems[0] == (
        "no usable JUnit XML: it has a DOCTYPE or ENTITY declaration, which is refused "
        "(the command exited with status 0)"
    )


def test_a_failing_exit_code_with_clean_junit_still_fails(tmp_path: Path) -> None:
    junit = '<testsuites><testsuite><testcase classname="m" name="ok"/></testsuite></testsuites>'
    script = f"import sys; open(sys.argv[1][11:], 'w').write({junit!r}); print('INTERNALERROR'); sys.exit(3)"

    report = _run(_config({"name": "unit", "command": [PY, "-c", script, "--junitxml={junit}"]}))

    (suite,) = report.suites
    assert (suite.outcome, suite.executed, suite.passed) == (Outcome.FAILED, 1, 1)
    assert suite.problems[0].startswith("the command exited with status 3 but its JUnit XML shows no failure")
    assert "INTERNALERROR" in suite.problems[0]


def test_junit_parsing_reads_testsuites_testsuite_and_every_outcome() -> None:
    xml = b"""<testsuites>
      <testsuite name="a"><testcase classname="k" name="p" time="0.5"/></testsuite>
      <testsuite name="b">
        <testcase name="f" time="x"><failure message="boom">trace</failure></testcase>
        <testcase name="e"><error message="setup failed"/></testcase>
        <testcase name="s"><skipped message="no GPU"/></testcase>
      </testsuite>
    </testsuites>"""

    tests = commands.parse_junit_bytes("unit", xml)

    assert [(t.name, t.outcome, t.duration_s, t.message) for t in tests] == [
        ("k::p", P, 0.5, None),
        ("f", F, 0.0, "boom\ntrace"),
        ("e", E, 0.0, "setup failed"),
        ("s", S, 0.0, "no GPU"),
    ]


@pytest.mark.parametrize(
    ("xml", "error"),
    [
        (b"<html/>", "the root element is <html>, not <testsuites> or <testsuite>"),
        (b"<testsuite><testcase>", "not well-formed XML"),
        (b'<!DOCTYPE t SYSTEM "file:///etc/passwd"><testsuite/>', "DOCTYPE or ENTITY declaration"),
    ],
)
def test_unusable_junit_says_why(xml: bytes, error: str) -> None:
    with pytest.raises(commands.JUnitError, match=error):
        commands.parse_junit_bytes("unit", xml)


# --- hostile and broken configuration ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        (
            "tiers: {l1: {suites: [{name: unit, command: 'pytest -x; rm -rf /'}]}}",
            "tiers.l1.suites.0.command",
            "expected a list of arguments",
        ),
        ("tiers: {l1: {suites: [{name: unit}]}}", "tiers.l1.suites.0", "a suite needs `builtin`"),
        (
            "tiers: {l1: {suites: [{name: u, builtin: smoke, command: [x]}]}}",
            "tiers.l1.suites.0",
            "`builtin` or `command`, not both",
        ),
        ("tiers: {l1: {suites: []}}", "tiers.l1.suites", "must not be empty"),
        (
            "tiers: {l2: {suites: [{name: n, builtin: numeric}]}}",
            "tiers.l2.suites.0.builtin",
            "expected one of",
        ),
        (
            "tiers: {l1: {suites: [{name: a, builtin: smoke}, {name: a, command: [x]}]}}",
            "tiers.l1.suites.1.name",
            "duplicate suite name 'a'",
        ),
        (
            "tiers: {l1: {suites: [{name: a, command: [x], expected_tests: 0}]}}",
            "tiers.l1.suites.0.expected_tests",
            "at least 1",
        ),
        (
            "tiers: {l1: {suites: [{name: a, builtin: smoke, timeout_seconds: 5}]}}",
            "tiers.l1.suites.0",
            "command suites only",
        ),
        ("tiers: {l4: {}}", "tiers.l4", "unknown key 'l4'"),
        (
            "numerics: {shapes: [[128, 128]]}",
            "numerics.shapes.0",
            "a matmul shape is [M, N, K], got 2 numbers",
        ),
        ("numerics: {blocks: [[32, 24, 32]]}", "numerics.blocks.0", "powers of two, at least 16"),
        ("numerics: {dtypes: [float64]}", "numerics.dtypes.0", "expected one of"),
        (
            "numerics: {tolerances: {float16: {atol: -1, rtol: 0}}}",
            "numerics.tolerances.float16.atol",
            "at least 0",
        ),
        (
            "bench: {cases: [{kernel: softmax, shape: [4096]}]}",
            "bench.cases.0",
            "a softmax shape is [rows, cols]",
        ),
        (
            "bench: {cases: [{kernel: sum, shape: [64], block: [16, 16, 16]}]}",
            "bench.cases.0",
            "only matmul takes `block`",
        ),
        ("bench: {rep_ms: 0}", "bench.rep_ms", "at least 1"),
        ("performance: {floor: 1.5}", "performance.floor", "must be less than 1"),
    ],
)
def test_broken_tier_configuration_is_reported_by_field(text: str, field: str, message: str) -> None:
    problems = check_config(text, filename="sluice.yml")

    assert [p.field for p in problems] == [field]
    assert message in problems[0].message


def test_a_partial_numerics_section_keeps_the_other_defaults() -> None:
    config = parse_config("numerics: {dtypes: [float16], tolerances: {float16: {atol: 0.1, rtol: 0.1}}}")

    assert config.numerics.shapes == SluiceConfig().numerics.shapes
    assert config.numerics.tolerances.float32 == SluiceConfig().numerics.tolerances.float32
    assert config.numerics.tolerances.float16.atol == 0.1


def test_parse_config_refuses_a_command_line_string() -> None:
    with pytest.raises(ConfigError, match="list of arguments"):
        parse_config("tiers: {l1: {suites: [{name: unit, command: pytest}]}}")


# --- the environment fingerprint --------------------------------------------------------------------------


def _fake_nvidia_smi(bin_dir: Path, body: str) -> Path:
    bin_dir.mkdir(exist_ok=True)
    tool = bin_dir / "nvidia-smi"
    tool.write_text("#!/bin/sh\n" + body)
    tool.chmod(0o755)
    return tool


H200 = (  # two GPUs, the second idling; only the query with application clocks is answered
    'case "$1" in *applications*)\n'
    '  echo "NVIDIA H200, 550.54.15, 1980, 2619, 1980, 2619"\n'
    '  echo "NVIDIA H200, 550.54.15, 345, 2619, 1980, 2619";;\n'
    "*) exit 6;;\nesac\n"
)


def test_nvidia_smi_gives_the_gpu_model_count_driver_and_clocks(tmp_path: Path) -> None:
    tool = _fake_nvidia_smi(tmp_path / "bin", H200)

    gpu = environment.query_nvidia_smi(str(tool))

    assert gpu == environment.GpuInfo(
        model="NVIDIA H200",
        count=2,
        driver="550.54.15",
        clocks={"sm_mhz": "1980", "mem_mhz": "2619", "app_sm_mhz": "1980", "app_mem_mhz": "2619"},
    )


def test_an_older_nvidia_smi_without_application_clocks_still_answers(tmp_path: Path) -> None:
    body = 'case "$1" in *applications*) echo "Field is not a valid field" >&2; exit 2;; esac\n'
    tool = _fake_nvidia_smi(tmp_path / "bin", body + 'echo "Tesla T4, 470.1, [N/A], 5000"\n')

    gpu = environment.query_nvidia_smi(str(tool))

    assert gpu == environment.GpuInfo(model="Tesla T4", count=1, driver="470.1", clocks={"mem_mhz": "5000"})


@pytest.mark.parametrize("body", ["exit 9\n", "sleep 30\n", "echo\n"], ids=["fails", "hangs", "silent"])
def test_a_broken_nvidia_smi_never_fails_the_run(tmp_path: Path, body: str) -> None:
    tool = _fake_nvidia_smi(tmp_path / "bin", body)
    started = time.monotonic()

    assert environment.query_nvidia_smi(str(tool), timeout=1) is None
    assert time.monotonic() - started < 10


def test_the_context_hash_follows_every_field_but_the_momentary_clocks() -> None:
    base = environment.fingerprint(interpreter=True).model_dump()
    base.pop("context_hash")

    def digest(**changes: object) -> str:
        return environment.context_hash({**base, **changes})

    same = digest()
    assert digest(clocks={"sm_mhz": "345", "mem_mhz": "405"}) == same  # idle vs boosted: the same machine
    for field, value in [
        ("gpu_model", "NVIDIA H100"),
        ("gpu_count", 4),
        ("driver", "560.1"),
        ("cuda", "12.9"),
        ("clocks", {"app_sm_mhz": "1500"}),
        ("triton", "3.8.0"),
        ("torch", "2.12.0"),
        ("python", "3.12.1"),
        ("cpu", "Intel Xeon"),
        ("os", "Linux-5"),
        ("interpreter", False),
    ]:
        assert digest(**{field: value}) != same, field


def test_the_fingerprint_reads_this_machine() -> None:
    env = environment.fingerprint(interpreter=True)

    assert env.python == f"{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}"
    assert env.triton == "3.9.0" and env.torch is not None and env.torch.startswith("2.13.0")
    assert env.cpu and env.os and len(env.context_hash) == 64


def test_the_cpu_model_comes_from_proc_cpuinfo(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9654 96-Core Processor\n"
    )

    assert environment.cpu_model(cpuinfo) == "AMD EPYC 9654 96-Core Processor"


# --- the command line -------------------------------------------------------------------------------------


def _cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    environ["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [PY, "-m", "runners", *args],
        cwd=cwd,
        env={**environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_cli_runs_a_tier_and_writes_the_report(tmp_path: Path) -> None:
    project = _pytest_project(tmp_path, "def test_one():\n    pass\n")
    leak_check = "import os, sys; sys.exit(3 if 'TRITON_INTERPRET' in os.environ else 0)"
    config = {
        "tiers": {
            "l1": {
                "suites": [
                    {"name": "smoke", "builtin": "smoke", "expected_tests": 10},
                    {"name": "unit", "command": _pytest_argv(project)},
                    {
                        "name": "no-leak",
                        "command": [PY, "-c", leak_check],
                    },  # it sees the environment it was given
                ]
            }
        }
    }
    (tmp_path / ".github").mkdir()
    (tmp_path / ".github" / "sluice.yml").write_text(json.dumps(config))  # JSON is YAML
    out = tmp_path / "out" / "l1.json"

    done = _cli(
        "run",
        "--tier",
        "l1",
        "--out",
        str(out),
        "--head-sha",
        "abc123",
        "--ingestion-id",
        "ing-1",
        cwd=tmp_path,
    )

    assert done.returncode == 0, done.stderr
    report = round_trip(out)
    assert [(s.name, s.outcome, s.executed) for s in report.suites] == [
        ("smoke", Outcome.PASSED, 10),
        ("unit", Outcome.PASSED, 1),
        ("no-leak", Outcome.PASSED, 1),
    ]
    assert (report.run.tier, report.run.head_sha, report.run.ingestion_id) == (Level.L1, "abc123", "ing-1")
    assert report.run.started_at <= report.run.finished_at
    assert "config: .github/sluice.yml" in done.stderr
    assert "[10/10] passed" in done.stderr  # progress, a line per test in a log


def test_the_cli_exits_1_when_a_suite_fails_and_still_writes_the_report(tmp_path: Path) -> None:
    config = tmp_path / "sluice.yml"
    config.write_text(
        f"tiers: {{l2: {{suites: [{{name: lit, command: [{PY}, -c, 'raise SystemExit(4)']}}]}}}}\n"
    )
    out = tmp_path / "l2.json"

    done = _cli("run", "--tier", "l2", "--config", str(config), "--out", str(out), cwd=tmp_path)

    assert done.returncode == 1, done.stderr
    report = round_trip(out)
    assert report.suites[0].outcome == Outcome.FAILED
    assert "1 test failed: lit" in done.stderr


@pytest.mark.parametrize(
    ("setup", "args", "message"),
    [
        (
            "tiers: {l1: {suites: [{name: unit, command: 'pytest -x'}]}}\n",
            ("--config", "sluice.yml"),
            "sluice.yml:1: tiers.l1.suites.0.command: expected a list of arguments",
        ),
        ("", ("--config", "missing.yml"), "missing.yml: no such file"),
        ("", ("--only", "perf"), "tier l1 has no suite 'perf' (its suites: smoke)"),
        ("", ("--baseline-report", "sluice.yml"), "sluice.yml is not a tier report"),
    ],
    ids=["command-string", "missing-config", "unknown-only", "bad-baseline"],
)
def test_the_cli_exits_2_on_bad_input(
    tmp_path: Path, setup: str, args: tuple[str, ...], message: str
) -> None:
    (tmp_path / "sluice.yml").write_text(setup or "{}\n")

    done = _cli("run", "--tier", "l1", "--out", "r.json", *args, cwd=tmp_path)

    assert done.returncode == 2
    assert message in done.stderr
    assert not (tmp_path / "r.json").exists()


def test_compare_is_handed_its_own_arguments(tmp_path: Path) -> None:
    done = _cli("compare", "--help", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: python -m runners compare")


BENCH_WRITER = """import json, sys
samples = [0.25 + 0.001 * (i % 7) for i in range(40)]
bench = {"suite": "anything", "kernel": "matmul", "shape": [64, 64], "dtype": "fp16",
         "warmup_iters": 3, "measured_iters": 40, "warmup_budget_ms": 5.0, "measure_budget_ms": 20.0,
         "samples_ms": samples, "median_ms": 0.253, "p10_ms": 0.25, "p90_ms": 0.256, "p99_ms": 0.256,
         "iqr_ms": 0.003, "comparable": True}
open(sys.argv[1], "w").write(sys.argv[2] if len(sys.argv) > 2 else json.dumps([bench]))
"""


def test_a_command_suite_reports_the_benchmarks_it_wrote_under_its_own_name() -> None:
    report = _run(
        _config({"name": "bench", "command": [PY, "-c", BENCH_WRITER, "{benchmarks}"]}, tier="l3"),
        tier=Level.L3,
    )

    (suite,) = report.suites
    assert suite.outcome == Outcome.PASSED
    (bench,) = report.benchmarks
    assert (bench.suite, bench.kernel, bench.key, len(bench.samples_ms)) == (
        "bench",
        "matmul",
        "matmul[64x64:fp16]",
        40,
    )


@pytest.mark.parametrize(
    ("written", "problem"),
    [
        ('[{"kernel": "matmul"}]', "the benchmarks file is not a JSON list of benchmarks"),
        ("not json", "the benchmarks file is not a JSON list of benchmarks"),
    ],
)
def test_a_command_suite_whose_benchmarks_are_malformed_fails_saying_why(written: str, problem: str) -> None:
    argv = [PY, "-c", BENCH_WRITER, "{benchmarks}", written]
    report = _run(_config({"name": "bench", "command": argv}, tier="l3"), tier=Level.L3)

    (suite,) = report.suites
    assert suite.outcome == Outcome.FAILED and report.benchmarks == ()
    assert any(p.startswith(problem) for p in suite.problems)


def test_a_command_suite_that_wrote_no_benchmarks_where_it_said_it_would_fails() -> None:
    argv = [PY, "-c", "import sys", "{benchmarks}"]
    report = _run(_config({"name": "bench", "command": argv}, tier="l3"), tier=Level.L3)

    (suite,) = report.suites
    assert suite.outcome == Outcome.FAILED
    assert suite.problems == ("the command wrote no benchmarks to {benchmarks}",)
