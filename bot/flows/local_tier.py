"""The `local` tier backend: the tier's `python -m runners run` as a subprocess on the bot's machine."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
import signal
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from bot.core.config import SluiceConfig
from bot.core.refs import validate_sha
from bot.core.tiers import TierRun, selection_code
from bot.flows.tiers import Finished
from bot.git.environment import git_environ

SLUICE_ROOT = Path(__file__).resolve().parent.parent.parent  # where `runners` is importable from
MAX_LOG_CHARS = 200_000
RUNNER_SECTIONS = {"tiers", "extensions", "numerics", "bench", "performance"}


def run_local(
    git_dir: Path, run: TierRun, *, config: SluiceConfig, baseline_sha: str, timeout_s: float
) -> Finished | None:
    """Run the tier on a clean export of the head commit, as a tier workflow does; None when it ran past the
    tier's timeout (blocking: run it in a thread). The bot's own settings (`SLUICE_*`) stay out of its
    environment: the fork's tier commands must not read the App's key or webhook secret.

    The runner gets the sections of `config` (fork trunk's, as the bot read it) that it reads: the tiers
    and what their suites use. With `tiers.build` it runs in a virtual environment of its own, which sees
    the bot's packages but installs into itself: the build (`pip install .`) never touches the bot's."""
    with tempfile.TemporaryDirectory(prefix="sluice-tier-", ignore_cleanup_errors=True) as tmp:
        tree, out, settings = Path(tmp) / "tree", Path(tmp) / "report.json", Path(tmp) / "sluice.yml"
        _export(git_dir, run.head_sha, tree)
        settings.write_text(
            json.dumps(config.model_dump(mode="json", include=RUNNER_SECTIONS))
        )  # JSON is YAML
        env = _environment(Path(tmp))
        python = sys.executable
        if config.tiers.build is not None:
            python = _overlay(Path(tmp) / "venv", env)
        argv = [
            python,
            "-P",  # not the exported tree's own `runners/` or `bot/` ahead of Sluice's (the cwd is the tree)
            "-m",
            "runners",
            "run",
            "--tier",
            run.level.value,
            "--selection",
            str(selection_code(run.selection, run.suite)),
            "--head-sha",
            run.head_sha,
            "--baseline-sha",
            baseline_sha,
            "--out",
            str(out),
            "--config",
            str(settings),
        ]
        log_file = Path(tmp) / "tier.log"
        with log_file.open("wb") as logged:
            process = subprocess.Popen(
                argv,
                cwd=tree,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=logged,  # a file, not a pipe: a process left holding it cannot block the read
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: a timeout stops all of it
            )
            try:
                code = process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                return None
            finally:
                _stop(process)
        report = out.read_text() if out.is_file() else None
        return Finished("success" if code == 0 else "failure", report, log=_tail(log_file))


STOP_GRACE_S = 10.0  # after SIGTERM, how long the runner has to kill its suites' process groups


def _stop(process: subprocess.Popen[bytes]) -> None:
    """End the run's process group: SIGTERM first (the runner then kills its suites' groups, each in a
    session of its own, out of reach of a signal to this one), SIGKILL for what is left."""
    if process.poll() is None:
        _signal_group(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=STOP_GRACE_S)
    _signal_group(process.pid, signal.SIGKILL)  # whatever the runner left running in its group
    process.wait()


def _signal_group(group: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signum)


def _overlay(venv: Path, env: dict[str, str]) -> str:
    """A virtual environment over the bot's: the bot's packages (Sluice, torch, pip) are importable in it
    through a `.pth` file, but pip installs into it, and leaves what it finds outside it alone ("Not
    uninstalling ..., outside environment"). Its `bin` leads `env`'s PATH, so a build's `python -m pip`
    is its own. Returns its interpreter."""
    made = [sys.executable, "-m", "venv", "--without-pip", str(venv)]
    subprocess.run(made, check=True, capture_output=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
        env={"PATH": os.environ.get("PATH", "")},
    ).stdout.strip()
    bots = dict.fromkeys(p for p in sys.path if Path(p).name in ("site-packages", "dist-packages"))
    lines = [f"import site; site.addsitedir({path!r})" for path in bots]
    (Path(purelib) / "sluice-bot-packages.pth").write_text("\n".join(lines) + "\n")
    _shim_scripts(Path(sys.prefix) / "bin", venv / "bin", python)
    env["PATH"] = os.pathsep.join(p for p in (str(venv / "bin"), env.get("PATH")) if p)
    env["VIRTUAL_ENV"] = str(venv)
    return str(python)


def _shim_scripts(bots: Path, into: Path, python: Path) -> None:
    """The bot's Python console scripts (`pip`, `pytest`, `lit`...) run by the overlay's interpreter: a
    bare `pip install .` then installs into the overlay, and a suite's `pytest` imports the Triton the build
    installed there, where the script's own `#!` would run the bot's interpreter with the bot's packages."""
    if not bots.is_dir():
        return
    for script in sorted(bots.iterdir()):
        target = into / script.name
        if target.exists() or script.name.startswith("python") or not script.is_file():
            continue
        try:
            with script.open("rb") as f:
                first = f.readline(512)
        except OSError:
            continue
        if not (first.startswith(b"#!") and b"python" in first):
            continue
        target.write_text(f'#!/bin/sh\nexec {shlex.quote(str(python))} {shlex.quote(str(script))} "$@"\n')
        target.chmod(0o755)


def _tail(path: Path) -> str:
    """The log's last MAX_LOG_CHARS characters, reading no more of the file than they can take."""
    with path.open("rb") as f:
        f.seek(max(0, path.stat().st_size - 4 * MAX_LOG_CHARS))  # UTF-8: at most 4 bytes a character
        return f.read().decode("utf-8", "replace")[-MAX_LOG_CHARS:]


def _export(git_dir: Path, sha: str, tree: Path) -> None:
    """The commit's files (no .git): what actions/checkout gives the job."""
    tree.mkdir()
    archive = subprocess.run(
        ["git", "archive", "--format=tar", validate_sha(sha)],
        cwd=git_dir,
        env=git_environ(),
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(tree, filter="data")


# What a tier run sees of the bot's environment: the toolchain's variables, never the bot's settings or
# anything else it was started with (database URLs, cloud credentials, tokens); an operator names more in
# SLUICE_TIER_PASS_ENV (comma-separated).
PASSED_ENV = ("PATH", "LANG", "LC_", "TZ", "TRITON_", "CUDA_", "NVIDIA_", "HIP_", "ROCR_", "ROCM_", "HSA_")
PASS_ENV_SETTING = "SLUICE_TIER_PASS_ENV"


def _environment(home: Path) -> dict[str, str]:
    extra = {n.strip() for n in os.environ.get(PASS_ENV_SETTING, "").split(",") if n.strip()}
    env = {
        k: v
        for k, v in os.environ.items()
        if (k.startswith(PASSED_ENV) or k in extra) and not k.startswith("SLUICE_")
    }
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SLUICE_ROOT), os.environ.get("PYTHONPATH")) if p)
    env["HOME"] = env["TMPDIR"] = str(home)
    return env
