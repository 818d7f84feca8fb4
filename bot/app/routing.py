"""Job dispatch: a job's payload parsed once into its kind's model, then each matching router callback."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from gidgethub.routing import Router
from gidgethub.sansio import Event
from pydantic import BaseModel, ValidationError

from bot.app.context import Context
from bot.app.worker import Rejected, failure_of, job_label
from bot.core.errors import first_problem
from bot.db.jobs import Job

log = logging.getLogger("sluice.routing")


@dataclass(frozen=True)
class Routes:
    """The payload model of every job kind, and the router holding the callbacks for each kind.

    A callback is `async def on_x(event: <the kind's model>, *, ctx: Context, job: Job) -> None`.
    """

    router: Router
    payloads: Mapping[str, type[BaseModel]]

    def parse(self, job: Job) -> BaseModel:
        """The job's payload as its kind's model; Rejected (never retried) if it has none or is malformed."""
        model = self.payloads.get(job.kind)
        if model is None:
            raise Rejected(
                f"no handler for job kind {job.kind!r}", "deploy a Sluice that knows it, then requeue the job"
            )
        try:
            return model.model_validate(job.payload)
        except ValidationError as exc:
            where, why = first_problem(exc, whole="(the payload)")
            raise Rejected(
                f"{job.kind} job {job.id} has a malformed payload: {where}: {why}",
                "retrying cannot help; the next push, redelivery or periodic resync asks for the work again",
            ) from exc

    async def dispatch(self, job: Job, *, ctx: Context) -> None:
        """Run every callback registered for the job, each in its own try/log; then raise the first failure.

        gidgethub's `Router.dispatch` stops at the first exception, which would silently skip the rest.
        """
        event = self.parse(job)
        found = self.router.fetch(Event(job.payload, event=job.kind, delivery_id=job.delivery_id or ""))
        failures: list[Exception] = []
        for callback in sorted(found, key=_name):  # a set: sorted so every run goes in the same order
            try:
                await callback(event, ctx=ctx, job=job)
            except Exception as exc:
                exc.add_note(f"in {_name(callback)}")
                failures.append(exc)
        for later in failures[1:]:  # the worker logs the first, which it records on the job
            _log_failure(job, later)
        if failures:
            raise failures[0]  # the worker records it on the job and retries as its error allows


def _log_failure(job: Job, exc: Exception) -> None:
    """As the worker logs a job's failure: one a person can act on by its message, any other with its
    traceback."""
    where = f"{job_label(job)} also failed {exc.__notes__[-1]}"
    failure = failure_of(exc)
    if failure is None:
        log.error("%s", where, exc_info=exc)
    else:
        log.warning("%s: %s", where, failure)


def _name(callback: object) -> str:
    return f"{getattr(callback, '__module__', '?')}.{getattr(callback, '__qualname__', repr(callback))}"
