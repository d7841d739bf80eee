"""Client requests that open and extend transactions, for the transaction coordinator:
InitProducerId (with epoch bumps and fencing, KIP-98/KIP-360/KIP-588), AddPartitionsToTxn,
AddOffsetsToTxn and KIP-890 (part 1) verification (Kafka's TransactionCoordinator
handleInitProducerId, handleAddPartitionsToTransaction, handleVerifyPartitionsInTransaction).
Composed into :class:`kcompat.txn.coordinator.TransactionCoordinator`."""

from __future__ import annotations

from typing import Callable, Iterable

from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnResponse
from kcompat.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnResponse
from kcompat.protocol.messages.init_producer_id import InitProducerIdResponse
from kcompat.txn.coordinator_types import (
    log, OFFSETS_TOPIC, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, EMPTY, ONGOING, COMPLETE_COMMIT, COMPLETE_ABORT,
    TopicPartition, is_epoch_exhausted, Result, TxnConfig, _Transit, TxnMetadata, produce_verify_error,
    allocate_producer_id,
)
from kcompat.txn.shard import TxnShard
from kcompat.txn.state import PREPARE_STATES, TxnEvent


class TxnRequests:
    """InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and KIP-890 verification.

    Collaborators: the ``shard`` (metadata, ownership, the Result being built);
    ``allocate_producer_id`` (a new producer id; may raise :class:`KafkaError`);
    ``partition_exists(topic, partition)``; ``group_partition_for(group_id)`` (the
    ``__consumer_offsets`` partition of a group); ``fence_and_abort(m)`` (Kafka's
    prepareFenceProducerEpoch + endTransaction(ABORT), from
    :class:`kcompat.txn.completion.TxnCompletion`). Every request method has the signature
    ``(reply_to, req, version, now_ms) -> Result``; errors travel in the response, as Kafka.
    """

    def __init__(self, shard: TxnShard, config: TxnConfig, *, allocate_producer_id: Callable[[], int],
                 partition_exists: Callable[[str, int], bool], group_partition_for: Callable[[str], int],
                 fence_and_abort: Callable[[TxnMetadata], None]) -> None:
        self._shard = shard
        self._max_timeout_ms = config.max_timeout_ms
        self._allocate_producer_id = allocate_producer_id
        self._partition_exists = partition_exists
        self._group_partition_for = group_partition_for
        self._fence_and_abort = fence_and_abort

    # ------------------------------------------------------------------------------------------
    # InitProducerId
    # ------------------------------------------------------------------------------------------

    def init_producer_id(self, reply_to, req, version: int, now_ms: int) -> Result:
        """InitProducerId v0-5: a new producer id for an idempotent producer (no transactional
        id), or the producer id and bumped epoch of a transactional id, answered once its Empty
        record is appended. An ongoing transaction is fenced and aborted first (the reply is then
        CONCURRENT_TRANSACTIONS; the producer retries). Errors: INVALID_REQUEST,
        INVALID_TRANSACTION_TIMEOUT, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
        CONCURRENT_TRANSACTIONS, PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v4), allocation
        errors."""
        shard = self._shard
        shard.begin(now_ms)

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
                shard.reply(reply_to, respond(ErrorCode.INVALID_REQUEST))
                return shard.end()
            else:
                expected = (pid, epoch)

        if tid is None:  # an idempotent producer: a new producer id, always
            pid = self._allocate()
            if isinstance(pid, ErrorCode):
                shard.reply(reply_to, respond(pid))
            else:
                shard.reply(reply_to, respond(ErrorCode.NONE, pid, 0))
            return shard.end()
        if tid == "":
            shard.reply(reply_to, respond(ErrorCode.INVALID_REQUEST))
            return shard.end()
        timeout = req.transaction_timeout_ms
        if not 0 < timeout <= self._max_timeout_ms:
            shard.reply(reply_to, respond(ErrorCode.INVALID_TRANSACTION_TIMEOUT))
            return shard.end()
        error = shard.owner_error(tid)
        if error is not None:
            shard.reply(reply_to, respond(error))
            return shard.end()

        m = shard.get(tid)
        if m is None:
            pid = self._allocate()
            if isinstance(pid, ErrorCode):
                shard.reply(reply_to, respond(pid))
                return shard.end()
            # Kafka puts the new metadata in its cache before the append; here it stays invisible
            # (DescribeTransactions, ListTransactions) until its first record is replayed
            m = TxnMetadata(tid, shard.partition_for(tid), pid, NO_PRODUCER_EPOCH, timeout, EMPTY, now_ms)
            m.visible = False
            shard.put(m)

        outcome = self._prepare_init_producer_id(m, timeout, expected, now_ms)
        if isinstance(outcome, ErrorCode):
            shard.reply(reply_to, respond(outcome))
        elif outcome is None:  # an ongoing transaction was fenced: retry once it is aborted
            shard.reply(reply_to, respond(ErrorCode.CONCURRENT_TRANSACTIONS),
                        ((tid,), lambda lost: respond(lost[tid])))
        else:
            shard.write(m, outcome, (TxnEvent.INIT_PRODUCER_ID,))
            log.info("transactional id %s: producer id %d epoch %d", tid, outcome.producer_id, outcome.producer_epoch)
            shard.reply(reply_to, respond(ErrorCode.NONE, outcome.producer_id, outcome.producer_epoch),
                        ((tid,), lambda lost: respond(lost[tid])))
        return shard.end()

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
            self._fence_and_abort(m)
            return None
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

    # ------------------------------------------------------------------------------------------
    # AddPartitionsToTxn / AddOffsetsToTxn
    # ------------------------------------------------------------------------------------------

    def add_partitions_to_txn(self, reply_to, req, version: int, now_ms: int) -> Result:
        """Versions 0-3 (one transaction, from the producer) and 4-5 (batched, from brokers:
        ``verify_only`` to check partitions instead of adding them, KIP-890 part 1, or to add them
        for a TV2 client's Produce v12 / TxnOffsetCommit v5, KIP-890 part 2, which records the
        transaction's client version 2)."""
        self._shard.begin(now_ms)
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
                # Kafka's transactionVersionForAddPartitionsToTxn: v4+ (a broker adding a partition
                # for a TV2 client's Produce v12 / TxnOffsetCommit v5) is TV2, v0-3 a TV0 client
                error, wrote = self._add_partitions(tid, pid, epoch, set(partitions), now_ms,
                                                    client_txn_version=2 if version >= 4 else 0)
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

        self._shard.reply(reply_to, build(results), (tuple(written), rebuild))
        return self._shard.end()

    def add_offsets_to_txn(self, reply_to, req, version: int, now_ms: int) -> Result:
        """Adds ``__consumer_offsets``-<partition of the group> to the transaction."""
        self._shard.begin(now_ms)
        tid = req.transactional_id
        tp = (OFFSETS_TOPIC, self._group_partition_for(req.group_id))
        error, wrote = self._add_partitions(tid, req.producer_id, req.producer_epoch, {tp}, now_ms)

        def respond(e: ErrorCode) -> AddOffsetsToTxnResponse:
            if version < 2 and e is ErrorCode.PRODUCER_FENCED:
                e = ErrorCode.INVALID_PRODUCER_EPOCH
            return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=int(e))

        self._shard.reply(reply_to, respond(error), ((tid,), lambda lost: respond(lost[tid])) if wrote else None)
        return self._shard.end()

    def _add_partitions(self, tid: str, producer_id: int, producer_epoch: int, partitions: set[TopicPartition],
                        now_ms: int, *, client_txn_version: int = 0) -> tuple[ErrorCode, bool]:
        """Kafka's handleAddPartitionsToTransaction: (error, whether a record was written);
        ``client_txn_version`` (0, or 2 for an implicit add, KIP-890 part 2) is recorded with the
        Ongoing transition (Kafka's prepareAddPartitions)."""
        if not tid:
            return ErrorCode.INVALID_REQUEST, False
        error = self._shard.owner_error(tid)
        if error is not None:
            return error, False
        m = self._shard.get(tid)
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
                            last_update_ms=now_ms, client_txn_version=client_txn_version)
        self._shard.write(m, transit, (TxnEvent.ADD_PARTITIONS,))
        return ErrorCode.NONE, True

    def _verify_partitions(self, tid: str, producer_id: int, producer_epoch: int,
                           partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """Kafka's handleVerifyPartitionsInTransaction (AddPartitionsToTxn v4+ verify_only)."""
        partitions = list(partitions)
        error = self._verify_error(tid, producer_id, producer_epoch)
        if error is not None:
            return {tp: error for tp in partitions}
        m = self._shard.get(tid)
        assert m is not None
        return {tp: ErrorCode.NONE if tp in m.partitions else ErrorCode.TRANSACTION_ABORTABLE for tp in partitions}

    def _verify_error(self, tid: str, producer_id: int, producer_epoch: int) -> ErrorCode | None:
        if not tid:
            return ErrorCode.INVALID_REQUEST
        error = self._shard.owner_error(tid)
        if error is not None:
            return error
        m = self._shard.get(tid)
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
        the error Kafka 4.3.1 gives that batch: TRANSACTION_ABORTABLE (partition not added;
        INVALID_TXN_STATE for older request versions, see ``errors.txn_abortable_error``),
        INVALID_PRODUCER_EPOCH (fenced), INVALID_PRODUCER_ID_MAPPING, or NOT_ENOUGH_REPLICAS
        (retriable: CONCURRENT_TRANSACTIONS, loading, not the coordinator)."""
        raw = self._verify_partitions(transactional_id, producer_id, producer_epoch, [(topic, partition)])
        error = raw[(topic, partition)]
        return int(produce_verify_error(error))

    def _allocate(self) -> int | ErrorCode:
        """A new producer id, or the error to answer with."""
        return allocate_producer_id(self._allocate_producer_id)
