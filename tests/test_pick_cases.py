"""The conflict case suite picked through real git: every class right, every resolution exact."""

from __future__ import annotations

import pytest

from bot.core.conflicts import ConflictClass
from bot.core.models import PickStatus
from tests.support.case_repo import CaseOutcome, build_case_repos, pick_case
from tests.support.conflict_cases import ConflictCase, cases

CASES = cases()


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CaseOutcome]:
    built = build_case_repos(tmp_path_factory.mktemp("cases"), CASES)
    return {b.case.name: pick_case(b) for b in built}


def test_the_suite_is_big_enough() -> None:
    counts = {cls: sum(1 for c in CASES if c.expected == cls) for cls in [*ConflictClass, None]}
    assert all(n >= 20 for n in counts.values()), counts


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case(outcomes: dict[str, CaseOutcome], case: ConflictCase) -> None:
    outcome = outcomes[case.name]
    if case.expected is None:
        assert (outcome.status, outcome.text) == (PickStatus.CLEAN, case.expected_text)
    elif case.expected is ConflictClass.MECHANICAL:
        assert (outcome.predicted, outcome.status) == ("mechanical", PickStatus.AUTO_RESOLVED), (
            outcome.evidence
        )
        assert outcome.text == case.expected_text
    else:
        assert outcome.predicted == case.expected.value, outcome.evidence
        assert outcome.status is PickStatus.NEEDS_HUMAN and outcome.text is None
    assert not outcome.wrong_resolution


def test_api_evidence_names_the_symbol_and_the_fork_users(outcomes: dict[str, CaseOutcome]) -> None:
    for case in (c for c in CASES if c.expected is ConflictClass.API):
        evidence = " ".join(outcomes[case.name].evidence)
        assert any(f"{path}:" in evidence for path in case.api_uses), (case.name, evidence)
