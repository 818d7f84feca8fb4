"""The gate and CODEOWNERS as tables: facts in, decision out; no GitHub, git or database."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from bot.core.codeowners import CodeOwners, parse_codeowners
from bot.core.config import Component, ConfigError, GatePolicy, SluiceConfig, parse_config
from bot.core.gate import (
    Approval,
    CheckResult,
    GateInput,
    Hold,
    MissingKind,
    Resolution,
    Review,
    Waiver,
    decide,
    owners_of,
    required_tiers,
    should_pause,
    standing_approvals,
    summary,
    team_owners,
)
from bot.core.ingestion import CheckName, stacked
from bot.core.models import RiskLevel
from bot.core.webhooks import Pull

HEAD, OLD = "a" * 40, "b" * 40
UP = "c" * 40
NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
PASS = "lib/Dialect/TritonGPU/Transforms/Pipeliner.cpp"
CODEOWNERS = parse_codeowners(
    "# owners\n*            @global\nlib/Dialect/ @org/compiler  # the dialects\n/docs/ @writer\n"
)
CONFIG = SluiceConfig(gate=GatePolicy(required_tiers=("l1", "l2")))


def green(*tiers: CheckName, head: str = HEAD) -> dict[str, CheckResult]:
    return {t.value: CheckResult(t.value, head, "completed", "success") for t in tiers}


def run(
    tier: CheckName, status: str, conclusion: str | None = None, head: str = HEAD
) -> dict[str, CheckResult]:
    return {tier.value: CheckResult(tier.value, head, status, conclusion)}


def waiver(expires: dt.datetime, tier: CheckName = CheckName.L2, head: str = HEAD) -> Waiver:
    plan = "rerun on the new pool by Friday"
    return Waiver(tier, "@org/compiler", "flaky GPU pool", plan, expires, "lead", head)


SEMANTIC = Resolution(UP, PASS, "semantic", "reused")
MECHANICAL = Resolution(UP, "CMakeLists.txt", "mechanical", "append-union")


def facts(**changes: object) -> GateInput:
    base = GateInput(head_sha=HEAD, checks=green(CheckName.L1, CheckName.L2), codeowners=CODEOWNERS)
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("checks", "waivers", "conclusion", "missing"),
    [
        (green(CheckName.L1, CheckName.L2), (), "success", []),
        (green(CheckName.L1), (), None, ["sluice/L2 has not run on this head"]),
        (green(CheckName.L1) | run(CheckName.L2, "in_progress"), (), None, ["sluice/L2 is in_progress"]),
        (
            green(CheckName.L1) | green(CheckName.L2, head=OLD),
            (),
            None,
            ["sluice/L2 has not run on this head"],
        ),
        (
            green(CheckName.L1) | run(CheckName.L2, "completed", "failure"),
            (),
            "failure",
            ["sluice/L2 concluded failure"],
        ),
        # a valid waiver counts for L2, never for L1; an expired one stops counting
        (
            green(CheckName.L1) | run(CheckName.L2, "completed", "failure"),
            (waiver(NOW + dt.timedelta(days=1)),),
            "success",
            [],
        ),
        (
            green(CheckName.L1) | run(CheckName.L2, "completed", "failure"),
            (waiver(NOW - dt.timedelta(seconds=1)),),
            "failure",
            ["sluice/L2 concluded failure (the waiver by @lead expired 2026-03-01 11:59 UTC)"],
        ),
        # a waiver given on another head (before a push) waives nothing here, nor one that names no head
        (
            green(CheckName.L1) | run(CheckName.L2, "completed", "failure"),
            (waiver(NOW + dt.timedelta(days=1), head=OLD),),
            "failure",
            [
                "sluice/L2 concluded failure (the waiver by @lead was given on `bbbbbbbbbb`; a new head "
                "needs a new one)"
            ],
        ),
        (
            green(CheckName.L1) | run(CheckName.L2, "completed", "failure"),
            (waiver(NOW + dt.timedelta(days=1), head=""),),
            "failure",
            [
                "sluice/L2 concluded failure (the waiver by @lead was given on an unrecorded head; a new "
                "head needs a new one)"
            ],
        ),
        (
            green(CheckName.L2) | run(CheckName.L1, "completed", "failure"),
            (waiver(NOW + dt.timedelta(days=1), tier=CheckName.L1),),
            "failure",
            ["sluice/L1 concluded failure"],
        ),
        (
            green(CheckName.L1, CheckName.L2) | run(CheckName.L3, "completed", "failure"),
            (),
            "success",
            [],
        ),  # L3 not required
    ],
)
def test_required_tiers_and_waivers(
    checks: dict[str, CheckResult], waivers: tuple[Waiver, ...], conclusion: str | None, missing: list[str]
) -> None:
    decision = decide(facts(checks=checks, waivers=waivers), config=CONFIG, now=NOW)
    assert decision.conclusion == conclusion
    assert [m.what for m in decision.missing] == missing


@pytest.mark.parametrize("concluded", ["cancelled", "skipped", "action_required", "neutral", "stale"])
def test_a_tier_that_concluded_neither_success_nor_failure_has_not_passed(concluded: str) -> None:
    """Cancelled, skipped, never started or neutral: nothing ran to say the head is good, so it blocks (and
    no waiver is asked for: nothing failed)."""
    checks = green(CheckName.L1) | run(CheckName.L2, "completed", concluded)
    decision = decide(facts(checks=checks), config=CONFIG, now=NOW)
    assert decision.conclusion is None and not decision.passed and decision.failed == ()
    assert [m.what for m in decision.missing] == [
        f"sluice/L2 concluded {concluded}: it has not passed on this head"
    ]


def test_l1_failure_says_it_is_never_waived_and_l2_names_the_waiver() -> None:
    l1 = decide(
        facts(checks=green(CheckName.L2) | run(CheckName.L1, "completed", "failure")), config=CONFIG, now=NOW
    )
    l2 = decide(
        facts(checks=green(CheckName.L1) | run(CheckName.L2, "completed", "timed_out")),
        config=CONFIG,
        now=NOW,
    )
    assert "never waived" in l1.missing[0].how
    assert "`/waive`" in l2.missing[0].how and l2.failed == (CheckName.L2,)


def test_a_waiver_that_counts_is_shown_with_its_owner_reason_expiry_and_plan() -> None:
    checks = green(CheckName.L1) | run(CheckName.L2, "completed", "failure")
    decision = decide(
        facts(checks=checks, waivers=(waiver(NOW + dt.timedelta(hours=2)),)), config=CONFIG, now=NOW
    )
    assert decision.passed and decision.waived
    text = summary(decision)
    assert "@org/compiler" in text and "flaky GPU pool" in text and "rerun on the new pool" in text
    assert "2026-03-01 14:00 UTC" in text


@pytest.mark.parametrize(
    ("approvals", "teams", "passed"),
    [
        ((), {}, False),
        ((Approval("alice", HEAD, NOW),), {"@org/compiler": frozenset({"alice"})}, True),  # a team member
        ((Approval("Alice", HEAD, NOW),), {"@org/compiler": frozenset({"alice"})}, True),  # logins fold case
        ((Approval("alice", OLD, NOW),), {"@org/compiler": frozenset({"alice"})}, False),  # an older head
        ((Approval("bob", HEAD, NOW),), {"@org/compiler": frozenset({"alice"})}, False),  # not an owner
        ((Approval("global", HEAD, NOW),), {}, False),  # `*`'s owner: a later line owns the dialects
        ((Approval("ipo", HEAD, NOW, source="command"),), {}, True),  # the component's own owner
    ],
)
def test_a_resolution_needs_a_code_owner_on_the_current_head(
    approvals: tuple[Approval, ...], teams: dict[str, frozenset[str]], passed: bool
) -> None:
    config = CONFIG.model_copy(
        update={
            "components_extra": (
                Component(
                    name="core-passes",
                    paths=("lib/Dialect/*/Transforms/**",),
                    risk=RiskLevel.HIGH,
                    owners=("@ipo",),
                ),
            )
        }
    )
    given = facts(resolutions=(SEMANTIC, MECHANICAL), approvals=approvals, teams=teams)
    decision = decide(given, config=config, now=NOW)
    assert decision.passed is passed
    if not passed:
        (item,) = decision.missing
        assert item.kind is MissingKind.APPROVAL and PASS in item.what
        assert item.who == ("@org/compiler", "@ipo")


def test_an_approval_on_an_older_head_is_named_as_such() -> None:
    given = facts(resolutions=(SEMANTIC,), approvals=(Approval("alice", OLD, NOW),))
    (item,) = decide(given, config=CONFIG, now=NOW).missing
    assert "@alice were given on an older head" in item.how and HEAD[:10] in item.how


@pytest.mark.parametrize(
    ("resolution", "needs"),
    [
        (Resolution(UP, "a.py", "semantic", "reused"), True),
        (Resolution(UP, "a.py", "api", "reused"), True),
        (Resolution(UP, "a.py", "mechanical", "proposed"), True),
        (Resolution(UP, "a.py", "unknown", "whitespace,proposed"), True),
        (Resolution(UP, "a.py", "mechanical", "include-union"), False),
        (Resolution(UP, "a.py", "unknown", "reused"), False),
    ],
)
def test_which_resolutions_need_a_code_owner(resolution: Resolution, needs: bool) -> None:
    assert resolution.needs_approval is needs


def test_a_path_nobody_owns_says_how_to_name_an_owner() -> None:
    given = facts(resolutions=(Resolution(UP, "setup.py", "api", "reused"),), codeowners=CodeOwners())
    (item,) = decide(given, config=CONFIG, now=NOW).missing
    assert item.who == () and "CODEOWNERS" in item.how


def test_a_hold_closes_the_gate_until_released() -> None:
    decision = decide(facts(hold=Hold("rm", "release freeze", NOW)), config=CONFIG, now=NOW)
    assert not decision.passed and decision.conclusion is None
    assert decision.missing[0].kind is MissingKind.HOLD and "release freeze" in decision.missing[0].what


def test_the_summary_lists_what_is_missing_and_who_can_provide_it() -> None:
    given = facts(checks=green(CheckName.L1), resolutions=(SEMANTIC,), hold=Hold("rm", "freeze", NOW))
    text = summary(decide(given, config=CONFIG, now=NOW), notes=("Sluice merges when the gate opens.",))
    assert "| sluice/L2 has not run on this head |" in text
    assert "@org/compiler" in text and "held by @rm: freeze" in text
    assert "sluice/L1 succeeded" in text and "Sluice merges" in text


@pytest.mark.parametrize(
    ("reviews", "approved"),
    [
        ([Review("alice", "APPROVED", HEAD, NOW)], [("alice", HEAD)]),
        ([Review("alice", "APPROVED", OLD, NOW)], [("alice", OLD)]),
        # a later request for changes (or a dismissal) withdraws the approval; a comment does not
        (
            [
                Review("alice", "APPROVED", HEAD, NOW),
                Review("alice", "CHANGES_REQUESTED", HEAD, NOW + dt.timedelta(1)),
            ],
            [],
        ),
        (
            [
                Review("alice", "APPROVED", HEAD, NOW),
                Review("alice", "DISMISSED", HEAD, NOW + dt.timedelta(1)),
            ],
            [],
        ),
        (
            [
                Review("alice", "APPROVED", HEAD, NOW),
                Review("alice", "COMMENTED", HEAD, NOW + dt.timedelta(1)),
            ],
            [("alice", HEAD)],
        ),
        ([Review("sluice[bot]", "APPROVED", HEAD, NOW)], []),
        ([Review("alice", "PENDING", HEAD, NOW)], []),
    ],
)
def test_reviews_give_approvals_as_github_counts_them(
    reviews: list[Review], approved: list[tuple[str, str]]
) -> None:
    assert [(a.login, a.head_sha) for a in standing_approvals(reviews, bot_login="sluice[bot]")] == approved


def test_an_approve_command_stands_until_the_same_person_s_later_deciding_review() -> None:
    command = Approval("alice", HEAD, NOW + dt.timedelta(1), source="command")
    changes = Review("Alice", "CHANGES_REQUESTED", HEAD, NOW + dt.timedelta(2))

    def standing(reviews: list[Review], *commands: Approval) -> list[tuple[str, str]]:
        return [(a.login, a.source) for a in standing_approvals(reviews, commands, bot_login="sluice[bot]")]

    assert standing([Review("alice", "CHANGES_REQUESTED", HEAD, NOW)], command) == [("alice", "command")]
    assert standing([changes], command) == []  # withdrawn, as an approving review would be
    assert standing([changes, Review("bob", "APPROVED", HEAD, NOW)], command) == [("bob", "review")]
    again = dataclasses.replace(command, at=NOW + dt.timedelta(3))
    assert standing([changes], again) == [("alice", "command")]
    assert standing([Review("alice", "COMMENTED", HEAD, NOW + dt.timedelta(2))], command) == [
        ("alice", "command")
    ]
    within_its_second = dataclasses.replace(command, at=NOW + dt.timedelta(2, microseconds=900_000))
    assert standing([changes], within_its_second) == []  # GitHub's review time has no fraction: order unknown


def test_team_owners_are_the_teams_the_resolutions_need() -> None:
    assert team_owners([SEMANTIC, MECHANICAL], CODEOWNERS, CONFIG) == {"@org/compiler"}
    assert owners_of("docs/guide.md", CODEOWNERS, CONFIG) == ("@writer",)


def test_required_tiers_always_start_with_l1() -> None:
    assert required_tiers(SluiceConfig()) == (CheckName.L1, CheckName.L2)
    assert required_tiers(parse_config("gate:\n  required_tiers: [l3, l1]\n")) == (CheckName.L1, CheckName.L3)
    with pytest.raises(ConfigError, match="l1 is always required"):
        parse_config("gate:\n  required_tiers: [l2]\n")


@pytest.mark.parametrize(("failures", "paused"), [(0, False), (2, False), (3, True), (7, True)])
def test_the_safety_throttle(failures: int, paused: bool) -> None:
    assert should_pause(failures, SluiceConfig()) is paused


# --- CODEOWNERS, with GitHub's documented examples ----------------------------------------------------

GITHUB_EXAMPLE = r"""
*       @global-owner1 @global-owner2
*.js    @js-owner #This is an inline comment.
*.go docs@example.com
/build/logs/ @doctocat
docs/*  docs@example.com
apps/ @octocat
/docs/ @doctocat
/scripts/ @doctocat @octocat
**/logs @octocat
/apps/ @octocat
/apps/github
\#notes @hash
!negated @nobody
"""


@pytest.mark.parametrize(
    ("path", "owners"),
    [
        ("README.md", ("@global-owner1", "@global-owner2")),
        ("src/app.js", ("@js-owner",)),
        ("main.go", ("docs@example.com",)),
        ("build/logs/today/x.log", ("@octocat",)),  # `**/logs` is a later line than `/build/logs/`
        ("docs/getting-started.md", ("@doctocat",)),  # /docs/ comes after docs/*: the last match wins
        ("docs/build-app/troubleshooting.md", ("@doctocat",)),
        ("deeply/nested/logs/x.txt", ("@octocat",)),
        ("web/apps/x.py", ("@octocat",)),
        ("apps/github/x.py", ()),  # a pattern without owners takes ownership away
        ("apps/other.py", ("@octocat",)),
        ("#notes", ("@hash",)),
    ],
)
def test_codeowners_follow_githubs_rules(path: str, owners: tuple[str, ...]) -> None:
    assert parse_codeowners(GITHUB_EXAMPLE).owners(path) == owners


def test_codeowners_lines_github_ignores_are_reported() -> None:
    parsed = parse_codeowners(GITHUB_EXAMPLE + "lib/[ab].c @x\nsrc/ not-an-owner\n")
    assert len(parsed.problems) == 3
    assert "negated" in parsed.problems[0] and "character ranges" in parsed.problems[1]
    assert "not an owner: not-an-owner" in parsed.problems[2]


def test_an_enterprise_managed_users_login_owns_as_any_login_does() -> None:
    """An EMU login carries its enterprise's short code after an underscore; the line was once dropped whole,
    and the broader line before it owned the directory instead."""
    parsed = parse_codeowners("* @docs-writer\nlib/Dialect/ @mona_acme @org/compiler\n")
    assert parsed.problems == ()
    assert parsed.owners("lib/Dialect/Ops.cpp") == ("@mona_acme", "@org/compiler")
    assert parse_codeowners("lib/ @mona_\n").problems == ("line 1: `lib/`: not an owner: @mona_",)


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("docs/*", "docs/a.md", True),
        ("docs/*", "docs/sub/a.md", False),
        ("docs", "x/docs/a.md", True),
        ("/docs", "x/docs/a.md", False),
        ("lib/**/Pass.cpp", "lib/a/b/Pass.cpp", True),
        ("lib/**/Pass.cpp", "lib/Pass.cpp", True),
        ("*.cpp", "lib/a/x.cpp", True),
        ("a?c", "abc", True),
        ("a?c", "a/c", False),
    ],
)
def test_codeowners_patterns(pattern: str, path: str, matches: bool) -> None:
    assert bool(parse_codeowners(f"{pattern} @o\n").owners(path)) is matches


FIX = "python/triton/runtime/fix.py"


def test_an_emergency_pick_needs_l1_and_a_code_owner_of_its_files_on_the_head() -> None:
    owners = parse_codeowners("* @global\npython/ @python-owner\n")
    pick = facts(checks=green(CheckName.L1), codeowners=owners, emergency=[FIX, "docs/x.md"])
    waiting = decide(pick, config=CONFIG, now=NOW)  # L2 is required of ingestions, not of emergency picks
    assert [(m.kind, m.who) for m in waiting.missing] == [
        (MissingKind.APPROVAL, ("@python-owner", "@global"))
    ]
    assert "`python/triton/runtime/fix.py`, `docs/x.md`" in waiting.missing[0].what
    stale = dataclasses.replace(pick, approvals=(Approval("python-owner", OLD, NOW),))
    assert "given on an older head" in decide(stale, config=CONFIG, now=NOW).missing[0].how
    stranger = dataclasses.replace(pick, approvals=(Approval("someone", HEAD, NOW),))
    assert not decide(stranger, config=CONFIG, now=NOW).passed
    approved = dataclasses.replace(pick, approvals=(Approval("python-owner", HEAD, NOW, "command"),))
    decision = decide(approved, config=CONFIG, now=NOW)
    assert decision.passed and [a.login for a in decision.approvals] == ["python-owner"]
    # no conflict is needed for the approval to be asked, and a conflict's own approval still is
    both = dataclasses.replace(approved, resolutions=(SEMANTIC,))
    assert [m.kind for m in decide(both, config=CONFIG, now=NOW).missing] == [MissingKind.APPROVAL]
    assert not decide(dataclasses.replace(approved, checks={}), config=CONFIG, now=NOW).passed


def test_an_emergency_pick_nobody_owns_says_how_to_name_an_owner() -> None:
    pick = facts(checks=green(CheckName.L1), codeowners=CodeOwners(), emergency=["odd/file.txt"])
    (missing,) = decide(pick, config=SluiceConfig(components=()), now=NOW).missing
    assert missing.who == () and "CODEOWNERS" in missing.how


def test_emergency_required_tiers() -> None:
    assert required_tiers(SluiceConfig(), emergency=True) == (CheckName.L1,)
    l2 = parse_config("gate:\n  emergency_required_tiers: [l1, l2]\n")
    assert required_tiers(l2, emergency=True) == (CheckName.L1, CheckName.L2)
    with pytest.raises(ConfigError, match="l1 is always required"):
        parse_config("gate:\n  emergency_required_tiers: [l2]\n")
    assert team_owners([], CODEOWNERS, CONFIG, emergency=[PASS]) == {"@org/compiler"}


@pytest.mark.parametrize(
    ("base", "expected"),
    [
        ({"ref": "main", "sha": "b" * 40}, False),
        ({"ref": "sluice/ingest/bundle-0a1b2c3d4e", "sha": "b" * 40}, True),  # on another ingestion PR
        ({"ref": "feature/sluice/ingest/x", "sha": "b" * 40}, False),  # the prefix, not a substring
    ],
)
def test_a_pr_is_stacked_when_its_base_is_an_ingestion_branch(base: dict[str, str], expected: bool) -> None:
    head = {"ref": "sluice/ingest/chain-1", "sha": "c" * 40}
    assert (
        stacked(Pull.model_validate({"number": 7, "state": "open", "base": base, "head": head})) is expected
    )
