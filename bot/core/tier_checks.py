"""A tier's check run as data: conclusion, summary, annotations and the Re-run button, in GitHub's limits."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.core.limits import fit_for_github
from bot.core.markdown import cell
from bot.core.render import plural
from bot.core.tiers import FailedTest, Level, ReportFacts, TierRun, Triage, Verdict

LOG_LINES = 40
LOG_LINE_CHARS = 500  # a log line longer than this is cut, with an ellipsis
LOG_CHARS = 12_000  # the log tail's most characters: the oldest of its lines go first
LISTED = 30  # failing tests (and broken-trunk ones) listed by name; the report artifact has them all
_SIGNOFF = (
    "**Metrics regressed beyond noise** (the benchmarks above). Where the gate requires L3, an owner of "
    "each regressed kernel's area accepts them with `/signoff l3` on this head; or push a fix."
)
# in all, one per location (GitHub takes 50 a request; thousands of failures at one fixture's line, each a
# request of its own, would spend the rate limit on one check run): the rest are counted in the summary
MAX_ANNOTATIONS = 50
RERUN = "rerun"  # the requested action's identifier (GitHub: at most 20 characters)
RUN_L3 = "run-l3"
ACTIONS_RERUN = ({"label": "Re-run", "description": "Run this tier again on this head", "identifier": RERUN},)
ACTION_RUN_L3 = {"label": "Run L3", "description": "Run L3 on this head", "identifier": RUN_L3}
ENVIRONMENT_KEYS = (
    "gpu_model",
    "gpu_count",
    "driver",
    "cuda",
    "triton",
    "torch",
    "python",
    "os",
    "interpreter",
)

CONCLUSIONS: Mapping[Verdict, str] = {
    Verdict.PASSED: "success",
    Verdict.FAILED: "failure",
    Verdict.INFRA: "failure",
    Verdict.BROKEN_TRUNK: "failure",
}


@dataclass(frozen=True)
class CheckUpdate:
    """One check-run update: `status` and `conclusion` (None while it runs), the output, the buttons."""

    status: str
    conclusion: str | None
    title: str
    summary: str
    annotations: tuple[dict[str, Any], ...] = ()
    actions: tuple[dict[str, str], ...] = ACTIONS_RERUN

    def requests(self) -> list[dict[str, Any]]:
        """The PATCH bodies: one, with everything (at most MAX_ANNOTATIONS annotations, GitHub's limit a
        request)."""
        output = {"title": self.title, "summary": fit_for_github(self.summary, what="a check run's summary")}
        annotated = {"annotations": list(self.annotations[:MAX_ANNOTATIONS])} if self.annotations else {}
        first: dict[str, Any] = {
            "status": self.status,
            "output": output | annotated,
            "actions": list(self.actions),
        }
        if self.conclusion is not None:
            first["conclusion"] = self.conclusion
        return [first]


@dataclass(frozen=True)
class Shown:
    """Everything the summary of a completed run shows besides the run itself."""

    facts: ReportFacts | None
    triage: Triage
    owner: str | None = None
    regressions: str | None = None  # runners.compare's markdown against the baseline report
    baseline_sha: str | None = None
    retrying: bool = False  # an infrastructure failure that is dispatched again
    l3_button: bool = False
    log_tail: str = ""  # the run's log, shown when it left no usable report
    regressed: int = 0  # L3's metrics regressed beyond noise against the baseline (tests may still pass)
    extra: Sequence[str] = field(default_factory=tuple)


def dispatched(level: Level, *, attempt: int, reason: str, url: str | None = None) -> CheckUpdate:
    where = f" ([workflow run]({url}))" if url else ""
    summary = f"{level.name} dispatched{where}: {reason}." + (f" Attempt {attempt}." if attempt > 1 else "")
    return CheckUpdate("in_progress", None, f"{level.name}: running (attempt {attempt})", summary)


def blocked(level: Level, *, reason: str) -> CheckUpdate:
    summary = (
        f"{level.name} does not start on this head: {reason}. A tier never starts when the one below failed."
    )
    return CheckUpdate("completed", "skipped", f"{level.name}: not started ({reason})", summary, actions=())


def awaiting(level: Level, *, reason: str) -> CheckUpdate:
    """A tier that waits for a maintainer's go (a PR from outside the fork): its button starts it."""
    summary = (
        f"{level.name} has not started on this head: {reason}. Someone with write access to the repository "
        f"starts it with **Run {level.name}** above, once they have read the change; a new push needs it "
        "again."
    )
    button = {"label": f"Run {level.name}", "description": "Run it on this head", "identifier": RERUN}
    title = f"{level.name}: waits for a maintainer (PR from outside the fork)"
    return CheckUpdate("completed", "action_required", title, summary, actions=(button,))


def not_run_here(level: Level, *, short: str, reason: str) -> CheckUpdate:
    """A tier this deployment does not run on this PR at all (no button starts it: a maintainer's way is
    another deployment, or the change on a branch of the fork itself)."""
    summary = f"{level.name} does not run on this PR: {reason}."
    return CheckUpdate(
        "completed", "action_required", f"{level.name}: not run ({short})", summary, actions=()
    )


def refused(level: Level, *, status: int, message: str, owner: str | None) -> CheckUpdate:
    summary = (
        f"GitHub refused to start {level.name}'s workflow (HTTP {status}): {message}\n\n"
        "It is not retried: a 404 means the fork has no such workflow file on its trunk (copy it from "
        "Sluice's `deploy/workflows/`), a 422 that the workflow does not take these inputs. Fix it, then "
        "press Re-run." + _owner_line(owner)
    )
    # action_required, not failure: nothing ran, so nothing failed (the gate stays closed, the safety throttle
    # does not count it); an operator must act.
    return CheckUpdate(
        "completed", "action_required", f"{level.name}: dispatch refused (HTTP {status})", summary
    )


def timed_out(run: TierRun, *, minutes: int, owner: str | None) -> CheckUpdate:
    summary = (
        f"{run.level.name} (attempt {run.attempt}) sent no result within its {minutes}-minute timeout; "
        "Sluice stopped waiting for it. A result that still arrives is ignored; press Re-run to try again."
        + _owner_line(owner)
    )
    return CheckUpdate("completed", "timed_out", f"{run.level.name}: timed out after {minutes} min", summary)


def stale(level: Level, *, head: str) -> CheckUpdate:
    summary = (
        f"This result is for an earlier head; the PR's head is now `{head[:10]}`, where {level.name} runs."
    )
    return CheckUpdate(
        "completed", "skipped", f"{level.name}: superseded by a newer head", summary, actions=()
    )


def completed(run: TierRun, shown: Shown) -> CheckUpdate:
    """The summary of a finished run: per-suite counts, the environment, regressions, broken trunk, owner."""
    verdict = shown.triage.verdict
    lines = [_headline(run, shown), ""]
    if shown.facts is not None:
        lines += [*_suite_table(shown.facts), "", *_environment(shown.facts), ""]
        lines += _failures(shown.facts.failures, broken=set(shown.triage.broken_trunk))
    elif shown.log_tail.strip():
        tail = _log_tail(shown.log_tail)
        lines += [f"### The run's log (last {plural(len(tail), 'line')})", "", "```text", *tail, "```"]
    if shown.triage.broken_trunk:
        lines += ["", f"### Broken trunk ({plural(len(shown.triage.broken_trunk), 'failure')})", ""]
        lines += ["These fail on fork trunk's latest report too: trunk is broken, not this change.", ""]
        lines += _listed([f"- `{key}`" for key in shown.triage.broken_trunk])
    if shown.regressions:
        against = f" against `{shown.baseline_sha[:10]}`" if shown.baseline_sha else ""
        lines += ["", f"### Benchmarks{against}", "", shown.regressions]
    if shown.regressed and verdict in (Verdict.PASSED, Verdict.BROKEN_TRUNK):
        lines += ["", _SIGNOFF]
    annotations, left_out = _annotations(shown.facts.failures if shown.facts else ())
    if left_out:
        lines += ["", f"_{plural(left_out, 'failure')} not annotated on the diff: {_ANNOTATED}._"]
    lines += [*shown.extra]
    if verdict is not Verdict.PASSED and not shown.retrying:
        lines.append(_owner_line(shown.owner))
    status, conclusion = ("in_progress", None) if shown.retrying else ("completed", CONCLUSIONS[verdict])
    actions = ACTIONS_RERUN + ((ACTION_RUN_L3,) if shown.l3_button else ())
    return CheckUpdate(status, conclusion, _title(run, shown), "\n".join(lines) + "\n", annotations, actions)


def _title(run: TierRun, shown: Shown) -> str:
    verdict, name = shown.triage.verdict, run.level.name
    if shown.retrying:
        return f"{name}: infrastructure failure ({shown.triage.infra}), retrying"
    if verdict is Verdict.PASSED:
        counts = shown.facts.suites if shown.facts else ()
        tests = plural(sum(s.executed for s in counts), "test")
        if shown.regressed:  # its tests passed, but not every metric: the gate may want a signoff
            return (
                f"{name}: tests passed ({tests}), {plural(shown.regressed, 'metric')} regressed beyond noise"
            )
        return f"{name}: passed ({tests})"
    if verdict is Verdict.INFRA:
        return f"{name}: infrastructure failure ({shown.triage.infra}), retries used up"
    if verdict is Verdict.BROKEN_TRUNK:
        return f"{name}: fails as fork trunk does (broken trunk)"
    failed = len(shown.facts.failures) if shown.facts else 0
    return f"{name}: failed" + (f" ({plural(failed, 'test')})" if failed else "")


def _headline(run: TierRun, shown: Shown) -> str:
    attempt = f" (attempt {run.attempt})" if run.attempt > 1 else ""
    triage = shown.triage
    if triage.verdict is Verdict.INFRA:
        what = "retried" if shown.retrying else "not retried again: the retries are used up"
        head = f"**{run.level.name}{attempt}: infrastructure failure**"
        return f"{head} — {triage.reason}. Not a test failure; {what}."
    word = {Verdict.PASSED: "passed", Verdict.FAILED: "failed", Verdict.BROKEN_TRUNK: "failed as trunk does"}
    return f"**{run.level.name}{attempt} {word[triage.verdict]}**: {triage.reason}."


def _log_tail(log: str) -> list[str]:
    """The log's last lines for a code block: each line capped (a minified line can be megabytes), the
    newest kept when they are long, and no line that closes the block early."""
    lines = [_capped(line) for line in log.strip().splitlines()[-LOG_LINES:]]
    while len(lines) > 1 and sum(len(line) + 1 for line in lines) > LOG_CHARS:
        lines.pop(0)
    return [line.replace("`" * 3, "'" * 3) for line in lines]


def _capped(line: str) -> str:
    return line if len(line) <= LOG_LINE_CHARS else line[: LOG_LINE_CHARS - 1] + "…"


def _suite_table(facts: ReportFacts) -> list[str]:
    rows = [
        "| suite | outcome | executed | expected | passed | failed | errors | skipped |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in facts.suites:
        expected = "—" if s.expected is None else str(s.expected)
        counts = f"{s.executed} | {expected} | {s.passed} | {s.failed} | {s.errors} | {s.skipped}"
        rows.append(f"| `{s.name}` | {s.outcome} | {counts} |")
    problems = [f"- `{s.name}`: {_cell(p)}" for s in facts.suites for p in s.problems]
    return rows + (["", *problems] if problems else [])


def _environment(facts: ReportFacts) -> list[str]:
    env = facts.environment
    shown = [f"{key} `{env[key]}`" for key in ENVIRONMENT_KEYS if env.get(key) not in (None, "")]
    if env.get("triton") and env.get("triton_origin"):  # which Triton the suites ran: the commit's own?
        checkout = env["triton_origin"] == "checkout"
        where = "built from the checkout" if checkout else "installed, not built here"
        shown = [f"{item} ({where})" if item.startswith("triton ") else item for item in shown]
    fingerprint = f" (context `{env['context_hash'][:12]}`)" if env.get("context_hash") else ""
    return [f"**Environment**{fingerprint}: " + (", ".join(shown) or "not reported")]


def _failures(failures: Sequence[FailedTest], *, broken: set[str]) -> list[str]:
    new = [f for f in failures if f.key not in broken]
    if not new:
        return []
    lines = [f"### Failing tests ({len(new)})", ""]
    return lines + _listed(
        [f"- `{f.key}`: {_cell(f.message.splitlines()[0] if f.message else '')}" for f in new]
    )


def _listed(rows: Sequence[str]) -> list[str]:
    """The first LISTED rows of a list, then how many more there are."""
    more = len(rows) - LISTED
    return [
        *rows[:LISTED],
        *([f"- … and {more} more (the report artifact lists them all)"] if more > 0 else []),
    ]


_ANNOTATED = f"one annotation per location, at most {MAX_ANNOTATIONS}; the report artifact lists them all"


def _annotations(failures: Sequence[FailedTest]) -> tuple[tuple[dict[str, Any], ...], int]:
    """The annotations of the failures that name a location, the first at each, at most MAX_ANNOTATIONS;
    and how many failures naming a location were left out."""
    found: list[dict[str, Any]] = []
    seen: set[tuple[str, int]] = set()
    left_out = 0
    for failure in failures:
        where = failure.location()
        if where is None:
            continue
        if where in seen or len(found) == MAX_ANNOTATIONS:
            left_out += 1
            continue
        seen.add(where)
        path, line = where
        found.append(
            {
                "path": path,
                "start_line": line,
                "end_line": line,
                "annotation_level": "failure",
                "title": failure.key[:255],
                "message": (failure.message or failure.key)[:4000],
            }
        )
    return tuple(found), left_out


def _owner_line(owner: str | None) -> str:
    if owner is None:
        return "\n\nNo owner is configured for this tier (`tiers.<tier>.owner` in `.github/sluice.yml`)."
    return f"\n\nOwner of this tier: {owner}."


def _cell(text: str) -> str:
    return cell(text)[:300]
