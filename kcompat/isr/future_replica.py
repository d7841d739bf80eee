"""Moving a replica to another log dir while it serves (AlterReplicaLogDirs, KIP-113).

Kafka's ``ReplicaAlterLogDirsThread`` fetches from the partition's current log on the same broker
and appends to its *future* log (``<topic>-<partition>.<id>-future`` in the destination dir) as a
follower appends: the same batches, offsets and leader epochs. Before each step the future log's
latest epoch is checked against the current log, as a follower's OffsetForLeaderEpoch would (the
current log of a follower may have been truncated since). When the future log has reached the
current log end offset, ``Partition.maybeReplaceCurrentWithFutureReplica`` swaps them under the
partition's lock; here every step runs on the event loop between requests, so nothing is appended
between the check and the swap.
"""

from __future__ import annotations

import logging

from kcompat.log import Log, LogStorageError, OffsetOutOfRangeError
from kcompat.protocol import records as rb
from kcompat.txn.producer_state import ProducerStateManager

log = logging.getLogger("kcompat.isr")

COPY_STEP_BYTES = 1 << 20   # bytes read from the current log per step (Kafka: replica.fetch.max.bytes)


class FutureReplica:
    """The future log of ``partition`` (a :class:`kcompat.isr.partition.Partition`) and the
    producer state replayed into it (only what its ``.txnindex`` needs: the partition keeps its
    own producer state, which stays valid after the swap)."""

    def __init__(self, partition, future: Log) -> None:
        self.partition = partition
        self.log = future
        self.producer_state = ProducerStateManager()
        self._started = future.log_end_offset > 0 or future.size_in_bytes > 0
        self._future_failed = False   # the operation under way writes the future log

    @property
    def lag(self) -> int:
        """Current log end offset minus the future log end offset (DescribeLogDirs ``offset_lag``
        of a future log), never below 0."""
        return max(self.partition.log.log_end_offset - self.log.log_end_offset, 0)

    def copy_step(self, now_ms: int, max_bytes: int = COPY_STEP_BYTES) -> bool:
        """Append up to ``max_bytes`` of the current log to the future log; True once the future
        log has reached the current log end offset (then swap before anything else is appended).
        Raises LogStorageError if either log's I/O fails; its ``in_future_log`` attribute says
        which."""
        try:
            return self._copy_step(now_ms, max_bytes)
        except LogStorageError as e:
            e.in_future_log = self.log.closed or self._future_failed
            raise
        finally:
            self._future_failed = False

    def _copy_step(self, now_ms: int, max_bytes: int) -> bool:
        current: Log = self.partition.log
        self._follow_truncation(current, now_ms)
        self._future_failed = False   # the read below is of the current log
        start = self.log.log_end_offset
        if not self._started:
            start = current.log_start_offset
        if start >= current.log_end_offset:
            return self._started or self._start_empty(current, now_ms)
        try:
            data = current.read(start, max_bytes, max_offset=current.log_end_offset, min_one_batch=True)
        except OffsetOutOfRangeError:   # retention or DeleteRecords passed the future log end: start again
            self._restart(current.log_start_offset, now_ms)
            return False
        mv = memoryview(data)
        headers = [h for _pos, h in rb.iter_batches(mv)]
        if not headers:
            return False
        self._future_failed = True   # from here on only the future log is written
        if not self._started:
            self.log.truncate_fully_and_start_at(headers[0].base_offset, now_ms=now_ms)
            self._started = True
        end = sum(h.size for h in headers)
        self.log.append(mv[:end], last_offset=headers[-1].last_offset,
                        max_timestamp=max(h.max_timestamp for h in headers), offset_of_max_timestamp=-1,
                        now_ms=now_ms, allow_gap=True)
        pos = 0
        for h in headers:
            self._replay(h, mv[pos:pos + h.size])
            pos += h.size
        if self.log.log_end_offset >= current.log_end_offset:
            self._align_log_start(current)
            return True
        return False

    def _start_empty(self, current: Log, now_ms: int) -> bool:
        """The current log holds no record: the future log starts empty at its end offset."""
        self._future_failed = True
        self.log.truncate_fully_and_start_at(current.log_end_offset, now_ms=now_ms)
        self._started = True
        return True

    def _align_log_start(self, current: Log) -> None:
        self._future_failed = True
        if current.log_start_offset > self.log.log_start_offset:
            self.log.delete_records_before(min(current.log_start_offset, self.log.log_end_offset))

    def _follow_truncation(self, current: Log, now_ms: int) -> None:
        """If the current log was truncated below what was copied (a follower's divergence), copy
        again from its start: compare the end of the future log's latest epoch in both logs."""
        if not self._started:
            return
        end = self.log.log_end_offset
        epoch = self.log.latest_epoch
        diverged = end > current.log_end_offset
        if not diverged and epoch is not None:
            current_epoch, current_end = current.end_offset_for_epoch(epoch)
            diverged = current_epoch != epoch or current_end < end
        if diverged:
            log.info("%s: the current log diverged from the future log at %d; copying again", self.partition, end)
            self._restart(current.log_start_offset, now_ms)

    def _restart(self, offset: int, now_ms: int) -> None:
        self._future_failed = True
        self.log.truncate_fully_and_start_at(offset, now_ms=now_ms)
        self.producer_state = ProducerStateManager()
        self._started = False

    def _replay(self, h: rb.BatchHeader, batch: memoryview) -> None:
        """Producer state and aborted-transaction index of the future log (Kafka's future
        UnifiedLog keeps its own producer state)."""
        if h.producer_id < 0:
            return
        if not h.is_control:
            self.producer_state.replay(h)
            return
        commit, coordinator_epoch = False, -1
        for rec in rb.iter_records(batch):
            commit = rb.control_type(rec) == rb.CONTROL_COMMIT
            if rec.value and len(rec.value) >= 6:
                coordinator_epoch = int.from_bytes(rec.value[2:6], "big", signed=True)
            break
        done = self.producer_state.complete_txn(h.producer_id, h.producer_epoch, coordinator_epoch, h.base_offset,
                                                h.max_timestamp)
        if done is not None and not commit:
            unstable = self.producer_state.first_unstable_offset()
            self.log.append_aborted_txn(h.producer_id, done.first_offset, done.last_offset,
                                        h.base_offset + 1 if unstable is None else unstable)
