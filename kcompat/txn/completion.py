"""How transactions end, for the transaction coordinator: EndTxn, the abort that fences a
producer, COMMIT/ABORT markers and their retries, and the CompleteCommit/CompleteAbort record
(Kafka's TransactionCoordinator.endTransaction, the bookkeeping half of
TransactionMarkerChannelManager and TransactionMarkerRequestCompletionHandler; KIP-98).
Composed into :class:`kcompat.txn.coordinator.TransactionCoordinator`."""

from __future__ import annotations

from typing import Callable, Iterable

from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.end_txn import EndTxnResponse
from kcompat.txn.coordinator_types import (
    log, MARKER_RETRY_BACKOFF_MS, MAX_PRODUCER_EPOCH, NO_PRODUCER_EPOCH, ONGOING, PREPARE_COMMIT, PREPARE_ABORT,
    COMPLETE_COMMIT, COMPLETE_ABORT, TopicPartition, _MARKER_DONE, _MARKER_ABORT_SENDING, _MARKER_RETRIABLE,
    MarkerRequest, Result, _Transit, TxnMetadata,
)
from kcompat.txn.shard import TxnShard
from kcompat.txn.state import PREPARE_STATES, TxnEvent


class TxnCompletion:
    """EndTxn, fencing aborts, markers and completion records.

    Collaborators: the ``shard`` and ``partition_exists(topic, partition)`` (markers go only to
    partitions that still exist). Used by the other parts through :meth:`fence_and_abort`
    (InitProducerId during a transaction, transaction timeouts), :meth:`resume_markers` (loading)
    and :meth:`retry_markers` (the retry timer).
    """

    def __init__(self, shard: TxnShard, *, partition_exists: Callable[[str, int], bool]) -> None:
        self._shard = shard
        self._partition_exists = partition_exists

    # ------------------------------------------------------------------------------------------
    # EndTxn and markers
    # ------------------------------------------------------------------------------------------

    def end_txn(self, reply_to, req, version: int, now_ms: int) -> Result:
        """EndTxn (Kafka 3.x semantics, transaction.version 0/1, also for v5): PrepareCommit or
        PrepareAbort, answered once that record is appended, then markers. Errors:
        INVALID_REQUEST, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
        INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2),
        CONCURRENT_TRANSACTIONS, INVALID_TXN_STATE."""
        self._shard.begin(now_ms)
        tid = req.transactional_id
        error, wrote = self._end_txn(tid, req.producer_id, req.producer_epoch, bool(req.committed))

        def respond(e: ErrorCode) -> EndTxnResponse:
            if version < 2 and e is ErrorCode.PRODUCER_FENCED:
                e = ErrorCode.INVALID_PRODUCER_EPOCH
            return EndTxnResponse(throttle_time_ms=0, error_code=int(e))

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
            transit = m.transit(state=PREPARE_COMMIT if commit else PREPARE_ABORT, last_update_ms=self._shard.now_ms)
            self._prepare_end(m, transit, (event,), commit=commit)
            return ErrorCode.NONE, True
        if (m.state is COMPLETE_COMMIT and commit) or (m.state is COMPLETE_ABORT and not commit):
            return ErrorCode.NONE, False  # a retry of an EndTxn that completed
        log.info("transactional id %s: EndTxn %s in state %s", tid, "commit" if commit else "abort", m.state)
        return ErrorCode.INVALID_TXN_STATE, False

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
        m.fence_epoch = bumped
        m.last_producer_epoch = NO_PRODUCER_EPOCH
        transit = m.transit(producer_epoch=bumped, last_producer_epoch=NO_PRODUCER_EPOCH, state=PREPARE_ABORT,
                            last_update_ms=self._shard.now_ms)
        log.info("transactional id %s: fencing producer id %d epoch %d, aborting its transaction with epoch %d",
                 m.transactional_id, m.producer_id, m.producer_epoch, bumped)
        self._prepare_end(m, transit, (TxnEvent.FENCE_EPOCH, TxnEvent.ABORT), commit=False, fence=True)

    def _prepare_end(self, m: TxnMetadata, transit: _Transit, events: tuple[TxnEvent, ...], *, commit: bool,
                     fence: bool = False) -> None:
        """Write PrepareCommit/PrepareAbort and ask for the markers (written once it is appended)."""
        targets = frozenset(tp for tp in transit.partitions if self._partition_exists(*tp))
        self._shard.write(m, transit, events, fence=fence, marker_partitions=targets)
        if targets:
            self._send_markers(m, targets, transit.producer_id, transit.producer_epoch, commit)

    def _send_markers(self, m: TxnMetadata, partitions: Iterable[TopicPartition], producer_id: int,
                      producer_epoch: int, commit: bool) -> None:
        parts = sorted(partitions)
        m.markers_in_flight.update(parts)
        coordinator_epoch = self._shard.coordinator_epoch(m.partition)
        self._shard.add_marker(MarkerRequest(m.transactional_id, producer_id, producer_epoch,
                                             0 if coordinator_epoch is None else coordinator_epoch, commit, parts))

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
        """Kafka's prepareComplete: CompleteCommit/CompleteAbort, no partitions."""
        transit = m.transit(state=COMPLETE_COMMIT if m.state is PREPARE_COMMIT else COMPLETE_ABORT,
                            partitions=frozenset(), last_update_ms=self._shard.now_ms)
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
