"""The webhook intake's own lane to the database: bounded waiting, one writer with group commit, deadlines."""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from bot.core.errors import Unavailable, first_line
from bot.db.jobs import Delivery, DeliveryOutcome, JobQueue

log = logging.getLogger("sluice.intake")
T = TypeVar("T")
RETRY_AFTER_S = 10  # what a 503 asks the sender to wait; GitHub itself never redelivers on its own
MAX_BATCH = 64  # deliveries written in one transaction
UNAVAILABLE = (OperationalError, PoolTimeout)  # the database did not answer: nothing to learn per delivery


class DatabaseBusy(Unavailable):
    """The database did not answer in time (or too much is already waiting for it): nothing was promised."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "redeliver it later (the delivery's id makes a redelivery safe)")


@dataclass(eq=False)
class _Waiting:
    delivery: Delivery
    answer: asyncio.Future[DeliveryOutcome] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class Intake:
    """Records deliveries through its own thread and engine; every caller has an answer within `deadline`.

    Deliveries wait in a bounded line; one writer takes everything waiting (up to MAX_BATCH) and records it
    in one transaction, so a burst costs one commit. A full line, or a writer stuck past the deadline (a
    thread cannot be cancelled), refuses at once instead of making callers wait.
    """

    def __init__(
        self, queue: JobQueue, *, capacity: int, deadline: float, clock: Callable[[], dt.datetime]
    ) -> None:
        self._queue, self._capacity, self._deadline, self._clock = queue, capacity, deadline, clock
        self._line: collections.deque[_Waiting] = collections.deque()
        self._writing = 0  # deliveries in the batch being written
        self._busy_since: float | None = None  # loop time the batch being written started
        self._wake = asyncio.Event()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sluice-intake")
        self._writer: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._writer = asyncio.create_task(self._write_forever())

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)  # a stuck thread must not hold up the exit

    def problem(self) -> str | None:
        """Why the intake refuses deliveries right now, or None when it takes them."""
        if self._busy_since is not None:
            stuck = asyncio.get_running_loop().time() - self._busy_since
            if stuck > self._deadline:
                return f"the database has not finished the intake's last write for {stuck:.0f} s"
        if len(self._line) + self._writing >= self._capacity:
            return f"{self._capacity} deliveries are already waiting for the database"
        return None

    async def accept(self, delivery: Delivery) -> DeliveryOutcome:
        """The delivery recorded with its job, or DatabaseBusy within the deadline."""
        problem = self.problem()
        if problem is not None:
            raise DatabaseBusy(problem)
        waiting = _Waiting(delivery)
        self._line.append(waiting)
        self._wake.set()
        try:
            return await asyncio.wait_for(asyncio.shield(waiting.answer), self._deadline)
        except TimeoutError:
            raise DatabaseBusy(
                f"the database did not record the delivery within {self._deadline:g} s"
                + ("" if self._forget(waiting) else " (it may still; a redelivery is then a duplicate)")
            ) from None
        finally:
            waiting.answer.cancel()  # no-op once answered; else the writer skips it

    def _forget(self, waiting: _Waiting) -> bool:
        """Take a caller that gave up out of the line; False when its batch is already being written."""
        try:
            self._line.remove(waiting)
        except ValueError:
            return False
        return True

    async def _write_forever(self) -> None:
        while True:
            await self._wake.wait()
            batch = [self._line.popleft() for _ in range(min(MAX_BATCH, len(self._line)))]
            if not self._line:
                self._wake.clear()
            batch = [waiting for waiting in batch if not waiting.answer.done()]
            if batch:
                await self._write(batch)

    async def _write(self, batch: list[_Waiting]) -> None:
        self._writing, self._busy_since = len(batch), asyncio.get_running_loop().time()
        try:
            await self._record(batch)
        finally:
            self._writing, self._busy_since = 0, None

    async def _record(self, batch: list[_Waiting]) -> None:
        deliveries = [waiting.delivery for waiting in batch]
        try:
            outcomes = await asyncio.get_running_loop().run_in_executor(
                self._executor, lambda: self._queue.accept_deliveries(deliveries, now=self._clock())
            )
        except UNAVAILABLE as exc:  # a lock or statement timeout, a lost connection: each caller gets a 503
            log.warning("could not record %d deliveries: %s", len(batch), first_line(exc))
            _refuse(batch, f"the database refused it: {first_line(exc)}")
        except Exception as exc:
            if len(batch) > 1:  # one delivery the store cannot take must not fail the others with it
                for waiting in batch:
                    await self._record([waiting])
                return
            log.exception("could not record delivery %s", batch[0].delivery.id)
            _refuse(batch, f"it could not be recorded ({type(exc).__name__})")
        else:
            for waiting, outcome in zip(batch, outcomes, strict=True):
                if not waiting.answer.done():
                    waiting.answer.set_result(outcome)


def _refuse(batch: list[_Waiting], reason: str) -> None:
    for waiting in batch:
        if not waiting.answer.done():
            waiting.answer.set_exception(DatabaseBusy(reason))


class Lane:
    """Blocking database calls on their own few threads, each answered or refused within `deadline`.

    A call still running past its deadline keeps its thread (threads cannot be cancelled); while every
    thread is taken, new calls are refused at once instead of queueing behind them.
    """

    def __init__(self, name: str, *, threads: int, deadline: float) -> None:
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)
        self._threads, self._deadline, self._running = threads, deadline, 0

    async def run(self, call: Callable[[], T]) -> T:
        if self._running >= self._threads:
            raise DatabaseBusy(f"{self._running} earlier database calls have not returned yet")
        self._running += 1
        future = asyncio.get_running_loop().run_in_executor(self._executor, call)
        future.add_done_callback(self._done)
        try:
            return await asyncio.wait_for(asyncio.shield(future), self._deadline)
        except TimeoutError:
            raise DatabaseBusy(f"the database did not answer within {self._deadline:g} s") from None

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _done(self, future: asyncio.Future[Any]) -> None:
        self._running -= 1
        if not future.cancelled():
            future.exception()  # retrieved: a late failure after its caller gave up is not worth a warning
