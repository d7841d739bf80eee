"""How transactions end, for the transaction coordinator: EndTxn, COMMIT/ABORT markers and their
retries, transaction timeouts and transactional-id expiration, and DescribeTransactions /
ListTransactions (KIP-664). Mixed into :class:`kcompat.txn.coordinator.TransactionCoordinator`."""

from __future__ import annotations

from typing import Iterable

from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.describe_transactions import DescribeTransactionsResponse
from kcompat.protocol.messages.end_txn import EndTxnResponse
from kcompat.protocol.messages.list_transactions import ListTransactionsResponse
from kcompat.txn.coordinator_types import (
    log, MARKER_RETRY_BACKOFF_MS, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT,
    TopicPartition, _MARKER_DONE, _MARKER_ABORT_SENDING, _MARKER_RETRIABLE, MarkerRequest, Result, _Transit,
    TxnMetadata,
)
from kcompat.txn.state import EXPIRATION_ALLOWED, PREPARE_STATES, TxnEvent, TxnState


class TxnCompletionMixin:
    """EndTxn and markers, timeouts, DescribeTransactions and ListTransactions."""

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
