"""Driving the log cleaner from the broker's event loop.

The :class:`~kcompat.log.LogCleaner` does its work in worker processes, but every log mutation -
installing a cleaning's result, starting the next step - happens in :meth:`LogCleaner.tick` on
the event loop's thread (the cleaner and the logs are not thread-safe). A task of the driver's
own ticks it about every second to look for cleanable logs, which ``log.cleaner.backoff.ms``
spaces out when none was found - its own task, like Kafka's cleaner thread, so that nothing else
the broker does periodically (retention, checkpoints, controller work that fails or waits) can
delay or skip cleaning; a cleaning in progress is advanced sooner: when a worker step finishes,
its future's done callback (on the worker pool's result thread) only hops to the loop
(``call_soon_threadsafe``) and sets an event, and the task ticks the cleaner at once, as Kafka's
cleaner thread goes straight on to its next step. Each tick is the same bounded amount of loop
work (a few renames per finished step), so produce and fetch are not stalled.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable, Mapping

from kcompat.log import CleanOutcome, Log, LogCleaner

log = logging.getLogger("kcompat.broker")

TopicPartition = tuple[str, int]


class CleanerDriver:
    """Ticks ``cleaner`` over ``logs`` (``LogManager.logs``, the live dict) from a task of its
    own: every ``interval_s`` seconds, and at once whenever a worker step finishes.
    ``now_ms()`` is the broker's wall clock in milliseconds; ``stable_offset_of`` and
    ``producer_last_offsets_of`` are passed to :meth:`LogCleaner.tick`."""

    def __init__(self, cleaner: LogCleaner, logs: Mapping[TopicPartition, Log], *,
                 now_ms: Callable[[], int],
                 stable_offset_of: Callable[[TopicPartition], int | None],
                 producer_last_offsets_of: Callable[[TopicPartition], Mapping[int, int] | None],
                 interval_s: float = 1.0) -> None:
        self.cleaner = cleaner
        self.logs = logs
        self.now_ms = now_ms
        self.stable_offset_of = stable_offset_of
        self.producer_last_offsets_of = producer_last_offsets_of
        self.interval_s = interval_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        """Start the task that advances cleanings as their worker steps finish (call on the loop)."""
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.ensure_future(self._run())
        self.cleaner.on_step_done = self._step_done

    def stop(self) -> None:
        """Stop the notices and cancel the task (before :meth:`LogCleaner.shutdown`)."""
        self.cleaner.on_step_done = None
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def tick(self, now_ms: int) -> list[CleanOutcome]:
        """One :meth:`LogCleaner.tick` at ``now_ms``; failed cleanings are logged."""
        outcomes = self.cleaner.tick(self.logs, now_ms, stable_offset_of=self.stable_offset_of,
                                     producer_last_offsets_of=self.producer_last_offsets_of)
        for outcome in outcomes:
            if outcome.error:
                log.warning("cleaning %s-%d failed: %s", *outcome.tp, outcome.error)
        return outcomes

    def _step_done(self) -> None:
        """The cleaner's ``on_step_done``; runs on any thread: only hands over to the loop."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(self._wake.set)
        except RuntimeError:    # the loop closed meanwhile (shutdown)
            pass

    async def _run(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), self.interval_s)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()      # a step finishing during the tick sets it again
            try:
                self.tick(self.now_ms())
            except Exception:
                log.exception("advancing the log cleaner failed")
