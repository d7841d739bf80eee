"""The produce path of :class:`kcompat.isr.replica_manager.ReplicaManager`: Kafka's
``ReplicaManager.handleProduceAppend``, ``appendRecords`` and ``DelayedProduce``.

:func:`handle_produce_append` first verifies, with a transaction coordinator on another broker,
the transactional batches that open their producer's transaction in a partition (KIP-890 part 1),
or for Produce v12+ has the coordinator add those partitions (KIP-890 part 2), then calls
:func:`append_records`.

:func:`append_records` appends one batch per partition to the partitions led here and answers
per partition (:class:`ProducePartitionResult`):

- ``acks`` must be -1, 0 or 1 (else INVALID_REQUIRED_ACKS for every partition);
- an unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION (whatever the topic's name, as
  Kafka answers Produce), a partition led by another broker NOT_LEADER_OR_FOLLOWER;
- acks=-1 fails with NOT_ENOUGH_REPLICAS when the ISR is smaller than ``min.insync.replicas``
  (before appending); otherwise the answer waits until every ISR member has the batch
  (:class:`DelayedProduce`);
- the batch is validated and appended by :meth:`kcompat.isr.partition.Partition.append`
  (:mod:`kcompat.log.validation`); record-level rejections carry ``record_errors`` (KIP-467) and
  the partition's log start offset;
- a failed partition's ``message`` (Produce v8+ ``error_message``) is set only where Kafka sets
  text (``LogAppendResult.hasCustomErrorMessage``): record-level rejections and some transaction
  verification refusals; UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, MESSAGE_TOO_LARGE,
  CORRUPT_MESSAGE and the rest answer null, as Kafka 3.9 and 4.3 do. Errors the log raises carry
  the partition's log start offset except those of :data:`NO_LOG_START_ERRORS` (Kafka's
  ``ReplicaManager.appendToLocalLog``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
import inspect
import logging
from typing import TYPE_CHECKING, Awaitable, Protocol

from kcompat.protocol.errors import BatchRefusedError, ErrorCode, KafkaError, RecordValidationError

if TYPE_CHECKING:  # pragma: no cover
    from kcompat.isr.partition import Partition
    from kcompat.isr.replica_manager import ReplicaManager

log = logging.getLogger("kcompat.isr")


@dataclass(slots=True)
class ProducePartitionResult:
    """One partition's answer to a produce (Kafka ``PartitionResponse``): ``error`` and, when it
    failed, ``message`` and ``record_errors`` ``[(batch index, message)]`` (KIP-467); on success
    ``base_offset`` (the batch's first offset), ``log_append_time`` (ms, -1 unless LogAppendTime)
    and ``log_start_offset``, which stay when an acks=-1 wait fails after the append
    (:class:`DelayedProduce`); -1 where unknown."""

    topic: str
    partition: int
    error: ErrorCode = ErrorCode.NONE
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None
    record_errors: list[tuple[int, str]] = field(default_factory=list)


# The append errors Kafka's ReplicaManager.appendToLocalLog answers without the partition's log start
# offset (UNKNOWN_LOG_APPEND_INFO); any other error the log raises carries it (processFailedRecord).
NO_LOG_START_ERRORS = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.MESSAGE_TOO_LARGE,
    ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.CORRUPT_MESSAGE, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.UNKNOWN_TOPIC_ID})


def failed(topic: str, partition: int, code: ErrorCode, message: str | None = None) -> ProducePartitionResult:
    """A partition that failed with ``code`` before anything was appended."""
    return ProducePartitionResult(topic, partition, code, message=message)


class DelayedProduce:
    """An acks=-1 produce waiting until the ISR of every partition it appended to has its batch
    (the high watermark passed it), at most ``timeout_ms`` (Kafka ``DelayedProduce``). ``waits``:
    ``[(result, partition, offset the HW must reach)]``; the results are updated in place:
    REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below the minimum
    meanwhile, NOT_LEADER_OR_FOLLOWER if leadership moved. Only the error code changes: the base
    offset, log append time and log start offset of the append stay and there is no error
    message, as Kafka's ``DelayedProduce`` answers (it sets ``responseStatus.error`` alone)."""

    __slots__ = ("results", "waits", "timeout_ms")

    def __init__(self, results: list[ProducePartitionResult],
                 waits: list[tuple[ProducePartitionResult, "Partition", int]], timeout_ms: int) -> None:
        self.results = results
        self.waits = waits
        self.timeout_ms = timeout_ms

    async def complete(self) -> list[ProducePartitionResult]:
        """Wait for every partition together; the results, in request order."""
        codes = await asyncio.gather(*(p.wait_for_replication(required, self.timeout_ms)
                                       for _, p, required in self.waits))
        for (result, _partition, _required), code in zip(self.waits, codes):
            if code != ErrorCode.NONE:   # the batch is in the leader's log: its offsets stay, no text
                result.error = code
        return self.results


def append_records(rm: "ReplicaManager", entries: list[tuple[str, int, object]], *, acks: int, timeout_ms: int,
                   transactional_id: str | None, now_ms: int, verified: dict[tuple[str, int], int] | None = None
                   ) -> list[ProducePartitionResult] | Awaitable[list[ProducePartitionResult]]:
    """Append ``entries`` ``[(topic, partition, records)]`` (``records``: a writable buffer with
    one batch, rewritten in place) with ``acks`` -1/0/1; the results in the same order, or for
    acks=-1 with partitions to wait for an awaitable of them (``timeout_ms``: the request's).
    ``verified``: ``{(topic, partition): error code}`` from the remote transaction coordinator
    for batches that needed KIP-890 verification. Counts BrokerTopicMetrics per partition."""
    stats = rm.stats
    results = []
    waits = []
    for topic, index, records in entries:
        if acks not in (-1, 0, 1):
            result, required = failed(topic, index, ErrorCode.INVALID_REQUIRED_ACKS), -1
        else:
            code = verified.get((topic, index)) if verified else None
            result, partition, required = _append_one(rm, topic, index, records, acks, now_ms,
                                                      transactional_id, code)
            if partition is not None and acks == -1 and partition.high_watermark < required:
                waits.append((result, partition, required))
        size = len(records or b"")
        if result.error == ErrorCode.NONE:
            stats.produced(topic, size, max(0, required - result.base_offset))
        else:
            stats.produce_failed(topic, size)
        results.append(result)
    if waits:
        return DelayedProduce(results, waits, timeout_ms).complete()
    return results


def _append_one(rm: "ReplicaManager", topic: str, index: int, records, acks: int, now_ms: int,
                transactional_id: str | None, verified: int | None
                ) -> tuple[ProducePartitionResult, "Partition | None", int]:
    """(result, the partition appended to or None, offset the HW must reach for acks=-1)."""
    partition = rm.get(topic, index)
    leader = rm.leader_of(topic, index)
    if partition is None:
        # Kafka: a topic not in the metadata cache is UNKNOWN_TOPIC_OR_PARTITION for Produce,
        # whatever its name (INVALID_TOPIC_EXCEPTION is Metadata's answer); a partition that
        # exists but is hosted elsewhere NOT_LEADER_OR_FOLLOWER
        code = ErrorCode.NOT_LEADER_OR_FOLLOWER if leader is not None and rm.topic_exists(topic) \
            else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return failed(topic, index, code), None, -1
    if leader != rm.node_id or not partition.is_leader:
        return failed(topic, index, ErrorCode.NOT_LEADER_OR_FOLLOWER), None, -1
    if verified:
        return failed(topic, index, ErrorCode(verified),
                      f"Transactional id {transactional_id} has no ongoing transaction with {topic}-{index}"), None, -1
    try:
        partition.check_min_isr(acks)
        info = partition.append(records, now_ms, transactional_id, txn_verified=verified == 0)
    except RecordValidationError as e:
        # KIP-467: every rejected record by its index; Kafka's ReplicaManager also answers the
        # partition's log start offset here
        result = failed(topic, index, e.code, e.message)
        result.record_errors = list(e.record_errors)
        result.log_start_offset = partition.log_start_offset
        return result, None, -1
    except BatchRefusedError as e:   # before the log: no log start offset
        return failed(topic, index, e.code, e.message if e.custom_message else None), None, -1
    except KafkaError as e:   # from the log: no text (Kafka's hasCustomErrorMessage is false)
        result = failed(topic, index, e.code)
        if e.code == ErrorCode.KAFKA_STORAGE_ERROR:   # the cause (disk full...) is for the operator
            log.warning("%s-%d: append failed: %s", topic, index, e.message)
        if e.code not in NO_LOG_START_ERRORS:
            result.log_start_offset = partition.log_start_offset
        return result, None, -1
    return (ProducePartitionResult(topic, index, ErrorCode.NONE, info.base_offset, info.log_append_time,
                                   info.log_start_offset), partition, info.last_offset + 1)


def transactions_to_verify(rm: "ReplicaManager", entries: list[tuple[str, int, object]]
                           ) -> dict[tuple[int, int], list[tuple[str, int]]]:
    """``{(producer id, producer epoch): [(topic, partition)]}`` of the transactional batches in
    ``entries`` that open their producer's transaction in a partition led here, which must be
    verified with the transaction coordinator first (KIP-890 part 1, Kafka
    ``ReplicaManager.appendRecordsWithTransactionVerification``)."""
    by_producer: dict[tuple[int, int], list[tuple[str, int]]] = {}
    for topic, index, records in entries:
        p = rm.get(topic, index)
        producer = p.transaction_to_verify(records) if p is not None and p.is_leader else None
        if producer is not None:
            by_producer.setdefault(producer, []).append((topic, index))
    return by_producer



class TxnPartitionAdder(Protocol):
    """The transaction coordinator as a TV2 client's Produce v12 and TxnOffsetCommit v5 ask it to
    add partitions (KIP-890 part 2; Kafka's ``AddPartitionsToTxnManager`` with ``addPartition``):
    :class:`kcompat.broker.txn_runtime.TxnRuntime`."""

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: list[tuple[str, int]], timeout_s: float) -> Awaitable[dict[tuple[str, int], int]]:
        """``{(topic, partition): error code}`` once the coordinator (this broker's, or another's by
        AddPartitionsToTxn v5) added them to the transaction, codes mapped as for verification."""


class RemoteTxnVerification(Protocol):
    """The transaction coordinator as the produce path asks it (KIP-890 part 1; Kafka's
    ``AddPartitionsToTxnManager``): :class:`kcompat.broker.txn_runtime.TxnRuntime`."""

    def remote_coordinator(self, transactional_id: str) -> int | None:
        """The coordinator's node id when it is another live broker, else None."""

    def verify_remote(self, node: int, transactional_id: str, producer_id: int, producer_epoch: int,
                      partitions: list[tuple[str, int]], timeout_s: float) -> Awaitable[dict[tuple[str, int], int]]:
        """``{(topic, partition): error code}`` from AddPartitionsToTxn ``verify_only`` to ``node``."""


def handle_produce_append(rm: "ReplicaManager", entries: list[tuple[str, int, object]], *, acks: int,
                          timeout_ms: int, transactional_id: str | None, add_partitions: bool = False
                          ) -> list[ProducePartitionResult] | Awaitable[list[ProducePartitionResult]]:
    """Kafka's ``ReplicaManager.handleProduceAppend``: :func:`append_records`, after asking the
    transaction coordinator when it is another broker (``rm.remote_txn_verification``) about the
    batches that open their producer's transaction in a partition led here (only with
    ``transaction.partition.verification.enable``, ``rm.txn_verifier`` set). A batch it refuses
    fails with its error code; the others are appended. The wait for the coordinator is at most
    ``timeout_ms`` (at least 100 ms, at most 30 s).

    ``add_partitions`` (Produce v12+, a transaction.version 2 client, KIP-890 part 2: Kafka's
    ``produceRequestVersionToTransactionSupportedOperation`` -> ``addPartition``): those batches'
    partitions are instead added to the transaction by the coordinator, local or remote
    (``rm.txn_partition_adder``), whatever ``transaction.partition.verification.enable`` says."""
    ask = _coordinator_question(rm, transactional_id, add_partitions)
    by_producer = transactions_to_verify(rm, entries) if ask is not None else None
    if not by_producer:
        return rm.append_records(entries, acks=acks, timeout_ms=timeout_ms, transactional_id=transactional_id)
    return _append_after_coordinator(rm, by_producer, entries, acks=acks, timeout_ms=timeout_ms,
                                     transactional_id=transactional_id, ask=ask)


def _coordinator_question(rm: "ReplicaManager", transactional_id: str | None, add_partitions: bool):
    """``ask(producer id, epoch, partitions, timeout_s)`` for the transaction coordinator a Produce
    consults before appending, or None when it consults none: the adder (any coordinator) for
    ``add_partitions``, else the remote verification when it is on and the coordinator is another
    broker."""
    if not transactional_id:
        return None
    adder = rm.txn_partition_adder
    if add_partitions and adder is not None:
        return lambda pid, epoch, tps, timeout_s: adder.add_partitions(transactional_id, pid, epoch, tps, timeout_s)
    verification = rm.remote_txn_verification
    if rm.txn_verifier is None or verification is None:
        return None
    node = verification.remote_coordinator(transactional_id)
    if node is None:
        return None
    return lambda pid, epoch, tps, timeout_s: verification.verify_remote(node, transactional_id, pid, epoch, tps,
                                                                         timeout_s)


async def _append_after_coordinator(rm: "ReplicaManager", by_producer: dict, entries, *, acks: int,
                                    timeout_ms: int, transactional_id: str, ask) -> list[ProducePartitionResult]:
    """Ask the coordinator (``ask(producer id, epoch, partitions, timeout_s)``: verify or add) about
    each producer's batches, then append; a partition it refuses fails with the code."""
    timeout_s = max(0.1, min(timeout_ms, 30_000) / 1000.0)
    verified: dict[tuple[str, int], int] = {}
    for (producer_id, producer_epoch), tps in by_producer.items():
        verified.update(await ask(producer_id, producer_epoch, tps, timeout_s))
    results = rm.append_records(entries, acks=acks, timeout_ms=timeout_ms, transactional_id=transactional_id,
                                verified=verified)
    return await results if inspect.isawaitable(results) else results
