"""The log cleaner: background compaction of ``cleanup.policy=compact`` logs (Kafka's
``LogCleaner`` + ``LogCleanerManager``).

Division of labour, so that cleaning never stalls the request thread:

- on the broker's thread (the only one that touches a :class:`~kcompat.log.log.Log`),
  :meth:`LogCleaner.tick` picks the filthiest log, marks it as being cleaned
  (:meth:`Log.begin_cleaning`) and turns it into a picklable :class:`CleanTask`: directory,
  segments to read, offsets, config values, ``now``;
- a worker process (``concurrent.futures.ProcessPoolExecutor`` with ``log.cleaner.threads``
  workers, started with ``spawn``) runs :func:`kcompat.log.compaction.run_clean_task`: it
  reads the inactive segments (immutable files) by itself and writes fsynced ``.cleaned`` files;
- later ticks install the result with Kafka's swap protocol (the broker ticks as soon as a
  worker step finishes: :attr:`LogCleaner.on_step_done`), in steps that are each a few
  renames on the broker's thread, the fsyncs and unlinks in between running in the worker:
  ``.cleaned`` -> ``.swap`` (:meth:`Log.begin_swap`); fsync of the directory; old segments ->
  ``.deleted``, ``.swap`` -> final names and the in-memory segment list swapped in one call
  (:meth:`Log.complete_swap`); then fsync of the directory, unlink of the ``.deleted`` files and
  the cleaner checkpoint (``<log dir>/cleaner-offset-checkpoint``, Kafka's format).

Which log and which range (Kafka ``LogCleanerManager.cleanableOffsets`` / ``LogToClean``): the
dirty section starts at the checkpoint (reset to the log start offset if it is out of range) and
ends at the first uncleanable offset: the active segment's base, or earlier - the last stable
offset given by the broker, the first segment whose largest timestamp is within
``min.compaction.lag.ms`` - rounded down to a segment base. A log is cleaned when its dirty ratio
(dirty bytes / total bytes) exceeds ``min.cleanable.dirty.ratio``, or when a dirty segment's
first batch is older than ``max.compaction.lag.ms`` (KIP-354). The filthiest log goes first.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import time
from bisect import bisect_right
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, NamedTuple

from kcompat.log.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT, TopicPartition, read_offset_checkpoint, write_offset_checkpoint,
)
from kcompat.log.fileio import fsync_dir, unlink_quiet
from kcompat.log.compaction import (
    CleaningAbandoned, CleanResult, CleanStats, CleanTask, run_clean_task, worker_init,
)
from kcompat.log.errors import CheckpointError
from kcompat.log.log import Log
from kcompat.log.log_cleaning import CleaningLease, delete_cleaned_files

logger = logging.getLogger("kcompat.log.cleaner")

LONG_MAX = 2**63 - 1


@dataclass
class LogToClean:
    """A compacted log's cleanable range and how dirty it is (Kafka ``LogToClean``)."""

    tp: TopicPartition
    log: Log
    first_dirty: int
    upper: int                 # first uncleanable offset (a segment base)
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool  # max.compaction.lag.ms exceeded

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


class CleanOutcome(NamedTuple):
    """What became of one cleaning: ``installed`` (the cleaned segments replaced the old ones
    and the checkpoint moved to ``end_offset``), or not, with ``error`` saying why."""

    tp: TopicPartition
    installed: bool
    end_offset: int
    stats: CleanStats | None
    error: str | None
    storage_error: bool = False   # an OSError (disk full...): retried after the backoff


class _Job:
    """One cleaning, from planning to the end of its install. ``stage``: ``clean`` (the worker
    runs :func:`run_clean_task`), ``swap`` (cleaned files renamed to ``.swap``; the worker
    fsyncs the directory), ``finish`` (installed and the log released; the worker fsyncs the
    directory, unlinks the old files and writes the checkpoint file)."""

    __slots__ = ("tp", "log", "lease", "task", "future", "started", "stage", "result", "inline")

    def __init__(self, tp: TopicPartition, log: Log, lease: CleaningLease, task: CleanTask) -> None:
        self.tp, self.log, self.lease, self.task = tp, log, lease, task
        self.future: Future | None = None
        self.started = time.monotonic()
        self.stage = "clean"
        self.result: CleanResult | None = None
        self.inline = False


class LogCleaner:
    """Compaction of the ``compact`` logs among those handed to :meth:`tick`.

    Settings are Kafka's ``log.cleaner.*``: ``threads`` worker processes (0 disables cleaning),
    ``dedupe_buffer_size`` bytes of offset map shared among them, filled up to
    ``io_buffer_load_factor``, ``backoff_ms`` between checks when nothing is cleanable, measured
    with ``monotonic_ms()`` (default: ``time.monotonic``), never with the ``now_ms`` of the calls.
    ``start_method`` is the multiprocessing start method of the workers (``spawn`` or
    ``forkserver``; not ``fork``: the broker has threads). Not thread-safe: call every method
    from the thread that owns the logs. No fsync and no unlink of old segments happens on that
    thread: they run in the workers too.

    ``on_step_done``: None, or a callable (no arguments) run when a worker step of a cleaning
    finishes (or fails, or is cancelled), so that the owner calls :meth:`poll` / :meth:`tick`
    at once instead of at its next periodic call (Kafka's cleaner thread goes straight on to
    the next step). It runs on whichever thread completes the step - the worker pool's result
    thread, or the calling thread if the step was already done - and must do nothing but hand
    the news to the owning thread (e.g. ``loop.call_soon_threadsafe``); the attribute is read
    at each call, so setting it to None stops the notices.
    """

    def __init__(self, *, threads: int = 1, dedupe_buffer_size: int = 134217728,
                 io_buffer_load_factor: float = 0.9, backoff_ms: int = 15000,
                 start_method: str = "spawn", monotonic_ms: Callable[[], int] | None = None) -> None:
        self.threads = threads
        self.dedupe_buffer_size = dedupe_buffer_size
        self.load_factor = io_buffer_load_factor
        self.backoff_ms = backoff_ms
        self.start_method = start_method
        # the clock of the cleaner's own waits (the backoff between checks and after a storage
        # error): monotonic, like the pause of Kafka's cleaner thread; ``now_ms`` (record time)
        # may step back and would then stop cleaning for as long as the step
        self._monotonic_ms = monotonic_ms or (lambda: time.monotonic_ns() // 1_000_000)
        self._executor: ProcessPoolExecutor | None = None
        self._jobs: dict[TopicPartition, _Job] = {}
        self._checkpoints: dict[Path, dict[TopicPartition, int]] = {}
        self._dirty_checkpoints: set[Path] = set()
        self._dir_of: dict[TopicPartition, Path] = {}
        self._uncleanable: dict[TopicPartition, str] = {}
        self._retry_after: dict[TopicPartition, int] = {}   # after a storage error
        self._next_check_ms = 0
        self._look_again = False   # a cleaning finished: look for the next log before the backoff ends
        self.on_step_done: Callable[[], None] | None = None

    # -- the periodic entry point -----------------------------------------------------------------
    def tick(self, logs: Mapping[TopicPartition, Log], now_ms: int, *,
             stable_offset_of: Callable[[TopicPartition], int | None] | None = None,
             producer_last_offsets_of: Callable[[TopicPartition], Mapping[int, int] | None] | None = None,
             ) -> list[CleanOutcome]:
        """Advance the cleanings in progress (install finished ones), then - if a worker is free
        and the backoff has elapsed, or a cleaning just finished - start cleaning the filthiest
        logs. Returns the outcomes of the cleanings installed (or failed) in this call. Call it
        about every second, and soon after each :attr:`on_step_done` notice, with every log of
        the broker (``LogManager.logs``; partitions missing from it are forgotten); it never
        waits for a worker, and each call advances every finished step by one stage only.

        ``stable_offset_of(tp)``: the partition's last stable offset (the high watermark, or the
        first unstable offset of an open transaction), which cleaning never passes; None for no
        bound (tests, tools). ``producer_last_offsets_of(tp)``: producer id -> last offset of its
        last data batch (the producer state), whose batches cleaning keeps; None to keep the last
        batch of every producer id found in the cleaned range instead."""
        outcomes = self.poll(now_ms)
        if self.threads <= 0 or self._cleaning_jobs() >= self.threads:
            return outcomes
        mono = self._monotonic_ms()
        if not outcomes and not self._look_again and mono < self._next_check_ms:
            return outcomes
        self._look_again = False
        self._forget_missing(logs)
        while self._cleaning_jobs() < self.threads:
            ltc = self.grab_filthiest(logs, now_ms, stable_offset_of=stable_offset_of)
            if ltc is None:
                self._next_check_ms = mono + self.backoff_ms
                break
            plo = producer_last_offsets_of(ltc.tp) if producer_last_offsets_of else None
            job = self.start(ltc, now_ms, producer_last_offsets=plo)
            if not self._submit(job, run_clean_task, job.task):
                outcomes.append(self._fail(job, "the worker pool is broken", uncleanable=False))
                break
        return outcomes

    def poll(self, now_ms: int) -> list[CleanOutcome]:
        """Advance the cleanings whose worker step has finished; returns the outcomes of those
        installed or failed."""
        outcomes = []
        for job in list(self._jobs.values()):
            if job.future is not None and job.future.done():
                out = self._advance(job, now_ms)
                if out is not None:
                    outcomes.append(out)
        return outcomes

    def clean_now(self, logs: Mapping[TopicPartition, Log], now_ms: int, *,
                  stable_offset_of: Callable[[TopicPartition], int | None] | None = None,
                  producer_last_offsets: Mapping[int, int] | None = None) -> CleanOutcome | None:
        """Clean the filthiest eligible log synchronously in this process, every step included
        (tests, tools, benchmarks); None if no log is eligible."""
        self._forget_missing(logs)
        ltc = self.grab_filthiest(logs, now_ms, stable_offset_of=stable_offset_of)
        if ltc is None:
            return None
        job = self.start(ltc, now_ms, producer_last_offsets=producer_last_offsets)
        job.inline = True
        self._submit(job, run_clean_task, job.task)
        outcome = None
        while self._jobs.get(job.tp) is job:
            out = self._advance(job, now_ms)
            outcome = out or outcome
        return outcome

    def prestart_workers(self) -> None:
        """Start the worker processes now (e.g. at broker start-up) instead of at the first
        cleaning, which would then pay for the process start on the calling thread (~15 ms)."""
        if self.threads > 0:
            pool = self._pool()
            for _ in range(self.threads):
                pool.submit(_noop)

    @property
    def in_progress(self) -> list[TopicPartition]:
        """Partitions being cleaned (or finishing an install) now."""
        return list(self._jobs)

    @property
    def uncleanable(self) -> dict[TopicPartition, str]:
        """Partitions whose cleaning failed (not retried while they stay), with the error."""
        return dict(self._uncleanable)

    def _cleaning_jobs(self) -> int:
        return sum(1 for j in self._jobs.values() if j.stage == "clean")

    # -- choosing (Kafka LogCleanerManager) --------------------------------------------------------
    def grab_filthiest(self, logs: Mapping[TopicPartition, Log], now_ms: int, *,
                       stable_offset_of: Callable[[TopicPartition], int | None] | None = None,
                       ) -> LogToClean | None:
        """The compacted log with the highest cleanable ratio among those eligible (not being
        cleaned, not uncleanable, ratio > ``min.cleanable.dirty.ratio`` or
        ``max.compaction.lag.ms`` exceeded with something to clean); None if there is none."""
        best: LogToClean | None = None
        mono = self._monotonic_ms()
        for tp, log in logs.items():
            if (log.closed or not log.config.compact_enabled or tp in self._jobs
                    or log.cleaning is not None or tp in self._uncleanable
                    or self._retry_after.get(tp, 0) > mono):
                continue
            stable = stable_offset_of(tp) if stable_offset_of else None
            ltc = self.log_to_clean(tp, log, now_ms, stable_offset=stable)
            if ltc.total_bytes <= 0:
                continue
            if not ((ltc.need_compaction_now and ltc.cleanable_bytes > 0)
                    or ltc.cleanable_ratio > log.config.min_cleanable_dirty_ratio):
                continue
            if best is None or ltc.cleanable_ratio > best.cleanable_ratio:
                best = ltc
        return best

    def log_to_clean(self, tp: TopicPartition, log: Log, now_ms: int, *,
                     stable_offset: int | None = None) -> LogToClean:
        """The cleanable range of ``log`` (Kafka ``cleanableOffsets`` + ``LogToClean``)."""
        self._dir_of[tp] = log.directory.parent
        cfg = log.config
        segs = log.segments
        bases = [s.base_offset for s in segs]
        active_base = bases[-1]
        lso, leo = log.log_start_offset, log.log_end_offset
        ckpts = self._dir_checkpoints(log.directory.parent)
        ckpt = ckpts.get(tp)
        truncated = log.take_truncation()
        if truncated is not None and ckpt is not None and ckpt > truncated:
            ckpt = self._set_checkpoint(tp, truncated)
        if ckpt is None:
            first_dirty = lso
        elif ckpt < lso or ckpt > leo:
            if not (ckpt < lso and cfg.delete_enabled):
                logger.warning("%s-%d: resetting the first dirty offset to the log start offset %d: "
                               "the checkpointed offset %d is outside [%d, %d]", tp[0], tp[1], lso,
                               ckpt, lso, leo)
            first_dirty = self._set_checkpoint(tp, lso)
        else:
            first_dirty = ckpt
        bound = active_base
        if stable_offset is not None:
            bound = min(bound, stable_offset)
        start_i = max(0, bisect_right(bases, first_dirty) - 1)
        if cfg.min_compaction_lag_ms > 0:
            for seg in segs[start_i:-1]:
                if seg.largest_timestamp() > now_ms - cfg.min_compaction_lag_ms:
                    bound = min(bound, seg.base_offset)
                    break
        uncleanable = max(first_dirty, bound)
        # round down to the base of the (non-active) segment holding it (calculateCleanableBytes)
        ui = max(0, bisect_right(bases, uncleanable) - 1)
        upper = bases[min(ui, len(bases) - 1)]
        clean_bytes = sum(s.size for s in segs if s.base_offset < first_dirty)
        lo = max(0, bisect_right(bases, min(first_dirty, upper)) - 1)
        cleanable_bytes = sum(s.size for s in segs[lo:] if s.base_offset < upper)
        need_now = False
        if cfg.max_compaction_lag_ms < LONG_MAX and now_ms - cfg.max_compaction_lag_ms > 0:
            clean_until = now_ms - cfg.max_compaction_lag_ms
            for seg in segs[start_i:-1]:
                ts = seg.rolling_based_timestamp()
                if ts is not None and 0 < ts < clean_until:
                    need_now = True
                    break
        return LogToClean(tp, log, first_dirty, upper, clean_bytes, cleanable_bytes, need_now)

    # -- running ------------------------------------------------------------------------------------
    def start(self, ltc: LogToClean, now_ms: int, *,
              producer_last_offsets: Mapping[int, int] | None = None) -> _Job:
        """Mark ``ltc.log`` as being cleaned and build its task (not yet submitted: :meth:`tick`
        submits it to the worker pool; :meth:`clean_now` runs it in this process)."""
        log, cfg = ltc.log, ltc.log.config
        lease = log.begin_cleaning(ltc.upper)
        budget = int(self.dedupe_buffer_size / max(1, self.threads) * self.load_factor)
        task = CleanTask(
            topic=ltc.tp[0], partition=ltc.tp[1], directory=str(log.directory),
            segments=tuple((s.base_offset, s.size) for s in log.segments if s.base_offset < ltc.upper),
            first_dirty=ltc.first_dirty, upper=ltc.upper, now_ms=now_ms,
            delete_retention_ms=cfg.delete_retention_ms, segment_bytes=cfg.segment_bytes,
            segment_index_bytes=cfg.segment_index_bytes, index_interval_bytes=cfg.index_interval_bytes,
            map_budget_bytes=budget,
            producer_last_offsets=dict(producer_last_offsets) if producer_last_offsets is not None else None)
        job = _Job(ltc.tp, log, lease, task)
        self._jobs[ltc.tp] = job
        logger.info("%s-%d: cleaning offsets [%d, %d) (dirty ratio %.2f%s)", ltc.tp[0], ltc.tp[1],
                    ltc.first_dirty, ltc.upper, ltc.cleanable_ratio,
                    ", max.compaction.lag.ms exceeded" if ltc.need_compaction_now else "")
        return job

    def _submit(self, job: _Job, fn, *args) -> bool:
        """Run ``fn(*args)`` for ``job``: in a worker, or here for an inline job."""
        if job.inline:
            f: Future = Future()
            try:
                f.set_result(fn(*args))
            except Exception as e:
                f.set_exception(e)
            job.future = f
            return True
        try:
            job.future = self._pool().submit(fn, *args)
        except Exception as e:   # a broken or shut-down pool
            logger.error("cannot submit to the log cleaner's workers: %s", e)
            self._drop_pool()
            job.future = None
            return False
        job.future.add_done_callback(self._step_done)
        return True

    def _step_done(self, _future: Future) -> None:
        """A worker step finished: tell the owner (:attr:`on_step_done`). Any thread."""
        notify = self.on_step_done
        if notify is not None:
            notify()

    def _advance(self, job: _Job, now_ms: int) -> CleanOutcome | None:
        """Move ``job`` past its finished step. An error in a step on this thread (an OSError
        renaming files) ends the cleaning and marks the partition uncleanable."""
        try:
            out = self._advance_step(job, now_ms)
        except Exception as e:
            if self._jobs.get(job.tp) is not job:
                raise
            out = self._fail(job, e, uncleanable=not isinstance(e, OSError))
        if out is not None and not out.installed and out.storage_error:
            # a full disk (or another I/O error) is no reason to give up on the partition (Kafka
            # marks the log dir offline instead): clean it again after log.cleaner.backoff.ms
            self._retry_after[job.tp] = self._monotonic_ms() + self.backoff_ms
        return out

    def _advance_step(self, job: _Job, now_ms: int) -> CleanOutcome | None:
        fut, job.future = job.future, None
        assert fut is not None
        err = fut.exception()
        if isinstance(err, BrokenProcessPool):
            self._drop_pool()
        tp, log, lease = job.tp, job.log, job.lease
        name = f"{tp[0]}-{tp[1]}"
        if job.stage == "clean":
            if err is not None:
                return self._fail(job, err, uncleanable=not isinstance(
                    err, (CleaningAbandoned, BrokenProcessPool, OSError)))
            result: CleanResult = fut.result()
            job.result = result
            if not result.groups:
                return self._fail(job, "the offset map could not hold a single batch "
                                       "(log.cleaner.dedupe.buffer.size)", uncleanable=True)
            if not log.begin_swap(lease, result.groups):
                return self._fail(job, None, uncleanable=False)
            job.stage = "swap"
            if not self._submit(job, fsync_dir, str(log.directory)):
                return self._fail(job, "the worker pool is broken", uncleanable=False)
            return None
        if job.stage == "swap":
            result = job.result  # type: ignore[assignment]
            if err is not None:
                return self._fail(job, err, uncleanable=not isinstance(err, OSError))
            deleted = log.complete_swap(lease, result.groups, now_ms=now_ms)
            if deleted is None:
                return self._fail(job, None, uncleanable=False)
            log_dir = self._dir_of[tp]
            self._checkpoints[log_dir][tp] = result.end_offset
            self._dirty_checkpoints.add(log_dir)     # until a finish step has written it
            self._release(job, now_ms, installed=True)
            logger.info("%s: cleaned up to offset %d in %.2fs: %s", name, result.end_offset,
                        time.monotonic() - job.started, result.stats)
            job.stage = "finish"
            ckpt = (str(log_dir / CLEANER_OFFSET_CHECKPOINT), dict(self._checkpoints[log_dir]))
            if not self._submit(job, finish_install, str(log.directory), [str(p) for p in deleted], ckpt):
                finish_install(str(log.directory), [str(p) for p in deleted], ckpt)
                self._jobs.pop(tp, None)
            return CleanOutcome(tp, True, result.end_offset, result.stats, None)
        # finish: the log may be chosen again (its cleaning was bounded by the offset map, or it
        # got dirty meanwhile), as Kafka's cleaner thread goes straight on to the filthiest log
        self._jobs.pop(tp, None)
        self._look_again = True
        if err is not None:
            logger.error("%s: finishing the install failed (the old segments are removed at the "
                         "next start-up): %s", name, err)
        elif not any(j.stage == "finish" and self._dir_of.get(j.tp) == self._dir_of[tp]
                     for j in self._jobs.values()):
            self._dirty_checkpoints.discard(self._dir_of[tp])
        return None

    def _fail(self, job: _Job, err: BaseException | str | None, *, uncleanable: bool) -> CleanOutcome:
        """End a cleaning that installs nothing: remove its files, release the log. ``err`` None
        (or a lease aborted meanwhile - a worker reading a truncated segment fails too) means
        the log changed under the cleaning; otherwise the partition may be marked uncleanable
        (Kafka ``markPartitionUncleanable``: not retried while the broker runs)."""
        tp, log, lease, task = job.tp, job.log, job.lease, job.task
        aborted = lease.reason if lease.aborted else None
        lease.abort("failed")                      # removes any .swap files
        for base, _size in task.segments:
            delete_cleaned_files(log.directory, base)
        self._release(job, 0, installed=False)
        self._jobs.pop(tp, None)
        stats = job.result.stats if job.result is not None else None
        if err is None or aborted is not None:
            reason = aborted or "the log changed"
            logger.info("%s-%d: cleaning abandoned: %s", tp[0], tp[1], reason)
            return CleanOutcome(tp, False, task.first_dirty, stats, f"aborted: {reason}")
        error = err if isinstance(err, str) else f"{type(err).__name__}: {err}"
        if uncleanable:
            self._uncleanable[tp] = error
            logger.error("%s-%d: cleaning failed, the partition is marked uncleanable: %s",
                         tp[0], tp[1], error, exc_info=err if isinstance(err, BaseException) else None)
        elif isinstance(err, OSError):
            logger.error("%s-%d: cleaning failed, retried after log.cleaner.backoff.ms (%d ms): %s",
                         tp[0], tp[1], self.backoff_ms, error)
        else:
            logger.warning("%s-%d: cleaning failed: %s", tp[0], tp[1], error)
        return CleanOutcome(tp, False, task.first_dirty, stats, error, isinstance(err, OSError))

    def _release(self, job: _Job, now_ms: int, *, installed: bool) -> None:
        log = job.log
        log.end_cleaning(job.lease)
        if installed and log.config.delete_enabled and not log.closed:
            # Kafka's cleaner runs deleteOldSegments on compacted logs after cleaning
            try:
                log.apply_retention(now_ms, high_watermark=job.task.upper)
            except Exception:
                logger.exception("%s: retention after cleaning failed", log.directory)

    # -- checkpoints ---------------------------------------------------------------------------------
    def checkpoint_of(self, tp: TopicPartition, log_dir: Path) -> int | None:
        """The cleaner checkpoint (first dirty offset) of ``tp`` in ``log_dir``, None if none."""
        return self._dir_checkpoints(Path(log_dir)).get(tp)

    def _dir_checkpoints(self, log_dir: Path) -> dict[TopicPartition, int]:
        ckpts = self._checkpoints.get(log_dir)
        if ckpts is None:
            for stray in log_dir.glob(CLEANER_OFFSET_CHECKPOINT + ".*tmp"):
                unlink_quiet(stray)
            try:
                ckpts = read_offset_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT)
            except (CheckpointError, OSError) as e:
                logger.error("cannot read %s (%s); cleaning every compacted log from its start",
                             log_dir / CLEANER_OFFSET_CHECKPOINT, e)
                ckpts = {}
            self._checkpoints[log_dir] = ckpts
        return ckpts

    def _set_checkpoint(self, tp: TopicPartition, offset: int) -> int:
        """Change a checkpoint in memory (a reset or a truncation); the file is rewritten by the
        next install in that log dir, or by :meth:`shutdown` (a stale file only makes the next
        start-up recompute the same reset, or clean a truncated range less thoroughly)."""
        log_dir = self._dir_of[tp]
        self._dir_checkpoints(log_dir)[tp] = offset
        self._dirty_checkpoints.add(log_dir)
        return offset

    def _forget_missing(self, logs: Mapping[TopicPartition, Log]) -> None:
        """Drop state of partitions no longer handed in (deleted or moved away)."""
        for ckpts in self._checkpoints.values():
            for tp in [tp for tp in ckpts if tp not in logs]:
                del ckpts[tp]
        for tp in [tp for tp in self._uncleanable if tp not in logs]:
            del self._uncleanable[tp]
        for tp in [tp for tp in self._retry_after if tp not in logs]:
            del self._retry_after[tp]

    # -- worker processes ---------------------------------------------------------------------------
    def _pool(self) -> ProcessPoolExecutor:
        if self._executor is None:
            self._executor = ProcessPoolExecutor(
                max_workers=self.threads, mp_context=multiprocessing.get_context(self.start_method),
                initializer=worker_init)
        return self._executor

    def _drop_pool(self) -> None:
        ex, self._executor = self._executor, None
        if ex is not None:
            _kill_workers(ex)
            ex.shutdown(wait=False, cancel_futures=True)

    def shutdown(self) -> None:
        """Stop: kill the workers, drop unfinished cleanings (their files are removed here, or by
        the next start-up), release every log, write changed checkpoints. Call before closing
        the logs."""
        ex, self._executor = self._executor, None
        if ex is not None:
            _kill_workers(ex)
            ex.shutdown(wait=True, cancel_futures=True)
        for job in list(self._jobs.values()):
            if job.stage != "finish":
                job.lease.abort("cleaner shut down")
                for base, _size in job.task.segments:
                    delete_cleaned_files(job.log.directory, base)
                job.log.end_cleaning(job.lease)
        self._jobs.clear()
        for log_dir in list(self._dirty_checkpoints):
            try:
                write_offset_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT, self._checkpoints[log_dir])
            except OSError as e:
                logger.error("cannot write %s: %s", log_dir / CLEANER_OFFSET_CHECKPOINT, e)
        self._dirty_checkpoints.clear()


def finish_install(directory: str, deleted: list[str], checkpoint: tuple[str, dict] | None) -> None:
    """The last step of an install, off the broker's thread: fsync the directory (the renames
    become durable), unlink the old segments' ``.deleted`` files, write the cleaner checkpoint
    (through a per-process temporary file: two workers may write it at once)."""
    try:
        fsync_dir(directory)
    finally:
        for path in deleted:
            unlink_quiet(path)
    if checkpoint is not None:
        path, entries = checkpoint
        write_offset_checkpoint(Path(path), entries, tmp_suffix=f".{os.getpid()}.tmp")


def _noop() -> None:
    return None


def _kill_workers(ex: ProcessPoolExecutor) -> None:
    procs = getattr(ex, "_processes", None) or {}
    for p in list(procs.values()):
        try:
            p.kill()
        except Exception:
            pass
    for p in list(procs.values()):
        try:
            p.join(5)
        except Exception:
            pass
