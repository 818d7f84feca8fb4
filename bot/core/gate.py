"""`sluice/gate`: whether an ingestion PR may merge; when not, exactly what is missing and who can give it."""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bot.core.codeowners import CodeOwners
from bot.core.config import CONFIG_PATH, SluiceConfig
from bot.core.ingestion import CheckName
from bot.core.l3_metrics import UNASSIGNED, L3Metrics, Signoff, by_area, listed
from bot.core.markdown import cell

TIER_KEYS = {"l1": CheckName.L1, "l2": CheckName.L2, "l3": CheckName.L3}
NEEDS_APPROVAL = frozenset({"api", "semantic"})  # conflict classes no rule resolves: a person's resolution
PROPOSED = "proposed"  # `how` of a resolution the resolver command proposed


FAILED = ("failure", "timed_out")  # a required tier's conclusions that close the gate as failed


class MissingKind(enum.StrEnum):
    TIER = "tier"
    APPROVAL = "approval"
    SIGNOFF = "signoff"  # an area owner's `/signoff l3` of L3's regressed metrics
    HOLD = "hold"


@dataclass(frozen=True)
class CheckResult:
    """A tier's check run as GitHub shows it."""

    name: str
    head_sha: str
    status: str  # queued | in_progress | completed
    conclusion: str | None = None
    url: str | None = None


@dataclass(frozen=True)
class Waiver:
    """A recorded exception for a failed tier (never L1): who answers for it, why, until when, how the
    failure gets fixed, and the head it was given on (it waives that head's failure: a new push, whose
    code nobody has waived, needs a new waiver)."""

    tier: CheckName
    owner: str
    reason: str
    recovery_plan: str
    expires_at: dt.datetime
    granted_by: str
    head_sha: str  # "" for a waiver recorded before waivers named their head: it waives nothing

    def valid(self, now: dt.datetime, head_sha: str) -> bool:
        return self.tier is not CheckName.L1 and now < self.expires_at and self.head_sha == head_sha


@dataclass(frozen=True)
class Approval:
    login: str
    head_sha: str
    at: dt.datetime
    source: str = "review"  # review (GitHub's) | command (`/approve`)


@dataclass(frozen=True)
class Review:
    """A pull request review as GitHub's REST API lists it."""

    login: str
    state: str  # APPROVED | CHANGES_REQUESTED | COMMENTED | DISMISSED | PENDING
    commit_id: str
    submitted_at: dt.datetime


@dataclass(frozen=True)
class Pause:
    """A fork's automatic ingestion stopped: by whom (a maintainer, or Sluice's safety throttle) and why."""

    by: str
    reason: str
    at: dt.datetime


@dataclass(frozen=True)
class Hold:
    by: str
    reason: str
    at: dt.datetime


@dataclass(frozen=True)
class Resolution:
    """How one conflicted file of an ingested commit was resolved (from the audit record)."""

    upstream: str
    path: str
    cls: str  # mechanical | api | semantic | unknown
    how: str | None  # the rules, "reused" (a person's earlier resolution) or "proposed"

    @property
    def needs_approval(self) -> bool:
        return self.cls in NEEDS_APPROVAL or PROPOSED in (self.how or "").split(",")


@dataclass(frozen=True)
class GateInput:
    head_sha: str
    checks: Mapping[str, CheckResult]
    waivers: Sequence[Waiver] = ()
    resolutions: Sequence[Resolution] = ()
    approvals: Sequence[Approval] = ()
    hold: Hold | None = None
    codeowners: CodeOwners = field(default_factory=CodeOwners)
    teams: Mapping[str, frozenset[str]] = field(default_factory=dict)  # '@org/team' -> approvers in it
    # An emergency pick (`/cherry-pick`): the files its commit touches. A code owner of them approves it on
    # the head whatever its conflicts were, and only `gate.emergency_required_tiers` are required.
    emergency: Sequence[str] | None = None
    no_access: Sequence[str] = ()  # current-head approvers without write access: their approval is left out
    # The newest L3 attempt on the head, as compared with its baseline, and the `/signoff l3`s given: when
    # the gate requires L3, each area with a regressed metric needs a signoff by one of its owners.
    l3: L3Metrics | None = None
    signoffs: Sequence[Signoff] = ()


@dataclass(frozen=True)
class Missing:
    kind: MissingKind
    what: str
    who: tuple[str, ...]  # who can provide it; () when nobody is named yet
    how: str


@dataclass(frozen=True)
class GateDecision:
    head_sha: str
    missing: tuple[Missing, ...]
    met: tuple[str, ...]
    failed: tuple[CheckName, ...]  # required tiers that failed on the head without a valid waiver
    waived: tuple[Waiver, ...] = ()
    approvals: tuple[Approval, ...] = ()  # the approvals that counted
    signoffs: tuple[Signoff, ...] = ()  # the `/signoff l3`s that counted

    @property
    def passed(self) -> bool:
        return not self.missing

    @property
    def conclusion(self) -> str | None:
        """The check run's conclusion: success, failure (a tier failed unwaived), None (still waiting)."""
        if self.passed:
            return "success"
        return "failure" if self.failed else None


def required_tiers(config: SluiceConfig, *, emergency: bool = False) -> tuple[CheckName, ...]:
    """L1 always, then the tiers `gate.required_tiers` (an emergency pick: `gate.emergency_required_tiers`)
    names, in tier order."""
    keys = config.gate.emergency_required_tiers if emergency else config.gate.required_tiers
    named = {TIER_KEYS[key] for key in keys} | {CheckName.L1}
    return tuple(t for t in (CheckName.L1, CheckName.L2, CheckName.L3) if t in named)


def decide(facts: GateInput, *, config: SluiceConfig, now: dt.datetime) -> GateDecision:
    """Pure: every condition of the gate on `facts.head_sha` at `now`."""
    missing: list[Missing] = []
    met: list[str] = []
    failed: list[CheckName] = []
    waived: list[Waiver] = []
    tiers = required_tiers(config, emergency=facts.emergency is not None)
    for tier in tiers:
        _tier(tier, facts, now, missing=missing, met=met, failed=failed, waived=waived)
    signed = _signoffs(facts, config, missing=missing, met=met) if CheckName.L3 in tiers else ()
    counted = _approvals(facts, config, missing=missing, met=met)
    if facts.emergency is not None:
        counted = _emergency_approval(facts, config, facts.emergency, counted, missing=missing, met=met)
    if facts.hold is not None:
        hold = facts.hold
        missing.append(
            Missing(
                MissingKind.HOLD, f"held by @{hold.by}: {hold.reason or 'no reason given'}", (), "`/unhold`"
            )
        )
    else:
        met.append("no hold is set")
    return GateDecision(
        facts.head_sha, tuple(missing), tuple(met), tuple(failed), tuple(waived), counted, signed
    )


def _tier(
    tier: CheckName,
    facts: GateInput,
    now: dt.datetime,
    *,
    missing: list[Missing],
    met: list[str],
    failed: list[CheckName],
    waived: list[Waiver],
) -> None:
    run = facts.checks.get(tier.value)
    if run is None or run.head_sha != facts.head_sha:
        missing.append(Missing(MissingKind.TIER, f"{tier.value} has not run on this head", (), "wait for it"))
        return
    if run.status != "completed":
        missing.append(Missing(MissingKind.TIER, f"{tier.value} is {run.status}", (), "wait for it"))
        return
    if run.conclusion == "success":
        met.append(f"{tier.value} succeeded")
        return
    if run.conclusion not in FAILED:  # action_required (not started), skipped, cancelled...: nothing failed
        what = f"{tier.value} concluded {run.conclusion}: it has not passed on this head"
        missing.append(Missing(MissingKind.TIER, what, ("a maintainer",), "see its check run, then Re-run"))
        return
    waiver = next((w for w in facts.waivers if w.tier is tier and w.valid(now, facts.head_sha)), None)
    if waiver is not None:
        waived.append(waiver)
        met.append(
            f"{tier.value} {run.conclusion}, waived by @{waiver.granted_by} until {_when(waiver.expires_at)} "
            f"(owner {waiver.owner}: {waiver.reason}; recovery plan: {waiver.recovery_plan})"
        )
        return
    failed.append(tier)
    missing.append(_failed_tier(tier, run, facts.waivers, now))


def _failed_tier(tier: CheckName, run: CheckResult, waivers: Sequence[Waiver], now: dt.datetime) -> Missing:
    what = f"{tier.value} concluded {run.conclusion}"
    mine = [w for w in waivers if w.tier is tier is not CheckName.L1]
    expired = [w for w in mine if w.head_sha == run.head_sha and now >= w.expires_at]
    older = [w for w in mine if w.head_sha != run.head_sha]
    if expired:
        what += f" (the waiver by @{expired[-1].granted_by} expired {_when(expired[-1].expires_at)})"
    elif older:
        given = f"`{older[-1].head_sha[:10]}`" if older[-1].head_sha else "an unrecorded head"
        what += f" (the waiver by @{older[-1].granted_by} was given on {given}; a new head needs a new one)"
    if tier is CheckName.L1:
        return Missing(MissingKind.TIER, what, (), "fix the failure and push; L1 is never waived")
    how = "fix the failure and push, or record a waiver (`/waive`): owner, reason, expiry, recovery plan"
    return Missing(MissingKind.TIER, what, ("a maintainer",), how)


def _signoffs(
    facts: GateInput, config: SluiceConfig, *, missing: list[Missing], met: list[str]
) -> tuple[Signoff, ...]:
    """L3 passing its tests is not enough when a metric regressed beyond noise: an owner of each area whose
    kernels regressed signs the regression off on this head (`/signoff l3`)."""
    if facts.l3 is None or facts.l3.head_sha != facts.head_sha or not facts.l3.regressions:
        return ()
    current = [s for s in facts.signoffs if s.head_sha == facts.head_sha]
    counted: dict[str, Signoff] = {}
    for area, regressions in by_area(facts.l3.regressions, config).items():
        owners = l3_area_owners(area, facts.codeowners, config)
        subject = f"L3's regressed metrics in area {area_shown(area)} ({listed(regressions)})"
        by = [s for s in current if _owns(s.login, owners, facts.teams)]
        if by:
            counted.update((s.login, s) for s in by)
            met.append(f"{subject} signed off by {', '.join('@' + s.login for s in by)}")
            continue
        how = f"`/signoff l3` on the head `{facts.head_sha[:10]}`, or fix the regression and push"
        stale = sorted({"@" + s.login for s in facts.signoffs if s.head_sha != facts.head_sha})
        if stale:
            how += f"; the signoffs by {', '.join(stale)} were given on an older head and no longer count"
        if not owners:
            how = "name the area's `owners` in `tiers.l3.areas` (or `tiers.l3.owner`), then `/signoff l3`"
        missing.append(Missing(MissingKind.SIGNOFF, f"an area owner's signoff of {subject}", owners, how))
    return tuple(counted.values())


def area_shown(area: str) -> str:
    return "of no `tiers.l3.areas` entry" if area == UNASSIGNED else f"`{area}`"


def l3_area_owners(area: str, codeowners: CodeOwners, config: SluiceConfig) -> tuple[str, ...]:
    """Who may sign off an area of L3's benchmarks: its `owners`, then the code owners of its `files`. The
    kernels no area covers: L3's `owner`, else the code owners of the config (the fork's policy)."""
    l3 = config.tiers.l3
    entry = next((a for a in l3.areas if a.name == area), None)
    if entry is None:
        found: tuple[str, ...] = (l3.owner,) if l3.owner else owners_of(CONFIG_PATH, codeowners, config)
    else:
        found = (*entry.owners, *(o for path in entry.files for o in owners_of(path, codeowners, config)))
    return tuple(dict.fromkeys(found))


def _approvals(
    facts: GateInput, config: SluiceConfig, *, missing: list[Missing], met: list[str]
) -> tuple[Approval, ...]:
    current = [a for a in facts.approvals if a.head_sha == facts.head_sha]
    counted: dict[str, Approval] = {}
    for resolution in (r for r in facts.resolutions if r.needs_approval):
        owners = owners_of(resolution.path, facts.codeowners, config)
        upstream = resolution.upstream[:10]
        subject = f"the {_kind(resolution)} resolution of `{resolution.path}` (upstream `{upstream}`)"
        what = f"a code owner's approval of {subject}"
        by = [a for a in current if _owns(a.login, owners, facts.teams)]
        if by:
            counted.update((a.login, a) for a in by)
            met.append(f"{subject} approved by {', '.join('@' + a.login for a in by)}")
        elif not owners:
            how = f"name an owner for `{resolution.path}` in CODEOWNERS or its component's `owners`"
            missing.append(Missing(MissingKind.APPROVAL, what, (), how))
        else:
            missing.append(Missing(MissingKind.APPROVAL, what, owners, _approve_how(resolution, facts)))
    return tuple(counted.values())


def _emergency_approval(
    facts: GateInput,
    config: SluiceConfig,
    paths: Sequence[str],
    counted: tuple[Approval, ...],
    *,
    missing: list[Missing],
    met: list[str],
) -> tuple[Approval, ...]:
    """An emergency pick skips the planner's batching and the upstream order, so a code owner of the files
    it touches (any of them: one owner vouches for the pick) approves it on the current head."""
    owners = emergency_owners(paths, facts.codeowners, config)
    subject = "the emergency pick"
    by = [a for a in facts.approvals if a.head_sha == facts.head_sha and _owns(a.login, owners, facts.teams)]
    if by:
        met.append(f"{subject} approved by {', '.join('@' + a.login for a in by)}")
        return tuple({a.login: a for a in (*counted, *by)}.values())
    what = f"a code owner's approval of {subject} ({_files(paths)})"
    if not owners:
        how = "name an owner for its files in CODEOWNERS or their component's `owners`"
        missing.append(Missing(MissingKind.APPROVAL, what, (), how))
    else:
        missing.append(Missing(MissingKind.APPROVAL, what, owners, _approve_how(None, facts)))
    return counted


def emergency_owners(paths: Sequence[str], codeowners: CodeOwners, config: SluiceConfig) -> tuple[str, ...]:
    """Every code owner of any of `paths`, in the order first named."""
    found = (owner for path in paths for owner in owners_of(path, codeowners, config))
    return tuple(dict.fromkeys(found))


def _files(paths: Sequence[str]) -> str:
    shown = ", ".join(f"`{p}`" for p in paths[:5])
    return shown + (f" and {len(paths) - 5} more" if len(paths) > 5 else "") if paths else "no files"


def _approve_how(resolution: Resolution | None, facts: GateInput) -> str:
    stale = [a for a in facts.approvals if a.head_sha != facts.head_sha]
    how = f"approve the PR on its head `{facts.head_sha[:10]}` (a review, or `/approve`)"
    if stale:
        logins = ", ".join(sorted({"@" + a.login for a in stale}))
        how += f"; the approvals by {logins} were given on an older head and no longer count"
    if facts.no_access:
        logins = ", ".join("@" + login for login in facts.no_access)
        how += f"; {logins} approved without write access to the repository, which does not count"
    return how


def _kind(resolution: Resolution) -> str:
    return PROPOSED if PROPOSED in (resolution.how or "").split(",") else resolution.cls


def owners_of(path: str, codeowners: CodeOwners, config: SluiceConfig) -> tuple[str, ...]:
    """The code owners of `path`: CODEOWNERS' (last matching line), then its component's `owners`."""
    component = config.component_for(path)
    found = (*codeowners.owners(path), *(component.owners if component else ()))
    return tuple(dict.fromkeys(o for o in found if o.startswith("@")))


def _owns(login: str, owners: Sequence[str], teams: Mapping[str, frozenset[str]]) -> bool:
    name = login.lower()
    for owner in owners:
        if "/" in owner and name in {m.lower() for m in teams.get(owner.lower(), frozenset())}:
            return True
        if owner.lower() == "@" + name:
            return True
    return False


def standing_approvals(
    reviews: Sequence[Review], commands: Sequence[Approval] = (), *, bot_login: str
) -> tuple[Approval, ...]:
    """The approvals that stand: each person's latest deciding act, a review (approved, changes requested,
    dismissed; comments decide nothing) or an `/approve` (`commands`, which approves as a review would),
    when it approved, on the commit it approved. A later "changes requested" withdraws an earlier `/approve`
    as it does an approving review."""
    acts: list[tuple[dt.datetime, str, Approval | None]] = []
    for review in reviews:
        if review.state in ("APPROVED", "CHANGES_REQUESTED", "DISMISSED") and review.login != bot_login:
            approved = review.state == "APPROVED"
            approval = Approval(review.login, review.commit_id, review.submitted_at) if approved else None
            acts.append((review.submitted_at, review.login, approval))
    acts += [(command.at, command.login, command) for command in commands]
    latest: dict[str, Approval | None] = {}
    # GitHub times a review to the second: within one second the order is unknown, and what approves nothing
    # counts as the later act.
    for _, login, approval in sorted(acts, key=lambda act: (act[0].replace(microsecond=0), act[2] is None)):
        latest[login.lower()] = approval
    return tuple(approval for approval in latest.values() if approval is not None)


def team_owners(
    resolutions: Sequence[Resolution],
    codeowners: CodeOwners,
    config: SluiceConfig,
    *,
    emergency: Sequence[str] = (),
    l3: L3Metrics | None = None,
) -> set[str]:
    """The teams among the owners the resolutions (and an emergency pick's files, and the areas of L3's
    regressions) need: the flow asks GitHub which approvers are in them."""
    needed = [owners_of(r.path, codeowners, config) for r in resolutions if r.needs_approval]
    needed.append(emergency_owners(emergency, codeowners, config))
    areas = by_area(l3.regressions, config) if l3 is not None else {}
    needed += [l3_area_owners(area, codeowners, config) for area in areas]
    return {owner.lower() for owners in needed for owner in owners if "/" in owner}


def should_pause(consecutive_failures: int, config: SluiceConfig) -> bool:
    """The safety throttle: after `gate.pause_after_failures` failed ingestions in a row, stop ingesting."""
    return consecutive_failures >= config.gate.pause_after_failures


def _when(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


# ------------------------------------------------------------------ the check run's text

TITLES = {
    "success": "Gate open: every condition holds",
    "failure": "Gate closed: a required tier failed",
    None: "Gate closed: waiting",
}


def title(decision: GateDecision) -> str:
    if decision.passed:
        return TITLES["success"]
    return TITLES[decision.conclusion] + f" ({len(decision.missing)} missing)"


def summary(decision: GateDecision, *, notes: Sequence[str] = ()) -> str:
    """Markdown: what is missing and who can provide it, then what holds, for the check run's summary."""
    lines = [f"Head `{decision.head_sha[:10]}`.", ""]
    if decision.missing:
        lines += ["### Missing", "", "| what | who can provide it | how |", "|---|---|---|"]
        for item in decision.missing:
            who = ", ".join(item.who) if item.who else "—"
            lines.append(f"| {cell(item.what)} | {cell(who)} | {cell(item.how)} |")
        lines.append("")
    lines += ["### Conditions met", ""]
    lines += [f"- {cell(line)}" for line in decision.met] or ["- nothing yet"]
    if notes:
        lines += ["", "### Notes", "", *(f"- {note}" for note in notes)]
    return "\n".join(lines) + "\n"
