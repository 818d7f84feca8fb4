"""Tiers end to end: the simulator, `sluice serve` with the real store, tier runs with real reports.

With the `local` backend the bot runs `python -m runners run` itself; with the GitHub backend the fork carries
deploy/workflows' templates and the test acts as the Actions runner: it runs the same command on the
dispatched head and finishes the run with the report artifact, and the simulator sends `workflow_run`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import select

from bot.app.service import create_app
from bot.core.ingestion import BRANCH_PREFIX
from bot.db.jobs import JobQueue, jobs
from bot.db.store import Store
from bot.db.tier_runs import TierRuns
from tests.support.github_sim import GitHubSim
from tests.support.rig import installation_created, serve_settings, upstream_and_fork, url_of

SECRET = "tiers-secret"
UPSTREAM, FORK = "triton-lang/triton", "meta/triton"
WORKFLOWS = Path(__file__).parent.parent / "deploy" / "workflows"
CHECK_SCRIPT = """import os, pathlib, sys
tier = sys.argv[1]
mode_file = pathlib.Path(f"ci/{tier}.mode")
mode = mode_file.read_text().strip() if mode_file.exists() else "pass"
if mode == "flaky-gpu":
    state = pathlib.Path(os.environ["TIER_STATE_DIR"]) / f"{tier}-attempts"
    attempt = int(state.read_text()) + 1 if state.exists() else 1
    state.write_text(str(attempt))
    if attempt == 1:
        print("RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable")
        sys.exit(1)
if mode == "fail":
    print("ci/check.py:14: AssertionError: tensors not close")
    sys.exit(1)
if len(sys.argv) > 2:  # `{benchmarks}`: matmul and softmax timed 60 times; ci/<tier>.slower slows matmul
    import json, numpy
    slower_file = pathlib.Path(f"ci/{tier}.slower")
    slower = float(slower_file.read_text()) if slower_file.exists() else 0.0
    rng = numpy.random.default_rng()
    def timed(kernel, ms):
        samples = [float(x) for x in ms * rng.lognormal(0.0, 0.01, 60)]
        q = numpy.quantile(samples, [0.1, 0.25, 0.5, 0.75, 0.9, 0.99])
        return {"suite": "bench", "kernel": kernel, "shape": [1024, 1024], "dtype": "fp16",
                "warmup_iters": 5, "measured_iters": 60, "warmup_budget_ms": 25.0, "measure_budget_ms": 100.0,
                "samples_ms": samples, "median_ms": q[2], "p10_ms": q[0], "p90_ms": q[4], "p99_ms": q[5],
                "iqr_ms": q[3] - q[1], "comparable": True}
    timings = [timed("matmul", 0.25 * (1 + slower)), timed("softmax", 0.10)]
    pathlib.Path(sys.argv[2]).write_text(json.dumps(timings))
print(f"{tier} ok")
"""


def tier_config(sim_url: str, *, benchmarks: bool = False) -> str:
    """The fork's tiers; with `benchmarks`, L3's `bench` suite times matmul and softmax (`{benchmarks}`)."""
    python = json.dumps(sys.executable)
    timed = ", '{benchmarks}'" if benchmarks else ""
    return (
        f"upstream:\n  url: {sim_url}/{UPSTREAM}.git\n  branch: main\nfork:\n  branch: main\n"
        "tiers:\n"
        f"  l1:\n    owner: '@meta/compiler-ci'\n    timeout_minutes: 1\n"
        f"    suites: [{{name: unit, command: [{python}, ci/check.py, l1]}}]\n"
        f"  l2:\n    owner: '@meta/gpu-ci'\n"
        f"    suites: [{{name: gpu, command: [{python}, ci/check.py, l2]}}]\n"
        f"  l3:\n    suites:\n      - {{name: bench, command: [{python}, ci/check.py, l3{timed}]}}\n"
        f"      - {{name: sweep, command: [{python}, ci/check.py, l3-sweep]}}\n"
    )


class Clock:
    """The bot's and the simulator's time: real time plus what a test moves it on by."""

    def __init__(self) -> None:
        self.offset = dt.timedelta()

    def __call__(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC) + self.offset


@dataclass
class Rig:
    sim: GitHubSim
    bot_url: str
    store: Store
    clock: Clock

    async def settle(self, timeout: float = 120.0) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        queue = JobQueue(self.store)
        while loop.time() < deadline:
            await self.sim.drain_hooks()
            counts = queue.counts()
            if counts["queued"] == 0 and counts["running"] == 0:
                assert self.job_errors() == []
                assert self.sim.schema_violations == [] and self.sim.undocumented_statuses == []
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"jobs did not settle: {queue.counts()}")

    def job_errors(self) -> list[tuple[str, str]]:
        with self.store._engine.connect() as conn:
            rows = conn.execute(select(jobs.c.kind, jobs.c.error).where(jobs.c.error.is_not(None)))
            return [(r.kind, r.error) for r in rows]

    def checks(self, sha: str) -> dict[str, dict[str, Any]]:
        """The latest check run per name on `sha`."""
        latest: dict[str, dict[str, Any]] = {}
        for run in self.sim.check_runs[FORK]:
            if run["head_sha"] == sha:
                latest[run["name"]] = run
        return latest

    def head(self, branch: str) -> str:
        return self.sim.git(FORK, "rev-parse", f"refs/heads/{branch}").strip()

    async def deliver(self, event: str, payload: dict[str, Any]) -> None:
        assert await self.sim.deliver(f"{self.bot_url}/webhook", event, payload, secret=SECRET) == 202

    def act_as_runner(self, run: dict[str, Any], *, conclusion: str | None = None) -> None:
        """What the tier workflow does: run the tier on the head it was given, upload report.json and
        tier.log, finish (the simulator then sends `workflow_run` completed)."""
        report, log, code = run_tier(self.sim, run)
        files: dict[str, str | bytes] = {"tier.log": log} | ({"report.json": report} if report else {})
        final = conclusion or ("success" if code == 0 else "failure")
        self.sim.finish_run(FORK, run["id"], final, artifact=("sluice-tier-report", files))


EXPRESSION = re.compile(r"\$\{\{\s*(inputs\.[a-z_]+|github\.sha|vars\.[A-Z_]+)\s*\}\}")
# The fork's repository variables, as the operator sets them (deploy/README.md, "The tier workflows").
REPO_VARS = {"vars.SLUICE_PIP_SPEC": "sluice[runners] @ git+https://github.com/your-org/sluice@v1"}


def run_tier(sim: GitHubSim, run: dict[str, Any]) -> tuple[str | None, str, int]:
    """The dispatched workflow's job, as an Actions runner runs it: its template's steps in order, each
    `actions/checkout` an export of the commit it names (`github.sha`: the commit dispatched on, fork trunk),
    each `run` step in bash with the job's environment (the runner itself installed: no pip step)."""
    inputs = run["inputs"]
    values = {f"inputs.{k}": str(v) for k, v in inputs.items()} | {"github.sha": run["head_sha"]} | REPO_VARS

    def expand(text: str) -> str:
        return EXPRESSION.sub(lambda m: values[m[1]], text)

    job = yaml.safe_load((WORKFLOWS / run["name"]).read_text())["jobs"]["tier"]
    work = Path(tempfile.mkdtemp(prefix=f"runner-{inputs['request']}-", dir=sim.root))
    tree, temp = work / "workspace", work / "temp"
    tree.mkdir(parents=True)
    temp.mkdir()
    python = Path(sys.executable).parent
    env = {k: expand(str(v)) for k, v in job["env"].items()}
    env |= {"RUNNER_TEMP": str(temp), "PATH": f"{python}:{os.environ['PATH']}", "HOME": str(work)}
    env |= {"PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    log = ""
    for step in job["steps"]:
        uses, script = str(step.get("uses", "")), step.get("run")
        if uses.startswith("actions/checkout"):
            where = tree / step["with"].get("path", ".")
            where.mkdir(parents=True, exist_ok=True)
            export(sim, expand(step["with"]["ref"]), where)
            strip_upstream(where)
        elif script is not None and "pip install" not in script:
            done = subprocess.run(
                ["bash", "-e", "-c", script], cwd=tree, env=env, capture_output=True, text=True, check=False
            )
            log += done.stdout + done.stderr
            strip_upstream(temp)
            if done.returncode != 0:
                break
    report = tree / "sluice-report" / "report.json"
    return (report.read_text() if report.is_file() else None), log, done.returncode


def export(sim: GitHubSim, sha: str, where: Path) -> None:
    archive = subprocess.run(
        ["git", "archive", "--format=tar", sha], cwd=sim.repo_path(FORK), capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(where, filter="data")


def strip_upstream(where: Path) -> None:
    """The simulator serves upstream over http, which only the bot trusts: every Sluice config the runner
    could read loses its `upstream` section (the tiers are what it reads)."""
    for path in [*where.rglob("sluice.yml")]:
        text = path.read_text()
        if "tiers:" in text and not text.startswith("tiers:"):
            path.write_text(text[text.index("tiers:") :])


async def make_rig(
    aiohttp_server: Any,
    tmp_path: Path,
    database_url: str,
    *,
    backend: str,
    workflows: dict[str, str],
    config: str = "",
    benchmarks: bool = False,
    before_install: Callable[[GitHubSim], None] | None = None,
    settle_timeout: float = 120.0,
    **changes: Any,
) -> tuple[Rig, Any]:
    """The fork with its tier commands and `.github/sluice.yml` (`tier_config`, then `config`: it may go on
    with the `tiers` section's keys before any of its own), `before_install` done on the simulator, then
    `sluice serve` (`changes` are its settings) installed on both repositories and settled."""
    clock = Clock()
    sim = GitHubSim(root=tmp_path / "sim", clock=clock)
    sim_url = url_of(await aiohttp_server(sim.app))
    upstream_and_fork(sim, UPSTREAM, FORK, {"README.md": "triton\n", "docs/guide.md": "guide\n"})
    sluice_yml = tier_config(sim_url, benchmarks=benchmarks) + config
    files = {".github/sluice.yml": sluice_yml, "ci/check.py": CHECK_SCRIPT, **workflows}
    sim.commit(FORK, "main", files, message="fork: tier commands and Sluice config")
    if before_install is not None:
        before_install(sim)
    store = Store.open(database_url)
    settings = serve_settings(
        sim,
        sim_url,
        secret=SECRET,
        data_dir=tmp_path / "data",
        allow_private_upstreams=True,
        tier_backend=backend,
        **changes,
    )
    server = await aiohttp_server(create_app(settings, store=store, clock=clock, background=True))
    sim.hook(f"{url_of(server)}/webhook", SECRET)
    rig = Rig(sim, url_of(server), store, clock)
    await rig.deliver("installation", installation_created(sim, FORK, sim.install(FORK)))
    await rig.deliver("installation", installation_created(sim, UPSTREAM, sim.install(UPSTREAM)))
    await rig.settle(timeout=settle_timeout)
    return rig, server


def templates() -> dict[str, str]:
    return {f".github/workflows/{p.name}": p.read_text() for p in sorted(WORKFLOWS.glob("sluice-l*.yml"))}


@pytest.fixture
async def local(
    aiohttp_server: Any, tmp_path: Path, database_url: str, monkeypatch: Any
) -> AsyncIterator[Rig]:
    monkeypatch.setenv("TIER_STATE_DIR", str(tmp_path))  # the flaky GPU counts its attempts here
    monkeypatch.setenv("SLUICE_TIER_PASS_ENV", "TIER_STATE_DIR")  # an operator lets the tier see it
    rig, server = await make_rig(aiohttp_server, tmp_path, database_url, backend="local", workflows={})
    yield rig
    await server.close()
    rig.store.close()


@pytest.fixture
async def actions(aiohttp_server: Any, tmp_path: Path, database_url: str) -> AsyncIterator[Rig]:
    rig, server = await make_rig(
        aiohttp_server, tmp_path, database_url, backend="github", workflows=templates()
    )
    yield rig
    await server.close()
    rig.store.close()


async def ingestion_pr(rig: Rig, files: dict[str, str]) -> tuple[int, str]:
    """An upstream push; the bundle PR Sluice opens for it; its number and head."""
    rig.sim.commit(UPSTREAM, "main", files, message="upstream: a change")
    await rig.settle()
    (pull,) = [i for i in rig.sim.issues[FORK].values() if i.is_pull and i.head_ref.startswith(BRANCH_PREFIX)]
    return pull.number, rig.head(pull.head_ref)


def report_of(check: dict[str, Any]) -> str:
    return str(check["output"]["summary"])


def the_answer(rig: Rig, number: int) -> str:
    """Sluice's one comment on PR `number` saying it did not run a tier asked for (asking again edits it)."""
    (answer,) = [c for c in rig.sim.comments[(FORK, number)] if "did not run" in c]
    return answer


# --- the local backend -------------------------------------------------------------------------------------


async def test_upstream_push_to_l1_then_l2_with_real_reports(local: Rig) -> None:
    number, head = await ingestion_pr(local, {"docs/guide.md": "guide, clarified\n"})
    checks = local.checks(head)
    assert (checks["sluice/L1"]["conclusion"], checks["sluice/L2"]["conclusion"]) == ("success", "success")
    assert checks["sluice/L1"]["output"]["title"] == "L1: passed (1 test)"
    summary = report_of(checks["sluice/L2"])
    assert "| `gpu` | passed | 1 | — | 1 | 0 | 0 | 0 |" in summary and "**Environment** (context `" in summary
    assert checks["sluice/L3"]["status"] == "queued"  # L3 runs on request (the default policy)
    assert [a["identifier"] for a in checks["sluice/L2"]["actions"]] == ["rerun", "run-l3"]
    runs = TierRuns(local.store).for_pull(FORK, number)
    assert [(r.level.value, r.state.value, r.verdict and r.verdict.value) for r in runs] == [
        ("l1", "completed", "passed"),
        ("l2", "completed", "passed"),
    ]
    report = json.loads(runs[0].report or "{}")
    assert report["run"]["head_sha"] == head and report["suites"][0]["name"] == "unit"


async def test_the_local_backend_says_on_the_pr_that_it_does_not_run_a_pr_from_outside_the_fork(
    local: Rig,
) -> None:
    outsider = "outsider/triton"
    local.sim.create_repo(outsider)
    local.sim.git(outsider, "fetch", "--quiet", str(local.sim.repo_path(FORK)), "main:main")
    head = local.sim.commit(
        outsider, "fix", {"src/a.py": "a = 1\n"}, message="a fix", parent=local.head("main")
    )
    pull = local.sim.open_pull(FORK, head="outsider:fix", base="main", title="A fix", user="outsider")
    await local.settle()
    l1 = local.checks(head)["sluice/L1"]
    assert (l1["status"], l1["conclusion"]) == ("completed", "action_required")
    assert l1["output"]["title"] == "L1: not run (PR from outside the fork)" and not l1.get("actions")
    assert "only for the fork's own branches" in report_of(l1) and "outsider/triton" in report_of(l1)
    assert TierRuns(local.store).for_pull(FORK, pull["number"]) == []  # nothing ran here


async def test_run_l3_on_request(local: Rig) -> None:
    number, head = await ingestion_pr(local, {"docs/guide.md": "guide, clarified\n"})
    l2 = local.checks(head)["sluice/L2"]
    local.sim.set_permission(FORK, "dev", "write")
    await local.deliver(
        "check_run", local.sim.check_run_payload(FORK, l2["id"], identifier="run-l3", sender="dev")
    )
    await local.settle()
    l3 = local.checks(head)["sluice/L3"]
    assert l3["conclusion"] == "success" and l3["output"]["title"] == "L3: passed (2 tests)"  # both suites
    assert [r.level.value for r in TierRuns(local.store).for_pull(FORK, number)] == ["l1", "l2", "l3"]


async def test_a_tier_runs_on_a_mirror_an_operator_wiped(local: Rig, tmp_path: Path) -> None:
    """The data dir is a cache (deploy docs): a tier job after it was wiped fetches into a new mirror."""
    _, head = await ingestion_pr(local, {"docs/guide.md": "guide, clarified\n"})
    shutil.rmtree(tmp_path / "data" / "mirrors")
    l2 = local.checks(head)["sluice/L2"]
    local.sim.set_permission(FORK, "dev", "write")
    await local.deliver(
        "check_run", local.sim.check_run_payload(FORK, l2["id"], identifier="run-l3", sender="dev")
    )
    await local.settle()
    assert local.checks(head)["sluice/L3"]["conclusion"] == "success"


async def say(rig: Rig, number: int, body: str, *, user: str) -> None:
    """`body` commented on PR `number` by `user` and delivered as GitHub would."""
    payload = rig.sim.issue_comment_payload(FORK, rig.sim.add_comment(FORK, number, body, user=user))
    await rig.deliver("issue_comment", payload)
    await rig.settle()


async def test_l3_with_a_suite_named_runs_only_that_suite(local: Rig) -> None:
    number, head = await ingestion_pr(local, {"docs/guide.md": "guide, clarified\n"})
    local.sim.set_permission(FORK, "dev", "write")
    await say(local, number, "/l3 sweep", user="dev")
    l3 = local.checks(head)["sluice/L3"]
    assert l3["conclusion"] == "success" and l3["output"]["title"] == "L3: passed (1 test)"
    (run,) = [r for r in TierRuns(local.store).for_pull(FORK, number) if r.level.value == "l3"]
    assert run.suite == 1  # read back from the store
    assert [s["name"] for s in json.loads(run.report or "{}")["suites"]] == ["sweep"]


async def test_l2_does_not_start_after_l1_failed(local: Rig) -> None:
    # a textually clean upstream change that breaks the fork's L1 suite
    number, head = await ingestion_pr(local, {"ci/l1.mode": "fail\n"})
    checks = local.checks(head)
    l1 = checks["sluice/L1"]
    assert l1["conclusion"] == "failure" and l1["output"]["title"] == "L1: failed (1 test)"
    assert "@meta/compiler-ci" in report_of(l1)  # the owner is named
    assert l1["output"]["annotations_count"] == 1  # ci/check.py:14, from the failure message
    assert (
        checks["sluice/L2"]["conclusion"] == "skipped"
        and "L1 failed" in checks["sluice/L2"]["output"]["title"]
    )
    assert [r.level.value for r in TierRuns(local.store).for_pull(FORK, number)] == ["l1"]


async def test_an_infrastructure_failure_is_retried_and_labelled(local: Rig) -> None:
    number, head = await ingestion_pr(local, {"ci/l1.mode": "flaky-gpu\n"})
    runs = TierRuns(local.store).for_pull(FORK, number)
    assert [(r.level.value, r.attempt, r.verdict and r.verdict.value) for r in runs] == [
        ("l1", 1, "infrastructure"),
        ("l1", 2, "passed"),
        ("l2", 1, "passed"),
    ]
    assert "GPU busy" in runs[0].detail
    checks = local.checks(head)
    assert checks["sluice/L1"]["conclusion"] == "success" and checks["sluice/L2"]["conclusion"] == "success"


# --- the GitHub Actions backend ---------------------------------------------------------------------------


@pytest.mark.parametrize(("selection", "accepted"), [("0", True), ("1", True), ("3", True), ("1;x", False)])
def test_the_templates_input_check_takes_a_one_suite_selection(selection: str, accepted: bool) -> None:
    for path in sorted(WORKFLOWS.glob("sluice-l*.yml")):
        steps = yaml.safe_load(path.read_text())["jobs"]["tier"]["steps"]
        (check,) = [step["run"] for step in steps if step.get("name") == "Check the inputs"]
        env = {"TIER": "3", "SELECTION": selection, "HEAD_SHA": "a" * 40, "BASELINE_SHA": "b" * 40}
        env["SLUICE_PIP_SPEC"] = "sluice[runners] @ git+https://github.com/your-org/sluice@v1"
        done = subprocess.run(["bash", "-c", check], env=env, capture_output=True, text=True, check=False)
        assert (done.returncode == 0) is accepted, (path.name, done.stdout)


def test_the_templates_refuse_to_run_without_the_sluice_release_to_install() -> None:
    """No fallback to PyPI's `sluice` (another project): an unset `vars.SLUICE_PIP_SPEC` stops the run."""
    for path in sorted(WORKFLOWS.glob("sluice-l*.yml")):
        job = yaml.safe_load(path.read_text())["jobs"]["tier"]
        assert job["env"]["SLUICE_PIP_SPEC"] == "${{ vars.SLUICE_PIP_SPEC }}", path.name
        (check,) = [step["run"] for step in job["steps"] if step.get("name") == "Check the inputs"]
        env = {
            "TIER": "1",
            "SELECTION": "0",
            "HEAD_SHA": "a" * 40,
            "BASELINE_SHA": "b" * 40,
            "SLUICE_PIP_SPEC": "",
        }
        done = subprocess.run(["bash", "-c", check], env=env, capture_output=True, text=True, check=False)
        assert done.returncode == 2 and "set the repository variable SLUICE_PIP_SPEC" in done.stdout, (
            path.name
        )


async def test_l3_with_a_suite_named_dispatches_its_index_as_the_selection(actions: Rig) -> None:
    number, head = await ingestion_pr(actions, {"docs/guide.md": "guide, clarified\n"})
    for level in ("l1", "l2"):
        (run,) = [r for r in actions.sim.workflow_runs[FORK] if r["inputs"]["tier"] == level[1:]]
        actions.act_as_runner(run)
        await actions.settle()
    actions.sim.set_permission(FORK, "dev", "write")
    await say(actions, number, "/l3 bench", user="dev")
    (l3,) = [r for r in actions.sim.workflow_runs[FORK] if r["inputs"]["tier"] == "3"]
    assert l3["inputs"]["selection"] == "2" and l3["inputs"]["head_sha"] == head  # suite 0: bench
    actions.act_as_runner(l3)
    await actions.settle()
    assert actions.checks(head)["sluice/L3"]["output"]["title"] == "L3: passed (1 test)"


async def test_dispatch_with_run_details_and_results_from_the_artifact(actions: Rig) -> None:
    number, head = await ingestion_pr(actions, {"docs/guide.md": "guide, clarified\n"})
    (l1,) = actions.sim.workflow_runs[FORK]
    assert l1["name"] == "sluice-l1.yml" and l1["inputs"]["head_sha"] == head
    assert set(l1["inputs"]) == {"tier", "pull", "head_sha", "baseline_sha", "selection", "request"}
    assert actions.checks(head)["sluice/L1"]["status"] == "in_progress"
    (recorded,) = TierRuns(actions.store).for_pull(FORK, number)
    assert recorded.run_id == l1["id"]  # from GitHub's 200 answer (return_run_details)
    actions.act_as_runner(l1)
    await actions.settle()
    assert actions.checks(head)["sluice/L1"]["conclusion"] == "success"
    l2 = actions.sim.workflow_runs[FORK][-1]
    assert l2["name"] == "sluice-l2.yml" and l2["inputs"]["tier"] == "2"
    actions.act_as_runner(l2)
    await actions.settle()
    assert actions.checks(head)["sluice/L2"]["conclusion"] == "success"


async def test_a_result_whose_check_run_github_failed_to_update_is_shown_and_followed_on_the_retry(
    actions: Rig,
) -> None:
    number, head = await ingestion_pr(actions, {"docs/guide.md": "guide, clarified\n"})
    (l1,) = actions.sim.workflow_runs[FORK]
    # the result is recorded, then every try of its check-run update is rate limited: the job fails for now
    actions.sim.fail_next("PATCH", r"/check-runs/\d+$", 403, times=5, headers={"retry-after": "0"})
    actions.act_as_runner(l1)
    await actions.settle()
    assert actions.checks(head)["sluice/L1"]["conclusion"] == "success"  # shown by the job's retry
    assert [r["name"] for r in actions.sim.workflow_runs[FORK]] == ["sluice-l1.yml", "sluice-l2.yml"]
    runs = [(r.level.value, r.state.value) for r in TierRuns(actions.store).for_pull(FORK, number)]
    assert runs == [("l1", "completed"), ("l2", "dispatched")]
    await actions.deliver("workflow_run", actions.sim.workflow_run_payload(FORK, l1["id"], "completed"))
    await actions.settle()
    assert [r["name"] for r in actions.sim.workflow_runs[FORK]] == ["sluice-l1.yml", "sluice-l2.yml"]
    assert actions.checks(head)["sluice/L1"]["conclusion"] == "success"


async def test_without_run_details_the_run_is_found_by_the_id_in_its_name(actions: Rig) -> None:
    actions.sim.run_details = False  # GitHub answers 204, without the run's id
    number, head = await ingestion_pr(actions, {"docs/guide.md": "guide, clarified\n"})
    (l1,) = actions.sim.workflow_runs[FORK]
    (recorded,) = TierRuns(actions.store).for_pull(FORK, number)
    assert l1["display_title"] == f"sluice L1 pull {number} request {recorded.id}"
    assert recorded.run_id == l1["id"]  # found among the dispatched runs
    actions.act_as_runner(l1)
    await actions.settle()
    assert actions.checks(head)["sluice/L1"]["conclusion"] == "success"


async def test_a_missing_report_is_a_failure_not_a_pass(actions: Rig) -> None:
    _, head = await ingestion_pr(actions, {"docs/guide.md": "guide, clarified\n"})
    (l1,) = actions.sim.workflow_runs[FORK]
    actions.sim.finish_run(FORK, l1["id"], "success", artifact=("sluice-tier-report", {"tier.log": "?"}))
    await actions.settle()
    check = actions.checks(head)["sluice/L1"]
    assert check["conclusion"] == "failure" and "holds no report.json" in report_of(check)
    assert "The run's log" in report_of(check)  # what the run printed, since there is no report


@pytest.mark.parametrize("listed", ["true", "understated"])
async def test_an_artifact_over_the_size_limit_is_refused_on_the_check_run(
    actions: Rig, monkeypatch: Any, listed: str
) -> None:
    # The limit lowered to 4 KiB: an artifact over the real 128 MiB one would take the simulator minutes
    monkeypatch.setattr("bot.flows.tiers.MAX_ARTIFACT_BYTES", 4096)
    _, head = await ingestion_pr(actions, {"docs/guide.md": "guide, clarified\n"})
    (l1,) = actions.sim.workflow_runs[FORK]
    report, log, _ = run_tier(actions.sim, l1)
    noise = os.urandom(8192).hex()  # does not compress: the zip is over 4096 bytes
    files = {"report.json": report or "", "tier.log": log + noise}
    actions.sim.finish_run(FORK, l1["id"], "success", artifact=("sluice-tier-report", files))
    if listed == "understated":  # GitHub's listing is not trusted: the download itself is cut off
        actions.sim.artifacts[FORK][-1]["size_in_bytes"] = 100
    await actions.settle()
    check = actions.checks(head)["sluice/L1"]
    assert check["conclusion"] == "failure"
    zipped = len(actions.sim._artifact_zips[actions.sim.artifacts[FORK][-1]["id"]][0])
    assert f"the `sluice-tier-report` artifact is {zipped:,} bytes" in report_of(check)  # listed or sent
    assert "over Sluice's limit of 4,096 bytes: refused" in report_of(check)
    downloads = [r for r in actions.sim.requests if r[1].endswith("/zip")]
    assert len(downloads) == (
        1 if listed == "understated" else 0
    )  # a listed size over the limit: not fetched


async def test_a_dispatch_refused_with_422_is_reported_on_the_check_run(actions: Rig) -> None:
    # the fork's L1 workflow does not declare the `request` input Sluice sends
    broken = templates()[".github/workflows/sluice-l1.yml"].replace("      request:", "      unused:")
    actions.sim.commit(FORK, "main", {".github/workflows/sluice-l1.yml": broken}, message="ci: break it")
    await actions.settle()
    number, head = await ingestion_pr(actions, {"docs/guide.md": "guide, clarified\n"})
    check = actions.checks(head)["sluice/L1"]
    assert (
        check["conclusion"] == "action_required"
        and check["output"]["title"] == "L1: dispatch refused (HTTP 422)"
    )
    assert "Unexpected inputs provided" in report_of(check) and "not retried" in report_of(check)
    assert actions.sim.workflow_runs[FORK] == []
    calls = [r for r in actions.sim.requests if r[1].endswith("/sluice-l1.yml/dispatches")]
    assert [status for _, _, status in calls] == [422]  # not retried blindly
    (run,) = TierRuns(actions.store).for_pull(FORK, number)
    assert run.state.value == "refused"


def dispatch_answers(rig: Rig, workflow: str) -> list[int]:
    return [status for _, path, status in rig.sim.requests if path.endswith(f"/{workflow}/dispatches")]


async def test_a_dispatch_github_fails_with_a_5xx_is_asked_for_again_by_the_jobs_retry(actions: Rig) -> None:
    actions.sim.fail_next("POST", r"/sluice-l1\.yml/dispatches$", 503)
    number, head = await ingestion_pr(actions, {"docs/guide.md": "guide, clarified\n"})  # retried after 5 s
    assert dispatch_answers(actions, "sluice-l1.yml") == [503, 200]
    (l1,) = actions.sim.workflow_runs[FORK]
    (recorded,) = TierRuns(actions.store).for_pull(FORK, number)  # the same row, dispatched again
    assert (recorded.attempt, recorded.state.value, recorded.run_id) == (1, "dispatched", l1["id"])
    assert l1["inputs"]["request"] == str(recorded.id)
    actions.act_as_runner(l1)
    await actions.settle()
    assert actions.checks(head)["sluice/L1"]["conclusion"] == "success"


async def test_a_check_run_github_fails_to_create_before_the_dispatch_leaves_no_run_waiting(
    actions: Rig,
) -> None:
    actions.sim.fail_next("POST", rf"/repos/{FORK}/check-runs$", 503)  # the fork PR's first: its L1's
    trunk = actions.head("main")
    actions.sim.commit(FORK, "feature", {"src/a.py": "a = 1\n"}, message="a", parent=trunk, pusher="dev")
    pull = actions.sim.open_pull(FORK, head="feature", base="main", title="A fork change", user="dev")
    await actions.settle()  # the tiers job fails, and its retry (5 s on) shows and dispatches L1
    (l1,) = actions.sim.workflow_runs[FORK]
    (recorded,) = TierRuns(actions.store).for_pull(FORK, pull["number"])
    assert (recorded.attempt, recorded.state.value, recorded.run_id) == (1, "dispatched", l1["id"])
    assert actions.checks(l1["inputs"]["head_sha"])["sluice/L1"]["status"] == "in_progress"


async def test_a_dispatch_whose_answer_is_lost_is_not_dispatched_twice(actions: Rig) -> None:
    """GitHub started the run but answered 502: the retry finds that run by the id in its name."""
    actions.sim.fail_after_next("POST", r"/sluice-l1\.yml/dispatches$", 502)
    number, head = await ingestion_pr(actions, {"docs/guide.md": "guide, clarified\n"})
    assert dispatch_answers(actions, "sluice-l1.yml") == [502]
    (l1,) = actions.sim.workflow_runs[FORK]
    (recorded,) = TierRuns(actions.store).for_pull(FORK, number)
    assert (recorded.state.value, recorded.run_id) == ("dispatched", l1["id"])
    actions.act_as_runner(l1)
    await actions.settle()
    assert actions.checks(head)["sluice/L1"]["conclusion"] == "success"


async def test_a_pr_changing_its_own_sluice_config_still_runs_trunks_tier_commands(actions: Rig) -> None:
    trunk = actions.head("main")
    mine = json.dumps([sys.executable, "-c", "print('all good')"])
    own = f"tiers:\n  l1:\n    workflow: mine.yml\n    suites: [{{name: mine, command: {mine}}}]\n"  # passes
    files = {".github/sluice.yml": own, "ci/l1.mode": "fail\n"}
    head = actions.sim.commit(FORK, "feature", files, message="skip the checks", parent=trunk, pusher="dev")
    actions.sim.open_pull(FORK, head="feature", base="main", title="A change", user="dev")
    await actions.settle()
    (l1,) = actions.sim.workflow_runs[FORK]
    assert l1["name"] == "sluice-l1.yml"  # the bot reads trunk's config too: the head's `workflow` is ignored
    assert l1["head_sha"] == trunk and l1["inputs"]["head_sha"] == head  # dispatched on trunk, runs the head
    report, log, code = run_tier(actions.sim, l1)
    assert code == 1 and report is not None, log
    assert [s["name"] for s in json.loads(report)["suites"]] == ["unit"]  # trunk's suite, on the PR's code
    assert "AssertionError: tensors not close" in log and "all good" not in log
    actions.act_as_runner(l1)
    await actions.settle()
    assert actions.checks(head)["sluice/L1"]["conclusion"] == "failure"


async def test_a_stale_sha_result_is_ignored(actions: Rig) -> None:
    trunk = actions.head("main")
    actions.sim.commit(
        FORK, "feature", {"src/a.py": "a = 1\n"}, message="fork: a", parent=trunk, pusher="dev"
    )
    pull = actions.sim.open_pull(FORK, head="feature", base="main", title="A fork change", user="dev")
    await actions.settle()
    (old_run,) = actions.sim.workflow_runs[FORK]
    old_head = old_run["inputs"]["head_sha"]
    new_head = actions.sim.commit(
        FORK, "feature", {"src/a.py": "a = 2\n"}, message="fork: a, again", pusher="dev"
    )
    await actions.settle()
    new_run = actions.sim.workflow_runs[FORK][-1]
    assert new_run["inputs"]["head_sha"] == new_head and new_run["inputs"]["selection"] == "1"  # a fork PR
    actions.act_as_runner(old_run)  # the old head's result arrives late
    await actions.settle()
    runs = {r.head_sha: r for r in TierRuns(actions.store).for_pull(FORK, pull["number"])}
    assert runs[old_head].state.value == "stale" and runs[old_head].report is None
    assert actions.checks(new_head)["sluice/L1"]["status"] == "in_progress"
    assert "sluice/L2" not in actions.checks(new_head) and len(actions.sim.workflow_runs[FORK]) == 2


@pytest.fixture
async def swept(aiohttp_server: Any, tmp_path: Path, database_url: str) -> AsyncIterator[Rig]:
    """The GitHub backend, with the sweep for stalled tier runs every second."""
    rig, server = await make_rig(
        aiohttp_server, tmp_path, database_url, backend="github", workflows=templates(), tier_sweep_interval=1
    )
    yield rig
    await server.close()
    rig.store.close()


async def test_a_stalled_fork_pr_run_is_timed_out_by_the_sweep_with_no_event(swept: Rig) -> None:
    trunk = swept.head("main")
    head = swept.sim.commit(FORK, "feature", {"src/a.py": "a = 1\n"}, message="a", parent=trunk, pusher="dev")
    pull = swept.sim.open_pull(FORK, head="feature", base="main", title="A fork change", user="dev")
    await swept.settle()
    assert swept.checks(head)["sluice/L1"]["status"] == "in_progress"
    swept.clock.offset = dt.timedelta(minutes=2)  # past L1's timeout_minutes: 1; nothing calls for the PR
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while swept.checks(head)["sluice/L1"].get("conclusion") is None and loop.time() < deadline:
        await asyncio.sleep(0.2)
    await swept.settle()
    check = swept.checks(head)["sluice/L1"]
    assert check["conclusion"] == "timed_out" and "1 min" in check["output"]["title"]
    (run,) = TierRuns(swept.store).for_pull(FORK, pull["number"])
    assert run.state.value == "timed_out"
    assert swept.checks(head)["sluice/L2"]["conclusion"] == "skipped"  # the tiers above are blocked


async def test_a_time_out_github_failed_to_show_is_shown_by_a_later_sweep(swept: Rig) -> None:
    """The sweep recorded the time-out, then GitHub failed the check run's update: the run waits again, so
    a later sweep ends it again and shows it (a sweep reads waiting runs only: it was lost)."""
    trunk = swept.head("main")
    head = swept.sim.commit(FORK, "feature", {"src/b.py": "b = 1\n"}, message="b", parent=trunk, pusher="dev")
    pull = swept.sim.open_pull(FORK, head="feature", base="main", title="A fork change", user="dev")
    await swept.settle()
    assert swept.checks(head)["sluice/L1"]["status"] == "in_progress"
    swept.sim.fail_next("PATCH", r"/check-runs/\d+$", 502, times=6)
    swept.clock.offset = dt.timedelta(minutes=2)  # past L1's timeout_minutes: 1
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    while swept.checks(head)["sluice/L1"].get("conclusion") is None and loop.time() < deadline:
        await asyncio.sleep(0.2)
    await swept.settle()
    assert swept.checks(head)["sluice/L1"]["conclusion"] == "timed_out"
    (run,) = TierRuns(swept.store).for_pull(FORK, pull["number"])
    assert run.state.value == "timed_out"


async def test_one_run_the_sweep_cannot_read_does_not_keep_the_others_from_timing_out(swept: Rig) -> None:
    trunk, heads = swept.head("main"), []
    for name in ("damaged", "deleted", "stalled"):
        files = {f"src/{name}.py": "a = 1\n"}
        heads.append(swept.sim.commit(FORK, name, files, message=name, parent=trunk, pusher="dev"))
        swept.sim.open_pull(FORK, head=name, base="main", title=name, user="dev")
        await swept.settle()
    damaged_run, deleted_run, _ = swept.sim.workflow_runs[FORK]
    # the first run ended, its event lost, and its artifact's report.json no longer inflates
    report = {"report.json": json.dumps(list(range(3000)))}  # compressed to more than the bytes broken
    swept.sim.add_artifact(FORK, damaged_run["id"], "sluice-tier-report", report)
    (artifact,) = swept.sim.artifacts[FORK]
    zipped, signature = swept.sim._artifact_zips[artifact["id"]]
    start = zipped.index(b"report.json") + len("report.json") + 5
    broken = zipped[:start] + bytes(b ^ 0xFF for b in zipped[start : start + 30]) + zipped[start + 30 :]
    swept.sim._artifact_zips[artifact["id"]] = (broken, signature)
    damaged_run["status"], damaged_run["conclusion"] = "completed", "success"
    # the second's workflow run was deleted: GitHub answers 404 for it, every sweep
    swept.sim.fail_next("GET", rf"/actions/runs/{deleted_run['id']}$", 404, times=1000)
    swept.clock.offset = dt.timedelta(minutes=2)  # past L1's timeout_minutes: 1
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while swept.checks(heads[2])["sluice/L1"].get("conclusion") is None and loop.time() < deadline:
        await asyncio.sleep(0.2)
    await swept.settle()
    damaged, deleted, stalled = (swept.checks(head)["sluice/L1"] for head in heads)
    assert damaged["conclusion"] == "failure"
    assert "the `sluice-tier-report` artifact is damaged (zlib.error: Error -3" in report_of(damaged)
    assert deleted["status"] == "in_progress"  # still waiting: each sweep tries it again, and logs why not
    assert stalled["conclusion"] == "timed_out"


async def test_a_pr_from_outside_the_fork_waits_for_a_maintainer_before_the_gpu_tiers(actions: Rig) -> None:
    outsider = "outsider/triton"  # a contributor's fork of the fork
    actions.sim.create_repo(outsider)
    actions.sim.git(outsider, "fetch", "--quiet", str(actions.sim.repo_path(FORK)), "main:main")
    trunk = actions.head("main")
    head = actions.sim.commit(outsider, "fix", {"src/a.py": "a = 1\n"}, message="a fix", parent=trunk)
    pull = actions.sim.open_pull(FORK, head="outsider:fix", base="main", title="A fix", user="outsider")
    await actions.settle()
    (l1,) = actions.sim.workflow_runs[FORK]
    assert l1["name"] == "sluice-l1.yml" and l1["inputs"]["head_sha"] == head  # GitHub's hosted runners
    actions.act_as_runner(l1)
    await actions.settle()
    l2 = actions.checks(head)["sluice/L2"]
    assert (l2["status"], l2["conclusion"]) == ("completed", "action_required")
    assert l2["output"]["title"] == "L2: waits for a maintainer (PR from outside the fork)"
    assert "comes from outside the fork" in report_of(l2) and [a["label"] for a in l2["actions"]] == [
        "Run L2"
    ]
    assert len(actions.sim.workflow_runs[FORK]) == 1  # nothing went to the self-hosted runners

    actions.sim.set_permission(FORK, "outsider", "read")  # the author (or anyone without write) pressing it
    payload = actions.sim.check_run_payload(FORK, l2["id"], identifier="rerun", sender="outsider")
    for _ in range(2):  # pressed twice: one answer, not two
        await actions.deliver("check_run", payload)
        await actions.settle()
    assert len(actions.sim.workflow_runs[FORK]) == 1
    answer = the_answer(actions, pull["number"])
    assert "@outsider: Sluice did not run L2 (asked for from the `sluice/L2` check run)" in answer
    assert f"has read access to {FORK}" in answer and "ask someone with write access" in answer
    actions.sim.set_permission(FORK, "dev", "maintain")
    await actions.deliver(
        "check_run", actions.sim.check_run_payload(FORK, l2["id"], identifier="rerun", sender="dev")
    )
    await actions.settle()
    l2_run = actions.sim.workflow_runs[FORK][-1]
    assert l2_run["name"] == "sluice-l2.yml" and l2_run["inputs"]["head_sha"] == head
    assert l2_run["inputs"]["selection"] == "1"  # the critical subset, as for any fork PR
    assert actions.checks(head)["sluice/L2"]["status"] == "in_progress"

    pushed = actions.sim.commit(outsider, "fix", {"src/a.py": "a = 2\n"}, message="a fix, again")
    await actions.settle()
    (l1_again,) = [r for r in actions.sim.workflow_runs[FORK] if r["inputs"]["head_sha"] == pushed]
    actions.act_as_runner(l1_again)
    await actions.settle()
    assert actions.checks(pushed)["sluice/L2"]["conclusion"] == "action_required"  # a new head: asked again
    assert [r["name"] for r in actions.sim.workflow_runs[FORK]] == [
        "sluice-l1.yml",
        "sluice-l2.yml",
        "sluice-l1.yml",
    ]


async def outside_pr_waiting_for_l2(rig: Rig) -> tuple[int, str, dict[str, Any]]:
    """A PR from a contributor's fork of the fork whose L1 passed: its number, head and waiting L2 check."""
    outsider = "outsider/triton"
    rig.sim.create_repo(outsider)
    rig.sim.git(outsider, "fetch", "--quiet", str(rig.sim.repo_path(FORK)), "main:main")
    head = rig.sim.commit(outsider, "fix", {"src/a.py": "a = 1\n"}, message="a fix", parent=rig.head("main"))
    pull = rig.sim.open_pull(FORK, head="outsider:fix", base="main", title="A fix", user="outsider")
    await rig.settle()
    (l1,) = [r for r in rig.sim.workflow_runs[FORK] if r["inputs"]["head_sha"] == head]
    rig.act_as_runner(l1)
    await rig.settle()
    assert rig.checks(head)["sluice/L2"]["conclusion"] == "action_required"
    return pull["number"], head, rig.checks(head)["sluice/L2"]


async def test_run_l2_pressed_on_a_head_the_contributor_has_pushed_past_starts_nothing(actions: Rig) -> None:
    number, read, l2 = await outside_pr_waiting_for_l2(actions)
    # the maintainer reads `read`; meanwhile the contributor pushes, and L1 passes on the new head
    pushed = actions.sim.commit("outsider/triton", "fix", {"src/a.py": "a = 2\n"}, message="a fix, again")
    await actions.settle()
    (l1,) = [r for r in actions.sim.workflow_runs[FORK] if r["inputs"]["head_sha"] == pushed]
    actions.act_as_runner(l1)
    await actions.settle()
    actions.sim.set_permission(FORK, "dev", "maintain")
    for event, payload in (
        ("check_run", actions.sim.check_run_payload(FORK, l2["id"], identifier="rerun", sender="dev")),
        ("check_run", actions.sim.rerequest_payload(FORK, l2["id"], sender="dev")),
        ("check_suite", actions.sim.suite_rerequest_payload(FORK, read, sender="dev")),
    ):
        await actions.deliver(event, payload)
        await actions.settle()
    assert [r["name"] for r in actions.sim.workflow_runs[FORK]] == ["sluice-l1.yml", "sluice-l1.yml"]
    told = [c for c in actions.sim.comments[(FORK, number)] if "did not run" in c]
    assert len(told) == 2  # one per check run (the button and GitHub's Re-run share it) and one for the suite
    said = f"@dev: Sluice did not run L2 (asked for from the `sluice/L2` check run of `{read[:10]}`)"
    assert said in told[0]
    assert f"the PR's head is now `{pushed[:10]}`" in told[0] and "read the new head's changes" in told[0]
    assert actions.checks(pushed)["sluice/L2"]["conclusion"] == "action_required"  # still waits for a press


async def test_an_ask_queued_before_a_push_does_not_run_on_the_new_head(actions: Rig) -> None:
    number, read, _ = await outside_pr_waiting_for_l2(actions)
    pushed = actions.sim.commit("outsider/triton", "fix", {"src/a.py": "a = 2\n"}, message="a fix, again")
    await actions.settle()
    (l1,) = [r for r in actions.sim.workflow_runs[FORK] if r["inputs"]["head_sha"] == pushed]
    actions.act_as_runner(l1)
    await actions.settle()
    # the press on `read` was checked and queued; the push came before a worker took it
    ask = {"fork": FORK, "pull": number, "rerun": "l2", "l3": False, "suite": None, "head": read}
    JobQueue(actions.store).enqueue_once("tiers", ask, key=f"{FORK}#{number}:ask", now=actions.clock())
    await actions.settle()
    assert [r["name"] for r in actions.sim.workflow_runs[FORK]] == ["sluice-l1.yml", "sluice-l1.yml"]
    (told,) = [c for c in actions.sim.comments[(FORK, number)] if "did not run" in c]
    assert f"Sluice did not run L2 (asked for on `{read[:10]}`)" in told and pushed[:10] in told
    # an ask queued before asks carried their head is brought forward on the PR's head, as it was then
    ask = {k: v for k, v in ask.items() if k != "head"}
    JobQueue(actions.store).enqueue_once("tiers", ask, key=f"{FORK}#{number}:old", now=actions.clock())
    await actions.settle()
    l2 = actions.sim.workflow_runs[FORK][-1]
    assert l2["name"] == "sluice-l2.yml" and l2["inputs"]["head_sha"] == pushed


async def test_githubs_own_re_run_runs_the_tier_again_as_sluices_button_does(actions: Rig) -> None:
    number, head = await ingestion_pr(actions, {"docs/guide.md": "guide, clarified\n"})
    (l1,) = actions.sim.workflow_runs[FORK]
    actions.act_as_runner(l1, conclusion="failure")
    await actions.settle()
    check = actions.checks(head)["sluice/L1"]
    assert check["conclusion"] == "failure"

    actions.sim.set_permission(FORK, "reader", "read")  # GitHub's Re-run in the Checks tab, by a reader
    await actions.deliver("check_run", actions.sim.rerequest_payload(FORK, check["id"], sender="reader"))
    await actions.settle()
    assert len(actions.sim.workflow_runs[FORK]) == 1
    answer = the_answer(actions, number)
    assert (
        "@reader: Sluice did not run L1 (asked for from the `sluice/L1` check run): @reader has read"
        in answer
    )

    actions.sim.set_permission(FORK, "dev", "write")
    await actions.deliver("check_run", actions.sim.rerequest_payload(FORK, check["id"], sender="dev"))
    await actions.settle()
    again = actions.sim.workflow_runs[FORK][-1]
    assert (
        again["id"] != l1["id"] and again["name"] == "sluice-l1.yml" and again["inputs"]["head_sha"] == head
    )
    actions.act_as_runner(again)
    await actions.settle()
    assert actions.checks(head)["sluice/L1"]["conclusion"] == "success"
    l2 = actions.sim.workflow_runs[FORK][-1]
    assert l2["name"] == "sluice-l2.yml"
    actions.act_as_runner(l2)
    await actions.settle()

    # "Re-run all checks" on Sluice's suite when nothing failed: nothing runs, and the PR says how
    await actions.deliver("check_suite", actions.sim.suite_rerequest_payload(FORK, head, sender="dev"))
    await actions.settle()
    assert len(actions.sim.workflow_runs[FORK]) == 3
    (told,) = [c for c in actions.sim.comments[(FORK, number)] if "Re-run all checks" in c]
    assert "no tier failed" in told and "press Re-run on its check run" in told


async def test_re_run_all_checks_runs_the_failed_tier_again(actions: Rig) -> None:
    number, head = await ingestion_pr(actions, {"docs/guide.md": "guide, clarified\n"})
    (l1,) = actions.sim.workflow_runs[FORK]
    actions.act_as_runner(l1)
    await actions.settle()
    (l2,) = actions.sim.workflow_runs[FORK][1:]
    actions.act_as_runner(l2, conclusion="failure")
    await actions.settle()
    assert actions.checks(head)["sluice/L2"]["conclusion"] == "failure"
    actions.sim.set_permission(FORK, "dev", "write")
    await actions.deliver("check_suite", actions.sim.suite_rerequest_payload(FORK, head, sender="dev"))
    await actions.settle()
    again = actions.sim.workflow_runs[FORK][-1]
    assert len(actions.sim.workflow_runs[FORK]) == 3 and again["name"] == "sluice-l2.yml"
    attempts = [(r.level.value, r.attempt) for r in TierRuns(actions.store).for_pull(FORK, number)]
    assert attempts == [("l1", 1), ("l2", 1), ("l2", 2)]


async def test_a_tier_workflow_re_run_from_the_actions_ui_is_not_counted_and_its_check_run_says_so(
    actions: Rig,
) -> None:
    number, head = await ingestion_pr(actions, {"docs/guide.md": "guide, clarified\n"})
    (l1,) = actions.sim.workflow_runs[FORK]
    actions.act_as_runner(l1, conclusion="failure")
    await actions.settle()
    assert actions.checks(head)["sluice/L1"]["conclusion"] == "failure"
    for _ in range(2):  # the CI owner re-runs it in the Actions UI; GitHub may deliver the result twice
        actions.act_as_runner(actions.sim.rerun_workflow(FORK, l1["id"]) if _ == 0 else l1)
        await actions.settle()
    check = actions.checks(head)["sluice/L1"]
    assert check["conclusion"] == "failure"  # Sluice's attempt stands
    note = "GitHub Actions re-ran this tier's workflow ([attempt 2]("
    assert report_of(check).count(note) == 1 and "press **Re-run** above or comment `/retry l1`" in report_of(
        check
    )
    assert [(r.attempt, r.state.value) for r in TierRuns(actions.store).for_pull(FORK, number)] == [
        (1, "completed")
    ]


async def test_run_l3_pressed_before_l2_passed_is_answered_and_starts_nothing(actions: Rig) -> None:
    number, head = await ingestion_pr(actions, {"docs/guide.md": "guide, clarified\n"})
    (l1,) = actions.sim.workflow_runs[FORK]
    actions.act_as_runner(l1)
    await actions.settle()
    (l2,) = actions.sim.workflow_runs[FORK][1:]  # dispatched, not finished
    actions.sim.set_permission(FORK, "dev", "write")
    check = actions.checks(head)["sluice/L2"]
    payload = actions.sim.check_run_payload(FORK, check["id"], identifier="run-l3", sender="dev")
    await actions.deliver("check_run", payload)
    await actions.settle()
    assert len(actions.sim.workflow_runs[FORK]) == 2
    answer = the_answer(actions, number)
    assert (
        "@dev: Sluice did not run L3 (asked for from the `sluice/L2` check run): L2 has not finished"
        in answer
    )
    assert "press it again once L2 passes" in answer

    actions.act_as_runner(l2)
    await actions.settle()
    await actions.deliver("check_run", payload)  # pressed again once L2 passed: L3 runs
    await actions.settle()
    assert actions.sim.workflow_runs[FORK][-1]["name"] == "sluice-l3.yml"


async def test_a_run_whose_result_never_reached_sluice_is_read_from_github_before_it_would_time_out(
    actions: Rig,
) -> None:
    number, head = await ingestion_pr(actions, {"docs/guide.md": "guide, clarified\n"})
    (l1,) = actions.sim.workflow_runs[FORK]
    report, log, code = run_tier(actions.sim, l1)  # the run ends, but its `workflow_run` event is lost
    assert code == 0 and report is not None
    actions.sim.add_artifact(FORK, l1["id"], "sluice-tier-report", {"report.json": report, "tier.log": log})
    l1["status"], l1["conclusion"] = "completed", "success"
    actions.clock.offset = dt.timedelta(minutes=2)  # past L1's timeout_minutes: 1
    await actions.deliver("pull_request", actions.sim.pull_request_payload(FORK, number, "synchronize"))
    await actions.settle()
    assert actions.checks(head)["sluice/L1"]["conclusion"] == "success"  # not timed out
    assert [(r.level.value, r.state.value) for r in TierRuns(actions.store).for_pull(FORK, number)] == [
        ("l1", "completed"),
        ("l2", "dispatched"),
    ]


async def test_a_stalled_run_times_out_and_rerun_dispatches_again(actions: Rig) -> None:
    number, head = await ingestion_pr(actions, {"docs/guide.md": "guide, clarified\n"})
    (stalled,) = actions.sim.workflow_runs[FORK]
    actions.clock.offset = dt.timedelta(minutes=2)  # past L1's timeout_minutes: 1
    await actions.deliver("pull_request", actions.sim.pull_request_payload(FORK, number, "synchronize"))
    await actions.settle()
    check = actions.checks(head)["sluice/L1"]
    assert check["conclusion"] == "timed_out" and "1 min" in check["output"]["title"]
    assert actions.checks(head)["sluice/L2"]["conclusion"] == "skipped"
    actions.act_as_runner(stalled)  # a result after the time-out is ignored
    await actions.settle()
    assert actions.checks(head)["sluice/L1"]["conclusion"] == "timed_out"
    # a person (with write access) presses Re-run on the L1 check run
    actions.sim.set_permission(FORK, "dev", "write")
    payload = actions.sim.check_run_payload(FORK, check["id"], identifier="rerun", sender="dev")
    await actions.deliver("check_run", payload)
    await actions.settle()
    again = actions.sim.workflow_runs[FORK][-1]
    assert again["id"] != stalled["id"] and again["name"] == "sluice-l1.yml"
    attempts = [
        (r.level.value, r.attempt, r.state.value) for r in TierRuns(actions.store).for_pull(FORK, number)
    ]
    assert attempts == [("l1", 1, "timed_out"), ("l1", 2, "dispatched")]
    actions.act_as_runner(again)
    await actions.settle()
    assert actions.checks(head)["sluice/L1"]["conclusion"] == "success"
    l1_checks = [
        r for r in actions.sim.check_runs[FORK] if r["name"] == "sluice/L1" and r["head_sha"] == head
    ]
    assert [r["conclusion"] for r in l1_checks] == ["timed_out", "success"]  # attempt 2 got its own check run
