"""The pure side of slash commands: strict arguments, CODEOWNERS as GitHub reads it, who may run what."""

from __future__ import annotations

import datetime as dt

import pytest

from bot.core import codeowners
from bot.core.command_args import (
    CommandRefused,
    Flag,
    Kind,
    Positional,
    PullNumber,
    ShaPrefix,
    Usage,
    parse_arguments,
    split_words,
)
from bot.core.config import parse_config
from bot.core.permissions import Permission, ownership, role_of

PICK = Usage("cherry-pick", (Positional("upstream PR number or SHA", Kind.PULL_OR_SHA),), (Flag("reason"),))
WAIVE = Usage(
    "waive",
    (Positional("tier", Kind.TEXT),),
    (Flag("until", Kind.DATE, required=True), Flag("reason", required=True)),
)
TARGET = "upstream PR number or SHA"


def test_usage_lines_say_what_a_command_takes() -> None:
    assert PICK.line == '/cherry-pick <upstream PR number or SHA> [--reason "…"]'
    assert WAIVE.line == '/waive <tier> --until YYYY-MM-DD --reason "…"'


@pytest.mark.parametrize(
    ("rest", "words"),
    [
        ('1872 --reason "the fix for #1870"', ["1872", "--reason", "the fix for #1870"]),
        ("1872 --reason 'it is; rm -rf /'", ["1872", "--reason", "it is; rm -rf /"]),
        ('--reason="a b"', ["--reason=a b"]),
        (r'"say \"hi\""', ['say "hi"']),
        ("1872;rm", ["1872;rm"]),  # nothing is a shell operator: it stays one word
        ("$(id) `id`", ["$(id)", "`id`"]),
        ("", []),
    ],
)
def test_words_split_as_a_shell_would_without_running_anything(rest: str, words: list[str]) -> None:
    assert split_words(rest) == words


@pytest.mark.parametrize("rest", ['1872 --reason "unbalanced', "1872 --reason 'half", "trailing\\"])
def test_unbalanced_quotes_are_refused(rest: str) -> None:
    with pytest.raises(CommandRefused, match="do not parse"):
        split_words(rest)


@pytest.mark.parametrize(
    ("rest", "values"),
    [
        ("1872", {TARGET: PullNumber(1872)}),
        ("abc1234", {TARGET: ShaPrefix("abc1234")}),
        ("ABCDEF0123456789", {TARGET: ShaPrefix("abcdef0123456789")}),
        ('1872 --reason "CVE fix"', {TARGET: PullNumber(1872), "reason": "CVE fix"}),
        ("--reason=urgent 1872", {TARGET: PullNumber(1872), "reason": "urgent"}),
        ("#1872", {TARGET: PullNumber(1872)}),
        ("1234567", {TARGET: PullNumber(1234567, sha="1234567")}),  # a PR or a SHA: the command decides
        ("#1234567", {TARGET: PullNumber(1234567)}),
        ("123456789", {TARGET: PullNumber(123456789, sha="123456789")}),
        ("1234567890", {TARGET: ShaPrefix("1234567890")}),  # too long for a PR number
    ],
)
def test_good_arguments_parse_to_typed_values(rest: str, values: dict[str, object]) -> None:
    assert dict(parse_arguments(PICK, rest).values) == values


@pytest.mark.parametrize(
    ("rest", "why"),
    [
        ("1872;rm", "is not a PR number"),
        ("--upload-pack=x", "is not an option"),
        ("-1", "is not an option"),
        ("\u0661\u0668\u0667\u0662", "is not a PR number"),  # Arabic-Indic digits: not ASCII
        ("1872 1873", "too many arguments"),
        ("0", "is not a PR number"),
        ("+1872", "is not a PR number"),
        ("abc12", "is not a PR number"),  # too short for a SHA
        ("g" * 7, "is not a PR number"),
        ("a" * 41, "is not a PR number"),
        ("1872 --reason", "needs a value"),
        ('1872 --reason a --reason "b"', "given twice"),
        ('1872 --reason ""', "1 to 500 characters"),
        ("", "missing"),
        ("HEAD~1", "is not a PR number"),
        ("#", "is not a PR number"),
        ("##1872", "is not a PR number"),
        ("#abc1234", "is not a PR number"),
        ("main..evil", "is not a PR number"),
    ],
)
def test_hostile_or_wrong_arguments_are_refused_with_why(rest: str, why: str) -> None:
    with pytest.raises(CommandRefused, match=why):
        parse_arguments(PICK, rest)


def test_dates_are_iso_and_required_flags_required() -> None:
    parsed = parse_arguments(WAIVE, 'L2 --until 2026-12-31 --reason "flaky runner"')
    assert parsed.get("until") == dt.date(2026, 12, 31)
    for rest, why in [
        ('L2 --until 31/12/2026 --reason "x"', "is not a date"),
        ('L2 --until 2026-02-30 --reason "x"', "is not a date"),
        ("L2 --until 2026-12-31", "--reason is required"),
    ]:
        with pytest.raises(CommandRefused, match=why):
            parse_arguments(WAIVE, rest)


def test_a_sha_or_ref_argument_is_a_sha_when_it_looks_like_one() -> None:
    usage = Usage("ingest", (Positional("upstream SHA or tag", Kind.SHA_OR_REF, optional=True),))
    assert parse_arguments(usage, "abcdef1").get("upstream SHA or tag") == ShaPrefix("abcdef1")
    assert parse_arguments(usage, "v3.2.0").get("upstream SHA or tag") == "v3.2.0"
    for rest in ("-v3", "v3..v4", "v3^{}", "v3:x", "\u0661\u0668"):
        with pytest.raises(CommandRefused):
            parse_arguments(usage, rest)


def test_ref_arguments_refuse_what_git_could_take_for_an_option() -> None:
    usage = Usage("ingest", (Positional("ref", Kind.REF, optional=True),))
    assert parse_arguments(usage, "release/3.2").get("ref") == "release/3.2"
    assert parse_arguments(usage, "").get("ref") is None
    for rest in ("--upload-pack=x", "a..b", "main@{1}", "re\u0301lease"):
        with pytest.raises(CommandRefused):
            parse_arguments(usage, rest)


# ------------------------------------------------------------------ CODEOWNERS

GITHUB_EXAMPLE = r"""
# GitHub's documented example, abridged
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
!negated @nobody
"""


@pytest.mark.parametrize(
    ("path", "owners"),
    [
        ("README.md", ("@global-owner1", "@global-owner2")),
        ("src/app.js", ("@js-owner",)),
        ("main.go", ("docs@example.com",)),
        ("build/logs/today.log", ("@octocat",)),  # `**/logs` comes after `/build/logs/`
        ("docs/getting-started.md", ("@doctocat",)),  # `/docs/` comes after `docs/*`
        ("docs/build-app/troubleshooting.md", ("@doctocat",)),
        ("lib/apps/x.py", ("@octocat",)),  # `apps/` at any depth
        ("deep/logs/x.txt", ("@octocat",)),
        ("apps/github/x.py", ()),  # the last rule names nobody: no owner
        ("apps/other/x.py", ("@octocat",)),
        ("negated", ("@global-owner1", "@global-owner2")),  # negation is not supported: the line is skipped
    ],
)
def test_codeowners_last_matching_pattern_wins(path: str, owners: tuple[str, ...]) -> None:
    assert codeowners.parse_codeowners(GITHUB_EXAMPLE).owners(path) == owners


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("docs/*", "docs/a.md", True),
        ("docs/*", "docs/x/b.md", False),  # one level only
        ("docs/*", "src/docs/a.md", False),  # a middle slash anchors at the root
        ("lib/", "lib/a/b.cpp", True),
        ("lib/", "x/lib/a.cpp", True),
        ("/lib/", "x/lib/a.cpp", False),
        ("lib", "lib", True),
        ("lib", "a/lib/b", True),
        ("a/**/b", "a/b", True),
        ("a/**/b", "a/x/y/b", True),
        ("a/**", "a/x/y", True),
        ("*.py", "a/b/c.py", True),
        ("*.py", "a/b/c.pyc", False),
        ("?.md", "a.md", True),
        ("?.md", "ab.md", False),
    ],
)
def test_codeowners_patterns_follow_githubs_gitignore_rules(pattern: str, path: str, matches: bool) -> None:
    assert (codeowners.parse_codeowners(f"{pattern} @x").owners(path) == ("@x",)) is matches


def test_ownership_counts_codeowners_and_component_owners() -> None:
    config = parse_config(
        "components:\n"
        "  - name: core-passes\n"
        "    paths: ['lib/Dialect/**']\n"
        "    risk: high\n"
        "    owners: ['@carol']\n",
        filename="sluice.yml",
    )
    owners = codeowners.parse_codeowners("/lib/ @alice\n/docs/ @bob\n/teams/ @org/core\n")
    area = ownership(["lib/Dialect/P.cpp", "docs/x.md", "free.txt"], codeowners=owners, config=config)
    assert area.owners["lib/Dialect/P.cpp"] == ("@alice", "@carol")
    assert area.refusal("alice") is not None and "docs/x.md" in (area.refusal("alice") or "")
    solo = ownership(["lib/Dialect/P.cpp", "free.txt"], codeowners=owners, config=config)
    assert solo.refusal("Carol") is None and solo.refusal("alice") is None  # logins are case-insensitive
    assert solo.refusal("bob") is not None
    team = ownership(["teams/x.md"], codeowners=owners, config=config)
    assert team.teams == {"@org/core"} and team.refusal("erin") is not None
    assert team.refusal("erin", member_of=["@org/core"]) is None
    unowned = ownership(["free.txt"], codeowners=owners, config=config)
    assert "no code owner" in (unowned.refusal("alice") or "")


# ------------------------------------------------------------------ roles


@pytest.mark.parametrize(
    ("role_name", "permission", "role"),
    [
        ("maintain", "write", Permission.MAINTAIN),
        ("triage", "read", Permission.TRIAGE),
        ("admin", "admin", Permission.ADMIN),
        (None, "write", Permission.WRITE),
        ("custom-role", "read", Permission.READ),
        ("none", "none", Permission.ANYONE),
        (None, None, Permission.ANYONE),
    ],
)
def test_roles_come_from_githubs_answer(role_name: object, permission: object, role: Permission) -> None:
    assert role_of(role_name, permission) is role


def test_roles_are_ordered_and_code_ownership_is_no_role() -> None:
    assert Permission.WRITE.allows(Permission.MAINTAIN) and Permission.WRITE.allows(Permission.ADMIN)
    assert not Permission.WRITE.allows(Permission.TRIAGE)
    assert Permission.ANYONE.allows(Permission.ANYONE)
    assert not Permission.CODE_OWNER.allows(Permission.ADMIN)


def test_after_a_double_dash_a_word_that_starts_with_a_dash_is_an_argument() -> None:
    """A reason may start with `-` ("-1 day slip") only after `--`; before it, it is an option."""
    hold = Usage("hold", (Positional("reason", Kind.SENTENCE, optional=True),))
    assert parse_arguments(hold, '-- "-1 day slip"').values == {"reason": "-1 day slip"}
    with pytest.raises(CommandRefused, match="is not an option of /hold") as refused:
        parse_arguments(hold, '"-1 day slip"')
    assert "goes after `--`" in refused.value.remedy
    skip = Usage("skip", (Positional("SHA", Kind.SHA),), (Flag("reason", required=True),))
    with pytest.raises(CommandRefused, match="is not an upstream SHA"):  # never an option for git
        parse_arguments(skip, "--reason x -- --upload-pack=y")
