"""The fork's tier workflows against its config. The workflow file decides where a tier runs (its `runs-on`,
L3's `environment`); `tiers.<tier>.runs_on`, `workflow` and `tiers.environment` say what the fork means it to
be. Where the two differ, or the file is missing, the `sluice/config` check says so, since the bot cannot
change the runner a dispatched workflow asks for."""

from __future__ import annotations

from collections.abc import Mapping

import yaml

from bot.core.config import SluiceConfig, yaml_data
from bot.core.tiers import LEVELS, Level, tier_config

WORKFLOWS_DIR = ".github/workflows"


def workflow_paths(config: SluiceConfig) -> dict[Level, str]:
    """Where each tier's workflow lives in the fork."""
    return {level: f"{WORKFLOWS_DIR}/{tier_config(config, level).workflow}" for level in LEVELS}


def workflow_notes(config: SluiceConfig, files: Mapping[str, str | None]) -> list[str]:
    """One line per difference between the config and the tier workflows in `files` (path → text, None when
    the file is not on trunk): a missing or unreadable file, a job whose `runs-on` is not the tier's
    `runs_on`, and an L3 job outside `tiers.environment`. Empty when they agree."""
    notes: list[str] = []
    for level, path in workflow_paths(config).items():
        text = files.get(path)
        if text is None:
            notes.append(
                f"`{path}` is not on trunk, so {level.name} cannot run: copy it from Sluice's "
                f"`deploy/workflows/`, or set `tiers.{level.value}.workflow` to the workflow that runs it"
            )
            continue
        notes += _job_notes(config, level, path, text)
    return notes


def _job_notes(config: SluiceConfig, level: Level, path: str, text: str) -> list[str]:
    try:
        document = yaml_data(text)  # `2026-02-30` is a string, as GitHub reads it, not an impossible date
    except (yaml.YAMLError, ValueError, RecursionError):
        return [f"`{path}` is not YAML GitHub can read, so {level.name} cannot run"]
    jobs = document.get("jobs") if isinstance(document, dict) else None
    if not isinstance(jobs, dict) or not jobs:
        return [f"`{path}` has no jobs, so {level.name} runs nothing"]
    notes = []
    wanted = tier_config(config, level).runs_on
    for name, job in jobs.items():
        if not isinstance(job, dict):
            continue
        labels = _labels(job.get("runs-on"))
        if labels is not None and labels != wanted:
            notes.append(
                f"`{path}` job `{name}` runs on `{', '.join(labels)}`, but `tiers.{level.value}.runs_on` "
                f"says `{', '.join(wanted)}`: the workflow decides; make the two agree"
            )
        if level is Level.L3:
            environment = _environment(job.get("environment"))
            if environment != config.tiers.environment:
                shown = f"the environment `{environment}`" if environment else "no environment"
                notes.append(
                    f"`{path}` job `{name}` runs in {shown}, but `tiers.environment` says "
                    f"`{config.tiers.environment}`, whose required reviewers should guard L3"
                )
    return notes


def _labels(runs_on: object) -> tuple[str, ...] | None:
    """A job's runner labels; None when an expression (`${{ … }}`) or a runner group chooses them."""
    if isinstance(runs_on, str):
        return None if "${{" in runs_on else (runs_on,)
    if isinstance(runs_on, list) and all(isinstance(label, str) and "${{" not in label for label in runs_on):
        return tuple(runs_on)
    return None


def _environment(value: object) -> str | None:
    """`environment: name` or `environment: {name: …, url: …}`."""
    if isinstance(value, dict):
        value = value.get("name")
    return value if isinstance(value, str) and value else None
