"""Print `deploy/constraints.txt`: each runtime dependency of Sluice (no extras) at the version installed.

    .venv/bin/python deploy/constraints.py > deploy/constraints.txt

Run it in the environment the tests passed in (`make test`), so the image is built from what was tested.
"""

from __future__ import annotations

import importlib.metadata as md

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

HEADER = """\
# Sluice's runtime dependencies, pinned to the versions of an environment where `make test` passed; the image
# is built with exactly these (deploy/Dockerfile: pip wheel -c). Regenerate: see deploy/constraints.py.
"""


def pinned(package: str = "sluice") -> dict[str, str]:
    """Name -> installed version of each distribution `package` needs to run (the extras it names too)."""
    found: dict[str, str] = {}
    todo = [(Requirement(r), "") for r in md.requires(package) or ()]
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(req.name)
        if name in found and not req.extras:
            continue
        dist = md.distribution(req.name)
        found[name] = dist.version
        for wanted in ("", *sorted(req.extras)):
            todo += [(Requirement(r), wanted) for r in dist.requires or ()]
    return found


def main() -> None:
    print(HEADER + "".join(f"{name}=={version}\n" for name, version in sorted(pinned().items())), end="")


if __name__ == "__main__":
    main()
