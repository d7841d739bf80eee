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

What lives only in memory, as in Kafka: the previous producer epoch used by KIP-360 retries (no
log value has a field for it; the previous producer id is in the v1 value written once
``transaction.version`` >= 1, and lost on reload before), the epoch bumped by a fence whose record
could not be written (Kafka's ``hasFailedEpochFence``), and which partitions of a Prepare*
transaction still lack their marker.

Transaction version 2 (KIP-890 part 2, :mod:`kcompat.txn.completion`): an EndTxn v5 bumps the
epoch with its Prepare* record (markers carry the bumped epoch and version 2), and the client's
transaction version is recorded with each transition (the v1 log value's ClientTransactionVersion),
so a reloaded coordinator completes the transaction the same way.

:class:`TransactionCoordinator` is a facade over parts composed as Kafka composes its
coordinators, each given only its collaborators:

- :class:`~kcompat.txn.shard.TxnShard`: the shared state (metadata of each transactional id, owned
  and loading partitions, timers, the clock, the Result being built), behind methods;
- :class:`~kcompat.txn.requests.TxnRequests`: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
  KIP-890 verification;
- :class:`~kcompat.txn.completion.TxnCompletion`: EndTxn, fencing aborts, markers, completion;
- :class:`~kcompat.txn.expiry.TxnExpiry`: the timers (retries, timed-out transactions, expiration);
- :class:`~kcompat.txn.describe.TxnDescriber`: DescribeTransactions, ListTransactions;
- :class:`~kcompat.txn.state_log.TxnStateLog`: loading, unloading, replay, append failures.
"""

from __future__ import annotations

from typing import Callable, Iterable

from kcompat.txn.completion import TxnCompletion
from kcompat.txn.coordinator_types import (
    MARKER_RETRY_BACKOFF_MS, MAX_PRODUCER_EPOCH, MarkerRequest, Record, Result, TxnConfig, TxnMetadata, partition_for,
)
from kcompat.txn.describe import TxnDescriber
from kcompat.txn.expiry import TxnExpiry
from kcompat.txn.requests import TxnRequests
from kcompat.txn.shard import TxnShard
from kcompat.txn.state_log import TxnStateLog

# what other modules import from here (the coordinator's public names)
__all__ = ["MARKER_RETRY_BACKOFF_MS", "MAX_PRODUCER_EPOCH", "MarkerRequest", "Record", "Result",
           "TransactionCoordinator", "TxnConfig", "partition_for"]


class TransactionCoordinator:
    """The transaction coordinator of one broker (Kafka's TransactionCoordinator).

    ``allocate_producer_id()`` returns a new producer id (it may raise a KafkaError, whose code the
    client gets); ``partition_exists(topic, partition)`` tells whether a data partition exists;
    ``group_partition_for(group_id)`` is the ``__consumer_offsets`` partition of a group
    (AddOffsetsToTxn); ``transaction_version()`` is the cluster's finalized ``transaction.version``
    (the log value version, and the kind of abort the coordinator itself starts). Request methods
    take ``(reply_to, req, version, now_ms)`` and, like every other call that changes something,
    return a :class:`Result`.
    """

    def __init__(self, config: TxnConfig, *, allocate_producer_id: Callable[[], int],
                 partition_exists: Callable[[str, int], bool], group_partition_for: Callable[[str], int],
                 transaction_version: Callable[[], int] = lambda: 0) -> None:
        self.config = config
        self._allocate_producer_id = allocate_producer_id
        self._shard = shard = TxnShard(config, transaction_version)
        self._completion = completion = TxnCompletion(shard, partition_exists=partition_exists,
                                                      allocate_producer_id=lambda: self._allocate_producer_id())
        self._requests = TxnRequests(
            shard, config,
            # looked up at each call: tests replace _allocate_producer_id on a running coordinator
            allocate_producer_id=lambda: self._allocate_producer_id(),
            partition_exists=partition_exists, group_partition_for=group_partition_for,
            fence_and_abort=completion.fence_and_abort)
        self._expiry = TxnExpiry(shard, config, fence_and_abort=completion.fence_and_abort,
                                 retry_markers=completion.retry_markers)
        self._describer = TxnDescriber(shard)
        self._log = TxnStateLog(shard, resume_markers=completion.resume_markers)

    # ------------------------------------------------------------------------------------------
    # client requests
    # ------------------------------------------------------------------------------------------

    def init_producer_id(self, reply_to, req, version: int, now_ms: int) -> Result:
        """InitProducerId (:meth:`kcompat.txn.requests.TxnRequests.init_producer_id`)."""
        return self._requests.init_producer_id(reply_to, req, version, now_ms)

    def add_partitions_to_txn(self, reply_to, req, version: int, now_ms: int) -> Result:
        """AddPartitionsToTxn 0-5 (:meth:`kcompat.txn.requests.TxnRequests.add_partitions_to_txn`)."""
        return self._requests.add_partitions_to_txn(reply_to, req, version, now_ms)

    def add_offsets_to_txn(self, reply_to, req, version: int, now_ms: int) -> Result:
        """AddOffsetsToTxn (:meth:`kcompat.txn.requests.TxnRequests.add_offsets_to_txn`)."""
        return self._requests.add_offsets_to_txn(reply_to, req, version, now_ms)

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str, partition: int) -> int:
        """KIP-890 produce-path verification (:meth:`kcompat.txn.requests.TxnRequests.verify`):
        0 or the error code the producer's batch gets."""
        return self._requests.verify(transactional_id, producer_id, producer_epoch, topic, partition)

    def end_txn(self, reply_to, req, version: int, now_ms: int) -> Result:
        """EndTxn (:meth:`kcompat.txn.completion.TxnCompletion.end_txn`)."""
        return self._completion.end_txn(reply_to, req, version, now_ms)

    def describe_transactions(self, reply_to, req, version: int, now_ms: int) -> Result:
        """DescribeTransactions (:meth:`kcompat.txn.describe.TxnDescriber.describe_transactions`)."""
        return self._describer.describe_transactions(reply_to, req, version, now_ms)

    def list_transactions(self, reply_to, req, version: int, now_ms: int) -> Result:
        """ListTransactions (:meth:`kcompat.txn.describe.TxnDescriber.list_transactions`)."""
        return self._describer.list_transactions(reply_to, req, version, now_ms)

    # ------------------------------------------------------------------------------------------
    # markers and time
    # ------------------------------------------------------------------------------------------

    def markers_written(self, transactional_id: str, producer_id: int, producer_epoch: int,
                        errors: dict[tuple[str, int], int], now_ms: int, *,
                        coordinator_epoch: int | None = None) -> Result:
        """Every partition of a :class:`MarkerRequest` was tried, ``errors`` has each one's error
        code (:meth:`kcompat.txn.completion.TxnCompletion.markers_written`)."""
        return self._completion.markers_written(transactional_id, producer_id, producer_epoch, errors, now_ms,
                                                coordinator_epoch=coordinator_epoch)

    def poll(self, now_ms: int) -> Result:
        """Retries, timed-out transactions and expired ids due by ``now_ms``
        (:meth:`kcompat.txn.expiry.TxnExpiry.poll`)."""
        return self._expiry.poll(now_ms)

    def next_deadline(self) -> int | None:
        """When :meth:`poll` has something to do next, or None."""
        return self._shard.next_deadline()

    # ------------------------------------------------------------------------------------------
    # partitions of __transaction_state, replay
    # ------------------------------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        """The ``__transaction_state`` partition of ``transactional_id``."""
        return self._shard.partition_for(transactional_id)

    def owns(self, partition: int) -> bool:
        return self._shard.owns(partition)

    def coordinator_epoch(self, partition: int) -> int | None:
        """The coordinator epoch ``partition`` was loaded at (None: not owned)."""
        return self._shard.coordinator_epoch(partition)

    def begin_loading(self, partition: int) -> None:
        """Requests for transactional ids of ``partition`` get COORDINATOR_LOAD_IN_PROGRESS until
        :meth:`load`."""
        self._log.begin_loading(partition)

    def load(self, partition: int, records: Iterable[tuple[int, bytes, bytes | None]], now_ms: int, *,
             coordinator_epoch: int = 0) -> Result:
        """Replay the partition's log ``(offset, key, value)``, then own it
        (:meth:`kcompat.txn.state_log.TxnStateLog.load`)."""
        return self._log.load(partition, records, now_ms, coordinator_epoch=coordinator_epoch)

    def unload(self, partition: int) -> Result:
        """Give the partition up: its transactional ids are forgotten, markers no longer tracked."""
        return self._log.unload(partition)

    def shutdown(self) -> Result:
        """Forget everything; later requests get NOT_COORDINATOR (DescribeTransactions and
        ListTransactions COORDINATOR_NOT_AVAILABLE), as Kafka after TransactionCoordinator.shutdown."""
        return self._log.shutdown()

    def replay(self, record: Record) -> None:
        """Apply a record after the broker appended it, or one of a partition being loaded."""
        self._log.replay(record)

    def append_failed(self, result: Result, error_code: int, now_ms: int) -> Result:
        """The records of ``result`` could not be appended: the replies to send instead and the
        markers still due (:meth:`kcompat.txn.state_log.TxnStateLog.append_failed`)."""
        return self._log.append_failed(result, error_code, now_ms)

    # ------------------------------------------------------------------------------------------
    # introspection (tests, DescribeProducers)
    # ------------------------------------------------------------------------------------------

    def metadata(self, transactional_id: str) -> TxnMetadata | None:
        """The coordinator's view of a transactional id (read only), or None."""
        return self._shard.get(transactional_id)

    def transactional_ids(self) -> list[str]:
        """The transactional ids known and visible, sorted."""
        return sorted(m.transactional_id for m in self._shard.transactions() if m.visible)

    # read-only views kept for tests that look at the timers (tests/txn)
    @property
    def _retries(self) -> dict[str, int]:
        return self._shard.retry_deadlines()

    @property
    def _abort_at(self) -> int | None:
        return self._shard.cleanup_deadlines()[0]

    @property
    def _expire_at(self) -> int | None:
        return self._shard.cleanup_deadlines()[1]
