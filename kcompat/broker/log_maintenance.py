"""The broker's periodic log and replica maintenance, off the request path (Kafka's LogManager and
ReplicaManager scheduler tasks): ISR shrink checks and high-watermark checkpoints, flushes,
retention and offset checkpoints, producer snapshots below the log start, producer id expiry.

The bookkeeping is quick and runs on the event loop; fsyncs and directory removals run on a
worker thread (DESIGN.md section 5). Each step is guarded on its own: one that fails (a log whose
retention raises, a full disk) is logged and the others still run."""

from __future__ import annotations

import asyncio
import logging
from typing import Callable

from kcompat.log import remove_tree

log = logging.getLogger("kcompat.broker")


async def guarded(what: str, step) -> None:
    """Await one periodic step; an error is logged, never ends the periodic task."""
    try:
        await step
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("periodic %s failed", what)


def guarded_call(what: str, step):
    """Run one periodic step; its result, or None (logged) if it raised."""
    try:
        return step()
    except Exception:
        log.exception("periodic %s failed", what)
        return None


def _background_io(plans, removals) -> None:
    for plan in plans:
        plan.sync()
    for path in removals:
        remove_tree(path)


class LogMaintenance:
    """The maintenance loop of one broker. ``config``: the broker config (``log.flush.*``,
    ``log.retention.check.interval.ms``, ``replica.lag.time.max.ms``,
    ``replica.high.watermark.checkpoint.interval.ms``, ``producer.id.expiration.*``);
    ``log_manager`` and ``replica_manager`` the broker's; ``now_ms()`` the wall clock in ms;
    ``stopping()`` true once the broker shuts down."""

    def __init__(self, config, log_manager, replica_manager, now_ms: Callable[[], int],
                 stopping: Callable[[], bool]) -> None:
        self.config = config
        self.log_manager = log_manager
        self.replica_manager = replica_manager
        self._now = now_ms
        self._stopping = stopping
        self._last_producer_expiry = 0
        self._last_isr_check = self._last_hw_checkpoint = 0

    async def run(self, interval_s: float) -> None:
        """Every ``interval_s`` until the broker stops."""
        cfg = self.config
        loop = asyncio.get_running_loop()
        while not self._stopping():
            await asyncio.sleep(interval_s)
            now = self._now()
            guarded_call("replication maintenance", lambda: self.replication(now))
            plans = guarded_call("planning flushes", lambda: self.log_manager.flush_plans(
                now, flush_check_ms=cfg.get("log.flush.scheduler.interval.ms"))) or []
            maintained = guarded_call("log retention and checkpoints", lambda: self.log_manager.maintain(
                now, retention_check_interval_ms=cfg.get("log.retention.check.interval.ms"),
                checkpoint_interval_ms=cfg.get("log.flush.offset.checkpoint.interval.ms")))
            removals = maintained[1] if maintained else []
            guarded_call("deleting producer snapshots", self.delete_snapshots_below_log_start)
            guarded_call("producer id expiry", lambda: self.expire_producers(now))
            if plans or removals:
                try:
                    await loop.run_in_executor(None, _background_io, plans, removals)
                    for plan in plans:
                        if not plan.log.closed:
                            plan.log.complete_flush(plan)
                except Exception:
                    log.exception("periodic log maintenance failed: flushes and directory removals")

    def delete_snapshots_below_log_start(self) -> None:
        """Producer snapshots below the local log start offset (the log start offset, unless
        older segments are only in remote storage, whose copies keep the snapshots they need)."""
        for p in self.replica_manager.partitions.values():
            if not p.offline and p.log.local_log_start_offset > 0:   # an offline dir is never written again
                p.log.delete_snapshots_before(p.log.local_log_start_offset)

    def expire_producers(self, now: int) -> None:
        """Producer ids idle for ``producer.id.expiration.ms``, checked every
        ``producer.id.expiration.check.interval.ms``."""
        cfg = self.config
        if 0 <= now - self._last_producer_expiry < cfg.get("producer.id.expiration.check.interval.ms"):
            return
        self._last_producer_expiry = now
        expiration = cfg.get("producer.id.expiration.ms")
        expired = sum(p.producer_state.remove_expired(now, expiration) for p in self.replica_manager.partitions.values())
        if expired:
            log.info("expired %d idle producer id(s) (producer.id.expiration.ms=%d)", expired, expiration)

    def replication(self, now: int) -> None:
        """ISR shrink checks every ``replica.lag.time.max.ms`` / 2 (Kafka's isr-expiration task)
        and the HW checkpoint every ``replica.high.watermark.checkpoint.interval.ms``."""
        cfg = self.config
        # "not 0 <= elapsed < interval": a wall clock stepped back must not stop these checks
        if not 0 <= now - self._last_isr_check < cfg.get("replica.lag.time.max.ms") // 2:
            self._last_isr_check = now
            self.replica_manager.maybe_shrink_isr(now)
        if not 0 <= now - self._last_hw_checkpoint < cfg.get("replica.high.watermark.checkpoint.interval.ms"):
            self._last_hw_checkpoint = now
            self.replica_manager.checkpoint_high_watermarks()
