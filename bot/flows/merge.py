"""The gate and the merge of one ingestion PR: gather the facts, ask `bot.core.gate`, publish `sluice/gate`
on the PR's head, count a failure for the safety throttle, and merge with the head pinned when allowed."""

from __future__ import annotations

import enum
import hashlib
import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from bot.core import audit, gate
from bot.core.codeowners import CODEOWNERS_PATHS, CodeOwners, parse_codeowners
from bot.core.config import SluiceConfig, Strategy
from bot.core.emergency import EMERGENCY_PREFIX, emergency_id, is_emergency_pull
from bot.core.errors import MergeRefused, Unavailable
from bot.core.gate import Approval, CheckResult, GateDecision, GateInput, Hold, Pause, Review, Waiver
from bot.core.ingestion import BRANCH_PREFIX, CheckName, stacked
from bot.core.l3_metrics import L3Metrics, Signoff
from bot.core.markdown import plain
from bot.core.permissions import WRITE_ACCESS
from bot.core.tier_checks import CheckUpdate
from bot.core.webhooks import CheckRun, Pull, PullReview
from bot.flows import checks
from bot.ports import Clock, GateForge, GateRecords, SignoffRecords

Db = Callable[..., Awaitable[Any]]  # Context.db: a store call in a worker thread
ROLLBACK_PREFIX = "sluice/rollback/"
SIGNOFF = "signoff-l3"  # an audit record's approval that is an area owner's `/signoff l3`
SHOWN_PROBLEMS = 5  # CODEOWNERS lines the gate's notes name, of those skipped
log = logging.getLogger("sluice.merge")


class Outcome(enum.StrEnum):
    SKIPPED = "skipped"  # not an open ingestion PR of this fork
    WAITING = "waiting"  # the gate is closed
    OPEN = "open"  # the gate passed; policy (or a pause, or the base) leaves the merge to a person
    MERGED = "merged"
    REFUSED = "refused"  # GitHub refused the pinned merge; tried again once something changes


@dataclass(frozen=True)
class Gatekeeper:
    """Everything one fork's gate needs: GitHub, the store (through `db`), the config and the clock."""

    forge: GateForge
    gates: GateRecords
    db: Db
    trunk: str  # fork trunk: the only base an ingestion PR is merged into
    config: SluiceConfig
    clock: Clock
    bot_login: str
    signoffs: SignoffRecords  # L3's regressions per head and the `/signoff l3`s (through `db`)

    @property
    def fork(self) -> str:
        return self.forge.repo


@dataclass(frozen=True)
class Stored:
    """What the store knows of one PR and its fork."""

    waivers: tuple[Waiver, ...]
    approvals: tuple[Approval, ...]
    hold: Hold | None
    record: audit.AuditRecord | None
    paused: Pause | None
    l3: L3Metrics | None = None  # the newest L3 attempt on the head, as compared with its baseline
    signoffs: tuple[Signoff, ...] = ()


@dataclass(frozen=True)
class Facts:
    pull: Pull
    head: str
    checks: Mapping[str, CheckResult]
    runs: Mapping[str, CheckRun]
    stored: Stored
    facts: GateInput


async def evaluate(keeper: Gatekeeper, number: int) -> Outcome:
    """Re-evaluate the gate of PR `number`; merge it when the gate passes and policy allows."""
    pull = await keeper.forge.get_pull(number)
    if not _is_open_ingestion(pull, keeper.fork):
        return Outcome.SKIPPED
    found = await _gather(keeper, pull)
    now = keeper.clock()
    decision = gate.decide(found.facts, config=keeper.config, now=now)
    paused = found.stored.paused
    # An emergency pick is no failed ingestion, and neither is a PR stacked on another ingestion PR: it holds
    # that PR's commits, so one culprit below would count once per PR of the stack.
    if decision.failed and found.facts.emergency is None and not stacked(pull):
        paused = await _count_failure(keeper, number, decision, paused)
    blocker = _merge_blocker(keeper, found, paused) if decision.passed else None
    if decision.passed and blocker is None and _refused_as_is(found):
        log.info("%s #%d: merge refused, nothing changed since: not tried again", keeper.fork, number)
        return Outcome.REFUSED  # the gate's check run still says why
    notes = [blocker] if blocker else []
    await _publish(keeper, found, decision, notes=notes)
    if not decision.passed:
        return Outcome.WAITING
    if blocker is not None:
        return Outcome.OPEN
    return await _merge(keeper, found, decision)


def _is_open_ingestion(pull: Pull, repo: str) -> bool:
    return pull.is_open and is_sluice_pull(pull, repo)


def is_sluice_pull(pull: Pull, repo: str) -> bool:
    """Sluice's own PR: an ingestion's or an emergency pick's branch in the fork itself."""
    return pull.on_branch_of(repo, (BRANCH_PREFIX, EMERGENCY_PREFIX))


def ingestion_id(pull: Pull, *, fork: str) -> str:
    """The id in the PR's branch: `bundle-…`/`chain-…`, or `emergency-<sha10>` for an emergency pick."""
    ref = pull.head.ref
    return emergency_id(ref) if is_emergency_pull(pull, fork=fork) else ref.removeprefix(BRANCH_PREFIX)


def _commit_count(pull: Pull) -> int:
    """How many commits the PR has (GitHub lists at most 250 of them; `GET /pulls/N` counts them all)."""
    if pull.commits is None:
        raise Unavailable(
            f"GitHub's answer for #{pull.number} does not count its commits",
            "nothing to do: the job is retried",
        )
    return pull.commits


async def _gather(keeper: Gatekeeper, pull: Pull) -> Facts:
    number, head = pull.number, pull.head.sha
    runs = await keeper.forge.check_runs(head)
    checks = {name: _check(run) for name, run in runs.items()}
    reviews = [r for r in map(_review, await keeper.forge.pull_reviews(number)) if r is not None]
    stored: Stored = await keeper.db(_load, keeper, number, head)
    given = gate.standing_approvals(reviews, stored.approvals, bot_login=keeper.bot_login)
    approvals, no_access = await _with_write_access(keeper, given, head)
    resolutions = stored.record.resolutions() if stored.record is not None else ()
    codeowners = await read_codeowners(keeper)
    emergency = (
        await keeper.forge.pull_files(number) if is_emergency_pull(pull, fork=keeper.forge.repo) else None
    )
    teams = await _teams(keeper, resolutions, codeowners, approvals, head, emergency or (), stored)
    facts = GateInput(
        head_sha=head,
        checks=checks,
        waivers=stored.waivers,
        resolutions=resolutions,
        approvals=approvals,
        hold=stored.hold,
        codeowners=codeowners,
        teams=teams,
        emergency=emergency,
        no_access=no_access,
        l3=stored.l3,
        signoffs=stored.signoffs,
    )
    return Facts(pull, head, checks, runs, stored, facts)


async def _with_write_access(
    keeper: Gatekeeper, approvals: tuple[Approval, ...], head: str
) -> tuple[tuple[Approval, ...], tuple[str, ...]]:
    """The approvals whose approver has write, maintain or admin access to the fork now, as GitHub's
    collaborator-permission API says (a code owner whose access was taken away, or a team member without it,
    approves nothing), and the logins of the current head's approvers left out. Only the current head's
    approvers are asked: the others count for nothing anyway."""
    logins = sorted({a.login.lower(): a.login for a in approvals if a.head_sha == head}.values())
    allowed = {
        login.lower() for login in logins if await keeper.forge.permission_level(login) in WRITE_ACCESS
    }
    kept = tuple(a for a in approvals if a.head_sha != head or a.login.lower() in allowed)
    return kept, tuple(login for login in logins if login.lower() not in allowed)


def _load(keeper: Gatekeeper, number: int, head: str) -> Stored:
    gates, fork = keeper.gates, keeper.fork
    return Stored(
        waivers=tuple(gates.waivers(fork, number)),
        approvals=tuple(gates.approvals(fork, number)),
        hold=gates.hold(fork, number),
        record=gates.audit(fork, number),
        paused=gates.paused(fork),
        l3=keeper.signoffs.l3_metrics(fork, number, head_sha=head),
        signoffs=tuple(keeper.signoffs.signoffs(fork, number)),
    )


def _check(run: CheckRun) -> CheckResult:
    return CheckResult(run.name, run.head_sha, run.status or "queued", run.conclusion, run.url)


def _review(review: PullReview) -> Review | None:
    """A submitted review, as the gate reads it; None for a pending one or a deleted account's."""
    if review.submitted_at is None or review.user is None:
        return None
    return Review(review.user.login, review.state, review.commit_id or "", review.submitted_at)


async def read_codeowners(keeper: Gatekeeper) -> CodeOwners:
    """CODEOWNERS as fork trunk has it, from the first of GitHub's places that holds one (the gate's and the
    slash commands' reading)."""
    for path in CODEOWNERS_PATHS:
        text = await keeper.forge.read_text(path, ref=keeper.trunk)
        if text is not None:
            return parse_codeowners(text)
    return CodeOwners()


async def _teams(
    keeper: Gatekeeper,
    resolutions: tuple[gate.Resolution, ...],
    codeowners: CodeOwners,
    approvals: tuple[Approval, ...],
    head: str,
    emergency: tuple[str, ...] | list[str],
    stored: Stored,
) -> dict[str, frozenset[str]]:
    """For each team owner the resolutions (or an emergency pick's files, or L3's regressed areas) need,
    which of the current head's approvers (and signers-off) are in it."""
    given = [(a.login, a.head_sha) for a in approvals] + [(s.login, s.head_sha) for s in stored.signoffs]
    logins = sorted({login for login, sha in given if sha == head})
    teams: dict[str, frozenset[str]] = {}
    needed = gate.team_owners(resolutions, codeowners, keeper.config, emergency=emergency, l3=stored.l3)
    for team in sorted(needed):
        teams[team] = frozenset([login for login in logins if await keeper.forge.in_team(team, login)])
    return teams


async def _count_failure(
    keeper: Gatekeeper, number: int, decision: GateDecision, paused: Pause | None
) -> Pause | None:
    """A required tier failed: one more failed ingestion in a row; enough of them pause ingestion."""
    now = keeper.clock()
    tier = decision.failed[0].value
    count = await keeper.db(
        keeper.gates.record_failure, keeper.fork, number, head_sha=decision.head_sha, tier=tier, at=now
    )
    if paused is not None or not gate.should_pause(count, keeper.config):
        return paused
    reason = f"{count} failed ingestions in a row (the last: #{number}, {tier})"
    await keeper.db(keeper.gates.pause, keeper.fork, by=keeper.bot_login, reason=reason, at=now)
    await keeper.forge.post_comment(number, paused_note(reason))
    log.warning("%s: automatic ingestion paused after %s", keeper.fork, reason)
    return Pause(keeper.bot_login, reason, now)


def paused_note(reason: str) -> str:
    return (
        f"**Sluice paused automatic ingestion** of this fork: {reason} (`gate.pause_after_failures`). "
        "No new ingestion starts and nothing merges until a maintainer resumes it (`/resume`)."
    )


def _merge_blocker(keeper: Gatekeeper, found: Facts, paused: Pause | None) -> str | None:
    """Why Sluice leaves an open gate's merge to a person, or None when it merges."""
    pull = found.pull
    author = pull.author or ""
    if author != keeper.bot_login:  # a branch named like Sluice's proves nothing: who opened the PR does
        return f"@{author} opened this PR, not Sluice: a person merges it."
    pushed = found.stored.record.head if found.stored.record is not None else None
    if found.facts.emergency is None and pushed != found.head:
        return "Its head is not the commit Sluice pushed (someone pushed to the branch): a person merges it."
    if paused is not None:
        return f"Automatic ingestion is paused ({paused.reason}); `/resume` lifts it."
    if pull.draft:  # GitHub refuses to merge a draft (405)
        return "It is a draft: Sluice merges it once someone marks it ready for review."
    if not keeper.config.gate.auto_merge:
        return "`gate.auto_merge` is off: a person merges this PR."
    if pull.base.ref != keeper.trunk:
        return f"This PR builds on `{pull.base.ref}`: it merges after that one, onto `{keeper.trunk}`."
    return None


async def _publish(keeper: Gatekeeper, found: Facts, decision: GateDecision, *, notes: list[str]) -> None:
    """`sluice/gate` on the head, updated in place; nothing is sent when it already says the same. CODEOWNERS
    lines the gate could not read are named in its notes (GitHub skips them too)."""
    conclusion = decision.conclusion
    notes = [*notes, *_ignored_codeowners(found.facts.codeowners)]
    await _set_gate(keeper, found, conclusion, gate.title(decision), gate.summary(decision, notes=notes))


def _ignored_codeowners(codeowners: CodeOwners) -> list[str]:
    problems = codeowners.problems
    if not problems:
        return []
    shown = "; ".join(plain(p) for p in problems[:SHOWN_PROBLEMS])
    more = f" (and {len(problems) - SHOWN_PROBLEMS} more)" if len(problems) > SHOWN_PROBLEMS else ""
    return [f"CODEOWNERS lines skipped, as GitHub skips them, so they own nothing: {shown}{more}."]


async def _set_gate(
    keeper: Gatekeeper, found: Facts, conclusion: str | None, title: str, summary: str
) -> None:
    shown = found.runs.get(CheckName.GATE.value)
    status = "completed" if conclusion is not None else "in_progress"
    if shown is not None and _shows(shown, status, conclusion, summary):
        return
    # a gate that waits again after it completed shows it on a new run (checks.reopens)
    update = CheckUpdate(status, conclusion, title, summary, actions=())
    await checks.show(keeper.forge, found.head, CheckName.GATE.value, update.requests(), shown=shown)


def _shows(run: CheckRun, status: str, conclusion: str | None, summary: str) -> bool:
    return (run.status, run.conclusion, run.output.summary) == (status, conclusion, summary)


async def _merge(keeper: Gatekeeper, found: Facts, decision: GateDecision) -> Outcome:
    """Merge at the head the gate judged; then the rollback tag, the closed audit record, the success."""
    number = found.pull.number
    rebase = keeper.config.strategy is Strategy.CHERRY_PICK or is_emergency_pull(
        found.pull, fork=keeper.forge.repo
    )
    method = "rebase" if rebase else "merge"  # an emergency pick keeps its commit: `Sluice-Kind: emergency`
    pulled = await keeper.forge.get_pull(number)
    commits = _commit_count(pulled)
    title = f"{found.pull.title or 'Sluice ingestion'} (#{number})"
    try:
        merged = await keeper.forge.merge_pull(number, sha=found.head, method=method, title=title)
    except MergeRefused as exc:
        await _refused(keeper, found, exc)
        return Outcome.REFUSED
    before = merged
    for _ in range(commits if method == "rebase" else 1):
        before = await keeper.forge.first_parent(before)
    tag = await _tag(keeper, ingestion_id(found.pull, fork=keeper.fork), number, before)
    await keeper.db(_close, keeper, found, decision, merged=merged, rollback=(tag, before))
    log.info("%s: merged #%d (%s) as %s; rollback point %s", keeper.fork, number, method, merged, tag)
    return Outcome.MERGED


async def record_merge(keeper: Gatekeeper, number: int) -> Outcome:
    """A PR a person merged (Sluice's own merges close their record as they merge): the rollback tag on the
    trunk it was merged onto, and the audit record closed with what the gate found on its head."""
    pull = await keeper.forge.get_pull(number)
    if not (pull.merged and pull.merge_commit_sha and is_sluice_pull(pull, keeper.fork)):
        return Outcome.SKIPPED
    found = await _gather(keeper, pull)
    if found.stored.record is not None and found.stored.record.state is audit.AuditState.CLOSED:
        return Outcome.SKIPPED
    # as the gate stood when it was merged: a waiver that has expired since still counted then
    decision = gate.decide(found.facts, config=keeper.config, now=pull.merged_at or keeper.clock())
    merged = pull.merge_commit_sha
    before = await _pre_merge_trunk(keeper, merged, pull)
    tag = await _tag(keeper, ingestion_id(pull, fork=keeper.fork), number, before)
    await keeper.db(_close, keeper, found, decision, merged=merged, rollback=(tag, before))
    log.info("%s: #%d was merged as %s; rollback point %s", keeper.fork, number, merged, tag)
    return Outcome.MERGED


async def _pre_merge_trunk(keeper: Gatekeeper, merged: str, pull: Pull) -> str:
    """Trunk before a merge made by any method: a merge commit's first parent; for a rebase (its last commit
    carries the message of the PR's head) as many first parents back as the PR had commits; for a squash,
    one. The count is the PR's own (`commits`): GitHub lists at most 250 of a PR's commits."""
    commit = await keeper.forge.get_commit(merged)
    first, count = commit.first_parent(), _commit_count(pull)
    if len(commit.parents) > 1 or count < 2:
        return first
    last = await keeper.forge.get_commit(pull.head.sha)
    if commit.commit.message != last.commit.message:
        return first
    before = merged
    for _ in range(count):
        before = await keeper.forge.first_parent(before)
    return before


async def _refused(keeper: Gatekeeper, found: Facts, exc: MergeRefused) -> None:
    """The refusal on the gate's check run, with what it was judged on (a later event that changes none of
    it does not try the merge again), and in one comment per head and reason (a refusal repeated after a
    change, for the same reason, adds none)."""
    number = found.pull.number
    what = "the head moved after the gate judged it" if exc.status == 409 else "GitHub cannot merge it"
    text = (
        f"Sluice did not merge #{number}: {what}. {exc.message}. It tries again when something changes "
        f"(a new head, an approval, a tier's check run completing): {exc.remedy}."
    )
    log.warning("%s: %s", keeper.fork, text)
    summary = f"### Merge refused\n\n{text}\n\n{REFUSED_MARKER.format(_judged_on(found))}\n"
    await _set_gate(keeper, found, "failure", f"Merge refused by GitHub ({exc.status})", summary)
    reason = hashlib.sha256(exc.message.encode()).hexdigest()[:12]
    marker = f"<!-- sluice:merge-refused:{found.head}:{exc.status}:{reason} -->"
    await keeper.forge.upsert_comment(number, marker=marker, body=f"{marker}\n{text}")


REFUSED_MARKER = "<!-- sluice:merge-refused {} -->"
REFUSED_SEEN = re.compile(r"<!-- sluice:merge-refused ([0-9a-f]{16}) -->")


def _judged_on(found: Facts) -> str:
    """A digest of what a refused merge was judged on besides its head (the gate's check run is the head's
    own): the approvals, the waivers, and each tier's check run (a re-run's completion changes it)."""
    checks = sorted(
        (name, run.id, run.status, run.conclusion, run.completed_at)
        for name, run in found.runs.items()
        if name != CheckName.GATE.value
    )
    seen = [sorted(map(repr, found.facts.approvals)), sorted(map(repr, found.facts.waivers)), checks]
    return hashlib.sha256(json.dumps(seen, default=str).encode()).hexdigest()[:16]


def _refused_as_is(found: Facts) -> bool:
    """Whether GitHub refused the merge of this head already, judged on the same facts as now."""
    gate_run = found.runs.get(CheckName.GATE.value)
    seen = REFUSED_SEEN.search(gate_run.output.summary or "") if gate_run is not None else None
    return seen is not None and seen[1] == _judged_on(found)


async def _tag(keeper: Gatekeeper, ingestion_id: str, number: int, sha: str) -> str | None:
    """`sluice/rollback/<id>` on the pre-merge trunk (`<id>-pr<N>` when a chain's earlier PR took it); None
    when both exist (the audit record still names the rollback commit)."""
    for name in (f"{ROLLBACK_PREFIX}{ingestion_id}", f"{ROLLBACK_PREFIX}{ingestion_id}-pr{number}"):
        if await keeper.forge.create_tag(name, sha):
            return name
    log.warning(
        "%s: rollback tags for %s exist already; the audit record names %s", keeper.fork, ingestion_id, sha
    )
    return None


def _close(
    keeper: Gatekeeper, found: Facts, decision: GateDecision, *, merged: str, rollback: tuple[str | None, str]
) -> None:
    """Close the audit record (made now from the PR if ingestion never wrote one) and end the failure run."""
    now = keeper.clock()
    number = found.pull.number
    record = found.stored.record or _bare_record(keeper.fork, found.pull)
    closed = audit.closed(
        record,
        checks=found.checks,
        approvals=(
            *decision.approvals,
            *(Approval(s.login, s.head_sha, s.at, SIGNOFF) for s in decision.signoffs),
        ),
        waivers=decision.waived,
        merge_sha=merged,
        rollback=rollback,
        at=now,
        head=found.pull.head.sha,
    )
    keeper.gates.save_audit(closed, at=now)
    if found.facts.emergency is None:  # an emergency pick says nothing of how ingestions fare
        keeper.gates.record_success(keeper.fork)
    log.debug("%s: audit record of #%d closed", keeper.fork, number)


def _bare_record(fork: str, pull: Pull) -> audit.AuditRecord:
    ref = ingestion_id(pull, fork=fork)
    return audit.AuditRecord(
        fork=fork,
        ingestion_id=ref,
        kind=ref.split("-", 1)[0],
        pr_number=pull.number,
        head=pull.head.sha,
        upstream_base=None,
        upstream_target="",
    )
