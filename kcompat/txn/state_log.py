"""What comes back from ``__transaction_state`` to the transaction coordinator: partitions loaded
and unloaded, records replayed after the broker appended them, and appends that failed (Kafka's
TransactionStateManager: loadTransactionsForTxnTopicPartition,
removeTransactionsForTxnTopicPartition, and the callback of appendTransactionToLog, which
completes the pending transition (TransactionMetadata.completeTransitionTo) or maps the append
error and drops it). Composed into :class:`kcompat.txn.coordinator.TransactionCoordinator`."""

from __future__ import annotations

from typing import Callable, Iterable

from kcompat.protocol.errors import ErrorCode, coordinator_error_for_append
from kcompat.txn import txn_records as rec
from kcompat.txn.coordinator_types import (
    MARKER_RETRY_BACKOFF_MS, MAX_TRANSITIONS_KEPT, TRANSACTION_STATE_TOPIC, Record, Result, TxnMetadata, _Pending,
    log,
)
from kcompat.txn.shard import TxnShard
from kcompat.txn.state import PREPARE_STATES, next_state
from kcompat.txn.txn_records import RecordFormatError, TxnLogValue


class TxnStateLog:
    """Loading, replay and append failures of ``__transaction_state``.

    Collaborators: the ``shard`` and ``resume_markers(m)`` (from
    :class:`kcompat.txn.completion.TxnCompletion`: a loaded Prepare* transaction sends its
    markers again). State changes only here, by replaying records (DESIGN.md section 6).
    """

    def __init__(self, shard: TxnShard, *, resume_markers: Callable[[TxnMetadata], None]) -> None:
        self._shard = shard
        self._resume_markers = resume_markers

    # ------------------------------------------------------------------------------------------
    # loading and unloading partitions
    # ------------------------------------------------------------------------------------------

    def begin_loading(self, partition: int) -> None:
        """Requests for transactional ids of ``partition`` get COORDINATOR_LOAD_IN_PROGRESS until
        :meth:`load`; records replayed meanwhile are buffered."""
        if self._shard.owns(partition):
            self._shard.drop_partition(partition)
        self._shard.start_loading(partition)

    def load(self, partition: int, records: Iterable[tuple[int, bytes, bytes | None]], now_ms: int, *,
             coordinator_epoch: int = 0) -> Result:
        """Replay the partition's log ``(offset, key, value)`` in order, then own the partition.

        ``coordinator_epoch`` is the leader epoch of the ``__transaction_state`` partition; markers
        carry it. Transactions found in PrepareCommit/PrepareAbort are completed: the Result asks
        for their markers again (Kafka's loadTransactionsForTxnTopicPartition)."""
        shard = self._shard
        shard.begin(now_ms)
        if shard.owns(partition):
            shard.drop_partition(partition)
        values = shard.finish_loading(partition)
        for _offset, key, value in records:
            entry = self._read_loaded(partition, key, value)
            if entry is not None:
                values[entry[0]] = entry[1]
        shard.own(partition, coordinator_epoch)
        shard.ensure_timers(now_ms)
        n_prepared = 0
        for tid, value in values.items():
            if value is None:
                continue
            m = self._metadata_from_value(tid, partition, value)
            shard.put(m)
            if m.state in PREPARE_STATES:
                n_prepared += 1
                self._resume_markers(m)
        log.info("loaded %s-%d (coordinator epoch %d): %d transactional ids, %d transactions to complete",
                 TRANSACTION_STATE_TOPIC, partition, coordinator_epoch,
                 sum(1 for v in values.values() if v is not None), n_prepared)
        return shard.end()

    def unload(self, partition: int) -> Result:
        """Give the partition up: its transactional ids are forgotten, markers no longer tracked."""
        shard = self._shard
        shard.begin(shard.now_ms)
        shard.cancel_loading(partition)
        shard.drop_partition(partition)
        return shard.end()

    def shutdown(self) -> Result:
        """Forget everything; later requests get NOT_COORDINATOR (DescribeTransactions and
        ListTransactions COORDINATOR_NOT_AVAILABLE), as Kafka after TransactionCoordinator.shutdown."""
        shard = self._shard
        shard.begin(shard.now_ms)
        shard.shutdown()
        return shard.end()

    @staticmethod
    def _read_loaded(partition: int, key: bytes | None,
                     value: bytes | None) -> tuple[str, TxnLogValue | None] | None:
        """``(transactional id, value or None for a tombstone)`` of a record read while loading,
        or None for a record skipped, as Kafka skips them (unknown key version, unreadable)."""
        try:
            tid = rec.parse_key(key)
            if tid is None:
                log.warning("%s-%d: skipping a record with an unknown key version", TRANSACTION_STATE_TOPIC, partition)
                return None
            return tid, rec.parse_value(value)
        except RecordFormatError as e:
            log.warning("%s-%d: skipping a record that cannot be read: %s", TRANSACTION_STATE_TOPIC, partition, e)
            return None

    @staticmethod
    def _metadata_from_value(tid: str, partition: int, v: TxnLogValue) -> TxnMetadata:
        """Kafka's TransactionLog.readTxnRecordValue: the previous producer epoch is not in the log;
        the previous and next producer ids and the client transaction version are (value v1)."""
        return TxnMetadata(tid, partition, v.producer_id, v.producer_epoch, v.timeout_ms, v.state,
                           v.last_update_ms, txn_start_ms=v.txn_start_ms, partitions=v.partitions,
                           last_producer_id=v.previous_producer_id, next_producer_id=v.next_producer_id,
                           client_txn_version=v.client_transaction_version)

    # ------------------------------------------------------------------------------------------
    # replay
    # ------------------------------------------------------------------------------------------

    def replay(self, record: Record) -> None:
        """Apply a record after the broker appended it, or one of a partition being loaded."""
        shard = self._shard
        partition = record.partition
        if shard.is_loading(partition):
            entry = self._read_loaded(partition, record.key, record.value)
            if entry is not None:
                shard.buffer_loaded(partition, *entry)
            return
        if not shard.owns(partition):
            return
        try:
            tid = rec.parse_key(record.key)
        except RecordFormatError as e:
            log.warning("%s-%d: skipping a record that cannot be read: %s", TRANSACTION_STATE_TOPIC, partition, e)
            return
        if tid is None:
            return
        m = shard.get(tid)
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
        shard.cancel_retry(tid)
        if value is None:
            shard.forget(tid)
        else:
            shard.put(self._metadata_from_value(tid, partition, value))

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
            self._shard.forget(m.transactional_id)
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
        m.next_producer_id = t.next_producer_id
        m.client_txn_version = t.client_txn_version
        m.visible = True
        if state in PREPARE_STATES:
            m.markers_remaining = set(pending.marker_partitions)
            m.markers_aborted = False
            if not m.markers_remaining:  # nothing to write markers to: complete at the next poll
                self._shard.schedule_retry(m.transactional_id, self._shard.now_ms)
        else:
            m.markers_remaining.clear()
            m.markers_in_flight.clear()
            self._shard.cancel_retry(m.transactional_id)

    # ------------------------------------------------------------------------------------------
    # append failures
    # ------------------------------------------------------------------------------------------

    def append_failed(self, result: Result, error_code: int, now_ms: int) -> Result:
        """The records of ``result`` (some or all) could not be appended, with ``error_code`` (a
        produce error such as NOT_LEADER_OR_FOLLOWER or NOT_ENOUGH_REPLICAS; UNKNOWN_SERVER_ERROR
        for anything else). Records already replayed stand. Returns the replies to send instead
        of ``result``'s (with Kafka's coordinator errors for the requests whose record was lost)
        and the markers of the records that were appended."""
        shard = self._shard
        shard.begin(now_ms)
        error = coordinator_error_for_append(error_code)
        failed: dict[str, ErrorCode] = {}
        for r in result.records:
            try:
                tid = rec.parse_key(r.key)
            except RecordFormatError:
                continue
            m = shard.get(tid) if tid is not None else None
            if m is None and tid is not None and not shard.owns(r.partition):
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
                    shard.schedule_retry(tid, now_ms + MARKER_RETRY_BACKOFF_MS)
            else:
                log.info("transactional id %s: append failed with %s", tid, error.name)
        ties = {t.index: t for t in result.ties}
        for i, (reply_to, response) in enumerate(result.replies):
            tie = ties.get(i)
            if tie is not None:
                lost = {tid: failed[tid] for tid in tie.transactional_ids if tid in failed}
                if lost:
                    response = tie.rebuild(lost)
            shard.reply(reply_to, response)
        for mk in result.markers:
            if mk.transactional_id not in failed:
                shard.add_marker(mk)
        return shard.end()
