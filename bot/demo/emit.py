"""The repository builder: bare upstream and fork repos written with `git fast-import`."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

from bot.demo.fork import Fork, ForkCommit
from bot.demo.people import GITHUB
from bot.demo.spec import CHERRY_PICK_X, PATCH_ID, SUBJECT_PATTERN, TRAILER, SandboxError
from bot.demo.text import SourceFile
from bot.demo.upstream import Upstream, UpstreamCommit


class _FastImport:
    """One `git fast-import` process fed a stream; `get-mark` answers come back on stdout."""

    def __init__(self, repo: Path, marks: Path) -> None:
        self.marks = marks
        self.err = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close() or fail()
        self.proc = subprocess.Popen(
            [
                "git",
                "-c",
                "fastimport.unpackLimit=0",
                "fast-import",
                "--quiet",
                "--done",
                "--date-format=raw",
                f"--export-marks={marks}",
            ],
            cwd=repo,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.err,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin: IO[bytes] = self.proc.stdin
        self.stdout: IO[bytes] = self.proc.stdout

    def commit(
        self,
        *,
        ref: str,
        mark: int,
        author: str,
        committer: str,
        message: str,
        files: dict[str, SourceFile],
        parent: str = "",
    ) -> None:
        msg = message.encode()
        out = [
            f"commit {ref}\nmark :{mark}\nauthor {author}\ncommitter {committer}\ndata {len(msg)}\n".encode(),
            msg,
            b"\n",
        ]
        if parent:
            out.append(f"from {parent}\n".encode())
        for path, f in files.items():
            data = f.render()
            mode = "100755" if f.executable else "100644"
            out.append(f"M {mode} inline {path}\ndata {len(data)}\n".encode())
            out.append(data)
            out.append(b"\n")
        out.append(b"\n")
        self.stdin.write(b"".join(out))

    def reset(self, ref: str, sha: str) -> None:
        self.stdin.write(f"reset {ref}\nfrom {sha}\n\n".encode())

    def get_mark(self, mark: int) -> str:
        self.stdin.write(f"get-mark :{mark}\n".encode())
        self.stdin.flush()
        sha = self.stdout.readline().decode().strip()
        if len(sha) != 40:
            self.fail()
        return sha

    def close(self) -> dict[int, str]:
        try:
            self.stdin.write(b"done\n")
            self.stdin.close()
        except BrokenPipeError:
            pass
        if self.proc.wait() != 0:
            self.fail()
        self.err.close()
        out: dict[int, str] = {}
        for line in self.marks.read_text().splitlines():
            mark, sha = line.split()
            out[int(mark[1:])] = sha
        return out

    def fail(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.err.seek(0)
        said = self.err.read().decode(errors="replace")[-2000:]
        raise SandboxError(
            f"git fast-import failed: {said}", "check the disk and the git install, then build again"
        )


def _git(repo: Path, *args: str) -> None:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)
    if done.returncode != 0:
        said = done.stderr.strip()
        raise SandboxError(
            f"git {' '.join(args)} failed: {said}", "check the disk and the git install, then build again"
        )


def _init_bare(path: Path) -> None:
    path.mkdir(parents=True)
    _git(path, "init", "--quiet", "--bare", "-b", "main")


def _upstream_message(c: UpstreamCommit, sha_of: Callable[[int], str]) -> str:
    body = c.body.replace("<<SHA>>", sha_of(c.ref)) if c.ref is not None else c.body
    return f"{c.subject}\n\n{body}\n" if body else f"{c.subject}\n"


def emit_upstream(repo: Path, up: Upstream, say: Callable[[str], None]) -> list[str]:
    _init_bare(repo)
    fi = _FastImport(repo, repo / "sluice-marks")
    try:
        for c in up.commits:
            if c.index and c.index % 500 == 0:
                say(f"upstream.git: {c.index}/{len(up.commits)} commits")
            fi.commit(
                ref="refs/heads/main",
                mark=c.index + 1,
                author=c.author.ident(c.author_time),
                committer=GITHUB.ident(c.time),
                message=_upstream_message(c, lambda i: fi.get_mark(i + 1)),
                files=c.changed,
            )
        marks = fi.close()
    except BrokenPipeError:
        fi.fail()
        raise
    (repo / "sluice-marks").unlink()
    return [marks[i + 1] for i in range(len(up.commits))]


def _pick_message(u: UpstreamCommit, c: ForkCommit, sha: str) -> str:
    body = f"\n\n{u.body}" if u.body else ""
    original = f"{u.subject}{body}"
    if c.method == TRAILER:
        return f"{original}\n\nUpstream-Commit: {sha}\nSluice-Ingestion: {c.ingestion_id}\n"
    if c.method == CHERRY_PICK_X:
        return f"{original}\n\n(cherry picked from commit {sha})\n"
    if c.method == PATCH_ID:
        return f"{original}\n"
    if c.method == SUBJECT_PATTERN:
        return (
            f"[Cherry-pick] '{u.title} (#{u.pr})'\n\nHand-picked from upstream #{u.pr} and adapted to the "
            f"TLX patch stack.\n\nSummary:\n{u.body.split(chr(10))[0] if u.body else u.title}\n"
        )
    return f"{original}\n\nUpstream-Commit: {sha}\nSluice-Kind: emergency\n"


def _link_objects(src: Path, dst: Path) -> None:
    for path in sorted((src / "objects").rglob("*")):
        if path.is_dir() or path.parent.name == "info":
            continue
        target = dst / "objects" / path.relative_to(src / "objects")
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path, target)
        except OSError:
            shutil.copy2(path, target)


def emit_fork(
    repo: Path, upstream: Path, fork: Fork, up_shas: list[str], fork_point: str, say: Callable[[str], None]
) -> list[str]:
    _init_bare(repo)
    _link_objects(upstream, repo)
    fi = _FastImport(repo, repo / "sluice-marks")
    try:
        fi.reset("refs/remotes/upstream/main", up_shas[-1])
        for k, c in enumerate(fork.commits):
            if k and k % 1000 == 0:
                say(f"fork.git: {k}/{len(fork.commits)} commits")
            if c.upstream is not None:
                message = _pick_message(fork.up.commits[c.upstream], c, up_shas[c.upstream])
            else:
                message = c.message
            fi.commit(
                ref="refs/heads/main",
                mark=k + 1,
                author=c.author.ident(c.author_time),
                committer=c.committer.ident(c.time),
                message=message,
                files=c.changed,
                parent=fork_point if k == 0 else "",
            )
        marks = fi.close()
    except BrokenPipeError:
        fi.fail()
        raise
    (repo / "sluice-marks").unlink()
    _git(repo, "config", "remote.upstream.url", str(upstream))
    _git(repo, "config", "remote.upstream.fetch", "+refs/heads/*:refs/remotes/upstream/*")
    return [marks[k + 1] for k in range(len(fork.commits))]
