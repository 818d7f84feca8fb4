"""Apply upstream commits onto a ref without a work tree, resolving only mechanical conflicts.

Per commit: a three-way merge on trees (`git merge-tree`), then, for each conflicted file, `git merge-file
--diff3` on the three blobs and the pure classifier in `core.conflicts`. A file is resolved by a mechanical
rule, by a resolution a human made before for the same conflict, or (when configured) proposed by the
resolver hook; anything else needs a human, and then no ref is written at all.
"""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import json
import re
import tempfile
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from bot.core import conflicts, rerere
from bot.core.config import SluiceConfig, Strategy
from bot.core.conflicts import ConflictClass, FileVerdict
from bot.core.errors import SluiceError
from bot.core.models import (
    CommitInfo,
    CommitReport,
    FileEvidence,
    FileReport,
    HunkReport,
    PickReport,
    PickStatus,
)
from bot.core.refs import validate_sha
from bot.flows.resolver_hook import ResolverOutcome, ResolverRequest, run_resolver
from bot.flows.swapped import is_ancestor
from bot.git.facts import VERSIONS, FactKey, FactKind
from bot.ports import CommitWriter, HistoryReader, MergeResult, Repository, Stage

Recall = Callable[[Iterable[str]], Mapping[str, tuple[str, ...]]]
SUBMODULE_OR_LINK = ("160000", "120000")
GREP_HITS = 500  # lines `git grep` may give for a changed API name, before the ones that are no fork use go


def _nothing_remembered(keys: Iterable[str]) -> Mapping[str, tuple[str, ...]]:
    return {}


@dataclass
class _FileOutcome:
    """One conflicted file: its verdict, and the text that resolves it (if any) and how."""

    verdict: FileVerdict
    stage: Stage | None  # our side's mode and blob, for writing the resolution
    text: str | None = None
    how: str | None = None  # rule names, "reused" or "proposed"
    reused_keys: tuple[str, ...] = ()
    evidence: FileEvidence | None = None
    hunk_blame: tuple[tuple[str, ...], ...] = ()  # per conflict block
    hook: ResolverOutcome | None = None


@dataclass
class StepResult:
    report: CommitReport
    tree: str | None
    rules: list[str] = field(default_factory=list)


class Picker:
    """Applies upstream commits one by one on top of a head; pure decisions come from `bot.core.conflicts`."""

    def __init__(
        self,
        repo: Repository,
        config: SluiceConfig,
        *,
        recall: Recall = _nothing_remembered,
        use_resolver: bool = True,
        evidence: bool = True,
        verdicts: MutableMapping[FactKey, str] | None = None,
    ) -> None:
        self.repo = repo
        self.git: CommitWriter = repo.plumbing()
        self.config = config
        self.recall = recall
        self.use_resolver = use_resolver and bool(config.resolver.command)
        # Planning only needs to know whether a human is needed: no blame. It still searches the fork for
        # users of an API upstream changed, which decide whether a conflict is mechanical or api.
        self.with_evidence = evidence
        # Planning's outcomes of conflicted merges, kept by content (see `step`): a re-plan classifies
        # only conflicts it has not met.
        self.verdicts = verdicts
        self._git_version: str | None = None

    def through(self, repo: Repository) -> Picker:
        """The same picker reading and writing through `repo` (a quarantined view of its repository)."""
        other = copy.copy(self)
        other.repo, other.git = repo, repo.plumbing()
        return other

    def step(self, head: str, tree: str, commit: CommitInfo, *, strategy: Strategy) -> StepResult:
        """Merge one upstream commit onto (`head`, `tree`); `head` is the commit whose history blame reads."""
        if strategy is Strategy.MERGE:
            result = self.git.merge(head, commit.sha)
        else:
            result = self.git.merge(*self._pick_inputs(tree, commit))
        if result.clean:
            return StepResult(
                CommitReport(
                    upstream=commit.sha, subject=commit.subject, status=PickStatus.CLEAN, tree=result.tree
                ),
                result.tree,
            )
        ours = head if strategy is Strategy.MERGE else tree  # what the fork's side of the merge holds
        key = self._verdict_key(commit, result, ours)
        with tempfile.TemporaryDirectory(prefix="sluice-pick-") as tmp:
            if key is not None and self.verdicts is not None and key in self.verdicts:
                return self._replay(commit, result, self.verdicts[key], Path(tmp))
            outcomes = [
                self._file(path, stages, commit, head, Path(tmp), ours=ours)
                for path, stages in sorted(result.stages.items())
            ]
            step = self._finish(commit, result, outcomes, Path(tmp))
        if key is not None and self.verdicts is not None:
            self.verdicts[key] = _remembered(step, outcomes)
        return step

    def _verdict_key(self, commit: CommitInfo, result: MergeResult, ours: str) -> FactKey | None:
        """What determines a conflicted merge's outcome in planning: the commit, the merged tree and its
        index stages (so all three sides), the fork's side `ours` (where API users are searched), the
        configuration and the code that classifies."""
        if (
            self.verdicts is None
            or self.with_evidence
            or self.use_resolver
            or self.recall is not _nothing_remembered
        ):
            return None  # blame, memory and the resolver read more than the merge's own content
        stages = sorted((path, n, s.mode, s.oid) for path, by in result.stages.items() for n, s in by.items())
        if self._git_version is None:  # `git merge-file` writes the conflict blocks that are classified
            self._git_version = self.repo.run("--version").strip()
        content = [
            VERSIONS[FactKind.VERDICT],
            self._git_version,
            result.tree,
            ours,
            stages,
            self.config.model_dump_json(),
        ]
        return commit.sha, hashlib.sha256(json.dumps(content).encode()).hexdigest()

    def _replay(self, commit: CommitInfo, result: MergeResult, remembered: str, tmp: Path) -> StepResult:
        """A conflicted merge's outcome as planning found it before, its resolved files written again."""
        known = json.loads(remembered)
        report = CommitReport.model_validate_json(known["report"])
        if known["resolved"] is None:
            return StepResult(report, None)
        entries = {
            path: Stage(mode=mode, oid=self.git.write_blob(text.encode("utf-8", "surrogateescape")))
            for path, (mode, text) in known["resolved"].items()
        }
        tree = self.git.replace_in_tree(result.tree, entries, workdir=tmp)
        return StepResult(report.model_copy(update={"tree": tree}), tree, list(known["rules"]))

    def _pick_inputs(self, tree: str, commit: CommitInfo) -> tuple[str, str]:
        """(ours, theirs) whose merge base is the commit's parent: a cherry-pick as a merge of trees.

        git 2.39 has no `merge-tree --merge-base`, so ours is a probe commit holding `tree` on top of the
        commit's parent. A root commit is picked onto an empty base made for the purpose.
        """
        stamp = commit.committer_time
        if commit.parents:
            return self.repo.write_commit(
                tree, [commit.parents[0]], "sluice: pick", timestamp=stamp
            ), commit.sha
        base = self.repo.write_commit(
            self.repo.write_object(b"tree", b""), [], "sluice: empty base", timestamp=stamp
        )
        theirs = self.repo.write_commit(
            self.repo.tree_of(commit.sha), [base], "sluice: root", timestamp=stamp
        )
        return self.repo.write_commit(tree, [base], "sluice: pick", timestamp=stamp), theirs

    def _finish(
        self, commit: CommitInfo, result: MergeResult, outcomes: list[_FileOutcome], tmp: Path
    ) -> StepResult:
        files = tuple(_file_report(o) for o in outcomes)
        if any(o.text is None for o in outcomes):
            return StepResult(
                CommitReport(
                    upstream=commit.sha,
                    subject=commit.subject,
                    status=PickStatus.NEEDS_HUMAN,
                    tree=None,
                    files=files,
                ),
                None,
            )
        entries = {
            o.verdict.path: Stage(
                mode=o.stage.mode, oid=self.git.write_blob(o.text.encode("utf-8", "surrogateescape"))
            )
            for o in outcomes
            if o.stage is not None and o.text is not None
        }
        tree = self.git.replace_in_tree(result.tree, entries, workdir=tmp)
        proposed = any(o.how == "proposed" for o in outcomes)
        status = PickStatus.PROPOSED if proposed else PickStatus.AUTO_RESOLVED
        rules = sorted({how for o in outcomes for how in (o.how or "").split(",") if how})
        report = CommitReport(
            upstream=commit.sha, subject=commit.subject, status=status, tree=tree, files=files
        )
        return StepResult(report, tree, rules)

    def _file(
        self,
        path: str,
        stages: Mapping[int, Stage],
        commit: CommitInfo,
        head: str,
        tmp: Path,
        *,
        ours: str | None = None,
    ) -> _FileOutcome:
        """One conflicted file classified (and resolved where it can be): `head` is the commit whose history
        blame reads, `ours` the tree or commit of the fork's side (`head` when not given)."""
        problem = _unmergeable_reason(stages)
        if problem is None:
            blobs = self.repo.blobs(stages[i].oid for i in (1, 2, 3))
            texts = [blobs.get(stages[i].oid, b"") for i in (1, 2, 3)]
            if any(b"\0" in t for t in texts):
                problem = "binary file changed on both sides"
        if problem is not None:
            outcome = _FileOutcome(verdict=conflicts.unmergeable(path, problem), stage=None)
        else:
            parent = commit.parents[0] if commit.parents else None
            outcome = self._classify(
                path, stages, texts, ours or head, tmp, upstream_sha=commit.sha, upstream_base=parent
            )
        if self.with_evidence:
            since = commit.parents[0] if commit.parents else None
            outcome.hunk_blame = self._blame(path, [h.hunk for h in outcome.verdict.hunks], head, since)
            outcome.evidence = self._evidence(path, outcome.verdict, commit, outcome)
        else:
            outcome.evidence = FileEvidence(upstream=commit.sha, blame=(), component=None, symbol=None)
        return outcome

    def _classify(
        self,
        path: str,
        stages: Mapping[int, Stage],
        texts: list[bytes],
        fork_side: str,
        tmp: Path,
        *,
        upstream_sha: str,
        upstream_base: str | None,
    ) -> _FileOutcome:
        """`fork_side`: the tree or commit whose files are the fork's side (searched for API users)."""
        base, ours, theirs = (t.decode("utf-8", "surrogateescape") for t in texts)
        merged, _ = self.git.merge_file(texts[0], texts[1], texts[2], workdir=tmp)
        symbols = conflicts.api_symbols(path, base=base, theirs=theirs)
        uses, cut = self._uses(fork_side, path, symbols, upstream_base=upstream_base)
        verdict = conflicts.classify_file(
            path,
            base=base,
            ours=ours,
            theirs=theirs,
            merged=merged,
            uses={s: u for s, u in uses.items() if u},
            cut=cut,
            auto_resolve=self.config.auto_resolve_allowed(path),
        )
        outcome = _FileOutcome(verdict=verdict, stage=stages[2])
        if verdict.resolved is not None:
            outcome.text, outcome.how = verdict.resolved, ",".join(r.value for r in verdict.rules)
            return outcome
        remembered: str | None = None
        used: tuple[str, ...] = ()
        if verdict.hunks:  # the classifier split the merge; `rerere` reads it with the same `diff3.parse`
            known = self.recall([conflicts.key_of(h.hunk) for h in verdict.hunks])
            remembered, used = rerere.apply(merged, known)
        if remembered is not None and conflicts.check_resolution(path, remembered, reference=ours) is None:
            outcome.text, outcome.how, outcome.reused_keys = remembered, "reused", used
            return outcome
        if self.use_resolver and verdict.cls is not ConflictClass.UNKNOWN:
            outcome.hook = self._ask_resolver(
                path, base, ours, theirs, merged, verdict, upstream_sha=upstream_sha
            )
            if outcome.hook.status == "proposed":
                outcome.text, outcome.how = outcome.hook.text, "proposed"
        return outcome

    def _uses(
        self, fork_side: str, path: str, symbols: Sequence[str], *, upstream_base: str | None
    ) -> tuple[dict[str, list[conflicts.Use]], set[str]]:
        """For each symbol defined in `path`, the lines of `fork_side` (a tree or commit) that use it, found
        by its last name component (`ns::Cls::f`, `mod.f` -> `f`): as code (`conflicts.code_use`), on lines
        of the fork's own. A line that upstream's file has too, as of the commit's parent `upstream_base`, is
        upstream's: the commit changes it, or it merges cleanly. Upstream's files are read once for all.
        Also the symbols whose search stopped at `GREP_HITS` lines: their uses are only the first found."""
        suffixes = conflicts.use_suffixes(path)
        if not suffixes:
            return {}, set()  # no file can call them (api_symbols finds none in such a file)
        hits: dict[str, list[tuple[str, int, str]]] = {}
        cut: set[str] = set()
        for symbol in symbols:
            word = symbol.split("::")[-1].split(".")[-1]
            found = self.git.grep_word(fork_side, word, limit=GREP_HITS + 1, suffixes=suffixes)
            if len(found) > GREP_HITS:
                cut.add(symbol)
                found = found[:GREP_HITS]
            hits[symbol] = [
                (file, n, text)
                for file, n, text in found
                if conflicts.code_use(file, text, word, defined_in=path)
            ]
        wanted = {file for lines in hits.values() for file, _, _ in lines}
        files = self.repo.read_files(upstream_base, wanted) if upstream_base else {}
        upstream = {
            file: {line.strip() for line in data.decode("utf-8", "surrogateescape").splitlines()}
            for file, data in files.items()
        }
        return {
            symbol: [
                conflicts.Use(path=file, line=n, text=text)
                for file, n, text in lines
                if text.strip() not in upstream.get(file, ())
            ]
            for symbol, lines in hits.items()
        }, cut

    def _ask_resolver(
        self,
        path: str,
        base: str,
        ours: str,
        theirs: str,
        merged: str,
        verdict: FileVerdict,
        *,
        upstream_sha: str,
    ) -> ResolverOutcome:
        request = ResolverRequest.model_validate(
            {
                "path": path,
                "upstream_sha": upstream_sha,
                "base": base,
                "ours": ours,
                "theirs": theirs,
                "merged": merged,
                "class": verdict.cls.value,
                "evidence": [h.evidence for h in verdict.hunks],
            }
        )
        return run_resolver(
            self.config.resolver.command,
            request,
            timeout=self.config.resolver.timeout_seconds,
            check=lambda p, text: conflicts.check_resolution(p, text, reference=ours),
        )

    def _blame(
        self, path: str, hunks: Sequence[conflicts.Hunk3], head: str, since: str | None
    ) -> tuple[tuple[str, ...], ...]:
        """For each conflict block, the fork commits that last touched our side of it (or the line it sits
        at): the commits `head` has and `since` (the upstream commit's parent) lacks, so the walk ends at
        what upstream had. One walk for the file's blocks."""
        if not hunks:
            return ()
        starts = [max(h.line, 1) for h in hunks]
        ranges = [(start, start + max(len(h.ours), 1) - 1) for start, h in zip(starts, hunks, strict=True)]
        return tuple(self.git.blame(head, path, ranges, since=since))

    def _evidence(
        self, path: str, verdict: FileVerdict, commit: CommitInfo, outcome: _FileOutcome
    ) -> FileEvidence:
        blame = [sha for per_hunk in outcome.hunk_blame for sha in per_hunk]
        component = self.config.component_for(path)
        symbol = next((h.symbol for h in verdict.hunks if h.symbol), None)
        return FileEvidence(
            upstream=commit.sha,
            blame=tuple(dict.fromkeys(blame)),
            component=component.name if component else None,
            symbol=symbol,
        )


def _remembered(step: StepResult, outcomes: Sequence[_FileOutcome]) -> str:
    """A conflicted step's outcome as `Picker._replay` reads it: the report, the resolved texts, rules."""
    resolved = None
    if step.tree is not None:
        resolved = {
            o.verdict.path: (o.stage.mode, o.text)
            for o in outcomes
            if o.stage is not None and o.text is not None
        }
    report = step.report.model_copy(update={"tree": None}).model_dump_json()
    return json.dumps({"report": report, "resolved": resolved, "rules": step.rules})


def _unmergeable_reason(stages: Mapping[int, Stage]) -> str | None:
    if 1 not in stages:
        return "added on both sides with different contents"
    if 2 not in stages:
        return "deleted (or renamed) on fork trunk, modified upstream"
    if 3 not in stages:
        return "modified on fork trunk, deleted (or renamed) upstream"
    modes = {s.mode for s in stages.values()}
    if len(modes) > 1:
        return f"file mode changed ({', '.join(sorted(modes))})"
    if modes & set(SUBMODULE_OR_LINK):
        return "a submodule or symbolic link changed on both sides"
    return None


def _file_report(outcome: _FileOutcome) -> FileReport:
    verdict = outcome.verdict
    reused = set(outcome.reused_keys)
    hunks = tuple(
        HunkReport(
            line=h.hunk.line,
            cls=h.cls.value,
            rule=h.rule.value if h.rule else None,
            symbol=h.symbol,
            evidence=h.evidence,
            key=conflicts.key_of(h.hunk),
            reused=conflicts.key_of(h.hunk) in reused,
            blame=outcome.hunk_blame[i] if i < len(outcome.hunk_blame) else (),
        )
        for i, h in enumerate(verdict.hunks)
    )
    reason = verdict.reason
    if outcome.hook is not None:
        reason = f"{reason}; resolver {outcome.hook.status}: {outcome.hook.explanation}"
    assert outcome.evidence is not None
    return FileReport(
        path=verdict.path,
        cls=verdict.cls.value,
        resolved=outcome.text is not None,
        rule=outcome.how,
        reason=reason,
        hunks=hunks,
        evidence=outcome.evidence,
    )


TRAILER_LINE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*: |^[ \t]")


def with_trailers(message: str, trailers: Sequence[tuple[str, str]]) -> str:
    """Append trailers, joining the message's own trailer block when it ends with one (as git does)."""
    body = message.rstrip("\n")
    added = "\n".join(f"{key}: {value}" for key, value in trailers)
    head, _, last = body.rpartition("\n\n")
    if head and last and all(TRAILER_LINE.match(line) for line in last.splitlines()):
        return f"{body}\n{added}\n"
    return f"{body}\n\n{added}\n"


def commit_message(commit: CommitInfo, rules: Sequence[str]) -> str:
    """The upstream message with `Upstream-Commit` and one `Sluice-Resolution` trailer per rule used."""
    return with_trailers(
        commit.message, [("Upstream-Commit", commit.sha), *(("Sluice-Resolution", r) for r in rules)]
    )


@dataclass(frozen=True)
class PickRequest:
    onto: str  # full SHA of the commit to build on
    commits: tuple[CommitInfo, ...]
    strategy: Strategy
    dry_run: bool
    branch: str | None
    branch_old: str | None  # where the branch is now (None: it does not exist), for a compare-and-swap
    now: dt.datetime

    def __post_init__(self) -> None:
        shas = [c.sha for c in self.commits]
        twice = next((sha for i, sha in enumerate(shas) if sha in shas[:i]), None)
        if twice is not None:
            raise SluiceError(
                f"upstream commit {twice[:10]} is named twice in one pick", "name each upstream commit once"
            )


def check_branch(repo: HistoryReader, branch: str, *, onto: str, trunk: str) -> None:
    """Refuse a `--branch` that is the ref the pick builds on or fork trunk: a pick never moves those."""
    target = f"refs/heads/{branch}"
    out = repo.run("rev-parse", "--symbolic-full-name", "--end-of-options", onto, ok=(0, 128))
    # git 2.39 echoes `--end-of-options` back; a SHA or a revision expression names no ref at all.
    onto_ref = next((line for line in out.splitlines() if line.startswith("refs/")), None)
    for what, ref in (("--onto's own ref", onto_ref), ("fork trunk", f"refs/heads/{trunk}")):
        if target == ref:
            raise SluiceError(
                f"--branch {branch} is {what} ({ref}): a pick writes its own branch, never that one",
                "name another --branch, or leave it out for sluice/pick-<sha>",
            )


def _changes_nothing(step: StepResult, tree: str, strategy: Strategy) -> bool:
    """A cherry-pick whose tree is the tree it was applied to: the fork has the commit already.

    A merge that leaves the tree alone still records that upstream was merged, so it is written."""
    return strategy is Strategy.CHERRY_PICK and step.tree == tree


def run_pick(picker: Picker, request: PickRequest) -> PickReport:
    """Apply every commit; write the branch only when all of them applied (never half-written).

    A commit whose pick would be empty is reported as already applied and gets no commit of its own.
    Probes go to a throwaway object directory; only the objects of a branch that is written stay.
    """
    with picker.repo.quarantined() as probe:
        head, reports = _apply_all(picker.through(probe), request)
        reported = {r.upstream for r in reports}
        untried = tuple(c.sha for c in request.commits if c.sha not in reported)
        written = (
            head is not None and head != request.onto and not request.dry_run and request.branch is not None
        )
        if written:
            assert request.branch is not None and head is not None
            have = [request.onto, *(c.sha for c in request.commits)]
            picker.repo.adopt(probe, head, have=have)
            picker.git.update_branch(request.branch, head, old=request.branch_old)
    return PickReport(
        onto=request.onto,
        strategy=request.strategy.value,
        dry_run=request.dry_run,
        branch=request.branch,
        head=head if written else None,
        commits=reports,
        untried=untried,
    )


def _apply_all(picker: Picker, request: PickRequest) -> tuple[str | None, tuple[CommitReport, ...]]:
    """(the head with every commit applied, or None when one needs a human; every commit's report)."""
    head, tree = request.onto, picker.repo.tree_of(request.onto)
    blocked = False
    reports: list[CommitReport] = []
    merging = request.strategy is Strategy.MERGE
    named = {c.sha for c in request.commits}
    for commit in request.commits:
        if blocked and merging:
            break  # each later merge would bring the blocked commit, and its conflicts, along
        if merging and is_ancestor(picker.repo, commit.sha, head):  # merged already, with a later one
            reports.append(_already(commit))
            continue
        step = picker.step(head, tree, commit, strategy=request.strategy)
        if merging:
            step = replace(step, report=_with_brought(picker.repo, step.report, head=head, named=named))
        blocked = blocked or step.tree is None
        if step.tree is None or blocked:
            reports.append(step.report)
            continue
        if _changes_nothing(step, tree, request.strategy):
            reports.append(step.report.model_copy(update={"status": PickStatus.ALREADY_APPLIED}))
            continue
        tree = step.tree
        parents = [head, commit.sha] if request.strategy is Strategy.MERGE else [head]
        message = commit_message(commit, step.rules)
        head = picker.git.commit(tree, parents, message, author=commit, at=int(request.now.timestamp()))
        reports.append(step.report.model_copy(update={"commit": None if request.dry_run else head}))
    return (None if blocked else head), tuple(reports)


def _with_brought(repo: HistoryReader, report: CommitReport, *, head: str, named: set[str]) -> CommitReport:
    """A merge's report with the earlier upstream commits it brings along, and for each conflicted file the
    brought commits (itself included) that change it: its conflicts may be theirs."""
    upstream, head = validate_sha(report.upstream), validate_sha(head)
    stream = repo.run("rev-list", "--first-parent", "--reverse", upstream, f"^{head}").split()
    brings = tuple(sha for sha in stream if sha != upstream and sha not in named)
    if not brings:
        return report
    files = tuple(
        f.model_copy(update={"changed_by": _changed_by(repo, f.path, upstream=upstream, head=head)})
        for f in report.files
    )
    return report.model_copy(update={"brings": brings, "files": files})


def _changed_by(repo: HistoryReader, path: str, *, upstream: str, head: str) -> tuple[str, ...]:
    """The upstream stream commits between `head` and `upstream` that change `path`, oldest first."""
    # literal: an upstream file named like pathspec magic (`:(glob)…`) is that file, nothing more
    log = ("--literal-pathspecs", "log", "--first-parent", "--reverse", "--format=%H")
    found = repo.run(*log, upstream, f"^{head}", "--", path)
    return tuple(found.split())


def _already(commit: CommitInfo) -> CommitReport:
    """A commit the head has already (a merge of a later upstream commit brought it): nothing to write."""
    return CommitReport(
        upstream=commit.sha, subject=commit.subject, status=PickStatus.ALREADY_APPLIED, tree=None
    )


def pick_in_order(
    picker: Picker,
    onto: str,
    commits: Sequence[CommitInfo],
    *,
    strategy: Strategy,
    trailers: Sequence[tuple[str, str]] = (),
) -> tuple[str | None, tuple[CommitReport, ...]]:
    """Apply commits onto `onto` until one needs a human: (head of what applied or None, their reports and
    the blocking one's). Commits are dated like their upstream commits, so the same inputs give the same
    SHAs and a re-run pushes nothing new. Only the objects of the commits that applied stay."""
    with picker.repo.quarantined() as probe:
        head, reports = _apply_until_blocked(picker.through(probe), onto, commits, strategy, trailers)
        if head is not None:
            picker.repo.adopt(probe, head, have=[onto, *(c.sha for c in commits)])
    return head, reports


def _apply_until_blocked(
    picker: Picker,
    onto: str,
    commits: Sequence[CommitInfo],
    strategy: Strategy,
    trailers: Sequence[tuple[str, str]],
) -> tuple[str | None, tuple[CommitReport, ...]]:
    git = picker.git
    head, tree = onto, picker.repo.tree_of(onto)
    reports: list[CommitReport] = []
    for commit in commits:
        step = picker.step(head, tree, commit, strategy=strategy)
        if step.tree is None:
            reports.append(step.report)
            break
        tree = step.tree
        parents = [head, commit.sha] if strategy is Strategy.MERGE else [head]
        message = with_trailers(commit_message(commit, step.rules), trailers)
        head = git.commit(tree, parents, message, author=commit, at=commit.committer_time)
        reports.append(step.report.model_copy(update={"commit": head}))
    applied = any(r.commit is not None for r in reports)
    return (head if applied else None), tuple(reports)


def learn_resolutions(
    picker: Picker, upstream: CommitInfo, resolved: CommitInfo
) -> dict[str, tuple[str, tuple[str, ...]]]:
    """What a human's resolution commit teaches: {conflict key: (path, lines)} for each block it resolved.

    `resolved` is the fork commit that carries `upstream` picked by hand onto its first parent. The probe
    it merges is thrown away.
    """
    with picker.repo.quarantined() as probe:
        return _learn(picker.through(probe), upstream, resolved)


def _learn(
    picker: Picker, upstream: CommitInfo, resolved: CommitInfo
) -> dict[str, tuple[str, tuple[str, ...]]]:
    onto = resolved.parents[0]
    ours = picker.repo.write_commit(
        picker.repo.tree_of(onto), [upstream.parents[0]], "sluice: learn", timestamp=upstream.committer_time
    )
    result = picker.git.merge(ours, upstream.sha)
    learned: dict[str, tuple[str, tuple[str, ...]]] = {}
    with tempfile.TemporaryDirectory(prefix="sluice-learn-") as tmp:
        for path, stages in sorted(result.stages.items()):
            if _unmergeable_reason(stages) is not None:
                continue
            blobs = picker.repo.blobs(stages[i].oid for i in (1, 2, 3))
            merged, _ = picker.git.merge_file(
                *(blobs.get(stages[i].oid, b"") for i in (1, 2, 3)), workdir=Path(tmp)
            )
            final = picker.repo.read_file(resolved.sha, path)
            if final is None:
                continue
            taught = rerere.learn(merged, final.decode("utf-8", "surrogateescape"))
            learned.update((key, (path, lines)) for key, lines in taught.items())
    return learned
