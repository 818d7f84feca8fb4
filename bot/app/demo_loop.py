"""`sluice demo`'s whole loop: the sandbox in the GitHub simulator, the App in-process, until Sluice rests.

The simulator is the test suite's (`tests/support/github_sim.py`, the project's one fake GitHub): the demo
loads it from the checkout Sluice runs from, so it needs a checkout (the README's quick start), not a wheel.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import importlib
import json
import os
import re
import secrets
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml
from aiohttp import web
from pydantic import SecretStr
from sqlalchemy import func, select

import bot
from bot.app.service import create_app
from bot.app.settings import Settings
from bot.core.audit import AuditState
from bot.core.bisect_pr import BisectionRecord
from bot.core.config import parse_config
from bot.core.ingestion import BRANCH_PREFIX, MAX_OPEN_UNITS, CheckName, IngestionRecord, UnitKind, units_of
from bot.core.models import Plan
from bot.core.tiers import RunState, TierRun
from bot.db.bisections import Bisections
from bot.db.gates import GateStore
from bot.db.jobs import JobState, jobs
from bot.db.lag import LagHistory
from bot.db.registry import Registry
from bot.db.store import Store
from bot.db.tier_runs import TierRuns, tier_runs
from bot.demo import Sandbox

UPSTREAM, FORK = "triton-lang/triton", "sandbox/triton-fork"
MAINTAINERS, MAINTAINER = "sandbox/maintainers", "demo-maintainer"  # the fork's code owners; who approves
UPSTREAM_DEV = "upstream-dev"  # who pushes upstream's commits
POLL_S = 0.5
QUIET_POLLS = 3  # consecutive polls with nothing in flight before the demo calls Sluice at rest
# The planted culprit fails L1 on its bundle and on every PR stacked on it (each holds it): with the default
# `gate.pause_after_failures` (3) the safety throttle would pause ingestion before the first bundle merges.
DEMO_GATE = {"required_tiers": ["l1", "l2"], "auto_merge": True, "pause_after_failures": 25}
TIERS = (CheckName.L1, CheckName.L2, CheckName.L3)
Say = Callable[[str], None]


class NeedsCheckout(Exception):
    """The simulator is not importable: Sluice runs from an installed wheel, or without its test extras."""


CHECKOUT = Path(bot.__file__).resolve().parent.parent  # where `bot` was imported from


def load_simulator(root: Path | None = None) -> tuple[ModuleType, ModuleType]:
    """`tests.support.github_sim` and `tests.support.rig` from the checkout (`CHECKOUT`) Sluice runs from."""
    root = root or CHECKOUT
    if not (root / "tests" / "support" / "github_sim.py").is_file():
        raise NeedsCheckout(
            f"the GitHub simulator (tests/support/github_sim.py) is not beside {root / 'bot'}: "
            "the full loop runs from a checkout (`make demo`)"
        )
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    try:
        sim, rig = (importlib.import_module(f"tests.support.{name}") for name in ("github_sim", "rig"))
    except ImportError as exc:
        raise NeedsCheckout(
            f"the GitHub simulator needs the test extras (`pip install -e '.[test]'`): {exc}"
        ) from exc
    if Path(str(sim.__file__)).resolve() != (root / "tests" / "support" / "github_sim.py").resolve():
        raise NeedsCheckout(
            f"another `tests` package ({sim.__file__}) comes before the checkout's on sys.path"
        )
    return sim, rig


# ------------------------------------------------------------------ what the demo reads back


def read_bisections(store: Store, fork: str) -> list[dict[str, Any]]:
    """The bisections Sluice ran for `fork`'s ingestions, oldest first: the ingestion and PR, the tier, how
    it ended, the culprit(s) blamed and the tier runs spent (probes with a result, confirmations included;
    the failing run that started it is the PR's own)."""
    return [_bisection(record) for record in Bisections(store).for_fork(fork)]


def _bisection(record: BisectionRecord) -> dict[str, Any]:
    culprits = [sha for culprit in record.state.culprits for sha in culprit.shas]
    return {
        "id": record.id,
        "ingestion": record.ingestion,
        "pr": record.pull,
        "tier": record.level.name,
        "status": record.status.value,
        "culprit": culprits[0] if culprits else None,
        "culprits": culprits,
        "dependents": [sha for culprit in record.state.culprits for sha in culprit.dependents],
        "tier_runs": record.state.runs,
        "commits": len(record.state.commits),
        "reason": record.reason,
    }


@dataclass
class Ingestion:
    """One ingestion as the fork shows it at the end: its PR, tiers, gate, merge and audit record."""

    id: str
    kind: str
    pr: int | None
    state: str
    commits: int
    upstream: tuple[str, str]
    head: str | None
    tiers: dict[str, dict[str, Any]] = field(default_factory=dict)
    gate: dict[str, Any] = field(default_factory=dict)
    merge_sha: str | None = None
    rollback_tag: str | None = None
    audit: dict[str, Any] | None = None
    needs_human: str | None = None
    upstream_commits: tuple[str, ...] = ()  # from its audit record
    base: str | None = None  # the PR's base branch: fork trunk, or the ingestion branch it builds on
    stacked_on: int | None = None  # the PR it builds on

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "pr": self.pr,
            "state": self.state,
            "commits": self.commits,
            "upstream_first": self.upstream[0],
            "upstream_last": self.upstream[1],
            "head": self.head,
            "tiers": self.tiers,
            "gate": self.gate,
            "merge_sha": self.merge_sha,
            "rollback_tag": self.rollback_tag,
            "audit": self.audit,
            "needs_human": self.needs_human,
            "upstream_commits": list(self.upstream_commits),
            "base": self.base,
            "stacked_on": self.stacked_on,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Ingestion:
        values = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        upstream = (data["upstream_first"], data["upstream_last"])
        commits = tuple(data.get("upstream_commits", ()))
        return cls(**values | {"upstream": upstream, "upstream_commits": commits})


@dataclass
class DemoResult:
    """What the loop did: per ingestion, the bisections, the metrics before and after, what still waits."""

    ingestions: list[Ingestion]
    bisections: list[dict[str, Any]]
    metrics: dict[str, Any]
    culprits: list[str]
    approvals: list[dict[str, Any]]
    pending: list[str]
    seconds: float
    where: dict[str, str]
    # Where each planted culprit is in the fork's latest plan at the end: its unit, that unit's place, its PR.
    culprits_now: list[dict[str, Any]] = field(default_factory=list)
    kept: bool = True  # the run's directory (sandbox, the simulator's repositories) outlives the run
    store_kept: bool = True  # so does the store (`--dir`, or `--database` naming one's own)

    def as_json(self) -> dict[str, Any]:
        return {
            "ingestions": [i.as_json() for i in self.ingestions],
            "bisections": self.bisections,
            "metrics": self.metrics,
            "planted_culprits": self.culprits,
            "approvals": self.approvals,
            "pending": self.pending,
            "seconds": round(self.seconds, 1),
            "simulator": self.where,
            "culprits_now": self.culprits_now,
            "kept": {"directory": self.kept, "store": self.store_kept},  # else removed at exit
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DemoResult:
        """The result `as_json()` printed (`sluice demo --json`), to render its summary again."""
        return cls(
            ingestions=[Ingestion.from_json(i) for i in data["ingestions"]],
            bisections=list(data["bisections"]),
            metrics=dict(data["metrics"]),
            culprits=list(data["planted_culprits"]),
            approvals=list(data["approvals"]),
            pending=list(data["pending"]),
            seconds=float(data["seconds"]),
            where=dict(data["simulator"]),
            culprits_now=list(data.get("culprits_now", [])),
            kept=bool(data.get("kept", {}).get("directory", True)),
            store_kept=bool(data.get("kept", {}).get("store", True)),
        )


# ------------------------------------------------------------------ the loop


def run_demo(sandbox: Sandbox, *, root: Path, database_url: str, timeout_s: float, say: Say) -> DemoResult:
    """Serve the simulator with the sandbox in it and Sluice against it, push upstream, and wait until
    Sluice rests (or `timeout_s` passes); then read back what it did."""
    github_sim, rig = load_simulator()
    with _tier_python():
        return asyncio.run(_loop(github_sim, rig, sandbox, root, database_url, timeout_s, say))


@contextlib.contextmanager
def _tier_python() -> Any:
    """The sandbox's tier commands run `python3`: make it this interpreter, as `ci/validate.sh` does."""
    before = os.environ.get("PATH", "")
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), before])
    try:
        yield
    finally:
        os.environ["PATH"] = before


@dataclass
class Env:
    sim: Any
    store: Store
    bot_url: str
    secret: str
    say: Say
    database: str
    seen: dict[tuple[int, str], str] = field(default_factory=dict)  # (PR, what) -> what was last told
    approved: set[tuple[int, str]] = field(default_factory=set)
    approvals: list[dict[str, Any]] = field(default_factory=list)


async def _loop(
    github_sim: ModuleType,
    rig: ModuleType,
    sandbox: Sandbox,
    root: Path,
    database_url: str,
    timeout_s: float,
    say: Say,
) -> DemoResult:
    started = time.monotonic()
    sim = github_sim.GitHubSim(root=root / "github")
    async with _served(sim.app) as sim_url:
        say(f"GitHub simulator on {sim_url}: upstream {UPSTREAM}, fork {FORK} (its repositories: {sim.root})")
        _seed(sim, sandbox, sim_url, say)
        store = Store.open(database_url)
        try:
            secret = secrets.token_hex(16)
            settings = _settings(sim, sim_url, secret=secret, data_dir=root / "sluice-data")
            async with _served(create_app(settings, store=store, background=True)) as bot_url:
                env = Env(sim, store, bot_url, secret, say, database_url)
                sim.hook(f"{bot_url}/webhook", secret)
                say(
                    f"Sluice serving on {bot_url} ({settings.workers} workers, tiers run here: local backend)"
                )
                await _install(env, rig)
                deadline = started + timeout_s
                pending = await _until_rest(env, deadline)
                if not pending:
                    pending = await _push(env, sandbox, deadline)
                result = _read_back(env, sandbox, pending, started, sim_url)
        finally:
            store.close()
    return result


async def _push(env: Env, sandbox: Sandbox, deadline: float) -> list[str]:
    """Upstream's commits since the fork point, pushed by a person; then wait for Sluice to rest."""
    head = str(sandbox.manifest.upstream_head)
    count = env.sim.git(UPSTREAM, "rev-list", "--count", "--first-parent", head, "--not", "main")
    env.say(f"upstream: @{UPSTREAM_DEV} pushes {count} commits to {UPSTREAM} main (a push webhook)")
    env.sim.push(UPSTREAM, "main", head, pusher=UPSTREAM_DEV)
    culprits = [str(c) for c in sandbox.manifest.culprits]
    return await _until_rest(env, deadline, told=lambda: _culprits_handled(env, culprits))


def _culprits_handled(env: Env, culprits: Sequence[str]) -> bool:
    """Whether the story is told: each planted culprit blamed by a bisection whose PR then merged without it
    (the bundle rebuilt). Sluice goes on with the rest of the stream, every merge re-running the tiers of the
    PRs stacked above it; the demo does not wait for all of that."""
    records = Bisections(env.store).for_fork(FORK)
    for culprit in culprits:
        blamed = [r for r in records if any(culprit in c.shas for c in r.state.culprits)]
        if not any(_merged(env, r.pull, r.ingestion) for r in blamed):
            return False
    return bool(culprits)


def _merged(env: Env, number: int, ingestion: str) -> bool:
    """PR `number` merged and Sluice done with it: the rollback tag set and the audit record closed."""
    issue = env.sim.issues.get(FORK, {}).get(number)
    if issue is None or not issue.merged:
        return False
    audits = GateStore(env.store).find_audits(ingestion)
    return any(record.state is AuditState.CLOSED and record.pr_number == number for _, record in audits)


@contextlib.asynccontextmanager
async def _served(app: web.Application) -> AsyncIterator[str]:
    """`app` served on a free loopback port; its base URL."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def _seed(sim: Any, sandbox: Sandbox, sim_url: str, say: Say) -> None:
    """Upstream at the fork point (its later commits arrive by a push), the fork as the sandbox has it, and
    the maintainers' commit that points the fork's `.github/sluice.yml` at the simulator's upstream."""
    sim.create_repo(UPSTREAM)
    sim.git(
        UPSTREAM, "fetch", "--quiet", "--no-tags", str(sandbox.upstream), "+refs/heads/main:refs/heads/main"
    )
    sim.git(UPSTREAM, "update-ref", "refs/heads/main", sandbox.manifest.fork_point)
    sim.create_repo(FORK)
    trunk = f"+refs/heads/{sandbox.fork_ref}:refs/heads/main"
    sim.git(FORK, "fetch", "--quiet", "--no-tags", str(sandbox.fork), trunk)
    config = demo_config(sim.git(FORK, "show", "main:.github/sluice.yml"), f"{sim_url}/{UPSTREAM}.git")
    files = {".github/sluice.yml": config, ".github/CODEOWNERS": f"* @{MAINTAINERS}\n"}
    message = "Sluice: track the upstream in the simulator, merge what passes the gate"
    sim.commit(FORK, "main", files, message=message, pusher=MAINTAINER)
    sim.add_team_member(MAINTAINERS, MAINTAINER)
    sim.set_permission(FORK, MAINTAINER, "maintain")
    say(
        f"fork trunk: @{MAINTAINER} commits .github/sluice.yml (upstream: the simulator's {UPSTREAM}; "
        f"gate: {json.dumps(DEMO_GATE)}) and CODEOWNERS (@{MAINTAINERS})"
    )


def demo_config(committed: str, upstream_url: str) -> str:
    """The sandbox fork's own `.github/sluice.yml` with the simulator's upstream and the demo's gate."""
    values = yaml.safe_load(committed) or {}
    values["upstream"] = {"url": upstream_url, "branch": "main"}
    values["gate"] = {**values.get("gate", {}), **DEMO_GATE}
    text = yaml.safe_dump(values, sort_keys=False)
    parse_config(text, trusted_url_prefixes=("http://",))  # the demo's own: a ConfigError is a bug
    return text


def _settings(sim: Any, sim_url: str, *, secret: str, data_dir: Path) -> Settings:
    return Settings(
        app_id=sim.app_id,
        private_key=SecretStr(sim.private_key_pem or ""),
        private_key_file=None,
        webhook_secret=SecretStr(secret),
        github_url=sim_url,
        git_url=None,
        data_dir=data_dir,
        workers=max(2, min(4, os.cpu_count() or 1)),
        poll_interval=0,
        redelivery_interval=0,
        resync_interval=0,
        lease_seconds=120,
        tier_backend="local",
        allow_private_upstreams=True,  # the simulator listens on loopback, which Sluice refuses by default
    )


async def _install(env: Env, rig: ModuleType) -> None:
    """The App installed on the fork and on upstream (whose pushes then reach Sluice as webhooks)."""
    for repo in (FORK, UPSTREAM):
        payload = rig.installation_created(env.sim, repo, env.sim.install(repo))
        status = await env.sim.deliver(f"{env.bot_url}/webhook", "installation", payload, secret=env.secret)
        if status != 202:
            raise RuntimeError(f"Sluice answered the installation of {repo} with HTTP {status}")
    env.say(f"the App is installed on {FORK} and {UPSTREAM}; upstream main is at the fork point")


async def _until_rest(env: Env, deadline: float, *, told: Callable[[], bool] | None = None) -> list[str]:
    """Wait until nothing is in flight (no job, no dispatched tier run, no webhook on its way, no PR the demo
    can still move), or until `told` says the demo has shown what it came to show; telling what happens
    meanwhile. What was still in flight when `deadline` passed."""
    quiet = 0
    while time.monotonic() < deadline:
        await env.sim.drain_hooks()
        _tell(env)
        if told is not None and told():
            # Sluice would go on with the rest of the stream, each merge re-running the tiers of the PRs
            # stacked above it: the demo pauses it as `/pause` would (nothing more merges or opens) and waits
            # for what is in flight, so the figures at the end are those of the fork as it is left.
            reason = "the demo has shown its story: the culprit bisected into a chain, its bundle merged"
            at = dt.datetime.now(dt.UTC)
            await asyncio.to_thread(GateStore(env.store).pause, FORK, by=MAINTAINER, reason=reason, at=at)
            env.say(
                "the planted culprit is found and chained, and its bundle merged without it: @"
                f"{MAINTAINER} pauses Sluice (as /pause does) and the demo waits for what is in flight"
            )
            told, quiet = None, 0
        busy = _in_flight(env)
        if not busy and await _approve(env):
            busy = ["an approval"]
        quiet = 0 if busy else quiet + 1
        if quiet >= QUIET_POLLS:
            return []
        await asyncio.sleep(POLL_S)
    return _in_flight(env) or ["nothing in flight, but the time ran out before Sluice was seen at rest"]


def _in_flight(env: Env) -> list[str]:
    busy = [f"{n} {state} {kind} job{'' if n == 1 else 's'}" for kind, state, n in _live_jobs(env.store)]
    return busy + [
        f"#{pull} {level.upper()} dispatched on {head[:10]}" for pull, level, head in _dispatched(env.store)
    ]


def _dispatched(store: Store) -> list[tuple[int, str, str]]:
    """(PR, tier, head) of the fork's tier runs still waiting for a result, whatever they validate."""
    waiting = (tier_runs.c.fork == FORK) & (tier_runs.c.state == RunState.DISPATCHED.value)
    query = select(tier_runs.c.pull, tier_runs.c.level, tier_runs.c.head_sha).where(waiting)
    with store._engine.connect() as conn:
        return sorted((int(p), str(lv), str(h)) for p, lv, h in conn.execute(query))


def _live_jobs(store: Store) -> list[tuple[str, str, int]]:
    """(kind, state, count) of the jobs queued or running (a queued one may wait for its retry)."""
    live = jobs.c.state.in_([JobState.QUEUED.value, JobState.RUNNING.value])
    query = select(jobs.c.kind, jobs.c.state, func.count()).where(live).group_by(jobs.c.kind, jobs.c.state)
    with store._engine.connect() as conn:
        return sorted((str(k), str(s), int(n)) for k, s, n in conn.execute(query))


async def _approve(env: Env) -> bool:
    """Act as the fork's code owner where an open PR's gate waits for one's approval on its head."""
    acted, heads = False, _heads(env.sim)
    for pull in _pulls(env.sim):
        head = _head(pull, heads)
        gate = _checks(env.sim, head).get(CheckName.GATE.value)
        if pull.state != "open" or gate is None or gate.get("conclusion") is not None:
            continue
        wanted = [m for m in gate_missing(gate) if f"@{MAINTAINERS}" in m["who"]]
        if not wanted or (pull.number, head) in env.approved:
            continue
        env.approved.add((pull.number, head))
        env.sim.review(FORK, pull.number, user=MAINTAINER, state="APPROVED", body="Reviewed the resolutions.")
        env.approvals.append(
            {"pr": pull.number, "head": head, "by": MAINTAINER, "for": [m["what"] for m in wanted]}
        )
        env.say(f"#{pull.number}: the gate waits for a code owner; the demo approves as @{MAINTAINER}")
        acted = True
    return acted


def _tell(env: Env) -> None:
    """One progress line per change a newcomer would notice: a PR opened, a tier concluded, a merge."""
    heads = _heads(env.sim)
    for pull in _pulls(env.sim):
        unit = pull.head_ref.removeprefix(BRANCH_PREFIX)
        head = _head(pull, heads)
        news = {"pr": f"#{pull.number} opened for {unit}: {pull.title}"}
        for name, run in _checks(env.sim, head).items():
            if run.get("conclusion") not in (None, "skipped"):
                news[name] = f"#{pull.number} {_title(run)} [{run['conclusion']}, head {head[:10]}]"
        if pull.merged:
            news["merged"] = f"#{pull.number} merged into main as {str(pull.merge_commit_sha)[:10]}"
        elif pull.state == "closed":
            news["closed"] = f"#{pull.number} closed ({unit} left the plan)"
        for what, line in news.items():
            if env.seen.get((pull.number, what)) != line:
                env.seen[(pull.number, what)] = line
                env.say(line)


# ------------------------------------------------------------------ the simulator's view


def _pulls(sim: Any) -> list[Any]:
    """The fork's ingestion PRs, oldest first."""
    issues = sorted(sim.issues[FORK].values(), key=lambda i: i.number)
    return [i for i in issues if i.is_pull and i.head_ref.startswith(BRANCH_PREFIX)]


def _heads(sim: Any) -> dict[int, str]:
    """Each PR's `refs/pull/N/head`, which GitHub keeps at the head of an open PR (one git call)."""
    refs = sim.git(FORK, "for-each-ref", "--format=%(objectname) %(refname)", "refs/pull/")
    found = (line.split(" ", 1) for line in refs.splitlines())
    return {int(ref.split("/")[2]): sha for sha, ref in found if ref.endswith("/head")}


def _head(pull: Any, heads: Mapping[int, str]) -> str:
    """The PR's head: its branch's while open, the one GitHub froze at the merge or close after."""
    if pull.state != "open" and pull.frozen_head_sha:
        return str(pull.frozen_head_sha)
    return heads[pull.number]


def _checks(sim: Any, sha: str) -> dict[str, dict[str, Any]]:
    latest: dict[str, dict[str, Any]] = {}
    for run in sim.check_runs[FORK]:
        if run["head_sha"] == sha and run.get("app", {}).get("id", sim.app_id) == sim.app_id:
            latest[run["name"]] = run
    return latest


def _title(run: Mapping[str, Any]) -> str:
    return str((run.get("output") or {}).get("title") or run.get("conclusion") or run.get("status"))


ROW = re.compile(r"(?<!\\)\|")


def gate_missing(gate: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The rows of the `sluice/gate` summary's "Missing" table: what, who can provide it, how."""
    summary = str((gate.get("output") or {}).get("summary") or "")
    rows, inside = [], False
    for line in summary.splitlines():
        if line.startswith("### "):
            inside = line == "### Missing"
            continue
        cells = [c.strip().replace("\\|", "|") for c in ROW.split(line)[1:-1]]
        if inside and len(cells) == 3 and cells[0] not in ("what", "---"):
            who = [] if cells[1] == "—" else [w.strip() for w in cells[1].split(",")]
            rows.append({"what": cells[0], "who": who, "how": cells[2]})
    return rows


# ------------------------------------------------------------------ reading it all back


def _read_back(env: Env, sandbox: Sandbox, pending: list[str], started: float, sim_url: str) -> DemoResult:
    records = Registry(env.store).ingestions(FORK)
    pulls = {p.number: p for p in _pulls(env.sim)}
    ingestions = [_ingestion(env, r, pulls.get(r.pr_number) if r.pr_number else None) for r in records]
    ingestions.sort(key=lambda i: (i.pr is None, i.pr or 0, i.id))
    by_branch = {p.head_ref: p.number for p in pulls.values() if p.state == "open"}
    for ingestion in ingestions:
        ingestion.stacked_on = by_branch.get(ingestion.base or "")
    repos = str(env.sim.root / "repos")
    where = {
        "url": sim_url,
        "repositories": repos,
        "fork": FORK,
        "upstream": UPSTREAM,
        "database": env.database,
    }
    return DemoResult(
        ingestions=ingestions,
        bisections=read_bisections(env.store, FORK),
        metrics=_metrics(env.store, str(sandbox.manifest.upstream_head)),
        culprits=list(sandbox.manifest.culprits),
        culprits_now=culprits_now(env.store.latest_plan(FORK), sandbox.manifest.culprits, records),
        approvals=env.approvals,
        pending=pending,
        seconds=time.monotonic() - started,
        where=where,
    )


def culprits_now(
    plan: Plan | None, culprits: Sequence[str], records: Sequence[IngestionRecord]
) -> list[dict[str, Any]]:
    """Where each culprit is in `plan`: the unit that holds it, why, that unit's place in the order the units
    go in and its open PR; `unit` None for a culprit no unit holds (ingested, or held out)."""
    units = units_of(plan) if plan is not None else []
    prs = {r.id: r.pr_number for r in records if r.state == "open"}
    found: list[dict[str, Any]] = []
    for culprit in culprits:
        where = [(n, u) for n, u in enumerate(units, 1) if any(c.sha == culprit for c in u.commits)]
        place, unit = where[0] if where else (None, None)
        found.append(
            {
                "culprit": culprit,
                "unit": unit.id if unit else None,
                "kind": unit.kind.value if unit else None,
                "why": unit.chain.why.get(culprit) if unit and unit.chain else None,
                "place": place,
                "units": len(units),
                "pr": prs.get(unit.id) if unit else None,
            }
        )
    return found


def _ingestion(env: Env, record: Any, pull: Any) -> Ingestion:
    head = _head(pull, _heads(env.sim)) if pull is not None else record.head
    state = (
        "merged" if pull is not None and pull.merged else (pull.state if pull is not None else record.state)
    )
    found = Ingestion(
        id=record.id,
        kind=record.kind,
        pr=record.pr_number,
        state=state,
        commits=record.commits,
        upstream=(record.upstream_first, record.upstream_last),
        head=head,
        needs_human=record.needs_human,
        base=pull.base_ref if pull is not None else None,
    )
    if pull is None or head is None:
        return found
    checks = _checks(env.sim, head)
    runs = TierRuns(env.store).for_pull(FORK, pull.number)
    for tier in TIERS:
        run = checks.get(tier.value)
        key = tier.name
        found.tiers[key] = {
            "conclusion": run.get("conclusion") if run else None,
            "status": run.get("status") if run else "not created",
            "title": _title(run) if run else None,
            "report": _report([r for r in runs if r.head_sha == head and r.level.name == key]),
        }
    gate = checks.get(CheckName.GATE.value)
    found.gate = {
        "conclusion": gate.get("conclusion") if gate else None,
        "title": _title(gate) if gate else None,
        "missing": gate_missing(gate) if gate else [],
    }
    _audit(env.store, found)
    return found


def _report(runs: Sequence[TierRun]) -> dict[str, Any] | None:
    """The latest attempt's tier report, in brief: suites with their counts, the first failing tests."""
    if not runs:
        return None
    run = max(runs, key=lambda r: r.attempt)
    brief: dict[str, Any] = {
        "tier_run": run.id,
        "attempt": run.attempt,
        "state": run.state.value,
        "verdict": run.verdict.value if run.verdict else None,
        "detail": run.detail,
    }
    if run.report:
        report = json.loads(run.report)
        brief["suites"] = [
            {k: s.get(k) for k in ("name", "outcome", "executed", "passed", "failed", "errors")}
            for s in report.get("suites", ())
        ]
        failing = [t for t in report.get("tests", ()) if t.get("outcome") in ("failed", "error")]
        brief["failures"] = [
            {"suite": t["suite"], "test": t["name"], "error": _error_line(t.get("message") or "")}
            | {"message": (t.get("message") or "").strip()[-600:]}
            for t in failing[:5]
        ]
        brief["environment"] = {
            k: report.get("environment", {}).get(k) for k in ("interpreter", "context_hash")
        }
    return brief


def _error_line(message: str) -> str:
    """The line of a failure message that says what went wrong: pytest's last `E ` line, else the last."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    errors = [line.removeprefix("E").strip() for line in lines if line.startswith("E ")]
    return (errors or lines or [""])[-1][:300]


def _audit(store: Store, found: Ingestion) -> None:
    numbered = [(n, r) for n, r in GateStore(store).find_audits(found.id) if r.pr_number == found.pr]
    if not numbered:
        return
    number, record = numbered[-1]
    found.merge_sha, found.rollback_tag = record.merge_sha, record.rollback_tag
    found.upstream_commits = tuple(c.upstream for c in record.commits)
    found.audit = {
        "number": number,
        "state": record.state.value,
        "waived_tiers": list(record.waived_tiers),
        "rollback_sha": record.rollback_sha,
        "conflicts": len(record.conflicts),
        "approvals": [a.login for a in record.approvals],
    }


def _metrics(store: Store, upstream_head: str) -> dict[str, Any]:
    """Days Behind Upstream and Backlog Commits now, and right after the upstream push (before any merge)."""
    history = LagHistory(store).history(FORK)
    after_push = [p for p in history if p.upstream_head == upstream_head]
    if not after_push:
        return {"days_behind_upstream": None, "backlog_commits": None, "before": None}
    first, last = after_push[0], after_push[-1]
    return {
        "days_behind_upstream": last.days_behind,
        "backlog_commits": last.backlog_commits,
        "pending_commits": last.pending_commits,
        "ingestion_tip": last.ingestion_tip,
        "upstream_head": last.upstream_head,
        "before": {
            "days_behind_upstream": first.days_behind,
            "backlog_commits": first.backlog_commits,
            "pending_commits": first.pending_commits,
            "ingestion_tip": first.ingestion_tip,
        },
    }


# ------------------------------------------------------------------ the summary a newcomer reads

STATE_WORDS = {
    "merged": "merged",
    "open": "open, not merged",
    "closed": "closed without merging",
    "blocked": "waits for a person (tracking issue)",
}


def summary_text(result: DemoResult) -> str:
    """What happened, in words: each ingestion, the culprit, the bisections, Days Behind before and after;
    then where to look, unless the run's directory or its store is gone at exit (`result.kept`)."""
    merged = [i for i in result.ingestions if i.state == "merged"]
    prs = len([i for i in result.ingestions if i.pr])
    ran = (
        f"Sluice did not come to rest within the demo's time-out ({result.seconds:.0f} s)"
        if result.pending
        else f"Sluice ran its whole loop against the GitHub simulator in {result.seconds:.0f} s"
    )
    lines = [
        f"{ran}: one upstream push, {prs} ingestion PRs, {len(merged)} merged.",
        "Each ingestion PR builds on the one before it; one merges once it is based on main and its gate",
        "(`sluice/gate`: L1 and L2 passed, code owners' approvals, no hold) is open.",
        "",
    ]
    told: dict[str, int] = {}  # a failure already shown -> the PR it was shown for
    for ingestion in result.ingestions:
        lines += _ingestion_lines(ingestion, result.culprits, told)
    lines += ["", *_culprit_lines(result), "", *_metric_lines(result.metrics)]
    if result.approvals:
        approved = ", ".join(f"#{a['pr']}" for a in result.approvals)
        lines.append(f"The demo approved {approved} as @{MAINTAINER}, a code owner (@{MAINTAINERS}).")
    if result.pending:
        lines += ["", "Timed out with this still in flight:", *(f"  {p}" for p in result.pending)]
    return "\n".join([*lines, "", *_where_lines(result)]) + "\n"


def _where_lines(result: DemoResult) -> list[str]:
    where = result.where
    if result.kept:
        lines = [
            f"The simulator's repositories: {where['repositories']} (fork trunk: {FORK}.git, branch main)."
        ]
    else:
        lines = [
            "The sandbox and the simulator's repositories were in a temporary directory, removed at exit:",
            "`sluice demo --dir DIR` keeps them, and the store, to look at.",
        ]
    example = next((i for i in result.ingestions if i.audit), None)
    if example is not None and result.store_kept:
        lines.append(f"An audit record: sluice audit {example.id} --database {where.get('database')}")
    return lines


def _ingestion_lines(i: Ingestion, culprits: Sequence[str], told: dict[str, int]) -> list[str]:
    pr = f"#{i.pr}" if i.pr else "no PR"
    noun = "commit" if i.commits == 1 else "commits"
    state = STATE_WORDS.get(i.state, i.state)
    if i.stacked_on is not None:
        state += f", builds on #{i.stacked_on}"
    if _holds_culprit(i, culprits):
        state += "; holds the planted culprit"
    lines = [f"{pr} {i.kind} {i.id} ({i.commits} upstream {noun}): {state}"]
    tiers = [_tier_word(name, t) for name, t in i.tiers.items() if t["status"] != "not created"]
    if tiers:
        lines.append("    tiers: " + ", ".join(tiers))
    for name, tier in i.tiers.items():
        failures = (tier.get("report") or {}).get("failures") or []
        if tier["conclusion"] != "failure" or not failures:
            continue
        error = f"{failures[0]['test']}: {_without_paths(failures[0]['error'])[:150]}"
        if error in told:
            lines.append(f"    {name} failed as #{told[error]} did (it holds #{told[error]}'s commits)")
        else:
            told[error] = i.pr or 0
            lines.append(f"    {name} failed: {error}")
    if i.gate:
        lines.append(f"    gate: {i.gate['title'] or 'not evaluated'}")
    if i.merge_sha:
        audit = i.audit["number"] if i.audit else "—"
        lines.append(f"    merged as {i.merge_sha[:10]}; rollback tag {i.rollback_tag}; audit record {audit}")
    if i.needs_human:
        lines.append(f"    stopped at upstream {i.needs_human[:10]}: a person resolves it")
    return lines


PATH_IN_PARENS = re.compile(r"\s*\((?:/|[A-Za-z]:\\)[^)]*\)")


def _without_paths(text: str) -> str:
    """A message without the `(/tmp/…/file.py)` a tier's scratch directory leaves in it."""
    return PATH_IN_PARENS.sub("", text)


def _tier_word(name: str, tier: Mapping[str, Any]) -> str:
    if tier["conclusion"] is not None:
        return f"{name} {tier['conclusion']}"
    if name == CheckName.L3.name and tier["status"] == "queued":
        return f"{name} not requested (runs on request)"
    return f"{name} {tier['status']}"


def _holds_culprit(i: Ingestion, culprits: Sequence[str]) -> bool:
    return any(c in i.upstream_commits for c in culprits)


def _culprit_lines(result: DemoResult) -> list[str]:
    lines = [f"Planted culprit: {c[:10]} (breaks L1's TLX tests)" for c in result.culprits]
    for b in result.bisections:
        said = f"Bisection of {b['ingestion']} (#{b['pr']}) on {b['tier']}, {b['tier_runs']} tier runs: "
        if b["culprit"] is not None:
            dependents = f", with {len(b['dependents'])} commits that need it" if b["dependents"] else ""
            said += f"culprit {str(b['culprit'])[:10]}{dependents}, moved to a risky chain; the rest goes on"
        elif b["status"] == "superseded":
            said += "superseded: the PR's head moved on (rebuilt on main), and a bisection starts there again"
        else:
            said += f"{b['status']}, no culprit named (a person looks)"
        lines.append(said)
    if not result.bisections:
        lines.append("No bisection ran: no ingestion PR failed a tier for a real reason on trunk's base.")
    return lines + [_culprit_now_line(now) for now in result.culprits_now]


def _culprit_now_line(now: Mapping[str, Any]) -> str:
    if now["unit"] is None:
        return f"Now: {str(now['culprit'])[:10]} is in no unit of the fork's plan (ingested, or held out)."
    what = "risky chain" if now["kind"] == UnitKind.CHAIN.value else "low-risk bundle"
    why = f" ({now['why']})" if now["why"] else ""
    if now["pr"] is not None:
        where = f"its PR is #{now['pr']}"
    elif now["place"] > MAX_OPEN_UNITS:
        where = f"its PR opens as those before it merge (Sluice keeps {MAX_OPEN_UNITS} ingestion PRs open)"
    else:
        where = "its PR opens at the next ingestion run"
    return (
        f"Now: {str(now['culprit'])[:10]} is in {what} {now['unit']}{why}, unit {now['place']} of "
        f"{now['units']} in the plan's order; {where}."
    )


def _metric_lines(metrics: Mapping[str, Any]) -> list[str]:
    before = metrics.get("before")
    if before is None:
        return ["Days Behind Upstream: not recorded (no ingestion ran after the push)."]
    return [
        f"Days Behind Upstream: {_days(before['days_behind_upstream'])} after the push, "
        f"{_days(metrics['days_behind_upstream'])} at the end.",
        f"Backlog Commits: {before['backlog_commits']} → {metrics['backlog_commits']}; "
        f"pending upstream commits: {before['pending_commits']} → {metrics['pending_commits']}.",
        *_backlog_note(before["backlog_commits"], metrics["backlog_commits"]),
    ]


def _backlog_note(before: int, after: int) -> list[str]:
    if after <= before:
        return []
    return [
        "(Backlog Commits are the holes behind the ingestion tip: a merge moves the tip past commits that "
        "still wait in other PRs.)"
    ]


def _days(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"
