"""The audit record of one ingestion: what came in, how each conflict was resolved, what validated it, who
approved or waived what, and how to roll it back. Opened with its PR, closed when it merges."""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Mapping, Sequence

from bot.core.emergency import EmergencyPick
from bot.core.gate import FAILED, Approval, CheckResult, Resolution, Waiver
from bot.core.ingestion import CheckName, PickedUnit
from bot.core.models import CommitReport, Frozen

EMERGENCY_KIND = "emergency"  # the kind of an emergency pick's record (`/cherry-pick`)


class AuditState(enum.StrEnum):
    OPEN = "open"
    CLOSED = "closed"  # merged: the record is final
    UNMERGED = "unmerged"  # the PR was closed without a merge (stale, or a person's); a reopened PR goes on


class AuditCommit(Frozen):
    upstream: str
    subject: str
    status: str  # the pick's outcome: clean, auto_resolved, proposed, needs_human, already_applied
    commit: str | None = None  # the fork commit written for it


class AuditConflict(Frozen):
    upstream: str
    path: str
    cls: str
    resolved: bool
    how: str | None  # the rules, "reused" or "proposed"
    component: str | None = None

    def resolution(self) -> Resolution:
        return Resolution(self.upstream, self.path, self.cls, self.how)


class AuditTier(Frozen):
    """A reference to a tier's report: its check run (the report itself lives with the run)."""

    name: str
    head_sha: str
    status: str
    conclusion: str | None
    url: str | None = None


class AuditApproval(Frozen):
    login: str
    head_sha: str
    at: dt.datetime
    source: str


class AuditWaiver(Frozen):
    tier: str
    owner: str
    reason: str
    recovery_plan: str
    expires_at: dt.datetime
    granted_by: str
    head_sha: str = ""  # the head it waived ("" in records written before waivers named one)


class AuditBisection(Frozen):
    """One bisection of the PR: its tier, the head it bisected, how it ended, the tier runs it used, whom it
    blamed, and for a performance bisection the metrics it bisected."""

    id: int
    tier: str
    head_sha: str
    status: str
    runs: int
    culprits: tuple[str, ...] = ()
    regressions: tuple[str, ...] = ()  # `benchmark · metric` of L3's regression bisected; () for a failure


class AuditRecord(Frozen):
    fork: str
    ingestion_id: str
    kind: str  # bundle | chain | emergency
    pr_number: int
    head: str | None
    upstream_base: str | None  # the parent of the first upstream commit: where the range starts
    upstream_target: str  # the last upstream commit
    # the patch stack the unit was picked onto: fork trunk then, and how many of the fork's own commits it
    # held (None: recorded before audit records kept it, or an emergency pick's, which names its base only)
    fork_base: str | None = None
    patch_stack_commits: int | None = None
    commits: tuple[AuditCommit, ...] = ()
    conflicts: tuple[AuditConflict, ...] = ()
    tiers: tuple[AuditTier, ...] = ()
    waived_tiers: tuple[str, ...] = ()  # the tiers that failed on the merged head and a waiver let through
    approvals: tuple[AuditApproval, ...] = ()
    waivers: tuple[AuditWaiver, ...] = ()
    merge_sha: str | None = None
    rollback_tag: str | None = None
    rollback_sha: str | None = None  # fork trunk just before the merge
    state: AuditState = AuditState.OPEN
    opened_at: dt.datetime | None = None
    closed_at: dt.datetime | None = None
    bisections: tuple[AuditBisection, ...] = ()

    def resolutions(self) -> tuple[Resolution, ...]:
        return tuple(c.resolution() for c in self.conflicts if c.resolved)


def opened(
    picked: PickedUnit,
    *,
    fork: str,
    pr_number: int,
    upstream_base: str | None,
    fork_base: str | None = None,
    patch_stack_commits: int | None = None,
) -> AuditRecord:
    """The record of a unit as picked: each commit's outcome and each conflict with how it was resolved, and
    the patch stack it was picked onto (fork trunk, and its own commits' count)."""
    unit = picked.unit
    record = AuditRecord(
        fork=fork,
        ingestion_id=unit.id,
        kind=unit.kind.value,
        pr_number=pr_number,
        head=picked.head,
        upstream_base=upstream_base,
        upstream_target=unit.commits[-1].sha,
        fork_base=fork_base,
        patch_stack_commits=patch_stack_commits,
    )
    return with_reports(record, picked.reports)


def emergency_opened(
    pick: EmergencyPick, report: CommitReport, *, fork: str, pr_number: int, head: str
) -> AuditRecord:
    """The record of an emergency pick as `/cherry-pick` opens its PR: the one commit, its outcome, its
    conflicts (the gate and the merge add the rest, as for any ingestion)."""
    record = AuditRecord(
        fork=fork,
        ingestion_id=pick.id,
        kind=EMERGENCY_KIND,
        pr_number=pr_number,
        head=head,
        upstream_base=pick.commit.parents[0] if pick.commit.parents else None,
        upstream_target=pick.commit.sha,
    )
    return with_reports(record, (report,))


def with_reports(record: AuditRecord, reports: Sequence[CommitReport]) -> AuditRecord:
    """`record` with each picked commit's outcome and each conflict with how it was resolved."""
    commits = tuple(
        AuditCommit(upstream=r.upstream, subject=r.subject, status=r.status.value, commit=r.commit)
        for r in reports
    )
    conflicts = tuple(
        AuditConflict(
            upstream=r.upstream,
            path=f.path,
            cls=f.cls,
            resolved=f.resolved,
            how=f.rule,
            component=f.evidence.component,
        )
        for r in reports
        for f in r.files
    )
    return record.model_copy(update={"commits": commits, "conflicts": conflicts})


def with_bisection(record: AuditRecord, entry: AuditBisection) -> AuditRecord:
    """The record with this bisection's entry added or brought up to date."""
    kept = tuple(b for b in record.bisections if b.id != entry.id)
    return record.model_copy(update={"bisections": tuple(sorted((*kept, entry), key=lambda b: b.id))})


def kept_bisections(record: AuditRecord, stored: AuditRecord) -> AuditRecord:
    """A refreshed record keeps the bisections the stored one holds (a re-pick knows nothing of them)."""
    for entry in stored.bisections:
        if all(b.id != entry.id for b in record.bisections):
            record = with_bisection(record, entry)
    return record


def closed(
    record: AuditRecord,
    *,
    checks: Mapping[str, CheckResult],
    approvals: Sequence[Approval],
    waivers: Sequence[Waiver],
    merge_sha: str,
    rollback: tuple[str | None, str],
    at: dt.datetime,
    head: str,
) -> AuditRecord:
    """The record as the merge leaves it: the head merged (a person's push may have replaced the one Sluice
    pushed), tiers, the failing ones that were waived, the approvals and waivers that counted, merge,
    rollback."""
    tiers = tuple(
        AuditTier(name=c.name, head_sha=c.head_sha, status=c.status, conclusion=c.conclusion, url=c.url)
        for name, c in sorted(checks.items())
        if name in {t.value for t in CheckName if t is not CheckName.GATE}
    )
    waived = {w.tier.value for w in waivers}
    failed_and_waived = tuple(t.name for t in tiers if t.conclusion in FAILED and t.name in waived)
    return record.model_copy(
        update={
            "tiers": tiers,
            "waived_tiers": failed_and_waived,
            "approvals": tuple(
                AuditApproval(login=a.login, head_sha=a.head_sha, at=a.at, source=a.source) for a in approvals
            ),
            "waivers": tuple(_waiver(w) for w in waivers),
            "head": head,
            "merge_sha": merge_sha,
            "rollback_tag": rollback[0],
            "rollback_sha": rollback[1],
            "state": AuditState.CLOSED,
            "closed_at": at,
        }
    )


def unmerged(record: AuditRecord, *, head: str, at: dt.datetime) -> AuditRecord:
    """The record of a PR closed without a merge: ended, with the head it ended on, nothing merged."""
    return record.model_copy(update={"state": AuditState.UNMERGED, "head": head, "closed_at": at})


def _waiver(w: Waiver) -> AuditWaiver:
    return AuditWaiver(
        tier=w.tier.value,
        owner=w.owner,
        reason=w.reason,
        recovery_plan=w.recovery_plan,
        expires_at=w.expires_at,
        granted_by=w.granted_by,
        head_sha=w.head_sha,
    )


def _patch_stack(record: AuditRecord) -> str:
    count = "?" if record.patch_stack_commits is None else f"{record.patch_stack_commits} fork commits"
    return f"{count} on fork trunk {record.fork_base or '?'}"


def render(number: int, record: AuditRecord) -> str:
    """`sluice audit`'s text: the record, one fact a line."""
    lines = [
        f"audit {number}: {record.fork} #{record.pr_number} {record.ingestion_id} ({record.state.value})",
        f"  upstream: {record.upstream_base or '?'}..{record.upstream_target}",
        f"  patch stack: {_patch_stack(record)}",
        f"  head: {record.head or '-'}   merge: {record.merge_sha or '-'}",
        f"  rollback: {record.rollback_tag or '-'} at {record.rollback_sha or '-'}",
        f"  waived failing tiers: {', '.join(record.waived_tiers) or 'none'}",
        "  commits:",
        *(f"    {c.upstream[:10]} {c.status:<16} {c.subject}" for c in record.commits),
        *(
            f"  bisection {b.id}: {b.tier} on {b.head_sha[:10]} {b.status}, {b.runs} tier runs"
            + (f", culprits {' '.join(c[:10] for c in b.culprits)}" if b.culprits else "")
            + (f", regression of {', '.join(b.regressions)}" if b.regressions else "")
            for b in record.bisections
        ),
        "  conflicts:",
        *(f"    {c.upstream[:10]} {c.path}: {c.cls}, {c.how or 'unresolved'}" for c in record.conflicts),
        "  tiers:",
        *(
            f"    {t.name}: {t.conclusion or t.status} on {t.head_sha[:10]} {t.url or ''}".rstrip()
            for t in record.tiers
        ),
        "  approvals:",
        *(f"    @{a.login} on {a.head_sha[:10]} ({a.source}, {a.at.isoformat()})" for a in record.approvals),
        "  waivers:",
        *(
            f"    {w.tier} on {w.head_sha[:10] or '?'} by @{w.granted_by} until {w.expires_at.isoformat()}:"
            f" {w.reason}"
            f" (plan: {w.recovery_plan})"
            for w in record.waivers
        ),
    ]
    return "\n".join(lines) + "\n"
