"""Shared pieces of the transaction coordinator (:mod:`kcompat.txn.coordinator`): its configuration,
the records, marker requests and results it returns, transaction metadata and its pending
transitions, constants and Kafka's partition hashing. The coordinator's mutable state is in
:mod:`kcompat.txn.shard`."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable, Iterable

from kcompat.coordinator.result import CoordinatorResult
from kcompat.coordinator.java_strings import java_string_hash
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.topic_names import GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME
from kcompat.txn.state import PREPARE_STATES, TxnEvent, TxnState
from kcompat.txn.txn_records import TxnLogValue

log = logging.getLogger("kcompat.txn")

TRANSACTION_STATE_TOPIC = TRANSACTION_STATE_TOPIC_NAME
OFFSETS_TOPIC = GROUP_METADATA_TOPIC_NAME
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


def allocate_producer_id(allocate: Callable[[], int]) -> int | ErrorCode:
    """``allocate()``'s new producer id, or the error to answer with (a KafkaError's code, else
    UNKNOWN_SERVER_ERROR)."""
    try:
        return allocate()
    except KafkaError as e:
        return ErrorCode(e.code)
    except Exception:
        log.exception("could not allocate a producer id")
        return ErrorCode.UNKNOWN_SERVER_ERROR


# Marker write errors (Kafka's TransactionMarkerRequestCompletionHandler)
_MARKER_DONE = frozenset({ErrorCode.NONE, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, ErrorCode.UNSUPPORTED_VERSION})
_MARKER_ABORT_SENDING = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})
_MARKER_RETRIABLE = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.KAFKA_STORAGE_ERROR})

# Produce-path verification (KIP-890 part 1): the coordinator's answer as the producer sees it
# (AddPartitionsToTxnManager, then ReplicaManager.appendRecords, Kafka 4.3.1). TRANSACTION_ABORTABLE
# stays: the request version decides whether the client gets it (errors.txn_abortable_error).
_PRODUCE_VERIFY_ERRORS = {
    ErrorCode.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.CONCURRENT_TRANSACTIONS: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_COORDINATOR: ErrorCode.NOT_ENOUGH_REPLICAS,
}


def produce_verify_error(error: ErrorCode) -> ErrorCode:
    """The error a producer's batch gets for a KIP-890 verification answer ``error`` (as Kafka
    4.3.1 maps them: fenced -> INVALID_PRODUCER_EPOCH, coordinator busy, loading or moved ->
    NOT_ENOUGH_REPLICAS, which producers retry; TRANSACTION_ABORTABLE as it is, turned into
    INVALID_TXN_STATE for Produce below v11 and TxnOffsetCommit below v4 by their handlers)."""
    return _PRODUCE_VERIFY_ERRORS.get(error, error)


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
    each of ``partitions`` (Kafka's WriteTxnMarkers entry). ``transaction_version`` 2: the epoch
    was bumped by the EndTxn, so a partition leader wants it above the producer's epoch there."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: list[TopicPartition]
    transaction_version: int = 0  # the transaction's client version: WriteTxnMarkers v2 (KIP-1228)


@dataclass
class _Tie:
    """Reply ``index`` of a Result depends on the records of ``transactional_ids``; ``rebuild``
    gives the reply to send instead when some of them could not be appended."""

    index: int
    transactional_ids: tuple[str, ...]
    rebuild: Callable[[dict[str, ErrorCode]], object]


@dataclass
class Result(CoordinatorResult[Record]):
    """What one call of the transaction coordinator returns: ``records`` to append to
    ``__transaction_state`` first, ``replies`` ``(reply_to, *Response)`` to send once they are
    appended (both from :class:`CoordinatorResult`), then ``markers`` to write, and ``ties``
    (which replies depend on which records, for ``append_failed``)."""

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
    next_producer_id: int = NO_PRODUCER_ID  # TV2: the id to move to once the transaction completes
    client_txn_version: int = 0  # the transaction version of the client's last transition (TV2: 2)

    def log_value(self) -> TxnLogValue:
        """The TransactionLogValue; ``previous_producer_id``, ``next_producer_id`` and
        ``client_transaction_version`` reach the log only in the flexible value v1."""
        return TxnLogValue(producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                           timeout_ms=self.timeout_ms, state=self.state, partitions=self.partitions,
                           last_update_ms=self.last_update_ms, txn_start_ms=self.txn_start_ms,
                           previous_producer_id=self.last_producer_id, next_producer_id=self.next_producer_id,
                           client_transaction_version=self.client_txn_version)


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
                 "markers_aborted", "transitions", "next_producer_id", "client_txn_version")

    def __init__(self, transactional_id: str, partition: int, producer_id: int, producer_epoch: int,
                 timeout_ms: int, state: TxnState, last_update_ms: int, *, txn_start_ms: int = -1,
                 partitions: Iterable[TopicPartition] = (), last_producer_id: int = NO_PRODUCER_ID,
                 last_producer_epoch: int = NO_PRODUCER_EPOCH, next_producer_id: int = NO_PRODUCER_ID,
                 client_txn_version: int = 0) -> None:
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
        self.next_producer_id = next_producer_id  # TV2: set by a Prepare* whose epoch bump exhausts the epochs
        self.client_txn_version = client_txn_version  # Kafka's clientTransactionVersion (0, or 2 for TV2)
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
                      txn_start_ms=self.txn_start_ms, last_update_ms=self.last_update_ms,
                      next_producer_id=self.next_producer_id, client_txn_version=self.client_txn_version)
        values.update(changes)
        return _Transit(**values)

    def __repr__(self) -> str:
        return (f"TxnMetadata({self.transactional_id!r}, pid={self.producer_id}, epoch={self.producer_epoch}, "
                f"state={self.state}, partitions={sorted(self.partitions)}, pending={self.pending is not None})")
