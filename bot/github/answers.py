"""GitHub's REST answers parsed once, at the edge, into the frozen models of `bot.core.webhooks`."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ValidationError

from bot.core.errors import Unavailable, first_problem

M = TypeVar("M", bound=BaseModel)


def parsed(model: type[M], answer: object, *, what: str) -> M:
    """A REST answer parsed once here, into `model`; one GitHub did not shape so is `Unavailable` (retried:
    GitHub's answer, not anyone's input, was wrong), naming `what` it was about and the field."""
    try:
        return model.model_validate(answer)
    except ValidationError as exc:
        where, why = first_problem(exc, whole="the answer")
        raise unusable(f"GitHub answered {what} with an unusable {where}: {why}") from exc


def unusable(message: str) -> Unavailable:
    """An answer GitHub did not shape as documented: retried, as GitHub's fault, not anyone's input."""
    return Unavailable(
        message,
        "nothing to do: the job is retried; if it persists, GitHub's API is not answering as documented",
    )
