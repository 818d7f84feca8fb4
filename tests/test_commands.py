"""Slash commands: the strict first-line parser, the registry, and `/help` answered on the simulator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.app.context import Context
from bot.core import commands as core_commands
from bot.core import webhooks
from bot.core.command_args import MAX_TEXT, Kind, Positional, Usage, parse_arguments
from bot.core.commands import Conversation, SlashCommand
from bot.core.permissions import Permission
from bot.core.refs import MAX_REF_LENGTH
from handlers import ROUTES, commands
from handlers.commands.call import Call, Outcome
from tests.support.github_sim import GitHubSim
from tests.test_handlers import FORK, UPSTREAM, ctx, fork_record, job, sim_of

__all__ = ["ctx"]  # the fixture, reused from the handlers' tests
OCTOKIT = Path(__file__).parent / "fixtures" / "octokit" / "issue_comment.json"
ON = Conversation(repo=FORK, number=7, is_pull=True, installation_id=1)


@pytest.mark.parametrize(
    ("body", "name", "rest"),
    [
        ("/help", "help", ""),
        ("/help\r\n", "help", ""),
        ("/Help", "help", ""),
        ("/hold waiting for the LLVM bump  ", "hold", "waiting for the LLVM bump"),
        ("/hold\tbecause", "hold", "because"),
        ("/cherry-pick abc123\nwhy: the fix is needed on release", "cherry-pick", "abc123"),
        ("/help me", "help", "me"),
        (" /help", None, ""),  # not at the start of the comment
        ("please /help", None, ""),
        ("/help.", None, ""),
        ("/ help", None, ""),
        ("/", None, ""),
        ("/123", None, ""),
        ("/usr/bin/python crashes", None, ""),  # a path, not a command
        ("/usr/bin/env is broken", None, ""),
        ("/café au lait", None, ""),  # a word that goes on in letters no command name has
        ("lgtm\n/help", None, ""),  # only the first line counts
        ("/" + "a" * 33, None, ""),
        ("/hold " + "x" * 501, "hold", "x" * 501),  # over MAX_TEXT: refused by its arguments, not ignored
        ("/hold a\tb", "hold", "a\tb"),
        ("", None, ""),
        (None, None, ""),
    ],
)
def test_only_an_exact_first_line_is_a_command(body: str | None, name: str | None, rest: str) -> None:
    cmd = core_commands.parse(body, actor="alice", on=ON, comment_id=99)
    if name is None:
        assert cmd is None
    else:
        assert cmd == SlashCommand(name=name, rest=rest, actor="alice", on=ON, comment_id=99)


@pytest.mark.parametrize(
    ("body", "name", "problem", "rest"),
    [
        ("/hold\u00a0because", "hold", "the line holds U+00A0 (no-break space) at column 6", "\\xa0because"),
        ("/help\u00a0", "help", "U+00A0 (no-break space) at column 6", "\\xa0"),
        ("/Hold\u3000why", "hold", "U+3000 (ideographic space) at column 6", "\\u3000why"),
        ("/hold\u200bwhy", "hold", "U+200B (zero width space) at column 6", "\\u200bwhy"),
        ("/help \x07", "help", "U+0007 (a control character) at column 7", "\\x07"),
        ('/hold "a\rb"', "hold", "U+000D (a control character) at column 9", '"a\\rb"'),
        ("/frobnicate\u00a0now", "frobnicate", "U+00A0 (no-break space) at column 12", "\\xa0now"),
        (
            "/hold " + "x" * core_commands.MAX_LINE,
            "hold",
            f"the command line is {core_commands.MAX_LINE + 6} characters; at most {core_commands.MAX_LINE}",
            "x" * core_commands.EXCERPT + "…",
        ),
    ],
)
def test_a_line_that_starts_as_a_command_but_is_not_one_comes_with_its_problem(
    body: str, name: str, problem: str, rest: str
) -> None:
    cmd = core_commands.parse(body, actor="alice", on=ON, comment_id=99)
    assert cmd is not None and cmd.problem is not None
    assert (cmd.name, cmd.rest) == (name, rest) and problem in cmd.problem.message


def test_a_refused_lines_excerpt_is_short_printable_and_closes_no_code_span() -> None:
    hostile = "/hold " + "`\u202e\x1b[31m@everyone " * 200
    cmd = core_commands.parse(hostile, actor="alice", on=ON, comment_id=99)
    assert cmd is not None and cmd.problem is not None
    assert len(cmd.line) <= len("/hold ") + 4 * core_commands.EXCERPT + 1  # each character at most \\xNN
    assert "`" not in cmd.line and cmd.line.removesuffix("…").isascii() and cmd.line.isprintable()


LONGEST = {  # the longest value of each kind an argument parses
    Kind.TEXT: '"' + '\\"' * MAX_TEXT + '"',  # every character an escaped quote
    Kind.SENTENCE: '"' + '\\"' * MAX_TEXT + '"',
    Kind.DATE: "2026-12-31",
    Kind.SHA: "f" * 40,
    Kind.PULL_OR_SHA: "f" * 40,
    Kind.SHA_OR_REF: "r" * MAX_REF_LENGTH,
    Kind.REF: "r" * MAX_REF_LENGTH,
}


@pytest.mark.parametrize("name", sorted(commands.COMMANDS))
def test_the_longest_usage_of_every_command_fits_on_its_line(name: str) -> None:
    usage = commands.COMMANDS[name].USAGE
    words = [f"/{name}", *(LONGEST[p.kind] for p in usage.positionals)]
    words += [word for f in usage.flags for word in (f"--{f.name}", LONGEST[f.kind])]
    cmd = core_commands.parse(" ".join(words), actor="alice", on=ON, comment_id=99)
    assert cmd is not None and cmd.problem is None
    values = parse_arguments(usage, cmd.rest).values
    texts = [n for n, v in values.items() if isinstance(v, str) and v == '"' * MAX_TEXT]
    kinds = [p.kind for p in usage.positionals] + [f.kind for f in usage.flags]
    assert len(texts) == kinds.count(Kind.TEXT) + kinds.count(Kind.SENTENCE)


def test_a_waiver_with_a_long_reason_and_plan_parses() -> None:
    reason, plan = ("the GPU pool is being replaced. " * 10)[:300], ("rerun on the new pool. " * 11)[:250]
    body = f'/waive l2 --until 2026-12-31 --reason "{reason}" --plan "{plan}"'
    cmd = core_commands.parse(body, actor="alice", on=ON, comment_id=99)
    assert cmd is not None and cmd.problem is None
    values = parse_arguments(commands.COMMANDS["waive"].USAGE, cmd.rest).values
    assert (values["reason"], values["plan"]) == (reason.strip(), plan.strip())


def test_every_command_module_is_registered_under_its_name_with_a_help_line() -> None:
    assert "help" in commands.COMMANDS
    for name, command in commands.COMMANDS.items():
        assert name == command.NAME and command.HELP.startswith(f"`/{name}")
        assert "\n" not in command.HELP


# ------------------------------------------------------------------ on the simulator


def as_job(payload: dict[str, Any]) -> Any:
    """The job the intake records for an `issue_comment` delivery: its validated model, stored."""
    stored = webhooks.parse("issue_comment", json.dumps(payload).encode()).model_dump(mode="json")
    return job("issue_comment", stored, key=FORK)


def a_fork_with_a_pull(ctx: Context) -> tuple[GitHubSim, int]:
    sim = sim_of(ctx)
    fork_record(ctx, installation_id=sim.install(FORK))
    trunk = sim.git(FORK, "rev-parse", "main").strip()
    sim.commit(FORK, "feature", {"a.txt": "a\n"}, message="a", parent=trunk)
    return sim, int(sim.open_pull(FORK, head="feature", base="main", title="A", user="dev")["number"])


async def comment(
    ctx: Context, number: int, body: str, *, user: str = "alice", action: str = "created"
) -> None:
    sim = sim_of(ctx)
    payload = sim.issue_comment_payload(FORK, sim.add_comment(FORK, number, body, user=user), action=action)
    await ROUTES.dispatch(as_job(payload), ctx=ctx)


def replies(sim: GitHubSim, number: int) -> list[str]:
    return [c["body"] for c in sim.comment_objects(FORK, number) if c["user"]["login"] == sim.bot_login]


class Hold:
    """A command that is not built yet, to show /help lists whatever is registered."""

    NAME = "hold"
    HELP = "`/hold [reason]` — block merging this ingestion until `/unhold`"
    WHO = Permission.ANYONE
    USAGE = Usage("hold", (Positional("reason", Kind.TEXT, optional=True),))

    @staticmethod
    async def handle(call: Call, *, ctx: Context) -> Outcome:
        return Outcome("held", reply=f"held by @{call.actor}: {call.args.get('reason')}")


async def test_help_lists_every_registered_command(ctx: Context, monkeypatch: pytest.MonkeyPatch) -> None:
    # The registry is module data; a second command module is added for this test only (no mock: a real
    # command object, run through the real registry, parser and simulator).
    monkeypatch.setitem(commands.COMMANDS, Hold.NAME, Hold)
    sim, number = a_fork_with_a_pull(ctx)
    await comment(ctx, number, "/help")
    (reply,) = replies(sim, number)
    for command in commands.COMMANDS.values():
        assert f"- {command.HELP} (who: {command.WHO.described})\n" in reply
    await comment(ctx, number, '/hold "the LLVM bump"')
    assert replies(sim, number)[-1].endswith("held by @alice: the LLVM bump")


async def test_a_retried_help_edits_its_reply_rather_than_posting_again(ctx: Context) -> None:
    sim, number = a_fork_with_a_pull(ctx)
    payload = sim.issue_comment_payload(FORK, sim.add_comment(FORK, number, "/help", user="alice"))
    await ROUTES.dispatch(as_job(payload), ctx=ctx)
    await ROUTES.dispatch(as_job(payload), ctx=ctx)  # the job ran again (a lost lease, a redelivery)
    assert len(replies(sim, number)) == 1


async def test_an_unknown_command_gets_a_reply_pointing_to_help(ctx: Context) -> None:
    sim, number = a_fork_with_a_pull(ctx)
    await comment(ctx, number, "/frobnicate now")
    (reply,) = replies(sim, number)
    assert "no `/frobnicate` command" in reply and "comment `/help`" in reply


@pytest.mark.parametrize(
    ("user", "action", "body"),
    [
        pytest.param("alice", "edited", "/help", id="edited"),
        pytest.param("alice", "deleted", "/help", id="deleted"),
        pytest.param("sluice[bot]", "created", "/help", id="sluice-itself"),
        pytest.param("dependabot[bot]", "created", "/help", id="another-bot"),
        pytest.param("alice", "created", "thanks, /help was useful", id="not-a-command"),
    ],
)
async def test_comments_that_are_not_a_persons_new_command_are_only_recorded(
    ctx: Context, user: str, action: str, body: str
) -> None:
    sim, number = a_fork_with_a_pull(ctx)
    await comment(ctx, number, body, user=user, action=action)
    assert replies(sim, number) == ([body] if user == sim.bot_login else [])  # nothing posted


async def test_commands_count_only_on_a_fork_sluice_keeps_in_sync(ctx: Context) -> None:
    sim = sim_of(ctx)
    sim.install(UPSTREAM)
    number = sim.open_issue(UPSTREAM, title="question", user="dev")
    payload = sim.issue_comment_payload(UPSTREAM, sim.add_comment(UPSTREAM, number, "/help", user="alice"))
    stored = webhooks.parse("issue_comment", json.dumps(payload).encode()).model_dump(mode="json")
    await ROUTES.dispatch(job("issue_comment", stored, key=UPSTREAM), ctx=ctx)
    assert [c for c in sim.comment_objects(UPSTREAM, number) if c["user"]["login"] == sim.bot_login] == []


async def test_githubs_own_issue_comment_payload_runs_help(ctx: Context) -> None:
    """The octokit example of a created comment, pointed at the simulator's fork and issue."""
    sim, number = a_fork_with_a_pull(ctx)
    example = next(p for p in json.loads(OCTOKIT.read_text()) if p["action"] == "created")
    own = sim.issue_comment_payload(FORK, sim.add_comment(FORK, number, "/help", user="Codertocat"))
    payload = {
        **example,
        "repository": own["repository"],
        "installation": own["installation"],
        "issue": {**example["issue"], "number": number},
        "comment": {**example["comment"], "id": own["comment"]["id"], "body": "/help\r\n\r\nplease"},
    }
    await ROUTES.dispatch(as_job(payload), ctx=ctx)
    (reply,) = replies(sim, number)
    assert commands.COMMANDS["help"].HELP in reply
