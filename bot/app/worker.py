"""Job workers: claim a job, run its callbacks under a heartbeat-extended lease, record how it ended."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from typing import Protocol

from gidgethub import HTTPException

from bot.app.context import Context
from bot.core.errors import GitAuthRejected, SluiceError
from bot.db.jobs import Job, JobState
from bot.github.client import github_failure

log = logging.getLogger("sluice.worker")
MAX_ATTEMPTS = 5
IDLE_WAIT_S = 0.5


class Rejected(SluiceError):
    """A job that can never succeed as given (a broken config, an unknown repository): not retried."""

    retryable = False  # whatever it wraps: a person must change something first


def job_backoff(attempts: int) -> dt.timedelta:
    """5 s, 20 s, 80 s, 320 s, then at most 5 h 20 min: transient failures (GitHub, the network, a lost
    lease) get time to pass, and no attempt count can overflow the clock."""
    return dt.timedelta(seconds=5 * 4 ** min(max(attempts, 1) - 1, 7))


QUEUE_RETRY_S = (1.0, 2.0, 5.0, 10.0, 30.0)  # a worker's waits while the database fails it, then 30 s on


def job_label(job: Job) -> str:
    """`job 12 (push, delivery 72d3…)`; a job no delivery asked for (a resync, a poll) names none."""
    return f"job {job.id} ({job.kind}" + (f", delivery {job.delivery_id})" if job.delivery_id else ")")


def failure_of(exc: Exception) -> SluiceError | None:
    """The typed failure `exc` stands for (GitHub's HTTP errors as their Sluice kind); None when unknown."""
    if isinstance(exc, SluiceError):
        return exc
    if isinstance(exc, HTTPException):
        return github_failure(exc)
    return None


def is_permanent(exc: Exception) -> bool:
    """Whether retrying the job cannot help: the failure's own flag; an unknown failure is retried."""
    failure = failure_of(exc)
    return failure is not None and not failure.retryable


class Dispatcher(Protocol):
    """Runs a job's callbacks (bot.app.routing.Routes); raises what failed, for the worker to record."""

    async def dispatch(self, job: Job, *, ctx: Context) -> None: ...


class Worker:
    def __init__(self, ctx: Context, routes: Dispatcher, *, name: str) -> None:
        self.ctx = ctx
        self.routes = routes
        self.name = name
        self.lease = dt.timedelta(seconds=ctx.settings.lease_seconds)

    async def run(self, stop: asyncio.Event) -> None:
        """Claim and run jobs until `stop`. The database failing it (a restart, a failover, a locked SQLite
        file) is logged and waited out: a worker never ends while the service runs."""
        failures = 0
        while not stop.is_set():
            try:
                job = await asyncio.to_thread(
                    self.ctx.queue.claim,
                    self.name,
                    lease=self.lease,
                    now=self.ctx.clock(),
                    max_attempts=MAX_ATTEMPTS,
                )
                if job is not None:
                    await self.run_job(job)
                failures = 0
            except Exception:  # CancelledError is no Exception: a shutdown still ends the worker
                wait = QUEUE_RETRY_S[min(failures, len(QUEUE_RETRY_S) - 1)]
                failures += 1
                log.exception(
                    "worker %s: the job queue failed (%d in a row); again in %g s", self.name, failures, wait
                )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), wait)
                continue
            if job is None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), IDLE_WAIT_S)

    async def run_job(self, job: Job) -> None:
        heartbeat = asyncio.create_task(self._heartbeat(job))
        try:
            await self.routes.dispatch(job, ctx=self.ctx)
        except asyncio.CancelledError:  # shutting down mid-job: hand it back now, not when the lease ends
            release = asyncio.to_thread(
                self.ctx.queue.release,  # a shutdown is not the job's fault: its attempt is given back
                job.id,
                self.name,
                "the worker shut down mid-job",
                now=self.ctx.clock(),
            )
            await asyncio.shield(release)
            log.warning("job %d (%s) handed back: the worker is shutting down", job.id, job.kind)
            raise
        except Exception as exc:  # every failure is recorded on the job; none is lost
            await self._failed(job, exc)
        else:
            recorded = await asyncio.to_thread(
                self.ctx.queue.complete, job.id, self.name, now=self.ctx.clock()
            )
            if not recorded:
                log.warning(
                    "job %d (%s, %s) done, but its lease was lost: its result is not recorded",
                    job.id,
                    job.kind,
                    job.key,
                )
            else:
                log.info("job %d (%s, %s) done", job.id, job.kind, job.key)
        finally:
            heartbeat.cancel()

    async def _failed(self, job: Job, exc: Exception) -> None:
        if isinstance(exc, GitAuthRejected):  # the retry mints new tokens; a removed installation then fails
            self.ctx.github.forget_tokens()
        failure, permanent = failure_of(exc), is_permanent(exc)
        where = job_label(job)
        if failure is None:  # unknown: logged with its traceback, never posted
            log.exception("%s failed, attempt %d of %d", where, job.attempts, MAX_ATTEMPTS)
        elif permanent:
            log.error("%s rejected: %s", where, failure)
        else:
            log.warning("%s failed, attempt %d of %d: %s", where, job.attempts, MAX_ATTEMPTS, failure)
        state = await asyncio.to_thread(
            self.ctx.queue.fail,
            job.id,
            self.name,
            f"{type(failure or exc).__name__}: {failure or exc}",
            now=self.ctx.clock(),
            retry_after=job_backoff(job.attempts),
            max_attempts=job.attempts if permanent else MAX_ATTEMPTS,
        )
        if state is JobState.FAILED:
            log.error("job %d (%s) failed for good after %d attempts", job.id, job.kind, job.attempts)

    async def _heartbeat(self, job: Job) -> None:
        """Extend the job's lease every third of it; a beat the database fails is tried again sooner (a tenth
        of the lease), so one blip never lets the lease run out under a job that is still running."""
        wait = self.lease.total_seconds() / 3
        while True:
            await asyncio.sleep(wait)
            try:
                mine = await asyncio.to_thread(
                    self.ctx.queue.heartbeat, job.id, self.name, lease=self.lease, now=self.ctx.clock()
                )
            except Exception:
                log.exception("job %d: its lease could not be extended; trying again", job.id)
                wait = self.lease.total_seconds() / 10
                continue
            if not mine:
                log.warning("job %d: lease lost to another worker; its result will not be recorded", job.id)
                return
            wait = self.lease.total_seconds() / 3
