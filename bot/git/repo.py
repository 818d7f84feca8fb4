"""Git adapter: reads history, diffs, blobs and patch-ids, and probes merges without a work tree."""

from __future__ import annotations

import copy
import difflib
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import zlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from bot.core.diffparse import COMMIT_MARK, parse_patch_section, split_log
from bot.core.errors import GitError, MissingObject
from bot.core.ingestion import COMMITTER
from bot.core.models import CommitInfo, FileChange
from bot.core.refs import REV_STEPS, SHA_RE, validate_ref, validate_rev, validate_sha
from bot.git.environment import git_environ
from bot.ports import MergeResult, Stage

TZ_RE = re.compile(r"^[+-][0-9]{4}$")
# What opening a repository asks of it: where its objects are, whether it is shallow, whether the path is
# its top (`--show-cdup` prints nothing there).
REPO_FACTS = ("--absolute-git-dir", "--git-common-dir", "--is-shallow-repository", "--show-cdup")
LOOSE_COMPRESSION = 1  # git's default for loose objects (core.looseCompression)
FIELD = "\x1f"
META_FORMAT = FIELD.join(["%H", "%P", "%an", "%ae", "%ad", "%ct", "%B"])  # with --date=raw: "<epoch> <tz>"


SUFFIX = re.compile(r"\.[A-Za-z0-9]{1,8}")  # a file suffix for grep_word's pathspecs: nothing a glob reads
SHA_PREFIX = re.compile(r"[0-9a-f]{7,40}")  # what reads as a commit's SHA rather than a ref's name
# How git names an object it cannot read (a partial clone, a snapshot without large blobs).
MISSING_OBJECT = re.compile(
    rb"(?:unable to read|bad object|missing blob object|could not read)(?: tree| blob)? '?([0-9a-f]{40})",
    re.IGNORECASE,
)
# A git command failed for a reason Sluice cannot name (a lock another process holds, a full disk, a corrupt
# object): like any unknown failure, a job tries it again.
GIT_FAILED_REMEDY = "run it again; if git fails the same way, check the repository (`git fsck`) and the disk"
# What an operator's ~/.gitconfig could change in the listings and patches Sluice parses, pinned on the
# command line: only the system config is off (GIT_CONFIG_NOSYSTEM), since the global one may hold the
# credential and proxy settings git needs. Listing: log.showRoot, diff.relative, diff.ignoreSubmodules,
# diff.orderFile, log.showSignature. Patch: diff.noprefix and diff.mnemonicPrefix, diff.submodule (`log`
# prints no `diff --git` section), diff.interHunkContext, diff.algorithm, diff.indentHeuristic,
# color.diff, diff.external and textconv drivers.
LISTING_PINS = ("--root", "--no-relative", "--ignore-submodules=none", "-O/dev/null", "--no-show-signature")
PATCH_PINS = (
    "--src-prefix=a/",
    "--dst-prefix=b/",
    "--submodule=short",
    "--inter-hunk-context=0",
    "--diff-algorithm=myers",
    "--indent-heuristic",
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
)
RAW_ONE = (
    "log",
    "-1",
    "--raw",
    "--no-renames",
    "--no-abbrev",
    "--diff-merges=first-parent",
    *LISTING_PINS,
    "--format=",
)
PATCH_ID_LOG = ("--no-merges", "-p", *LISTING_PINS, *PATCH_PINS, "--format=commit %H")
DIFF_OPTIONS = ("--raw", "-p", "-U0", "--no-renames", "--no-abbrev", *LISTING_PINS, *PATCH_PINS)


def command_failure(command: str, stderr: bytes, returncode: int) -> GitError:
    """What a failed git command tells its caller: the object it lacked, or git's last word."""
    said = stderr.decode("utf-8", "replace").strip().splitlines()
    message = f"git {command} failed: {said[-1] if said else returncode}"
    missing = MISSING_OBJECT.search(message.encode())
    if missing is not None:
        return MissingObject(message, oid=missing.group(1).decode())
    return GitError(message, GIT_FAILED_REMEDY, retryable=True)


class GitRepo:
    """One local repository (bare or not), driven through `git` with an explicit `cwd`."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path).resolve()
        if not self.path.exists():
            raise GitError(f"{path} does not exist", "pass --repo the path of a clone or mirror")
        if not self.path.is_dir():
            raise GitError(
                f"{path} is not a directory, so no git repository",
                "pass --repo the path of a clone or mirror",
            )
        self.env = git_environ()
        proc = subprocess.run(
            ["git", "rev-parse", *REPO_FACTS],
            cwd=self.path,
            capture_output=True,
            env=self.env,
        )
        fields = proc.stdout.decode("utf-8", "surrogateescape").split("\n")
        if proc.returncode or len(fields) < 4 or fields[3]:  # `--show-cdup` is empty at the top only
            raise GitError(f"{path} is not a git repository", "pass --repo the path of a clone or mirror")
        self.git_dir = Path(fields[0])
        self.objects = (self.path / fields[1]).resolve() / "objects"
        self.quarantine: Path | None = None  # where this view writes objects, when it is a probe view
        # Commits whose diff needs an object this repository lacks: SHA -> the path git could not read.
        self.unreadable: dict[str, str] = {}
        if fields[2] == "true":
            raise GitError(
                f"{path} is a shallow clone; Sluice needs the whole history to recognise ingested commits",
                "run `git fetch --unshallow` in it, or clone without --depth",
            )

    @contextmanager
    def quarantined(self) -> Iterator[GitRepo]:
        """A view of this repository whose new objects go to a throwaway directory, removed on exit.

        As git's own quarantine for incoming pushes: git reads the repository's objects as an alternate
        and writes only into the temporary directory, so probes (plans, dry runs) leave nothing behind.
        A view that is already quarantined is returned as it is.
        """
        if self.quarantine is not None:
            yield self
            return
        tmp = Path(tempfile.mkdtemp(prefix="sluice-objects-"))
        view = copy.copy(self)
        inherited = self.env.get("GIT_ALTERNATE_OBJECT_DIRECTORIES")
        view.env = {
            **self.env,
            "GIT_OBJECT_DIRECTORY": str(tmp),
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": os.pathsep.join(filter(None, [str(self.objects), inherited])),
        }
        view.quarantine = tmp
        try:
            yield view
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def adopt(self, view: GitRepo, head: str, *, have: Sequence[str]) -> int:
        """Move the objects a quarantined view wrote that `head` needs into this repository, so a ref may
        point at `head` once the view is gone; `have` are commits the repository has (`head`'s base and
        the upstream commits picked), where the walk stops. Returns how many objects moved."""
        if view.quarantine is None:
            return 0
        bases = [validate_sha(sha) for sha in have]
        listing = view.run("rev-list", "--objects", validate_sha(head), "--not", *bases, "--")
        moved = 0
        for line in listing.splitlines():
            sha = line[:40]
            source = view.quarantine / sha[:2] / sha[2:]
            target = self.objects / sha[:2] / sha[2:]
            if source.exists() and not target.exists():
                _place(target, source.read_bytes())
                moved += 1
        return moved

    def plumbing(self) -> Plumbing:
        """The merges and object writes of a pick, through this repository (or view)."""
        return Plumbing(self)

    # -- running git -------------------------------------------------------------------------------

    def run(self, *args: str, stdin: bytes | None = None, ok: Sequence[int] = (0,)) -> str:
        return self.run_bytes(*args, stdin=stdin, ok=ok).decode("utf-8", "replace")

    def run_bytes(
        self, *args: str, stdin: bytes | None = None, ok: Sequence[int] = (0,), globs: bool = False
    ) -> bytes:
        """git's output. Pathspecs are literal (`GIT_LITERAL_PATHSPECS`) unless `globs`, for the pathspecs
        Sluice writes itself (never a path or pattern from outside)."""
        env = {**self.env, "GIT_LITERAL_PATHSPECS": "0"} if globs else self.env
        proc = subprocess.run(["git", *args], cwd=self.path, input=stdin, capture_output=True, env=env)
        if proc.returncode not in ok:
            raise command_failure(args[0], proc.stderr, proc.returncode)
        return proc.stdout

    # -- refs --------------------------------------------------------------------------------------

    def resolve(self, ref: str, *, default_for: str | None = None) -> str:
        """The commit a revision names; for an unknown one, an error naming close refs (and the option
        whose default it was, when the caller tried a default)."""
        sha = self.resolve_optional(ref)
        if sha is None:
            what = f" (the default for {default_for})" if default_for else ""
            close = self.close_refs(REV_STEPS.sub("", ref))
            hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            if default_for:
                remedy = f"pass {default_for} REF"
            elif SHA_PREFIX.fullmatch(ref):
                remedy = "this repository has no such commit: check the SHA, or fetch what holds it"
            else:
                remedy = "check the name with `git branch -a` / `git tag`"
            raise GitError(f"unknown ref {ref!r}{what} in {self.path}{hint}", remedy)
        return sha

    def resolve_optional(self, ref: str) -> str | None:
        """The commit a revision names, or None when there is no such commit."""
        validate_rev(ref)
        # --end-of-options: even a validated name is never read as an option.
        out = self.run(
            "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}", ok=(0, 1, 128)
        ).strip()
        return out if SHA_RE.match(out) else None

    def close_refs(self, name: str, *, limit: int = 3) -> list[str]:
        """Branch, remote-tracking and tag names that look like `name`, closest first."""
        out = self.run("for-each-ref", "--format=%(refname:short)", "refs/heads", "refs/remotes", "refs/tags")
        return difflib.get_close_matches(name, out.split(), n=limit, cutoff=0.6)

    def first_parent_times(self, head: str) -> list[tuple[str, int]]:
        """The first-parent stream ending at `head`, oldest first, with committer times."""
        out = self.run("log", "--first-parent", "--reverse", "--format=%H %ct", validate_sha(head), "--")
        return [(sha, int(ts)) for sha, ts in (line.split() for line in out.splitlines())]

    def commits(self, *revs: str, first_parent: bool = False, no_merges: bool = False) -> list[CommitInfo]:
        """Commit metadata for a revision range given as arguments (SHAs and `--not`), oldest first."""
        flags = [*(["--first-parent"] if first_parent else []), *(["--no-merges"] if no_merges else [])]
        out = self.run(
            "log", "--reverse", "--date=raw", *flags, f"--format={COMMIT_MARK}{META_FORMAT}", *revs, "--"
        )
        return [_commit_info(chunk) for chunk in out.split(COMMIT_MARK)[1:]]

    def range_patches(self, *revs: str, no_merges: bool = False) -> dict[str, tuple[FileChange, ...]]:
        """Raw + `-U0` patches of every commit in a range (against the first parent), in log order."""
        flags = ["--no-merges"] if no_merges else ["--diff-merges=first-parent"]
        options = (*flags, *DIFF_OPTIONS, f"--format={COMMIT_MARK}%H")
        try:
            out = self.run("log", *options, *revs, "--")
        except GitError:  # a missing object: go commit by commit, an unreadable one keeps only its file list
            shas = self.run("rev-list", *(["--no-merges"] if no_merges else []), *revs, "--").split()
            out = self.log_each(options, shas, mark=COMMIT_MARK.encode()).decode("utf-8", "replace")
        return {sha: parse_patch_section(body) for sha, body in split_log(out)}

    def patch_ids(self, *revs: str, stdin_shas: Sequence[str] = ()) -> dict[str, str]:
        """commit SHA -> `git patch-id --stable` for a range (or for the listed SHAs), merges excluded.

        A commit whose diff needs a missing object gets no patch-id; it is noted in `unreadable`.
        """
        if stdin_shas:
            args = ["log", "--no-walk=unsorted", "--stdin", *PATCH_ID_LOG]
            data = _sha_lines(stdin_shas)
        elif revs:
            args = ["log", *PATCH_ID_LOG, *revs, "--"]
            data = None
        else:
            return {}
        env = self.env
        with (
            tempfile.TemporaryFile() as errors,  # a pipe could fill up while nobody reads it
            subprocess.Popen(
                ["git", *args],
                cwd=self.path,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
                env=env,
            ) as log,
        ):
            assert log.stdin is not None
            # `log --stdin` reads every SHA before it writes anything, so this cannot block on our side.
            log.stdin.write(data or b"")
            log.stdin.close()
            patch = subprocess.run(
                ["git", "patch-id", "--stable"], cwd=self.path, stdin=log.stdout, capture_output=True, env=env
            )
            log.wait()
            errors.seek(0)
            said = errors.read().decode("utf-8", "replace").strip().splitlines()
        if log.returncode or patch.returncode:
            raise GitError(
                f"git patch-id failed: {said[-1] if said else log.returncode or patch.returncode}",
                "check that the repository is readable and not corrupt",
            )
        pairs = (line.split() for line in patch.stdout.decode().splitlines())
        return {commit: pid for pid, commit in pairs}

    def log_each(self, options: Sequence[str], shas: Sequence[str], *, mark: bytes) -> bytes:
        """`git log OPTIONS` of the listed commits in order, going on past any whose diff needs a missing
        object: such a commit keeps only its `--raw` file list (when its trees can be read) and is noted in
        `unreadable`.
        """
        env = self.env
        out: list[bytes] = []
        remaining = list(shas)
        while remaining:
            proc = subprocess.run(
                ["git", "log", "--no-walk=unsorted", "--stdin", *LISTING_PINS, *options],
                cwd=self.path,
                input=_sha_lines(remaining),
                capture_output=True,
                env=env,
            )
            if proc.returncode == 0:
                out.append(proc.stdout)
                break
            found = MISSING_OBJECT.search(proc.stderr)
            if found is None:
                said = proc.stderr.decode("utf-8", "replace").strip()[-300:]
                raise GitError(f"git log failed: {said}", GIT_FAILED_REMEDY, retryable=True)
            oid = found.group(1).decode()
            kept, sha, raw = self._failed_commit(proc.stdout, remaining, oid, mark=mark)
            self.unreadable[sha] = _path_of(raw, oid)
            out += [kept, mark + sha.encode() + b"\n\n" + raw.strip(b"\n") + b"\n"]
            remaining = remaining[remaining.index(sha) + 1 :]
        return b"".join(out)

    def _failed_commit(
        self, stdout: bytes, remaining: Sequence[str], oid: str, *, mark: bytes
    ) -> tuple[bytes, str, bytes]:
        """The output to keep, the commit git died on and its `--raw` lines. A missing blob fails after
        the commit's header was written; a missing tree fails before, so the culprit comes after it."""
        start = stdout.rfind(b"\n" + mark) + 1  # 0 when the last section is the first one
        last = (
            stdout[start + len(mark) : start + len(mark) + 40].decode()
            if stdout[start:].startswith(mark)
            else None
        )
        if last is not None and last in remaining:
            raw = self._raw_or_none(last)
            if raw is not None and oid.encode() in raw:
                return stdout[:start], last, raw
        after = remaining[remaining.index(last) + 1 :] if last in remaining else remaining
        for sha in after:
            raw = self._raw_or_none(sha)
            if raw is None or oid.encode() in raw:
                return stdout, sha, raw or b""
        raise GitError(f"git log failed: unable to read {oid}", "check that the repository is not corrupt")

    def _raw_or_none(self, sha: str) -> bytes | None:
        """A commit's `--raw` lines against its first parent, or None when its trees cannot be read."""
        proc = subprocess.run(
            ["git", *RAW_ONE, validate_sha(sha)],
            cwd=self.path,
            capture_output=True,
            env=self.env,
        )
        return proc.stdout if proc.returncode == 0 else None

    def patches_of(
        self, shas: Sequence[str], *, paths: Sequence[str] = ()
    ) -> dict[str, tuple[FileChange, ...]]:
        """Raw + `-U0` patches of the listed commits (merges against their first parent), optionally
        limited to some paths."""
        if not shas:
            return {}
        out = self.run(
            "log",
            "--no-walk=unsorted",
            "--stdin",
            "--diff-merges=first-parent",
            *DIFF_OPTIONS,
            f"--format={COMMIT_MARK}%H",
            "--",
            *paths,
            stdin=_sha_lines(shas),
        )
        return {sha: parse_patch_section(body) for sha, body in split_log(out)}

    def changed_files(self, shas: Sequence[str]) -> dict[str, tuple[FileChange, ...]]:
        """The files each listed commit changes against its first parent, without hunks.

        Reads no blob, so it works where a blob is missing (partial clones, snapshots without large files);
        a commit whose trees are missing too comes back without files and is noted in `unreadable`.
        """
        if not shas:
            return {}
        options = (
            "--diff-merges=first-parent",
            "--raw",
            "--no-renames",
            "--no-abbrev",
            f"--format={COMMIT_MARK}%H",
        )  # `log_each` adds LISTING_PINS
        out = self.log_each(options, shas, mark=COMMIT_MARK.encode()).decode("utf-8", "replace")
        return {sha: parse_patch_section(body) for sha, body in split_log(out)}

    def missing_objects(self, shas: Iterable[str]) -> set[str]:
        """The objects among `shas` this repository cannot read."""
        wanted = sorted({validate_sha(s) for s in shas})
        if not wanted:
            return set()
        out = self.run("cat-file", "--batch-check=%(objectname)", stdin=("\n".join(wanted) + "\n").encode())
        return {line.split()[0] for line in out.splitlines() if line.endswith(" missing")}

    def read_file(self, rev: str, path: str) -> bytes | None:
        """A file's content at a commit or tree, or None when it is not there."""
        proc = subprocess.run(
            ["git", "cat-file", "blob", f"{validate_sha(rev)}:{path}"],
            cwd=self.path,
            capture_output=True,
            env=self.env,
        )
        return proc.stdout if proc.returncode == 0 else None

    def read_file_in_tree(self, tree: str, path: str) -> str | None:
        """A file's text in a tree (or commit), or None when it is not there."""
        data = self.read_file(tree, path)
        return None if data is None else data.decode("utf-8", "surrogateescape")

    def read_files(self, rev: str, paths: Iterable[str]) -> dict[str, bytes]:
        """Many files as the commit or tree `rev` has them, through one `git cat-file --batch`: those that
        are there (and are blobs). A path holding a line break cannot be asked for and is left out."""
        rev = validate_sha(rev)
        wanted = sorted({p for p in paths if "\n" not in p and "\r" not in p})
        found = self._batch([f"{rev}:{path}" for path in wanted], kind=b"blob")
        return {path: found[f"{rev}:{path}"] for path in wanted if f"{rev}:{path}" in found}

    def blobs(self, shas: Iterable[str]) -> dict[str, bytes]:
        """Read many blobs through one `git cat-file --batch`."""
        return self._batch(sorted({validate_sha(s) for s in shas}))

    def _batch(self, wanted: Sequence[str], *, kind: bytes | None = None) -> dict[str, bytes]:
        """What `git cat-file --batch` gives for each object name in `wanted` that it finds (of type `kind`,
        when given): `<oid> <type> <size>` and the content, or `<name> missing` (a name may hold spaces)."""
        if not wanted:
            return {}
        out = self.run_bytes("cat-file", "--batch", stdin=("\n".join(wanted) + "\n").encode())
        result: dict[str, bytes] = {}
        pos = 0
        for name in wanted:
            header_end = out.index(b"\n", pos)
            header = out[pos:header_end]
            if header.endswith((b" missing", b" ambiguous")):
                pos = header_end + 1
                continue
            _, found, length = header.split()
            size = int(length)
            if kind is None or found == kind:
                result[name] = out[header_end + 1 : header_end + 1 + size]
            pos = header_end + 1 + size + 1
        return result

    # -- merges without a work tree ----------------------------------------------------------------

    def tree_of(self, commit: str) -> str:
        return self.run("rev-parse", f"{validate_sha(commit)}^{{tree}}").strip()

    def write_commit(
        self,
        tree: str,
        parents: Sequence[str],
        message: str,
        *,
        timestamp: int,
        author: str = "Sluice <sluice@localhost>",
        author_time: int | None = None,
        author_tz: str = "+0000",
    ) -> str:
        """Write a commit object directly into the object database (no process, no ref).

        The timestamp matters: git's merge-base walk goes in date order, and a commit dated 1970 would make
        it walk the whole history before reaching it.
        """
        if any(ch in author for ch in "\n\0") or not TZ_RE.match(author_tz):
            raise GitError(
                f"not a valid author identity or time zone: {author!r} {author_tz!r}",
                "give `Name <email>` on one line and a zone such as +0100",
            )
        lines = [f"tree {validate_sha(tree)}", *(f"parent {validate_sha(p)}" for p in parents)]
        authored = author_time if author_time is not None else timestamp
        body = "\n".join(
            [
                *lines,
                f"author {author} {authored} {author_tz}",
                f"committer {COMMITTER} {timestamp} +0000",
                "",
                message,
            ]
        )
        data = body.encode() if body.endswith("\n") else (body + "\n").encode()
        return self.write_object(b"commit", data)

    def write_object(self, kind: bytes, data: bytes) -> str:
        """Store a loose object in-process, as `git hash-object -w` would, and return its SHA.

        A process per object would cost more than the merges it serves.
        """
        raw = b"%s %d\0%s" % (kind, len(data), data)
        sha = hashlib.sha1(raw).hexdigest()
        target = (self.quarantine or self.objects) / sha[:2] / sha[2:]
        if not target.exists():
            _place(target, zlib.compress(raw, LOOSE_COMPRESSION))
        return sha


def _line_ranges(ranges: Sequence[tuple[int, int]]) -> list[str]:
    """`git blame`'s `-L` options for `ranges` (git takes them overlapping too, and in any order)."""
    options: list[str] = []
    for a, b in ranges:
        if a < 1 or b < a:
            raise ValueError(f"not a range of lines: {a}..{b}")
        options += ["-L", f"{a},{b}"]
    return options


class Plumbing:
    """Object-level writes and three-way merges for `sluice pick`; never touches a work tree or HEAD."""

    def __init__(self, repo: GitRepo) -> None:
        self.repo = repo

    def merge(self, ours: str, theirs: str) -> MergeResult:
        out = self.repo.run("merge-tree", "--write-tree", "-z", "--no-messages", ours, theirs, ok=(0, 1))
        fields = out.split("\0")
        stages: dict[str, dict[int, Stage]] = {}
        for entry in fields[1:]:
            if not entry:
                break
            meta, _, path = entry.partition("\t")
            mode, oid, stage = meta.split()
            stages.setdefault(path, {})[int(stage)] = Stage(mode=mode, oid=oid)
        return MergeResult(tree=fields[0], stages=stages)

    def merge_file(self, base: bytes, ours: bytes, theirs: bytes, *, workdir: Path) -> tuple[str, int]:
        """`git merge-file --diff3` of three texts: (merged text with diff3 markers, number of conflicts)."""
        names = []
        for name, data in (("ours", ours), ("base", base), ("theirs", theirs)):
            target = workdir / name
            target.write_bytes(data)
            names.append(str(target))
        proc = subprocess.run(
            ["git", "merge-file", "-p", "--diff3", "-L", "ours", "-L", "base", "-L", "theirs", "--", *names],
            cwd=workdir,
            capture_output=True,
            env=self.repo.env,
        )
        if proc.returncode < 0 or proc.returncode > 127:
            said = proc.stderr.decode("utf-8", "replace")[-500:]
            raise GitError(f"git merge-file failed: {said}", GIT_FAILED_REMEDY, retryable=True)
        return proc.stdout.decode("utf-8", "surrogateescape"), proc.returncode  # lossless for any bytes

    def write_blob(self, data: bytes) -> str:
        return self.repo.write_object(b"blob", data)

    def replace_in_tree(self, tree: str, entries: dict[str, Stage], *, workdir: Path) -> str:
        """A tree equal to `tree` with the given paths set to the given blobs (through a private index)."""
        env = {**self.repo.env, "GIT_INDEX_FILE": str(workdir / "index")}

        def git(*args: str, stdin: bytes | None = None) -> str:
            proc = subprocess.run(
                ["git", *args], cwd=self.repo.path, input=stdin, capture_output=True, env=env
            )
            if proc.returncode:
                raise command_failure(args[0], proc.stderr, proc.returncode)
            return proc.stdout.decode().strip()

        git("read-tree", validate_sha(tree))
        listing = "".join(f"{e.mode} {validate_sha(e.oid)}\t{path}\0" for path, e in entries.items())
        git("update-index", "-z", "--index-info", stdin=listing.encode())
        return git("write-tree")

    def commit(self, tree: str, parents: Sequence[str], message: str, *, author: CommitInfo, at: int) -> str:
        """A commit with the upstream author and date, committed by Sluice at `at`."""
        return self.repo.write_commit(
            tree,
            parents,
            message,
            timestamp=at,
            author=f"{author.author_name} <{author.author_email}>",
            author_time=author.author_time,
            author_tz=author.author_tz,
        )

    def update_branch(self, branch: str, new: str, *, old: str | None) -> None:
        """Move `refs/heads/<branch>` to `new` only if it is still at `old` (None: must not exist)."""
        ref = f"refs/heads/{validate_ref(branch)}"
        self.repo.run("update-ref", "-m", "sluice pick", ref, validate_sha(new), old or "0" * 40)

    def blame(
        self, rev: str, path: str, ranges: Sequence[tuple[int, int]], *, since: str | None = None
    ) -> list[tuple[str, ...]]:
        """For each range `(start, end)` of lines of `path` at `rev`, the commits that last touched them, in
        line order, unique; with `since`, only commits `since` lacks (the walk stops there, and lines older
        than it name no commit). One walk for all ranges; a range that starts past the file's end (which git
        refuses, and with it the others) names no commit."""
        revs = f"{validate_sha(since)}..{validate_sha(rev)}" if since else validate_sha(rev)
        out = self.repo.run(
            "blame", "--root", "--porcelain", *_line_ranges(ranges), revs, "--", path, ok=(0, 128)
        )
        if not out and len(ranges) > 1:
            return [found for one in ranges for found in self.blame(rev, path, [one], since=since)]
        by_line: dict[int, str] = {}
        boundary: set[str] = set()
        current = ""
        for line in out.splitlines():
            fields = line.split(" ")
            if SHA_RE.match(fields[0]) and len(fields) >= 3:  # `sha orig final [count]`, one per line
                current = fields[0]
                by_line[int(fields[2])] = current
            elif line == "boundary":
                boundary.add(current)  # (with --root) the commit a range stops at, for every older one
        named = {n: sha for n, sha in by_line.items() if sha not in boundary}
        return [tuple(dict.fromkeys(named[n] for n in range(a, b + 1) if n in named)) for a, b in ranges]

    def grep_word(
        self, rev: str, word: str, *, limit: int = 20, suffixes: Sequence[str] = ()
    ) -> list[tuple[str, int, str]]:
        """Lines of the tree `rev` (or a commit's) that use `word` as a whole word: (path, line, text), at
        most `limit` of them; only in files whose names end in one of `suffixes` (any case), when given."""
        rev = validate_sha(rev)
        paths = [f":(icase)*{suffix}" for suffix in suffixes if SUFFIX.fullmatch(suffix)]
        if len(paths) != len(suffixes):
            raise ValueError(f"not a file suffix: {suffixes!r}")
        args = ("grep", "-n", "-z", "-w", "-F", "-I", "--no-color", "-e", word, rev, "--", *paths)
        out = self.repo.run_bytes(*args, ok=(0, 1), globs=True).decode("utf-8", "replace")
        hits = []
        for line in out.split("\n")[:limit]:
            fields = line.split("\0", 2)  # `rev:path\0line\0text`: paths may hold ':' but never NUL
            if len(fields) == 3:
                hits.append((fields[0].removeprefix(f"{rev}:"), int(fields[1]), fields[2].strip()))
        return hits


def _path_of(raw: bytes, oid: str) -> str:
    """The path whose old or new blob is `oid` in a commit's `--raw` lines."""
    for line in raw.decode("utf-8", "replace").splitlines():
        meta, _, path = line.partition("\t")
        if oid in meta.split()[2:4]:
            return path
    return f"object {oid}"


def _place(target: Path, compressed: bytes) -> None:
    """Write a loose object file so that readers never see half of it (and two writers do not clash)."""
    try:
        fd, temporary = tempfile.mkstemp(prefix="tmp_obj_", dir=target.parent)
    except FileNotFoundError:  # the first object of its fan-out directory
        target.parent.mkdir(exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix="tmp_obj_", dir=target.parent)
    with os.fdopen(fd, "wb") as out:
        out.write(compressed)
        os.fchmod(out.fileno(), 0o444)  # as git leaves its objects
    os.replace(temporary, target)


def _sha_lines(shas: Sequence[str]) -> bytes:
    return "".join(f"{validate_sha(sha)}\n" for sha in shas).encode()


def _commit_info(chunk: str) -> CommitInfo:
    sha, parents, name, email, at, ct, message = chunk.split(FIELD, 6)
    return CommitInfo(
        sha=sha,
        parents=tuple(parents.split()),
        author_name=name,
        author_email=email,
        author_time=int(at.split()[0]),
        author_tz=at.split()[1],
        committer_time=int(ct),
        message=message.rstrip("\n"),
    )
