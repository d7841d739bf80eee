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

import logging
from dataclasses import dataclass, field
from typing import Callable, Iterable

from kcompat.group.coordinator import java_string_hash
from kcompat.protocol.errors import ErrorCode, KafkaError, coordinator_error_for_append
from kcompat.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnResponse
from kcompat.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnResponse
from kcompat.protocol.messages.describe_transactions import DescribeTransactionsResponse
from kcompat.protocol.messages.end_txn import EndTxnResponse
from kcompat.protocol.messages.init_producer_id import InitProducerIdResponse
from kcompat.protocol.messages.list_transactions import ListTransactionsResponse
from kcompat.txn import txn_records as rec
from kcompat.txn.state import (
    EXPIRATION_ALLOWED, PREPARE_STATES, TxnEvent, TxnState, next_state,
)
from kcompat.txn.txn_records import RecordFormatError, TxnLogValue

log = logging.getLogger("kcompat.txn")

TRANSACTION_STATE_TOPIC = "__transaction_state"
OFFSETS_TOPIC = "__consumer_offsets"
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_PRODUCER_EPOCH = 32767  # Short.MaxValue
MARKER_RETRY_BACKOFF_MS = 100  # before re-sending markers that failed or re-writing a completion
MAX_TRANSITIONS_KEPT = 32

S = TxnState
EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT = S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT
COMPLETE_COMMIT, COMPLETE_ABORT = S.COMPLETE_COMMIT, S.COMPLETE_ABORT

TopicPartition = tuple[str, int]


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka's TransactionMetadata.isEpochExhausted: clients never get Short.MaxValue, so the
    coordinator can always fence a producer by bumping its epoch once more."""
    return epoch >= MAX_PRODUCER_EPOCH - 1


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(transactionalId.hashCode) % transaction.state.log.num.partitions``."""
    h = java_string_hash(transactional_id)
    return (0 if h == -(2**31) else abs(h)) % num_partitions


# Marker write errors (Kafka's TransactionMarkerRequestCompletionHandler)
_MARKER_DONE = frozenset({ErrorCode.NONE, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, ErrorCode.UNSUPPORTED_VERSION})
_MARKER_ABORT_SENDING = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})
_MARKER_RETRIABLE = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.KAFKA_STORAGE_ERROR})

# Produce-path verification (KIP-890 part 1): the coordinator's answer as the producer sees it
# (AddPartitionsToTxnManager, then ReplicaManager.appendRecords, Kafka 3.8/3.9).
_PRODUCE_VERIFY_ERRORS = {
    ErrorCode.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.TRANSACTION_ABORTABLE: ErrorCode.INVALID_TXN_STATE,
    ErrorCode.CONCURRENT_TRANSACTIONS: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_COORDINATOR: ErrorCode.NOT_ENOUGH_REPLICAS,
}


# ----------------------------------------------------------------------------------------------
# API types
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TxnConfig:
    """Broker configs of the same names (Kafka defaults)."""

    max_timeout_ms: int = 900000  # transaction.max.timeout.ms
    transactional_id_expiration_ms: int = 604800000  # transactional.id.expiration.ms
    abort_timed_out_interval_ms: int = 10000  # transaction.abort.timed.out.transaction.cleanup.interval.ms
    remove_expired_interval_ms: int = 3600000  # transaction.remove.expired.transaction.cleanup.interval.ms
    num_partitions: int = 50  # transaction.state.log.num.partitions


@dataclass
class Record:
    """One ``__transaction_state`` record in Kafka's format. ``timeout_ms``: how long its append
    may wait for replication (Kafka uses the transaction timeout of the id; 0 = the broker's)."""

    partition: int
    key: bytes
    value: bytes | None  # None = tombstone
    timeout_ms: int = field(default=0, compare=False)


@dataclass
class MarkerRequest:
    """Write a COMMIT (``commit``) or ABORT control batch for ``producer_id``/``producer_epoch`` to
    each of ``partitions`` (Kafka's WriteTxnMarkers entry)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: list[TopicPartition]


@dataclass
class _Tie:
    """Reply ``index`` of a Result depends on the records of ``transactional_ids``; ``rebuild``
    gives the reply to send instead when some of them could not be appended."""

    index: int
    transactional_ids: tuple[str, ...]
    rebuild: Callable[[dict[str, ErrorCode]], object]


@dataclass
class Result:
    records: list[Record] = field(default_factory=list)  # append (to __transaction_state) first
    replies: list[tuple[object, object]] = field(default_factory=list)  # (reply_to, *Response)
    markers: list[MarkerRequest] = field(default_factory=list)  # write after the records
    ties: list[_Tie] = field(default_factory=list, repr=False, compare=False)  # for append_failed


# ----------------------------------------------------------------------------------------------
# per transactional id
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Transit:
    """Kafka's TxnTransitMetadata: what a transactional id becomes once its record is appended."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    txn_start_ms: int
    last_update_ms: int

    def log_value(self) -> TxnLogValue:
        return TxnLogValue(producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                           timeout_ms=self.timeout_ms, state=self.state, partitions=self.partitions,
                           last_update_ms=self.last_update_ms, txn_start_ms=self.txn_start_ms)


@dataclass
class _Pending:
    transit: _Transit | None  # None: the tombstone of an expiring id
    events: tuple[TxnEvent, ...]  # path through the state table
    key: bytes
    value: bytes | None
    fence: bool = False  # an abort with an epoch bumped to fence the producer
    completion: bool = False  # CompleteCommit/CompleteAbort after the markers
    marker_partitions: frozenset[TopicPartition] = frozenset()


class TxnMetadata:
    """Kafka's TransactionMetadata: what the coordinator knows about one transactional id."""

    __slots__ = ("transactional_id", "partition", "producer_id", "last_producer_id", "producer_epoch",
                 "last_producer_epoch", "timeout_ms", "state", "partitions", "txn_start_ms", "last_update_ms",
                 "pending", "fence_epoch", "visible", "markers_remaining", "markers_in_flight",
                 "markers_aborted", "transitions")

    def __init__(self, transactional_id: str, partition: int, producer_id: int, producer_epoch: int,
                 timeout_ms: int, state: TxnState, last_update_ms: int, *, txn_start_ms: int = -1,
                 partitions: Iterable[TopicPartition] = (), last_producer_id: int = NO_PRODUCER_ID,
                 last_producer_epoch: int = NO_PRODUCER_EPOCH) -> None:
        self.transactional_id = transactional_id
        self.partition = partition  # of __transaction_state
        self.producer_id = producer_id
        self.last_producer_id = last_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.timeout_ms = timeout_ms
        self.state = state
        self.partitions: set[TopicPartition] = set(partitions)
        self.txn_start_ms = txn_start_ms
        self.last_update_ms = last_update_ms
        self.pending: _Pending | None = None
        self.fence_epoch: int | None = None  # epoch bumped in memory by a fence not yet written
        self.visible = True  # False until the first record of a new transactional id is replayed
        self.markers_remaining: set[TopicPartition] = set()  # Prepare*: partitions without marker
        self.markers_in_flight: set[TopicPartition] = set()  # in a MarkerRequest not answered yet
        self.markers_aborted = False  # a marker was fenced: stop sending (Kafka's abortSending)
        self.transitions: list[tuple[TxnState, TxnEvent, TxnState]] = []

    @property
    def epoch(self) -> int:
        """The epoch requests are checked against (Kafka bumps it in memory when fencing)."""
        return self.producer_epoch if self.fence_epoch is None else self.fence_epoch

    @property
    def busy(self) -> bool:
        """Kafka's ``pendingTransitionInProgress``. Kafka sets a pending Complete* state as soon as
        a Prepare* record is written (and on load), so a Prepare* state counts as pending."""
        return self.pending is not None or self.state in PREPARE_STATES

    def transit(self, **changes) -> _Transit:
        """Kafka's prepareTransitionTo: the current values with ``changes``; the previous producer
        id is always the current one."""
        values = dict(producer_id=self.producer_id, last_producer_id=self.producer_id,
                      producer_epoch=self.epoch, last_producer_epoch=self.last_producer_epoch,
                      timeout_ms=self.timeout_ms, state=self.state, partitions=frozenset(self.partitions),
                      txn_start_ms=self.txn_start_ms, last_update_ms=self.last_update_ms)
        values.update(changes)
        return _Transit(**values)

    def __repr__(self) -> str:
        return (f"TxnMetadata({self.transactional_id!r}, pid={self.producer_id}, epoch={self.producer_epoch}, "
                f"state={self.state}, partitions={sorted(self.partitions)}, pending={self.pending is not None})")


# ----------------------------------------------------------------------------------------------
# the coordinator
# ----------------------------------------------------------------------------------------------


class TransactionCoordinator:
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
    # InitProducerId
    # ------------------------------------------------------------------------------------------

    def init_producer_id(self, reply_to, req, version: int, now_ms: int) -> Result:
        self._begin(now_ms)

        def respond(error: ErrorCode, producer_id: int = NO_PRODUCER_ID,
                    producer_epoch: int = NO_PRODUCER_EPOCH) -> InitProducerIdResponse:
            if version < 4 and error is ErrorCode.PRODUCER_FENCED:
                error = ErrorCode.INVALID_PRODUCER_EPOCH  # older clients do not know PRODUCER_FENCED
            if error is not ErrorCode.NONE:
                producer_id, producer_epoch = NO_PRODUCER_ID, NO_PRODUCER_EPOCH
            return InitProducerIdResponse(throttle_time_ms=0, error_code=int(error), producer_id=producer_id,
                                          producer_epoch=producer_epoch)

        tid = req.transactional_id
        expected: tuple[int, int] | None = None
        if version >= 3:
            pid, epoch = req.producer_id, req.producer_epoch
            if pid == NO_PRODUCER_ID and epoch == NO_PRODUCER_EPOCH:
                expected = None
            elif pid == NO_PRODUCER_ID or epoch == NO_PRODUCER_EPOCH:
                self._reply(reply_to, respond(ErrorCode.INVALID_REQUEST))
                return self._end()
            else:
                expected = (pid, epoch)

        if tid is None:  # an idempotent producer: a new producer id, always
            pid = self._allocate()
            if isinstance(pid, ErrorCode):
                self._reply(reply_to, respond(pid))
            else:
                self._reply(reply_to, respond(ErrorCode.NONE, pid, 0))
            return self._end()
        if tid == "":
            self._reply(reply_to, respond(ErrorCode.INVALID_REQUEST))
            return self._end()
        timeout = req.transaction_timeout_ms
        if not 0 < timeout <= self.config.max_timeout_ms:
            self._reply(reply_to, respond(ErrorCode.INVALID_TRANSACTION_TIMEOUT))
            return self._end()
        error = self._owner_error(tid)
        if error is not None:
            self._reply(reply_to, respond(error))
            return self._end()

        m = self._txns.get(tid)
        if m is None:
            pid = self._allocate()
            if isinstance(pid, ErrorCode):
                self._reply(reply_to, respond(pid))
                return self._end()
            # Kafka puts the new metadata in its cache before the append; here it stays invisible
            # (DescribeTransactions, ListTransactions) until its first record is replayed
            m = TxnMetadata(tid, self.partition_for(tid), pid, NO_PRODUCER_EPOCH, timeout, EMPTY, now_ms)
            m.visible = False
            self._txns[tid] = m

        outcome = self._prepare_init_producer_id(m, timeout, expected, now_ms)
        if isinstance(outcome, ErrorCode):
            self._reply(reply_to, respond(outcome))
        elif outcome is None:  # an ongoing transaction was fenced: retry once it is aborted
            self._reply(reply_to, respond(ErrorCode.CONCURRENT_TRANSACTIONS),
                        ((tid,), lambda lost: respond(lost[tid])))
        else:
            self._write(m, outcome, (TxnEvent.INIT_PRODUCER_ID,))
            log.info("transactional id %s: producer id %d epoch %d", tid, outcome.producer_id, outcome.producer_epoch)
            self._reply(reply_to, respond(ErrorCode.NONE, outcome.producer_id, outcome.producer_epoch),
                        ((tid,), lambda lost: respond(lost[tid])))
        return self._end()

    def _prepare_init_producer_id(self, m: TxnMetadata, timeout: int, expected: tuple[int, int] | None,
                                  now_ms: int) -> _Transit | ErrorCode | None:
        """Kafka's prepareInitProducerIdTransit: the Empty transit to write, an error, or None when
        an ongoing transaction was fenced and is being aborted."""
        if m.busy:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if expected is not None and not (
                m.epoch == NO_PRODUCER_EPOCH  # metadata just created: the producer recovers from UNKNOWN_PRODUCER_ID
                or expected[0] == m.producer_id
                # a retry after an epoch overflow whose response the producer never got
                or (expected[0] == m.last_producer_id and is_epoch_exhausted(expected[1]))):
            return ErrorCode.PRODUCER_FENCED
        if m.state is ONGOING:
            # Abort the ongoing transaction with a bumped epoch first; the producer retries and then
            # gets the epoch bumped once more (or a new producer id if that exhausts the epochs).
            return self._fence_and_abort(m)
        assert m.state in (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT), m
        if is_epoch_exhausted(m.epoch) and (expected is None or expected[1] == m.epoch):
            pid = self._allocate()
            if isinstance(pid, ErrorCode):
                return pid
            log.info("transactional id %s: epochs of producer id %d exhausted, new producer id %d",
                     m.transactional_id, m.producer_id, pid)
            return m.transit(producer_id=pid, producer_epoch=0,
                             last_producer_epoch=m.epoch if expected is not None else NO_PRODUCER_EPOCH,
                             timeout_ms=timeout, state=EMPTY, partitions=frozenset(), txn_start_ms=-1,
                             last_update_ms=now_ms)
        # Kafka's prepareIncrementProducerEpoch
        if expected is None:
            epoch, last_epoch = m.epoch + 1, NO_PRODUCER_EPOCH
        elif m.epoch == NO_PRODUCER_EPOCH or expected[1] == m.epoch:
            epoch, last_epoch = m.epoch + 1, m.epoch  # continue after an error (KIP-360)
        elif expected[1] == m.last_producer_epoch:
            epoch, last_epoch = m.epoch, m.last_producer_epoch  # a retry of a call that succeeded
        else:
            log.info("transactional id %s: expected epoch %d is neither the current %d nor the previous %d",
                     m.transactional_id, expected[1], m.epoch, m.last_producer_epoch)
            return ErrorCode.PRODUCER_FENCED
        return m.transit(producer_epoch=epoch, last_producer_epoch=last_epoch, timeout_ms=timeout, state=EMPTY,
                         partitions=frozenset(), txn_start_ms=-1, last_update_ms=now_ms)

    def _fence_and_abort(self, m: TxnMetadata) -> None:
        """Kafka's prepareFenceProducerEpoch followed by endTransaction(ABORT, isFromClient=false):
        PrepareAbort with the epoch bumped, so the producer of the ongoing transaction is fenced."""
        if m.epoch >= MAX_PRODUCER_EPOCH:  # never happens: clients get at most Short.MaxValue - 1
            raise RuntimeError(f"cannot fence producer {m.producer_id} of {m.transactional_id}: epoch {m.epoch}")
        bumped = m.epoch + 1 if m.fence_epoch is None else m.fence_epoch
        m.fence_epoch = bumped
        m.last_producer_epoch = NO_PRODUCER_EPOCH
        transit = m.transit(producer_epoch=bumped, last_producer_epoch=NO_PRODUCER_EPOCH, state=PREPARE_ABORT,
                            last_update_ms=self._now)
        log.info("transactional id %s: fencing producer id %d epoch %d, aborting its transaction with epoch %d",
                 m.transactional_id, m.producer_id, m.producer_epoch, bumped)
        self._prepare_end(m, transit, (TxnEvent.FENCE_EPOCH, TxnEvent.ABORT), commit=False, fence=True)
        return None

    # ------------------------------------------------------------------------------------------
    # AddPartitionsToTxn / AddOffsetsToTxn
    # ------------------------------------------------------------------------------------------

    def add_partitions_to_txn(self, reply_to, req, version: int, now_ms: int) -> Result:
        """Versions 0-3 (one transaction, from the producer) and 4-5 (batched, from brokers,
        ``verify_only`` to check partitions instead of adding them: KIP-890 part 1)."""
        self._begin(now_ms)
        if version < 4:
            txns = [(req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                     req.v3_and_below_producer_epoch, False, req.v3_and_below_topics)]
        else:
            txns = [(t.transactional_id, t.producer_id, t.producer_epoch, t.verify_only, t.topics)
                    for t in req.transactions]
        results: dict[str, dict[TopicPartition, ErrorCode]] = {}
        written: list[str] = []
        for tid, pid, epoch, verify_only, topics in txns:
            partitions = list(dict.fromkeys((t.name, p) for t in topics for p in t.partitions))
            unknown = {tp for tp in partitions if not self._partition_exists(*tp)}
            if unknown:
                # any failed partition fails the whole transaction; the others were not attempted
                results[tid] = {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown
                                else ErrorCode.OPERATION_NOT_ATTEMPTED for tp in partitions}
            elif verify_only:
                errors = self._verify_partitions(tid, pid, epoch, partitions)
                if version < 5:  # TRANSACTION_ABORTABLE is new in v5 (KIP-890)
                    errors = {tp: ErrorCode.INVALID_TXN_STATE if e is ErrorCode.TRANSACTION_ABORTABLE else e
                              for tp, e in errors.items()}
                results[tid] = errors
            else:
                error, wrote = self._add_partitions(tid, pid, epoch, set(partitions), now_ms)
                if version < 2 and error is ErrorCode.PRODUCER_FENCED:
                    error = ErrorCode.INVALID_PRODUCER_EPOCH
                results[tid] = {tp: error for tp in partitions}
                if wrote:
                    written.append(tid)

        def build(res: dict[str, dict[TopicPartition, ErrorCode]]) -> AddPartitionsToTxnResponse:
            def topic_results(errors: dict[TopicPartition, ErrorCode]):
                by_topic: dict[str, list] = {}
                for (topic, p), e in errors.items():
                    by_topic.setdefault(topic, []).append(AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult(
                        partition_index=p, partition_error_code=int(e)))
                return [AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult(name=t, results_by_partition=ps)
                        for t, ps in by_topic.items()]

            if version < 4:
                errors = next(iter(res.values()))
                return AddPartitionsToTxnResponse(throttle_time_ms=0,
                                                  results_by_topic_v3_and_below=topic_results(errors))
            return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=0, results_by_transaction=[
                AddPartitionsToTxnResponse.AddPartitionsToTxnResult(transactional_id=t, topic_results=topic_results(e))
                for t, e in res.items()])

        def rebuild(lost: dict[str, ErrorCode]) -> AddPartitionsToTxnResponse:
            return build({tid: ({tp: lost[tid] for tp in errors} if tid in lost else errors)
                          for tid, errors in results.items()})

        self._reply(reply_to, build(results), (tuple(written), rebuild))
        return self._end()

    def add_offsets_to_txn(self, reply_to, req, version: int, now_ms: int) -> Result:
        """Adds ``__consumer_offsets``-<partition of the group> to the transaction."""
        self._begin(now_ms)
        tid = req.transactional_id
        tp = (OFFSETS_TOPIC, self._group_partition_for(req.group_id))
        error, wrote = self._add_partitions(tid, req.producer_id, req.producer_epoch, {tp}, now_ms)

        def respond(e: ErrorCode) -> AddOffsetsToTxnResponse:
            if version < 2 and e is ErrorCode.PRODUCER_FENCED:
                e = ErrorCode.INVALID_PRODUCER_EPOCH
            return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=int(e))

        self._reply(reply_to, respond(error), ((tid,), lambda lost: respond(lost[tid])) if wrote else None)
        return self._end()

    def _add_partitions(self, tid: str, producer_id: int, producer_epoch: int, partitions: set[TopicPartition],
                        now_ms: int) -> tuple[ErrorCode, bool]:
        """Kafka's handleAddPartitionsToTransaction: (error, whether a record was written)."""
        if not tid:
            return ErrorCode.INVALID_REQUEST, False
        error = self._owner_error(tid)
        if error is not None:
            return error, False
        m = self._txns.get(tid)
        if m is None or m.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, False
        if m.epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED, False
        if m.busy:
            return ErrorCode.CONCURRENT_TRANSACTIONS, False
        if m.state is ONGOING and partitions <= m.partitions:
            return ErrorCode.NONE, False  # already in the transaction: no record
        start = now_ms if m.state in (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT) else m.txn_start_ms
        transit = m.transit(state=ONGOING, partitions=frozenset(m.partitions | partitions), txn_start_ms=start,
                            last_update_ms=now_ms)
        self._write(m, transit, (TxnEvent.ADD_PARTITIONS,))
        return ErrorCode.NONE, True

    def _verify_partitions(self, tid: str, producer_id: int, producer_epoch: int,
                           partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """Kafka's handleVerifyPartitionsInTransaction (AddPartitionsToTxn v4+ verify_only)."""
        partitions = list(partitions)
        error = self._verify_error(tid, producer_id, producer_epoch)
        if error is not None:
            return {tp: error for tp in partitions}
        m = self._txns[tid]
        return {tp: ErrorCode.NONE if tp in m.partitions else ErrorCode.TRANSACTION_ABORTABLE for tp in partitions}

    def _verify_error(self, tid: str, producer_id: int, producer_epoch: int) -> ErrorCode | None:
        if not tid:
            return ErrorCode.INVALID_REQUEST
        error = self._owner_error(tid)
        if error is not None:
            return error
        m = self._txns.get(tid)
        if m is None or m.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if m.epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if m.state in PREPARE_STATES:  # pending transitions are not checked: the append checks again
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return None

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str, partition: int) -> int:
        """KIP-890 part 1 produce-path verification, for a coordinator on the same broker: 0 if
        ``topic``-``partition`` is in the ongoing transaction of this producer id and epoch, else
        the error the producer gets from Kafka 3.8/3.9 for that batch: INVALID_TXN_STATE (partition
        not added), INVALID_PRODUCER_EPOCH (fenced), INVALID_PRODUCER_ID_MAPPING, or
        NOT_ENOUGH_REPLICAS (retriable: CONCURRENT_TRANSACTIONS, loading, not the coordinator)."""
        raw = self._verify_partitions(transactional_id, producer_id, producer_epoch, [(topic, partition)])
        error = raw[(topic, partition)]
        return int(_PRODUCE_VERIFY_ERRORS.get(error, error))

    # ------------------------------------------------------------------------------------------
    # EndTxn and markers
    # ------------------------------------------------------------------------------------------

    def end_txn(self, reply_to, req, version: int, now_ms: int) -> Result:
        """EndTxn (Kafka 3.x semantics, transaction.version 0/1, also for v5): PrepareCommit or
        PrepareAbort, answered once that record is appended, then markers."""
        self._begin(now_ms)
        tid = req.transactional_id
        error, wrote = self._end_txn(tid, req.producer_id, req.producer_epoch, bool(req.committed))

        def respond(e: ErrorCode) -> EndTxnResponse:
            if version < 2 and e is ErrorCode.PRODUCER_FENCED:
                e = ErrorCode.INVALID_PRODUCER_EPOCH
            return EndTxnResponse(throttle_time_ms=0, error_code=int(e))

        self._reply(reply_to, respond(error), ((tid,), lambda lost: respond(lost[tid])) if wrote else None)
        return self._end()

    def _end_txn(self, tid: str, producer_id: int, producer_epoch: int, commit: bool) -> tuple[ErrorCode, bool]:
        """Kafka's endTransaction for a client request (TV1): (error, whether a record was written)."""
        if not tid:
            return ErrorCode.INVALID_REQUEST, False
        error = self._owner_error(tid)
        if error is not None:
            return error, False
        m = self._txns.get(tid)
        if m is None or m.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, False
        if producer_epoch != m.epoch:  # strict equality for client requests
            return ErrorCode.PRODUCER_FENCED, False
        if m.busy:
            return ErrorCode.CONCURRENT_TRANSACTIONS, False
        if m.state is ONGOING:
            event = TxnEvent.COMMIT if commit else TxnEvent.ABORT
            transit = m.transit(state=PREPARE_COMMIT if commit else PREPARE_ABORT, last_update_ms=self._now)
            self._prepare_end(m, transit, (event,), commit=commit)
            return ErrorCode.NONE, True
        if (m.state is COMPLETE_COMMIT and commit) or (m.state is COMPLETE_ABORT and not commit):
            return ErrorCode.NONE, False  # a retry of an EndTxn that completed
        log.info("transactional id %s: EndTxn %s in state %s", tid, "commit" if commit else "abort", m.state)
        return ErrorCode.INVALID_TXN_STATE, False

    def _prepare_end(self, m: TxnMetadata, transit: _Transit, events: tuple[TxnEvent, ...], *, commit: bool,
                     fence: bool = False) -> None:
        """Write PrepareCommit/PrepareAbort and ask for the markers (written once it is appended)."""
        targets = frozenset(tp for tp in transit.partitions if self._partition_exists(*tp))
        self._write(m, transit, events, fence=fence, marker_partitions=targets)
        if targets:
            self._send_markers(m, targets, transit.producer_id, transit.producer_epoch, commit)

    def _send_markers(self, m: TxnMetadata, partitions: Iterable[TopicPartition], producer_id: int,
                      producer_epoch: int, commit: bool) -> None:
        parts = sorted(partitions)
        m.markers_in_flight.update(parts)
        self._markers.append(MarkerRequest(m.transactional_id, producer_id, producer_epoch,
                                           self._owned.get(m.partition, 0), commit, parts))

    def _resume_markers(self, m: TxnMetadata) -> None:
        """A Prepare* transaction whose markers are not all written (after a load, or a retry)."""
        m.markers_aborted = False
        m.markers_remaining = {tp for tp in m.partitions if self._partition_exists(*tp)}
        m.markers_in_flight.clear()
        if m.markers_remaining:
            self._send_markers(m, m.markers_remaining, m.producer_id, m.producer_epoch, m.state is PREPARE_COMMIT)
        else:
            self._write_completion(m)

    def _write_completion(self, m: TxnMetadata) -> None:
        """Kafka's prepareComplete: CompleteCommit/CompleteAbort, no partitions."""
        transit = m.transit(state=COMPLETE_COMMIT if m.state is PREPARE_COMMIT else COMPLETE_ABORT,
                            partitions=frozenset(), last_update_ms=self._now)
        self._write(m, transit, (TxnEvent.MARKERS_WRITTEN,), completion=True)

    def markers_written(self, transactional_id: str, producer_id: int, producer_epoch: int,
                        errors: dict[tuple[str, int], int], now_ms: int, *,
                        coordinator_epoch: int | None = None) -> Result:
        """Every partition of a :class:`MarkerRequest` was tried: ``errors`` has the error code of
        each (0 = marker written). Retriable errors are retried after
        :data:`MARKER_RETRY_BACKOFF_MS`; once every partition has its marker the Complete* record
        is written. INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED stop the sending (a
        newer coordinator or producer epoch owns the transaction), as Kafka."""
        self._begin(now_ms)
        m = self._txns.get(transactional_id)
        if (m is None or m.state not in PREPARE_STATES or m.producer_id != producer_id
                or m.producer_epoch != producer_epoch
                or (coordinator_epoch is not None and self._owned.get(m.partition) != coordinator_epoch)):
            log.info("transactional id %s: markers for producer id %d epoch %d answered, no longer expected",
                     transactional_id, producer_id, producer_epoch)
            return self._end()
        retry = False
        for tp, code in errors.items():
            tp = (tp[0], tp[1])
            m.markers_in_flight.discard(tp)
            try:
                error = ErrorCode(code)
            except ValueError:
                error = ErrorCode.UNKNOWN_SERVER_ERROR
            if error in _MARKER_DONE:
                m.markers_remaining.discard(tp)
            elif error in _MARKER_ABORT_SENDING:
                log.info("transactional id %s: marker for %s-%d fenced (%s); no more markers sent",
                         transactional_id, tp[0], tp[1], error.name)
                m.markers_aborted = True
            elif error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and not self._partition_exists(*tp):
                m.markers_remaining.discard(tp)  # deleted: no marker needed (Kafka skips partitions without leader)
            else:
                if error not in _MARKER_RETRIABLE:
                    log.error("transactional id %s: unexpected error %s writing the marker to %s-%d; retrying",
                              transactional_id, error.name, tp[0], tp[1])
                retry = True
        if m.markers_aborted:
            self._retries.pop(transactional_id, None)
        elif not m.markers_remaining and not m.markers_in_flight:
            if m.pending is None:
                self._write_completion(m)
        elif retry:
            self._retries[transactional_id] = now_ms + MARKER_RETRY_BACKOFF_MS
        return self._end()

    def _retry(self, tid: str) -> None:
        m = self._txns.get(tid)
        if m is None or m.state not in PREPARE_STATES or m.pending is not None or m.markers_aborted:
            return
        m.markers_remaining = {tp for tp in m.markers_remaining if self._partition_exists(*tp)}
        to_send = m.markers_remaining - m.markers_in_flight
        if to_send:
            self._send_markers(m, to_send, m.producer_id, m.producer_epoch, m.state is PREPARE_COMMIT)
        elif not m.markers_remaining and not m.markers_in_flight:
            self._write_completion(m)

    # ------------------------------------------------------------------------------------------
    # timeouts and expiration
    # ------------------------------------------------------------------------------------------

    def _abort_timed_out_transactions(self, now_ms: int) -> None:
        """Kafka's abortTimedOutTransactions: Ongoing past txn start + timeout, no pending transition."""
        for m in list(self._txns.values()):
            if (m.state is ONGOING and not m.busy and m.partition in self._owned
                    and m.txn_start_ms + m.timeout_ms < now_ms):
                log.info("transactional id %s: transaction of producer id %d epoch %d timed out after %d ms",
                         m.transactional_id, m.producer_id, m.epoch, m.timeout_ms)
                self._fence_and_abort(m)

    def _expire_transactional_ids(self, now_ms: int) -> None:
        """Kafka's removeExpiredTransactionalIds: tombstones for ids idle longer than
        ``transactional.id.expiration.ms`` (Empty, CompleteCommit or CompleteAbort)."""
        cutoff = now_ms - self.config.transactional_id_expiration_ms
        for m in list(self._txns.values()):
            if (m.visible and m.pending is None and m.state in EXPIRATION_ALLOWED and m.partition in self._owned
                    and m.last_update_ms <= cutoff):
                self._write(m, None, (TxnEvent.EXPIRE,))

    # ------------------------------------------------------------------------------------------
    # DescribeTransactions / ListTransactions (KIP-664)
    # ------------------------------------------------------------------------------------------

    def describe_transactions(self, reply_to, req, version: int, now_ms: int) -> Result:
        self._begin(now_ms)
        states = [self._describe_one(tid) for tid in req.transactional_ids]
        self._reply(reply_to, DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states))
        return self._end()

    def _describe_one(self, tid: str) -> DescribeTransactionsResponse.TransactionState:
        out = DescribeTransactionsResponse.TransactionState(transactional_id=tid)
        if not self._active:
            out.error_code = int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            return out
        if not tid:
            out.error_code = int(ErrorCode.INVALID_REQUEST)
            return out
        error = self._owner_error(tid)
        if error is not None:
            out.error_code = int(error)
            return out
        m = self._txns.get(tid)
        if m is None or not m.visible:
            out.error_code = int(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
            return out
        # in Prepare*, only the partitions still waiting for their marker (Kafka removes the others)
        partitions = m.markers_remaining if m.state in PREPARE_STATES else m.partitions
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(partitions):
            by_topic.setdefault(topic, []).append(p)
        out.error_code = 0
        out.transaction_state = str(m.state)
        out.transaction_timeout_ms = m.timeout_ms
        out.transaction_start_time_ms = m.txn_start_ms
        out.producer_id = m.producer_id
        out.producer_epoch = m.producer_epoch
        out.topics = [DescribeTransactionsResponse.TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()]
        return out

    def list_transactions(self, reply_to, req, version: int, now_ms: int) -> Result:
        self._begin(now_ms)
        if not self._active:
            resp = ListTransactionsResponse(throttle_time_ms=0, error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        elif self._loading:
            resp = ListTransactionsResponse(throttle_time_ms=0, error_code=int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))
        else:
            unknown: list[str] = []
            wanted_states: set[TxnState] = set()
            for name in req.state_filters:
                state = TxnState.from_name(name)
                if state is None:
                    unknown.append(name)
                else:
                    wanted_states.add(state)
            wanted_pids = set(req.producer_id_filters)
            duration = req.duration_filter if version >= 1 else -1
            states = []
            for tid in sorted(self._txns):
                m = self._txns[tid]
                if not m.visible or m.state is TxnState.DEAD:
                    continue
                if wanted_pids and m.producer_id not in wanted_pids:
                    continue
                if req.state_filters and m.state not in wanted_states:
                    continue
                if duration >= 0 and now_ms - m.txn_start_ms <= duration:  # KIP-994: running longer than
                    continue
                states.append(ListTransactionsResponse.TransactionState(
                    transactional_id=tid, producer_id=m.producer_id, transaction_state=str(m.state)))
            resp = ListTransactionsResponse(throttle_time_ms=0, error_code=0, unknown_state_filters=unknown,
                                            transaction_states=states)
        self._reply(reply_to, resp)
        return self._end()

    # ------------------------------------------------------------------------------------------
    # introspection (tests, DescribeProducers)
    # ------------------------------------------------------------------------------------------

    def metadata(self, transactional_id: str) -> TxnMetadata | None:
        """The coordinator's view of a transactional id (read only), or None."""
        return self._txns.get(transactional_id)

    def transactional_ids(self) -> list[str]:
        return sorted(tid for tid, m in self._txns.items() if m.visible)

