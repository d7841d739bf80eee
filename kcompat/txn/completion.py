"""How transactions end, for the transaction coordinator: EndTxn, the abort that fences a
producer, COMMIT/ABORT markers and their retries, and the CompleteCommit/CompleteAbort record
(Kafka's TransactionCoordinator.endTransaction, the bookkeeping half of
TransactionMarkerChannelManager and TransactionMarkerRequestCompletionHandler; KIP-98), for
EndTxn v0-4 (transaction versions 0/1) and v5 (transaction version 2, KIP-890 part 2: the epoch
bumped by every EndTxn, Kafka 4.3.1's endTransaction with its later fixes KAFKA-18464, KAFKA-18660,
KAFKA-19367, KAFKA-20090). Composed into :class:`kcompat.txn.coordinator.TransactionCoordinator`."""

from __future__ import annotations

from typing import Callable, Iterable

from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.end_txn import EndTxnResponse
from kcompat.txn.coordinator_types import (
    log, MARKER_RETRY_BACKOFF_MS, MAX_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, EMPTY, ONGOING,
    PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT, TopicPartition, _MARKER_DONE,
    _MARKER_ABORT_SENDING, _MARKER_RETRIABLE, MarkerRequest, Result, _Transit, TxnMetadata, is_epoch_exhausted,
    allocate_producer_id,
)
from kcompat.txn.shard import TxnShard
from kcompat.txn.state import PREPARE_STATES, TxnEvent

TV2 = 2  # transaction.version 2 (KIP-890 part 2): the epoch is bumped by every EndTxn
END_TXN_TV2_VERSION = 5  # Kafka's TransactionVersion.transactionVersionForEndTxn: v5+ is a TV2 client


def supports_epoch_bump(transaction_version: int) -> bool:
    """Kafka's ``TransactionVersion.supportsEpochBump``."""
    return transaction_version >= TV2


class TxnCompletion:
    """EndTxn, fencing aborts, markers and completion records.

    Collaborators: the ``shard``, ``partition_exists(topic, partition)`` (markers go only to
    partitions that still exist) and ``allocate_producer_id()`` (a TV2 epoch bump that exhausts the
    epochs moves the transactional id to a new producer id; may raise :class:`KafkaError`). Used by the other parts through :meth:`fence_and_abort`
    (InitProducerId during a transaction, transaction timeouts), :meth:`resume_markers` (loading)
    and :meth:`retry_markers` (the retry timer).
    """

    def __init__(self, shard: TxnShard, *, partition_exists: Callable[[str, int], bool],
                 allocate_producer_id: Callable[[], int] | None = None) -> None:
        self._shard = shard
        self._partition_exists = partition_exists
        self._allocate_producer_id = allocate_producer_id

    # ------------------------------------------------------------------------------------------
    # EndTxn and markers
    # ------------------------------------------------------------------------------------------

    def end_txn(self, reply_to, req, version: int, now_ms: int) -> Result:
        """EndTxn: PrepareCommit or PrepareAbort, answered once that record is appended, then
        markers. As Kafka 4.3 the request version decides the semantics, not the finalized
        transaction.version: v0-4 are a TV0/TV1 client's (:meth:`_end_txn`), v5 a TV2 client's
        (:meth:`_end_txn_v2`: the epoch is bumped and the answer carries the producer id and epoch
        to use next). Errors: INVALID_REQUEST, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
        INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2),
        CONCURRENT_TRANSACTIONS, INVALID_TXN_STATE, producer id allocation errors (v5)."""
        self._shard.begin(now_ms)
        tid = req.transactional_id
        commit = bool(req.committed)
        if version >= END_TXN_TV2_VERSION:
            error, wrote, next_id = self._end_txn_v2(tid, req.producer_id, req.producer_epoch, commit)
        else:
            (error, wrote), next_id = self._end_txn(tid, req.producer_id, req.producer_epoch, commit), None

        def respond(e: ErrorCode) -> EndTxnResponse:
            if version < 2 and e is ErrorCode.PRODUCER_FENCED:
                e = ErrorCode.INVALID_PRODUCER_EPOCH
            pid, epoch = next_id if e is ErrorCode.NONE and next_id is not None else (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
            return EndTxnResponse(throttle_time_ms=0, error_code=int(e), producer_id=pid, producer_epoch=epoch)

        self._shard.reply(reply_to, respond(error), ((tid,), lambda lost: respond(lost[tid])) if wrote else None)
        return self._shard.end()

    def _end_txn(self, tid: str, producer_id: int, producer_epoch: int, commit: bool) -> tuple[ErrorCode, bool]:
        """Kafka's endTransaction for a client request (TV1): (error, whether a record was written)."""
        if not tid:
            return ErrorCode.INVALID_REQUEST, False
        error = self._shard.owner_error(tid)
        if error is not None:
            return error, False
        m = self._shard.get(tid)
        if m is None or m.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, False
        if producer_epoch != m.epoch:  # strict equality for client requests
            return ErrorCode.PRODUCER_FENCED, False
        if m.busy:
            return ErrorCode.CONCURRENT_TRANSACTIONS, False
        if m.state is ONGOING:
            event = TxnEvent.COMMIT if commit else TxnEvent.ABORT
            # Kafka's prepareAbortOrCommit with TV_0: a transaction a TV2 client's Produce v12 opened
            # but an older EndTxn ends gets TV0 markers with the unbumped epoch
            transit = m.transit(state=PREPARE_COMMIT if commit else PREPARE_ABORT, last_update_ms=self._shard.now_ms,
                                client_txn_version=0)
            self._prepare_end(m, transit, (event,), commit=commit)
            return ErrorCode.NONE, True
        if (m.state is COMPLETE_COMMIT and commit) or (m.state is COMPLETE_ABORT and not commit):
            return ErrorCode.NONE, False  # a retry of an EndTxn that completed
        log.info("transactional id %s: EndTxn %s in state %s", tid, "commit" if commit else "abort", m.state)
        return ErrorCode.INVALID_TXN_STATE, False

    def _end_txn_v2(self, tid: str, producer_id: int, producer_epoch: int, commit: bool
                    ) -> tuple[ErrorCode, bool, tuple[int, int] | None]:
        """Kafka 4.3's endTransaction for a TV2 client (EndTxn v5, KIP-890 part 2): (error,
        whether a record was written, the producer id and epoch the answer carries).

        The Prepare* record bumps the epoch (``last_producer_epoch`` keeps the client's); when the
        current epoch is exhausted a new producer id is allocated and taken on completion
        (``next_producer_id``), and the answer already names it with epoch 0 (KAFKA-18660). A
        retry is recognised by the epoch one below the coordinator's (or, after an overflow, the
        previous producer id at Short.MaxValue - 1). Empty, CompleteCommit and CompleteAbort accept
        an abort with the current epoch: it bumps the epoch without markers. Checked as Kafka, in
        this order: producer id, a pending transition (CONCURRENT_TRANSACTIONS, KAFKA-18464), the
        epoch by state (PRODUCER_FENCED), then the state table:

        ==============  =============  ===============  =============  ===============
        state           abort (retry)  abort (current)  commit (retry) commit (current)
        ==============  =============  ===============  =============  ===============
        Empty           FENCED         bump             FENCED         INVALID_TXN_STATE
        CompleteAbort   NONE           bump             INVALID        INVALID_TXN_STATE
        CompleteCommit  INVALID        bump             NONE           INVALID_TXN_STATE
        ==============  =============  ===============  =============  ===============
        """
        if not tid:
            return ErrorCode.INVALID_REQUEST, False, None
        error = self._shard.owner_error(tid)
        if error is not None:
            return error, False, None
        m = self._shard.get(tid)
        if m is None:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, False, None
        retry_on_overflow = (m.last_producer_id == producer_id and producer_epoch == MAX_PRODUCER_EPOCH - 1
                             and m.epoch == 0)
        retry_on_bump = m.epoch == producer_epoch + 1
        if m.producer_id != producer_id and not retry_on_overflow:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, False, None
        if m.busy:
            return ErrorCode.CONCURRENT_TRANSACTIONS, False, None
        if m.state in (ONGOING, EMPTY):
            valid_epoch = producer_epoch == m.epoch
        else:  # CompleteCommit / CompleteAbort (Prepare* states are busy)
            valid_epoch = retry_on_bump or retry_on_overflow or producer_epoch == m.epoch
        if not valid_epoch:
            return ErrorCode.PRODUCER_FENCED, False, None
        retry = retry_on_bump or retry_on_overflow
        current = (m.producer_id, m.epoch)
        if m.state is ONGOING:
            return self._prepare_end_v2(m, commit, no_partition_added=False)
        if m.state is COMPLETE_COMMIT and commit and retry:
            return ErrorCode.NONE, False, current
        if m.state is COMPLETE_ABORT and not commit and retry:
            return ErrorCode.NONE, False, current
        if not commit and not retry:
            return self._prepare_end_v2(m, False, no_partition_added=True)
        log.info("transactional id %s: EndTxn v5 %s in state %s", tid, "commit" if commit else "abort", m.state)
        return ErrorCode.INVALID_TXN_STATE, False, None

    def _prepare_end_v2(self, m: TxnMetadata, commit: bool, *, no_partition_added: bool
                        ) -> tuple[ErrorCode, bool, tuple[int, int] | None]:
        """Kafka's prepareAbortOrCommit for a TV2 client: the epoch bumped, a new producer id if
        that exhausts the epochs; markers go out with the bumped epoch."""
        next_id = NO_PRODUCER_ID
        if is_epoch_exhausted(m.epoch):
            next_id = self._allocate()
            if isinstance(next_id, ErrorCode):
                return next_id, False, None
        now = self._shard.now_ms
        event = TxnEvent.COMMIT if commit else TxnEvent.ABORT
        transit = m.transit(state=PREPARE_COMMIT if commit else PREPARE_ABORT, producer_epoch=m.epoch + 1,
                            last_producer_epoch=m.epoch, next_producer_id=next_id, client_txn_version=TV2,
                            txn_start_ms=now if no_partition_added else m.txn_start_ms, last_update_ms=now)
        self._prepare_end(m, transit, (event,), commit=commit)
        answer = (next_id, 0) if next_id != NO_PRODUCER_ID else (transit.producer_id, transit.producer_epoch)
        return ErrorCode.NONE, True, answer

    def _allocate(self) -> int | ErrorCode:
        """A new producer id, or the error to answer with."""
        if self._allocate_producer_id is None:
            return ErrorCode.UNKNOWN_SERVER_ERROR
        return allocate_producer_id(self._allocate_producer_id)

    def fence_and_abort(self, m: TxnMetadata) -> None:
        """Kafka's prepareFenceProducerEpoch followed by endTransaction(ABORT, isFromClient=false):
        PrepareAbort with the epoch bumped, so the producer of the ongoing transaction is fenced.
        A bumped epoch whose record was not written is reused (Kafka's hasFailedEpochFence)."""
        if m.fence_epoch is None and m.producer_epoch >= MAX_PRODUCER_EPOCH:
            # never happens: clients get at most Short.MaxValue - 1 (Kafka throws here too)
            raise RuntimeError(f"cannot fence producer {m.producer_id} of {m.transactional_id}: epoch {m.epoch}")
        # a fence whose record could not be written is retried with the same bumped epoch
        # (Kafka's hasFailedEpochFence), also when that epoch is Short.MaxValue
        bumped = m.producer_epoch + 1 if m.fence_epoch is None else m.fence_epoch
        changes: dict = dict(client_txn_version=0)   # TV0/TV1 abort (Kafka's endTransactionWithTV1)
        if supports_epoch_bump(self._shard.transaction_version()):
            # the coordinator's own abort follows the cluster's transaction.version (Kafka passes
            # transactionVersionLevel): a TV2 abort, the fence's bump not bumped again
            # (KAFKA-19367), and a new producer id if the epoch was exhausted (KAFKA-20090)
            changes = dict(client_txn_version=TV2)
            if is_epoch_exhausted(m.producer_epoch) and m.next_producer_id == NO_PRODUCER_ID:
                next_id = self._allocate()
                if not isinstance(next_id, ErrorCode):
                    changes["next_producer_id"] = next_id
        m.fence_epoch = bumped
        m.last_producer_epoch = NO_PRODUCER_EPOCH
        transit = m.transit(producer_epoch=bumped, last_producer_epoch=NO_PRODUCER_EPOCH, state=PREPARE_ABORT,
                            last_update_ms=self._shard.now_ms, **changes)
        log.info("transactional id %s: fencing producer id %d epoch %d, aborting its transaction with epoch %d",
                 m.transactional_id, m.producer_id, m.producer_epoch, bumped)
        self._prepare_end(m, transit, (TxnEvent.FENCE_EPOCH, TxnEvent.ABORT), commit=False, fence=True)

    def _prepare_end(self, m: TxnMetadata, transit: _Transit, events: tuple[TxnEvent, ...], *, commit: bool,
                     fence: bool = False) -> None:
        """Write PrepareCommit/PrepareAbort and ask for the markers (written once it is appended)."""
        targets = frozenset(tp for tp in transit.partitions if self._partition_exists(*tp))
        self._shard.write(m, transit, events, fence=fence, marker_partitions=targets)
        if targets:
            self._send_markers(m, targets, transit.producer_id, transit.producer_epoch, commit,
                               transit.client_txn_version)

    def _send_markers(self, m: TxnMetadata, partitions: Iterable[TopicPartition], producer_id: int,
                      producer_epoch: int, commit: bool, version: int | None = None) -> None:
        """Ask for markers; ``version``: the transaction version they carry (that of the Prepare*
        being written, else the metadata's)."""
        version = m.client_txn_version if version is None else version
        parts = sorted(partitions)
        m.markers_in_flight.update(parts)
        coordinator_epoch = self._shard.coordinator_epoch(m.partition)
        self._shard.add_marker(MarkerRequest(m.transactional_id, producer_id, producer_epoch,
                                             0 if coordinator_epoch is None else coordinator_epoch, commit, parts,
                                             transaction_version=version))

    def resume_markers(self, m: TxnMetadata) -> None:
        """A Prepare* transaction whose markers are not all written (after a load): markers to
        every partition that still exists, or the completion record if there is none."""
        m.markers_aborted = False
        m.markers_remaining = {tp for tp in m.partitions if self._partition_exists(*tp)}
        m.markers_in_flight.clear()
        if m.markers_remaining:
            self._send_markers(m, m.markers_remaining, m.producer_id, m.producer_epoch, m.state is PREPARE_COMMIT)
        else:
            self._write_completion(m)

    def _write_completion(self, m: TxnMetadata) -> None:
        """Kafka's prepareComplete: CompleteCommit/CompleteAbort, no partitions; a TV2 transaction
        whose bump exhausted the epochs moves to its next producer id at epoch 0 (the previous
        epoch stays Short.MaxValue - 1, the last one the client saw)."""
        changes = {}
        if supports_epoch_bump(m.client_txn_version) and m.next_producer_id != NO_PRODUCER_ID:
            changes = dict(producer_id=m.next_producer_id, producer_epoch=0)
        transit = m.transit(state=COMPLETE_COMMIT if m.state is PREPARE_COMMIT else COMPLETE_ABORT,
                            partitions=frozenset(), last_update_ms=self._shard.now_ms,
                            next_producer_id=NO_PRODUCER_ID, **changes)
        self._shard.write(m, transit, (TxnEvent.MARKERS_WRITTEN,), completion=True)

    def markers_written(self, transactional_id: str, producer_id: int, producer_epoch: int,
                        errors: dict[tuple[str, int], int], now_ms: int, *,
                        coordinator_epoch: int | None = None) -> Result:
        """Every partition of a :class:`MarkerRequest` was tried: ``errors`` has the error code of
        each (0 = marker written). Retriable errors are retried after
        :data:`MARKER_RETRY_BACKOFF_MS`; once every partition has its marker the Complete* record
        is written. INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED stop the sending (a
        newer coordinator or producer epoch owns the transaction), as Kafka."""
        shard = self._shard
        shard.begin(now_ms)
        m = shard.get(transactional_id)
        if (m is None or m.state not in PREPARE_STATES or m.producer_id != producer_id
                or m.producer_epoch != producer_epoch
                or (coordinator_epoch is not None and shard.coordinator_epoch(m.partition) != coordinator_epoch)):
            log.info("transactional id %s: markers for producer id %d epoch %d answered, no longer expected",
                     transactional_id, producer_id, producer_epoch)
            return shard.end()
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
            shard.cancel_retry(transactional_id)
        elif not m.markers_remaining and not m.markers_in_flight:
            if m.pending is None:
                self._write_completion(m)
        elif retry:
            shard.schedule_retry(transactional_id, now_ms + MARKER_RETRY_BACKOFF_MS)
        return shard.end()

    def retry_markers(self, tid: str) -> None:
        """The retry of ``tid`` is due: resend the markers not written nor in flight, or write the
        completion record once every marker is written (called inside a call of the shard)."""
        m = self._shard.get(tid)
        if m is None or m.state not in PREPARE_STATES or m.pending is not None or m.markers_aborted:
            return
        m.markers_remaining = {tp for tp in m.markers_remaining if self._partition_exists(*tp)}
        to_send = m.markers_remaining - m.markers_in_flight
        if to_send:
            self._send_markers(m, to_send, m.producer_id, m.producer_epoch, m.state is PREPARE_COMMIT)
        elif not m.markers_remaining and not m.markers_in_flight:
            self._write_completion(m)
