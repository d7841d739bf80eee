"""The state the parts of the transaction coordinator share (Kafka's TransactionStateManager, the
in-memory half): the metadata of each transactional id, which ``__transaction_state`` partitions
are owned or loading, the timers, the clock, and the Result being built by the current call.

The parts (:mod:`kcompat.txn.requests`, :mod:`kcompat.txn.completion`, :mod:`kcompat.txn.expiry`,
:mod:`kcompat.txn.describe`, :mod:`kcompat.txn.state_log`) reach this state only through the
methods of :class:`TxnShard`; :class:`kcompat.txn.coordinator.TransactionCoordinator` composes
them.
"""

from __future__ import annotations

from typing import Callable

from kcompat.protocol.errors import ErrorCode
from kcompat.txn import txn_records as rec
from kcompat.txn.coordinator_types import (
    MarkerRequest, Record, Result, TopicPartition, TxnConfig, TxnMetadata, _Pending, _Tie, _Transit, partition_for,
)
from kcompat.txn.state import TxnEvent, TxnState, next_state
from kcompat.txn.txn_records import TxnLogValue

# A reply that depends on the records of some transactional ids: those ids and how to rebuild the
# reply with the errors of the ones whose record could not be appended (see Result.ties).
Tie = tuple[tuple[str, ...], Callable[[dict[str, ErrorCode]], object]]


class TxnShard:
    """Everything the coordinator's parts share, behind methods.

    - the clock: :meth:`begin` sets the current time of a call, :attr:`now_ms` reads it;
    - the Result of the call: :meth:`write` (a transition as a ``__transaction_state`` record),
      :meth:`reply`, :meth:`add_marker`, then :meth:`end`;
    - transactional ids: :meth:`get`, :meth:`put`, :meth:`forget`, :meth:`transactions`;
    - partitions of ``__transaction_state``: :meth:`owner_error` (Kafka's getTransactionState
      errors: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS), :meth:`owns`, :meth:`own`,
      :meth:`drop_partition`, the loading buffers (:meth:`start_loading`, :meth:`buffer_loaded`,
      :meth:`finish_loading`, :meth:`cancel_loading`);
    - timers: marker/completion retries per transactional id, and the two periodic cleanups of
      Kafka (abort of timed-out transactions, removal of expired transactional ids).
    """

    def __init__(self, config: TxnConfig, transaction_version: Callable[[], int] = lambda: 0) -> None:
        self._config = config
        self._transaction_version = transaction_version
        self._txns: dict[str, TxnMetadata] = {}
        self._owned: dict[int, int] = {}  # __transaction_state partition -> coordinator epoch
        self._loading: dict[int, dict[str, TxnLogValue | None]] = {}  # partition -> last value per id
        self._retries: dict[str, int] = {}  # transactional id -> when to resend markers / completion
        self._abort_at: int | None = None
        self._expire_at: int | None = None
        self._active = True
        self._now = 0
        self._records: list[Record] = []
        self._replies: list[tuple[object, object]] = []
        self._markers: list[MarkerRequest] = []
        self._ties: list[_Tie] = []

    def transaction_version(self) -> int:
        """The cluster's finalized ``transaction.version`` now (Kafka's
        ``TransactionStateManager.transactionVersionLevel``): the coordinator's own aborts
        (timeouts, fencing) follow it, and from 1 on the log value is the flexible v1."""
        return self._transaction_version()

    # ------------------------------------------------------------------------------------------
    # the clock and the Result of the current call
    # ------------------------------------------------------------------------------------------

    @property
    def now_ms(self) -> int:
        """The time of the current (or last) call."""
        return self._now

    def begin(self, now_ms: int) -> None:
        """Start a call at ``now_ms``, with an empty Result."""
        self._now = now_ms
        self._records, self._replies, self._markers, self._ties = [], [], [], []

    def end(self) -> Result:
        """The Result of the call begun by :meth:`begin`."""
        result = Result(self._records, self._replies, self._markers, self._ties)
        self._records, self._replies, self._markers, self._ties = [], [], [], []
        return result

    def reply(self, reply_to: object, response: object, tie: Tie | None = None) -> None:
        """Send ``response`` to ``reply_to`` once the records are appended. ``tie``: the
        transactional ids whose records the reply depends on and how to rebuild it when some
        could not be appended (:meth:`kcompat.txn.state_log.TxnStateLog.append_failed`)."""
        if tie is not None and tie[0]:
            self._ties.append(_Tie(len(self._replies), tie[0], tie[1]))
        self._replies.append((reply_to, response))

    def add_marker(self, marker: MarkerRequest) -> None:
        """Ask for COMMIT/ABORT markers, written once the records are appended."""
        self._markers.append(marker)

    def write(self, m: TxnMetadata, transit: _Transit | None, events: tuple[TxnEvent, ...], *,
              fence: bool = False, completion: bool = False,
              marker_partitions: frozenset[TopicPartition] = frozenset()) -> None:
        """Emit the record of a transition of ``m`` (``transit`` None: the tombstone of an expired
        id) along ``events`` of the state table; it takes effect when replayed. Until then ``m``
        has a pending transition (Kafka's prepareTransitionTo / pendingState)."""
        assert m.pending is None, m
        # check the path against the table now rather than when the record comes back
        state = m.state
        for event in events:
            state = next_state(state, event)
        assert state is (TxnState.DEAD if transit is None else transit.state), (m, events, transit)
        key = rec.key_bytes(m.transactional_id)
        # Kafka's TransactionVersion.transactionLogValueVersion: v1 (flexible, with the client
        # transaction version) once transaction.version >= 1 is finalized, v0 before
        version = 1 if self.transaction_version() >= 1 else 0
        value = None if transit is None else rec.value_bytes(transit.log_value(), version)
        m.pending = _Pending(transit, events, key, value, fence=fence, completion=completion,
                             marker_partitions=marker_partitions)
        self._records.append(Record(m.partition, key, value, timeout_ms=m.timeout_ms if transit is None
                                    else transit.timeout_ms))

    # ------------------------------------------------------------------------------------------
    # transactional ids
    # ------------------------------------------------------------------------------------------

    def get(self, transactional_id: str) -> TxnMetadata | None:
        return self._txns.get(transactional_id)

    def put(self, m: TxnMetadata) -> None:
        """Add or replace the metadata of ``m.transactional_id``."""
        self._txns[m.transactional_id] = m

    def forget(self, transactional_id: str) -> None:
        """Drop the metadata of a transactional id and its retry."""
        self._txns.pop(transactional_id, None)
        self._retries.pop(transactional_id, None)

    def transactions(self) -> list[TxnMetadata]:
        """Every transactional id known (a copy: safe to change the map while iterating)."""
        return list(self._txns.values())

    # ------------------------------------------------------------------------------------------
    # partitions of __transaction_state
    # ------------------------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        """False after :meth:`shutdown`."""
        return self._active

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self._config.num_partitions)

    def owns(self, partition: int) -> bool:
        return partition in self._owned

    def owns_any(self) -> bool:
        return bool(self._owned)

    def coordinator_epoch(self, partition: int) -> int | None:
        """The coordinator epoch ``partition`` was loaded at (None: not owned)."""
        return self._owned.get(partition)

    def owner_error(self, transactional_id: str) -> ErrorCode | None:
        """Kafka's TransactionStateManager.getTransactionState errors: NOT_COORDINATOR (shut down
        or not owned), COORDINATOR_LOAD_IN_PROGRESS; None when this coordinator answers."""
        if not self._active:
            return ErrorCode.NOT_COORDINATOR
        partition = self.partition_for(transactional_id)
        if partition in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self._owned:
            return ErrorCode.NOT_COORDINATOR
        return None

    def own(self, partition: int, coordinator_epoch: int) -> None:
        self._owned[partition] = coordinator_epoch

    def drop_partition(self, partition: int) -> None:
        """No longer own ``partition``: its transactional ids and their retries are forgotten."""
        self._owned.pop(partition, None)
        for tid in [tid for tid, m in self._txns.items() if m.partition == partition]:
            del self._txns[tid]
            self._retries.pop(tid, None)

    def is_loading(self, partition: int) -> bool:
        return partition in self._loading

    def loading_any(self) -> bool:
        return bool(self._loading)

    def start_loading(self, partition: int) -> None:
        """Requests for ids of ``partition`` get COORDINATOR_LOAD_IN_PROGRESS from now on."""
        self._loading.setdefault(partition, {})

    def buffer_loaded(self, partition: int, transactional_id: str, value: TxnLogValue | None) -> None:
        """The latest value of ``transactional_id`` read while loading ``partition``."""
        self._loading[partition][transactional_id] = value

    def finish_loading(self, partition: int) -> dict[str, TxnLogValue | None]:
        """Stop loading ``partition``: the values buffered so far (empty if it was not loading)."""
        return self._loading.pop(partition, {})

    def cancel_loading(self, partition: int) -> None:
        self._loading.pop(partition, None)

    def shutdown(self) -> None:
        """Forget everything and answer NOT_COORDINATOR from now on."""
        self._txns.clear()
        self._owned.clear()
        self._loading.clear()
        self._retries.clear()
        self._abort_at = self._expire_at = None
        self._active = False

    # ------------------------------------------------------------------------------------------
    # timers
    # ------------------------------------------------------------------------------------------

    def schedule_retry(self, transactional_id: str, at_ms: int) -> None:
        """Resend the markers (or the completion record) of ``transactional_id`` at ``at_ms``."""
        self._retries[transactional_id] = at_ms

    def cancel_retry(self, transactional_id: str) -> None:
        self._retries.pop(transactional_id, None)

    def due_retries(self, now_ms: int) -> list[str]:
        """The transactional ids whose retry is due at ``now_ms``, earliest first (still
        scheduled: :meth:`cancel_retry` each before running it)."""
        return [tid for tid, at in sorted(self._retries.items(), key=lambda item: item[1]) if at <= now_ms]

    def retry_deadlines(self) -> dict[str, int]:
        """A copy of the retries scheduled: transactional id -> when."""
        return dict(self._retries)

    def ensure_timers(self, now_ms: int) -> None:
        """Schedule the periodic cleanups if they are not: Kafka runs both at a fixed rate, the
        first run one interval after start-up."""
        if self._abort_at is None:
            self._abort_at = now_ms + max(1, self._config.abort_timed_out_interval_ms)
        if self._expire_at is None:
            self._expire_at = now_ms + max(1, self._config.remove_expired_interval_ms)

    def abort_cleanup_due(self, now_ms: int) -> bool:
        """True when the abort of timed-out transactions is due (then run it and call
        :meth:`abort_cleanup_done`)."""
        return self._abort_at is not None and self._abort_at <= now_ms

    def abort_cleanup_done(self, now_ms: int) -> None:
        """The next abort of timed-out transactions runs ``abort_timed_out_interval_ms`` later."""
        self._abort_at = now_ms + max(1, self._config.abort_timed_out_interval_ms)

    def expire_cleanup_due(self, now_ms: int) -> bool:
        """True when the removal of expired transactional ids is due (then run it and call
        :meth:`expire_cleanup_done`)."""
        return self._expire_at is not None and self._expire_at <= now_ms

    def expire_cleanup_done(self, now_ms: int) -> None:
        """The next removal of expired transactional ids runs ``remove_expired_interval_ms`` later."""
        self._expire_at = now_ms + max(1, self._config.remove_expired_interval_ms)

    def cleanup_deadlines(self) -> tuple[int | None, int | None]:
        """When the two periodic cleanups run next: (abort of timed-out transactions, removal of
        expired transactional ids)."""
        return self._abort_at, self._expire_at

    def next_deadline(self) -> int | None:
        """The earliest time a retry or cleanup is due (cleanups count only while a partition is
        owned), or None."""
        deadlines = list(self._retries.values())
        if self._owned and self._abort_at is not None:
            deadlines.append(self._abort_at)
        if self._owned and self._expire_at is not None:
            deadlines.append(self._expire_at)
        return min(deadlines) if deadlines else None
