"""What the real-history benchmarks share: a throwaway clone that reads a repository it must not change."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bot.git.repo import GitRepo


@contextmanager
def shared_clone(source: Path, *, prefix: str = "sluice-bench-") -> Iterator[GitRepo]:
    """A bare `--shared` clone: objects are read from `source`, every write (merge-tree's) stays in it."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        target = Path(tmp) / "clone.git"
        subprocess.run(
            ["git", "clone", "--bare", "--shared", "--quiet", "--", str(source), str(target)], check=True
        )
        yield GitRepo(target)
