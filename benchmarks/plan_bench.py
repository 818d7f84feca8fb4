"""Times `sluice plan` on a Triton-sized generated history beside the raw cost of `git merge-tree`.

The raw cost is one `git merge-tree --write-tree` per pending commit (the least any conflict prediction
must spend); the aim is a plan that costs at most twice that. Prints both and their ratio. It also times
the same plan with the shipped risk model loaded (`risk.model: default` in the fork's `.github/sluice.yml`,
on a fork head one config commit ahead), the runs interleaved, and prints both medians and their
difference beside the spread of the runs without one.

    python benchmarks/plan_bench.py     # BENCH: ≈5,000 files, 2,000 fork commits, 500 pending
    python benchmarks/plan_bench.py --files 400 --fork-commits 60 --ingested 150 --pending 120
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from bot.core.config import CONFIG_PATH
from bot.demo import BENCH, SandboxSize, build_sandbox
from bot.git.repo import GitRepo
from bot.ports import Stage

WITH_MODEL = "bench-with-model"  # the fork branch whose config loads the shipped risk model


def raw_merge_tree_seconds(repo: GitRepo, fork_ref: str, pending: list[str]) -> float:
    """One merge-tree per pending commit onto fork trunk, its inputs prepared outside the timing."""
    fork_tree = repo.tree_of(repo.resolve(fork_ref))
    infos = {c.sha: c for c in repo.commits(*pending, "--no-walk")}
    pairs = [
        (repo.write_commit(fork_tree, [infos[s].parents[0]], "bench", timestamp=infos[s].committer_time), s)
        for s in pending
    ]
    started = time.perf_counter()
    for ours, theirs in pairs:
        repo.run("merge-tree", "--write-tree", "-z", "--name-only", "--no-messages", ours, theirs, ok=(0, 1))
    return time.perf_counter() - started


def with_model(repo: GitRepo, fork_ref: str, workdir: Path) -> str:
    """A fork branch one commit ahead of `fork_ref`: its configuration with `risk.model: default` too."""
    head = repo.resolve(fork_ref)
    config = yaml.safe_load(repo.read_file(head, CONFIG_PATH) or b"") or {}
    config.setdefault("risk", {})["model"] = "default"
    plumbing = repo.plumbing()
    blob = plumbing.write_blob(yaml.safe_dump(config, sort_keys=False).encode())
    tree = plumbing.replace_in_tree(repo.tree_of(head), {CONFIG_PATH: Stage("100644", blob)}, workdir=workdir)
    at = repo.commits(head, "--no-walk")[0].committer_time + 1
    commit = repo.write_commit(tree, [head], "bench: load the shipped risk model", timestamp=at)
    repo.run("update-ref", f"refs/heads/{WITH_MODEL}", commit)
    return WITH_MODEL


def plan_seconds(
    sandbox_path: Path, fork_refs: list[str], upstream_ref: str, runs: int
) -> tuple[list[list[float]], list[dict[str, Any]]]:
    """Wall time of the real command on each fork ref, the refs interleaved in every round, recording into
    a fresh SQLite store each run; and each ref's last plan (its `--json`)."""
    script = Path(sys.executable).parent / "sluice"
    db = sandbox_path.parent / "bench.db"
    times: list[list[float]] = [[] for _ in fork_refs]
    plans: list[dict[str, Any]] = [{} for _ in fork_refs]
    for _ in range(runs):
        for i, fork_ref in enumerate(fork_refs):
            db.unlink(missing_ok=True)
            repo = ["--repo", str(sandbox_path), "--fork", fork_ref, "--upstream", upstream_ref]
            args = [str(script), "plan", *repo, "--json", "--database", f"sqlite:///{db}"]
            started = time.perf_counter()
            out = subprocess.run(args, check=True, stdout=subprocess.PIPE).stdout
            times[i].append(time.perf_counter() - started)
            plans[i] = json.loads(out)
    return times, plans


def scored(plan: dict[str, Any]) -> tuple[int, int]:
    """(commits with a probability, commits) in `plan`: whether the model was loaded."""
    commits = [c for unit in (*plan["bundles"], *plan["chains"]) for c in unit["commits"]]
    return sum(1 for c in commits if c.get("probability") is not None), len(commits)


def shown(times: list[float]) -> str:
    return f"median of {len(times)}: {', '.join(f'{t:.2f}' for t in times)}"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for field in dataclasses.fields(SandboxSize):
        parser.add_argument(f"--{field.name.replace('_', '-')}", type=int, default=getattr(BENCH, field.name))
    parser.add_argument("--runs", type=int, default=3, help="plan runs; the median is reported")
    args = parser.parse_args()
    size = SandboxSize(**{f.name: getattr(args, f.name) for f in dataclasses.fields(SandboxSize)})
    with tempfile.TemporaryDirectory(prefix="sluice-bench-") as tmp:
        started = time.perf_counter()
        sandbox = build_sandbox(Path(tmp) / "sandbox", size)
        built = time.perf_counter() - started
        repo = GitRepo(sandbox.fork)
        pending = list(sandbox.manifest.pending)
        files = len(repo.run("ls-tree", "-r", "--name-only", sandbox.fork_ref).splitlines())
        print(
            f"scenario: {files} files, {len(sandbox.manifest.patch_stack)} patch-stack commits, "
            f"{len(pending)} pending upstream commits (built in {built:.1f} s)"
        )
        modelled = with_model(repo, sandbox.fork_ref, Path(tmp))
        refs = [sandbox.fork_ref, modelled]
        (plan, with_a_model), (_, modelled_plan) = plan_seconds(
            sandbox.fork, refs, sandbox.upstream_ref, args.runs
        )
        raw = raw_merge_tree_seconds(repo, sandbox.fork_ref, pending)
    with_p, planned = scored(modelled_plan)
    median, median_model = statistics.median(plan), statistics.median(with_a_model)
    print(f"sluice plan:        {median:7.2f} s  ({shown(plan)})")
    each = 1000 * raw / max(len(pending), 1)
    print(f"raw git merge-tree: {raw:7.2f} s  ({len(pending)} calls, {each:.1f} ms each)")
    print(f"ratio plan / raw:   {median / raw:7.2f}  (aim: ≤ 2.00)")
    spread = max(plan) - min(plan)
    print(
        f"with the model:     {median_model:7.2f} s  "
        f"({shown(with_a_model)}; {with_p} of {planned} commits scored)"
    )
    print(
        f"model's difference: {median_model - median:+7.2f} s  "
        f"({(median_model - median) / median:+.1%}; the runs without it spread over {spread:.2f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
