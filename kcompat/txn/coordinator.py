"""The transaction coordinator (Kafka's TransactionCoordinator, TransactionStateManager and the
bookkeeping half of TransactionMarkerChannelManager), with its state in ``__transaction_state``.

The coordinator is a state machine without I/O (DESIGN.md sections 2 and 6). Each call takes the
current time and returns a :class:`Result`:

- ``records`` to append to ``__transaction_state`` (one per transactional id at most);
- ``replies`` to send once those records are appended (Kafka answers InitProducerId,
  AddPartitionsToTxn and EndTxn only when their record is durable);
- ``markers``: COMMIT/ABORT control batches to write to the partitions of a transaction (data
  partitions and ``__consumer_offsets``) once the records are appended. When every partition of a
  :class:`MarkerRequest` has been tried, the broker calls :meth:`TransactionCoordinator.markers_written`
  with an error code per partition; the coordinator then retries what failed (after
  :data:`MARKER_RETRY_BACKOFF_MS`, through :meth:`TransactionCoordinator.poll`) or writes the
  CompleteCommit/CompleteAbort record.

State changes only by :meth:`TransactionCoordinator.replay` of those records, after the broker
appended them, and loading a partition is the same replay. Between a handler returning a record and
its replay the transactional id has a *pending* transition (Kafka's ``pendingState``): other
requests for it get CONCURRENT_TRANSACTIONS. If appending fails the broker must deliver none of the
Result's replies or markers and call :meth:`TransactionCoordinator.append_failed` with the Result,
whose own Result answers the affected requests with Kafka's errors.

What lives only in memory, as in Kafka: the previous producer id and epoch used by KIP-360
retries (the v0 log value has no field for them, so they are lost on reload), the epoch bumped by a
fence whose record could not be written (Kafka's ``hasFailedEpochFence``), and which partitions of
a Prepare* transaction still lack their marker.
"""

from __future__ import annotations

from typing import Callable, Iterable

from kcompat.protocol.errors import ErrorCode, KafkaError, coordinator_error_for_append
from kcompat.txn import txn_records as rec
from kcompat.txn.completion import TxnCompletionMixin
from kcompat.txn.coordinator_types import (
    MARKER_RETRY_BACKOFF_MS, MAX_PRODUCER_EPOCH, MAX_TRANSITIONS_KEPT, TRANSACTION_STATE_TOPIC, MarkerRequest, Record,
    Result, TopicPartition, TxnConfig, TxnMetadata, _Pending, _Tie, _Transit, log, partition_for,
)
from kcompat.txn.requests import TxnRequestsMixin
from kcompat.txn.state import PREPARE_STATES, TxnEvent, TxnState, next_state
from kcompat.txn.txn_records import RecordFormatError, TxnLogValue

# what other modules import from here (the coordinator's public names)
__all__ = ["MARKER_RETRY_BACKOFF_MS", "MAX_PRODUCER_EPOCH", "MarkerRequest", "Record", "Result",
           "TransactionCoordinator", "TxnConfig", "partition_for"]


class TransactionCoordinator(TxnRequestsMixin, TxnCompletionMixin):
    def __init__(self, config: TxnConfig, *, allocate_producer_id: Callable[[], int],
                 partition_exists: Callable[[str, int], bool], group_partition_for: Callable[[str], int]) -> None:
        self.config = config
        self._allocate_producer_id = allocate_producer_id
        self._partition_exists = partition_exists
        self._group_partition_for = group_partition_for
        self._txns: dict[str, TxnMetadata] = {}
        self._owned: dict[int, int] = {}  # __transaction_state partition -> coordinator epoch
        self._loading: dict[int, dict[str, TxnLogValue | None]] = {}
        self._retries: dict[str, int] = {}  # transactional id -> when to resend markers / completion
        self._abort_at: int | None = None
        self._expire_at: int | None = None
        self._active = True
        self._now = 0
        self._records: list[Record] = []
        self._replies: list[tuple[object, object]] = []
        self._markers: list[MarkerRequest] = []
        self._ties: list[_Tie] = []

    # ------------------------------------------------------------------------------------------
    # partitions of __transaction_state
    # ------------------------------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.num_partitions)

    def owns(self, partition: int) -> bool:
        return partition in self._owned

    def coordinator_epoch(self, partition: int) -> int | None:
        """The coordinator epoch ``partition`` was loaded at (None: not owned)."""
        return self._owned.get(partition)

    def begin_loading(self, partition: int) -> None:
        """Requests for transactional ids of ``partition`` get COORDINATOR_LOAD_IN_PROGRESS until
        :meth:`load`."""
        if partition in self._owned:
            self._drop_partition(partition)
        self._loading.setdefault(partition, {})

    def load(self, partition: int, records: Iterable[tuple[int, bytes, bytes | None]], now_ms: int, *,
             coordinator_epoch: int = 0) -> Result:
        """Replay the partition's log ``(offset, key, value)`` in order, then own the partition.

        ``coordinator_epoch`` is the leader epoch of the ``__transaction_state`` partition; markers
        carry it. Transactions found in PrepareCommit/PrepareAbort are completed: the Result asks
        for their markers again (Kafka's loadTransactionsForTxnTopicPartition)."""
        self._begin(now_ms)
        if partition in self._owned:
            self._drop_partition(partition)
        values = self._loading.pop(partition, {})
        for _offset, key, value in records:
            self._apply_loading(values, partition, key, value)
        self._owned[partition] = coordinator_epoch
        self._ensure_timers(now_ms)
        n_prepared = 0
        for tid, value in values.items():
            if value is None:
                continue
            m = self._metadata_from_value(tid, partition, value)
            self._txns[tid] = m
            if m.state in PREPARE_STATES:
                n_prepared += 1
                self._resume_markers(m)
        log.info("loaded %s-%d (coordinator epoch %d): %d transactional ids, %d transactions to complete",
                 TRANSACTION_STATE_TOPIC, partition, coordinator_epoch,
                 sum(1 for v in values.values() if v is not None), n_prepared)
        return self._end()

    def unload(self, partition: int) -> Result:
        """Give the partition up: its transactional ids are forgotten, markers no longer tracked."""
        self._begin(self._now)
        self._loading.pop(partition, None)
        self._drop_partition(partition)
        return self._end()

    def shutdown(self) -> Result:
        """Forget everything; later requests get NOT_COORDINATOR (DescribeTransactions and
        ListTransactions COORDINATOR_NOT_AVAILABLE), as Kafka after TransactionCoordinator.shutdown."""
        self._begin(self._now)
        self._txns.clear()
        self._owned.clear()
        self._loading.clear()
        self._retries.clear()
        self._abort_at = self._expire_at = None
        self._active = False
        return self._end()

    def _drop_partition(self, partition: int) -> None:
        self._owned.pop(partition, None)
        for tid in [tid for tid, m in self._txns.items() if m.partition == partition]:
            del self._txns[tid]
            self._retries.pop(tid, None)

    @staticmethod
    def _apply_loading(values: dict[str, TxnLogValue | None], partition: int, key: bytes | None,
                       value: bytes | None) -> None:
        try:
            tid = rec.parse_key(key)
            if tid is None:
                log.warning("%s-%d: skipping a record with an unknown key version", TRANSACTION_STATE_TOPIC, partition)
                return
            values[tid] = rec.parse_value(value)
        except RecordFormatError as e:
            log.warning("%s-%d: skipping a record that cannot be read: %s", TRANSACTION_STATE_TOPIC, partition, e)

    @staticmethod
    def _metadata_from_value(tid: str, partition: int, v: TxnLogValue) -> TxnMetadata:
        """Kafka's TransactionLog.readTxnRecordValue: previous producer id/epoch are not in the log."""
        return TxnMetadata(tid, partition, v.producer_id, v.producer_epoch, v.timeout_ms, v.state,
                           v.last_update_ms, txn_start_ms=v.txn_start_ms, partitions=v.partitions,
                           last_producer_id=v.previous_producer_id)

    # ------------------------------------------------------------------------------------------
    # results and timers
    # ------------------------------------------------------------------------------------------

    def _begin(self, now_ms: int) -> None:
        self._now = now_ms
        self._records, self._replies, self._markers, self._ties = [], [], [], []

    def _end(self) -> Result:
        result = Result(self._records, self._replies, self._markers, self._ties)
        self._records, self._replies, self._markers, self._ties = [], [], [], []
        return result

    def _reply(self, reply_to, response, tie: tuple[tuple[str, ...], Callable] | None = None) -> None:
        if tie is not None and tie[0]:
            self._ties.append(_Tie(len(self._replies), tie[0], tie[1]))
        self._replies.append((reply_to, response))

    def _ensure_timers(self, now_ms: int) -> None:
        # Kafka schedules both cleanups at a fixed rate, the first run one interval after start-up
        if self._abort_at is None:
            self._abort_at = now_ms + max(1, self.config.abort_timed_out_interval_ms)
        if self._expire_at is None:
            self._expire_at = now_ms + max(1, self.config.remove_expired_interval_ms)

    def next_deadline(self) -> int | None:
        deadlines = list(self._retries.values())
        if self._owned and self._abort_at is not None:
            deadlines.append(self._abort_at)
        if self._owned and self._expire_at is not None:
            deadlines.append(self._expire_at)
        return min(deadlines) if deadlines else None

    def poll(self, now_ms: int) -> Result:
        """Resend markers and completions due, abort transactions past their timeout (every
        ``abort_timed_out_interval_ms``) and expire idle transactional ids (every
        ``remove_expired_interval_ms``)."""
        self._begin(now_ms)
        if self._active and self._owned:
            self._ensure_timers(now_ms)
            for tid, at in sorted(self._retries.items(), key=lambda item: item[1]):
                if at <= now_ms:
                    del self._retries[tid]
                    self._retry(tid)
            if self._abort_at is not None and self._abort_at <= now_ms:
                self._abort_timed_out_transactions(now_ms)
                self._abort_at = now_ms + max(1, self.config.abort_timed_out_interval_ms)
            if self._expire_at is not None and self._expire_at <= now_ms:
                self._expire_transactional_ids(now_ms)
                self._expire_at = now_ms + max(1, self.config.remove_expired_interval_ms)
        return self._end()

    # ------------------------------------------------------------------------------------------
    # writing records
    # ------------------------------------------------------------------------------------------

    def _write(self, m: TxnMetadata, transit: _Transit | None, events: tuple[TxnEvent, ...], *,
               fence: bool = False, completion: bool = False,
               marker_partitions: frozenset[TopicPartition] = frozenset()) -> None:
        """Emit the record of a transition; it takes effect when replayed."""
        assert m.pending is None, m
        # check the path against the table now rather than when the record comes back
        state = m.state
        for event in events:
            state = next_state(state, event)
        assert state is (TxnState.DEAD if transit is None else transit.state), (m, events, transit)
        key = rec.key_bytes(m.transactional_id)
        value = None if transit is None else rec.value_bytes(transit.log_value())
        m.pending = _Pending(transit, events, key, value, fence=fence, completion=completion,
                             marker_partitions=marker_partitions)
        self._records.append(Record(m.partition, key, value, timeout_ms=m.timeout_ms if transit is None
                                    else transit.timeout_ms))

    def replay(self, record: Record) -> None:
        """Apply a record after the broker appended it, or one of a partition being loaded."""
        partition = record.partition
        loading = self._loading.get(partition)
        if loading is not None:
            self._apply_loading(loading, partition, record.key, record.value)
            return
        if partition not in self._owned:
            return
        try:
            tid = rec.parse_key(record.key)
        except RecordFormatError as e:
            log.warning("%s-%d: skipping a record that cannot be read: %s", TRANSACTION_STATE_TOPIC, partition, e)
            return
        if tid is None:
            return
        m = self._txns.get(tid)
        pending = m.pending if m is not None else None
        if pending is not None and pending.key == record.key and pending.value == record.value:
            m.pending = None
            self._apply_transit(m, pending)
            return
        # Not the record this coordinator is waiting for: the log is the truth.
        try:
            value = rec.parse_value(record.value)
        except RecordFormatError as e:
            log.warning("%s-%d: skipping a record that cannot be read: %s", TRANSACTION_STATE_TOPIC, partition, e)
            return
        log.warning("transactional id %s: replaying a record this coordinator did not expect", tid)
        self._retries.pop(tid, None)
        if value is None:
            self._txns.pop(tid, None)
        else:
            self._txns[tid] = self._metadata_from_value(tid, partition, value)

    def _apply_transit(self, m: TxnMetadata, pending: _Pending) -> None:
        """Kafka's completeTransitionTo."""
        state = m.state
        for event in pending.events:
            new = next_state(state, event)
            m.transitions.append((state, event, new))
            state = new
        del m.transitions[:-MAX_TRANSITIONS_KEPT]
        t = pending.transit
        m.fence_epoch = None
        if t is None:  # Dead: the tombstone of an expired transactional id
            self._txns.pop(m.transactional_id, None)
            self._retries.pop(m.transactional_id, None)
            log.info("transactional id %s expired", m.transactional_id)
            return
        m.state = state
        m.producer_id = t.producer_id
        m.last_producer_id = t.last_producer_id
        m.producer_epoch = t.producer_epoch
        m.last_producer_epoch = t.last_producer_epoch
        m.timeout_ms = t.timeout_ms
        m.partitions = set(t.partitions)
        m.txn_start_ms = t.txn_start_ms
        m.last_update_ms = t.last_update_ms
        m.visible = True
        if state in PREPARE_STATES:
            m.markers_remaining = set(pending.marker_partitions)
            m.markers_aborted = False
            if not m.markers_remaining:  # nothing to write markers to: complete at the next poll
                self._retries[m.transactional_id] = self._now
        else:
            m.markers_remaining.clear()
            m.markers_in_flight.clear()
            self._retries.pop(m.transactional_id, None)

    def append_failed(self, result: Result, error_code: int, now_ms: int) -> Result:
        """The records of ``result`` (some or all) could not be appended, with ``error_code`` (a
        produce error such as NOT_LEADER_OR_FOLLOWER or NOT_ENOUGH_REPLICAS; UNKNOWN_SERVER_ERROR
        for anything else). Records already replayed stand. Returns the replies to send instead
        of ``result``'s (with Kafka's coordinator errors for the requests whose record was lost)
        and the markers of the records that were appended."""
        self._begin(now_ms)
        error = coordinator_error_for_append(error_code)
        failed: dict[str, ErrorCode] = {}
        for r in result.records:
            try:
                tid = rec.parse_key(r.key)
            except RecordFormatError:
                continue
            m = self._txns.get(tid) if tid is not None else None
            if m is None and tid is not None and r.partition not in self._owned:
                failed[tid] = ErrorCode.NOT_COORDINATOR  # the partition was unloaded meanwhile
                continue
            if m is None or m.pending is None or m.pending.key != r.key or m.pending.value != r.value:
                continue  # appended and replayed, or no longer ours
            pending, m.pending = m.pending, None
            failed[tid] = error
            if pending.transit is not None and pending.transit.state in PREPARE_STATES:
                m.markers_in_flight -= pending.marker_partitions
            if pending.fence:
                # Kafka's hasFailedEpochFence: the bumped epoch stays (in memory) and is reused
                log.warning("transactional id %s: could not write the epoch fence (%s); epoch stays %d in memory",
                            tid, error.name, m.epoch)
            elif pending.completion:
                # Kafka retries COORDINATOR_NOT_AVAILABLE, leaves NOT_COORDINATOR to the next coordinator
                # and treats anything else as fatal; here anything else is retried too
                if error in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
                    log.info("transactional id %s: completion not written (%s); the next coordinator completes it",
                             tid, error.name)
                else:
                    log.warning("transactional id %s: completion not written (%s); retrying", tid, error.name)
                    self._retries[tid] = now_ms + MARKER_RETRY_BACKOFF_MS
            else:
                log.info("transactional id %s: append failed with %s", tid, error.name)
        ties = {t.index: t for t in result.ties}
        for i, (reply_to, response) in enumerate(result.replies):
            tie = ties.get(i)
            if tie is not None:
                lost = {tid: failed[tid] for tid in tie.transactional_ids if tid in failed}
                if lost:
                    response = tie.rebuild(lost)
            self._replies.append((reply_to, response))
        self._markers.extend(mk for mk in result.markers if mk.transactional_id not in failed)
        return self._end()

    # ------------------------------------------------------------------------------------------
    # request validation
    # ------------------------------------------------------------------------------------------

    def _owner_error(self, transactional_id: str) -> ErrorCode | None:
        """Kafka's TransactionStateManager.getTransactionState errors."""
        if not self._active:
            return ErrorCode.NOT_COORDINATOR
        partition = self.partition_for(transactional_id)
        if partition in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self._owned:
            return ErrorCode.NOT_COORDINATOR
        return None

    def _allocate(self) -> int | ErrorCode:
        try:
            return self._allocate_producer_id()
        except KafkaError as e:
            return ErrorCode(e.code)
        except Exception:
            log.exception("could not allocate a producer id")
            return ErrorCode.UNKNOWN_SERVER_ERROR

    # ------------------------------------------------------------------------------------------
    # introspection (tests, DescribeProducers)
    # ------------------------------------------------------------------------------------------

    def metadata(self, transactional_id: str) -> TxnMetadata | None:
        """The coordinator's view of a transactional id (read only), or None."""
        return self._txns.get(transactional_id)

    def transactional_ids(self) -> list[str]:
        return sorted(tid for tid, m in self._txns.items() if m.visible)
