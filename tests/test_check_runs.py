"""bot.flows.checks: an update goes on the latest check run, or on a new one where GitHub refuses it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from bot.core.webhooks import CheckRun
from bot.flows import checks

SHA = "a" * 40


class Writer:
    """Check runs as GitHub keeps them: numbered, each updated in place."""

    def __init__(self) -> None:
        self.runs: dict[int, dict[str, Any]] = {}
        self.calls: list[tuple[str, int]] = []

    async def check_runs(self, sha: str) -> dict[str, CheckRun]:
        return {run["name"]: CheckRun.model_validate(run) for run in self.runs.values()}

    async def new_check_run(self, sha: str, name: str, body: Mapping[str, Any]) -> int:
        check_id = len(self.runs) + 1
        self.runs[check_id] = {"id": check_id, "name": name, "head_sha": sha, **body}
        self.calls.append(("new", check_id))
        return check_id

    async def update_check_run(self, check_run_id: int, body: Mapping[str, Any]) -> None:
        self.runs[check_run_id] |= body
        self.calls.append(("update", check_run_id))


def _run(status: str, conclusion: str | None = None) -> CheckRun:
    return CheckRun.model_validate(
        {"id": 7, "name": "sluice/gate", "head_sha": SHA, "status": status, "conclusion": conclusion}
    )


@pytest.mark.parametrize(
    "shown, body, reopened",
    [
        (_run("in_progress"), {"status": "completed", "conclusion": "success"}, False),
        (_run("queued"), {"status": "in_progress"}, False),
        (_run("completed", "failure"), {"status": "completed", "conclusion": "success"}, False),
        (_run("completed", "failure"), {"status": "in_progress"}, True),
        (_run("completed", "failure"), {"status": "queued"}, True),
        (_run("completed", "failure"), {"output": {"title": "L1", "summary": "a note"}}, False),
    ],
)
def test_only_a_completed_run_taken_back_to_running_reopens(
    shown: CheckRun, body: dict[str, Any], reopened: bool
) -> None:
    assert checks.reopens(shown, body) is reopened


async def test_the_first_update_on_a_head_makes_the_run_and_the_rest_annotate_it() -> None:
    writer = Writer()
    bodies = [{"status": "in_progress"}, {"output": {"annotations": [1]}}, {"output": {"annotations": [2]}}]
    check_id = await checks.show(writer, SHA, "sluice/L1", bodies, shown=None)
    assert writer.calls == [("new", 1), ("update", 1), ("update", 1)]
    assert check_id == 1 and writer.runs[1]["output"] == {"annotations": [2]}


async def test_a_run_that_waits_again_after_it_completed_gets_a_new_run_and_the_old_keeps_its_result() -> (
    None
):
    writer = Writer()
    first = await checks.show(writer, SHA, "sluice/gate", [{"status": "in_progress"}], shown=None)
    done = {"status": "completed", "conclusion": "failure"}
    shown = (await writer.check_runs(SHA))["sluice/gate"]
    assert await checks.show(writer, SHA, "sluice/gate", [done], shown=shown) == first
    shown = (await writer.check_runs(SHA))["sluice/gate"]
    again = await checks.show(writer, SHA, "sluice/gate", [{"status": "in_progress"}], shown=shown)
    assert again != first
    assert writer.runs[first]["conclusion"] == "failure"
    assert writer.runs[again]["status"] == "in_progress"
