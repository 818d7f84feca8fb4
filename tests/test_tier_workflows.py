"""The fork's tier workflows against its config (bot.core.tier_workflows): Sluice's templates agree with the
defaults, and each way a fork's copy can differ is named."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.core.config import SluiceConfig
from bot.core.tier_workflows import workflow_notes, workflow_paths

TEMPLATES = Path(__file__).parent.parent / "deploy" / "workflows"
L1, L2, L3 = (
    ".github/workflows/sluice-l1.yml",
    ".github/workflows/sluice-l2.yml",
    ".github/workflows/sluice-l3.yml",
)


def templates() -> dict[str, str | None]:
    return {path: (TEMPLATES / Path(path).name).read_text() for path in (L1, L2, L3)}


def test_sluices_templates_agree_with_the_default_config() -> None:
    assert list(workflow_paths(SluiceConfig()).values()) == [L1, L2, L3]
    assert workflow_notes(SluiceConfig(), templates()) == []


def test_a_missing_workflow_is_named_with_where_to_get_it() -> None:
    files = templates() | {L2: None}
    (note,) = workflow_notes(SluiceConfig(), files)
    assert note.startswith(
        f"`{L2}` is not on trunk, so L2 cannot run: copy it from Sluice's `deploy/workflows/`"
    )


@pytest.mark.parametrize(
    ("path", "old", "new", "note"),
    [
        pytest.param(
            L2,
            "runs-on: [self-hosted, linux, gpu]",
            "runs-on: [self-hosted, gpu-h100]",
            "runs on `self-hosted, gpu-h100`, but `tiers.l2.runs_on` says `self-hosted, linux, gpu`",
            id="other-labels",
        ),
        pytest.param(
            L1, "runs-on: ubuntu-latest", "runs-on: ubuntu-24.04", "runs on `ubuntu-24.04`", id="one-label"
        ),
        pytest.param(
            L3,
            "    environment: compiler-production-gate\n",
            "",
            "runs in no environment, but `tiers.environment` says `compiler-production-gate`",
            id="l3-unguarded",
        ),
        pytest.param(
            L3,
            "environment: compiler-production-gate",
            "environment: {name: staging, url: https://example.com}",
            "runs in the environment `staging`",
            id="l3-elsewhere",
        ),
        pytest.param(L1, "jobs:", "jobs: [", "is not YAML GitHub can read, so L1 cannot run", id="not-yaml"),
    ],
)
def test_a_workflow_that_runs_elsewhere_than_the_config_says_is_named(
    path: str, old: str, new: str, note: str
) -> None:
    files = templates()
    text = files[path]
    assert text is not None and old in text
    files[path] = text.replace(old, new)
    (found,) = workflow_notes(SluiceConfig(), files)
    assert found.startswith(f"`{path}`") and note in found


def test_runners_an_expression_chooses_and_a_config_that_says_so_are_not_flagged() -> None:
    files = templates()
    l2 = files[L2]
    assert l2 is not None
    files[L2] = l2.replace("runs-on: [self-hosted, linux, gpu]", "runs-on: ${{ vars.GPU_RUNNER }}")
    l1 = files[L1]
    assert l1 is not None
    files[L1] = l1.replace("runs-on: ubuntu-latest", "runs-on: [self-hosted, cpu]")
    l1_tier = SluiceConfig().tiers.l1.model_copy(update={"runs_on": ("self-hosted", "cpu")})
    config = SluiceConfig().model_copy(
        update={"tiers": SluiceConfig().tiers.model_copy(update={"l1": l1_tier})}
    )
    assert workflow_notes(config, files) == []


def test_a_value_that_reads_like_an_impossible_date_is_a_string_as_on_github() -> None:
    """PyYAML's safe_load takes `2026-02-30` for a date and raises ValueError; GitHub keeps it a string and
    runs the workflow, so Sluice says nothing of it (it once failed the fork's registration)."""
    files = templates()
    l1 = files[L1]
    assert l1 is not None and "jobs:" in l1
    files[L1] = l1.replace("jobs:", "env:\n  TRITON_CACHE_TAG: 2026-02-30\njobs:", 1)

    assert workflow_notes(SluiceConfig(), files) == []


@pytest.mark.parametrize(
    "bad",
    [
        "env:\n  N: !!int many\n",  # a value its explicit tag cannot take: a ValueError in PyYAML
        "env:\n  A: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
        + "".join(
            f"  {n}: &{n} [{', '.join([f'*{p}'] * 10)}]\n" for p, n in zip("abcde", "bcdef", strict=True)
        ),
    ],
)
def test_a_workflow_pyyaml_cannot_take_is_named_not_raised(bad: str) -> None:
    files = templates()
    l1 = files[L1]
    assert l1 is not None
    files[L1] = bad + l1

    (note,) = workflow_notes(SluiceConfig(), files)

    assert note == f"`{L1}` is not YAML GitHub can read, so L1 cannot run"
