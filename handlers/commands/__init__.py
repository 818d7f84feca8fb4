"""The slash-command registry and what every command goes through: who may, strict arguments, the
reaction or the refusal, and the audit log. One module per command (`NAME`, `HELP`, `WHO`, `USAGE`,
`handle`), listed in `MODULES`."""

from __future__ import annotations

import logging
from typing import Protocol

from bot.app.context import Context
from bot.app.worker import failure_of, is_permanent
from bot.core.command_args import CommandRefused, Usage, parse_arguments
from bot.core.commands import SlashCommand, reply_marker
from bot.core.errors import redact
from bot.core.permissions import Permission, role_of
from bot.ports import CommandRecord, Fork
from handlers.commands import (
    approve,
    bisect,
    cherry_pick,
    defer,
    hold,
    ingest,
    l3,
    pause,
    resume,
    retry,
    signoff,
    skip,
    status,
    unhold,
    waive,
)
from handlers.commands import help as help_command  # it reads COMMANDS only when it runs
from handlers.commands.call import Call, Outcome

log = logging.getLogger("sluice.commands")


class Command(Protocol):
    """What a command module provides (a module satisfies this protocol by its top-level names)."""

    NAME: str
    HELP: str  # one line: "`/name args` — what it does", shown by /help
    WHO: Permission  # who may run it
    USAGE: Usage  # its arguments, parsed strictly before `handle` runs

    async def handle(self, call: Call, *, ctx: Context) -> Outcome: ...


MODULES: tuple[Command, ...] = (
    approve,
    bisect,
    cherry_pick,
    defer,
    help_command,
    hold,
    ingest,
    l3,
    pause,
    resume,
    retry,
    signoff,
    skip,
    status,
    unhold,
    waive,
)
COMMANDS: dict[str, Command] = {module.NAME: module for module in MODULES}
AUDIT_ACCEPTED = "accepted"  # a command that ran: its row's outcome (else "refused" or "failed")


async def run(cmd: SlashCommand, *, fork: Fork, ctx: Context, last_attempt: bool = False) -> None:
    """Run the command `cmd` names, or say why not; either way one audit row records what happened.

    A failure underneath (GitHub, git) is raised for the job to record: retried when it may pass (no reply
    yet: the retry's answer is the one reply, edited in place), else, or on the job's `last_attempt`,
    answered with what failed and why."""
    command = COMMANDS.get(cmd.name)
    if (
        cmd.problem is not None
    ):  # a line that starts as a command but is not exactly one: never run, even in part
        refused = CommandRefused(cmd.problem.message, cmd.problem.remedy)
        await _refuse(cmd, refused, usage=command.USAGE if command is not None else None, ctx=ctx)
        return
    if command is None:
        refused = CommandRefused(f"Sluice has no `/{cmd.name}` command", "comment `/help` for those it has")
        await _refuse(cmd, refused, usage=None, ctx=ctx)
        return
    earlier = await ctx.db(ctx.command_log.entry, cmd.comment_id)
    if earlier is not None and earlier.outcome == AUDIT_ACCEPTED:
        # An earlier attempt did it and then failed to answer (or the comment was delivered again): give its
        # answer, never run it twice (a second `/pause` would be refused as already paused).
        await _answer(cmd, Outcome(earlier.reason, reply=earlier.reply), ctx, final=last_attempt)
        return
    log.info("%s#%d: /%s from @%s", cmd.on.repo, cmd.on.number, cmd.name, cmd.actor)
    try:
        outcome = await _checked(command, cmd, fork=fork, ctx=ctx)
    except CommandRefused as refused:
        await _refuse(cmd, refused, usage=command.USAGE, ctx=ctx)
        return
    except Exception as exc:  # GitHub or git failed underneath: the job is retried when it can be
        await _failed(cmd, exc, final=last_attempt or is_permanent(exc), ctx=ctx)
        raise
    # recorded before the answer: a job run again answers, and never runs the command twice
    await _audit(ctx, cmd, AUDIT_ACCEPTED, outcome.done, reply=outcome.reply)
    await _answer(cmd, outcome, ctx, final=last_attempt)


async def _answer(cmd: SlashCommand, outcome: Outcome, ctx: Context, *, final: bool) -> None:
    """The reaction and the reply; a failure here is the job's to retry (the command is done). On the job's
    last attempt a reaction GitHub refused is logged and the reply still goes out."""
    forge = ctx.forge(cmd.on.installation_id, cmd.on.repo)
    try:
        await forge.react(cmd.comment_id, outcome.reaction)  # GitHub keeps one per content: a retry adds none
    except Exception:
        if not final:
            raise
        log.exception("%s#%d: could not react to /%s", cmd.on.repo, cmd.on.number, cmd.name)
    if outcome.reply is not None:
        await reply(cmd, outcome.reply, ctx=ctx)


async def _failed(cmd: SlashCommand, exc: Exception, *, final: bool, ctx: Context) -> None:
    """Audited as failed; and, when no retry follows, answered with the failure's message and remedy (never
    a traceback, an unknown failure's text, or a credential)."""
    failure = failure_of(exc)
    reason = redact(failure.message) if failure is not None else f"internal error ({type(exc).__name__})"
    if final:
        remedy = redact(failure.remedy) if failure is not None and failure.remedy else None
        lines = [
            f"@{cmd.actor}: `{_code(cmd.line)}` failed: {reason}.",
            "",
            f"To fix: {remedy}." if remedy else "Sluice's operators find the details in its log.",
        ]
        try:
            await reply(cmd, "\n".join(lines) + "\n", ctx=ctx)
        except Exception:  # the failure itself is what the job records
            log.exception("%s#%d: could not answer /%s's failure", cmd.on.repo, cmd.on.number, cmd.name)
    await _audit(ctx, cmd, "failed", reason if final else f"{reason} (to be tried again)")


async def _checked(command: Command, cmd: SlashCommand, *, fork: Fork, ctx: Context) -> Outcome:
    """Who first (from GitHub, never from the payload), then the arguments, then the command itself."""
    role = Permission.ANYONE
    if command.WHO is not Permission.ANYONE:
        role = await role_on(ctx, cmd)
        needed = Permission.WRITE if command.WHO is Permission.CODE_OWNER else command.WHO
        if not needed.allows(role):
            raise CommandRefused(
                f"@{cmd.actor} has {'no' if role is Permission.ANYONE else role.value} access to "
                f"{cmd.on.repo}; `/{cmd.name}` needs "
                f"{command.WHO.described}",
                "ask someone who has it",
            )
    call = Call(cmd, parse_arguments(command.USAGE, cmd.rest), fork=fork, role=role)
    outcome = await command.handle(call, ctx=ctx)
    if command.WHO is Permission.CODE_OWNER and not call.owner_checked:
        raise RuntimeError(f"/{cmd.name} needs a code owner but did not check ownership")  # a bug
    return outcome


async def role_on(ctx: Context, cmd: SlashCommand) -> Permission:
    """The commenter's role on the repository, as GitHub's collaborator-permission API says."""
    forge = ctx.forge(cmd.on.installation_id, cmd.on.repo)
    answer = await forge.permission(cmd.actor)
    if answer is None:  # no such user, as GitHub says: no role
        return Permission.ANYONE
    return role_of(answer.role_name, answer.permission)


async def _refuse(cmd: SlashCommand, refused: CommandRefused, *, usage: Usage | None, ctx: Context) -> None:
    log.info("%s#%d: /%s from @%s refused: %s", cmd.on.repo, cmd.on.number, cmd.name, cmd.actor, refused)
    lines = [f"@{cmd.actor}: Sluice did not run `{_code(cmd.line)}`: {refused.message}.", ""]
    if usage is not None:
        lines.append(f"Usage: `{usage.line}` ({refused.remedy}).")
    else:
        lines.append(f"To fix: {refused.remedy}.")
    await reply(cmd, "\n".join(lines) + "\n", ctx=ctx)
    await _audit(ctx, cmd, "refused", refused.message)


async def _audit(
    ctx: Context, cmd: SlashCommand, outcome: str, reason: str, *, reply: str | None = None
) -> None:
    entry = CommandRecord(
        comment_id=cmd.comment_id,
        repo=cmd.on.repo,
        number=cmd.on.number,
        actor=cmd.actor,
        command=cmd.name,
        line=cmd.line,
        outcome=outcome,
        reason=reason,
        at=ctx.clock(),
        reply=reply,
    )
    await ctx.db(ctx.command_log.record, entry)


def _code(text: str) -> str:
    """Text shown inside backticks: no backtick can close the span early."""
    return text.replace("`", "'")[:200]


async def reply(cmd: SlashCommand, body: str, *, ctx: Context) -> None:
    """Answer the command's comment with one comment of Sluice's, edited in place if the job runs again."""
    forge = ctx.forge(cmd.on.installation_id, cmd.on.repo)
    marker = reply_marker(cmd)
    await forge.upsert_comment(cmd.on.number, marker=marker, body=f"{marker}\n{body}")
