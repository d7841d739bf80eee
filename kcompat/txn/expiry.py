"""What the transaction coordinator does as time passes (Kafka's TransactionCoordinator scheduled
tasks): resending markers and completion records whose retry is due, aborting transactions past
their timeout (``transaction.abort.timed.out.transaction.cleanup.interval.ms``, KIP-98) and
removing transactional ids idle longer than ``transactional.id.expiration.ms``
(``transaction.remove.expired.transaction.cleanup.interval.ms``; Kafka's
TransactionStateManager.removeExpiredTransactionalIds). Composed into
:class:`kcompat.txn.coordinator.TransactionCoordinator`."""

from __future__ import annotations

from typing import Callable

from kcompat.txn.coordinator_types import ONGOING, Result, TxnConfig, TxnMetadata, log
from kcompat.txn.shard import TxnShard
from kcompat.txn.state import EXPIRATION_ALLOWED, TxnEvent


class TxnExpiry:
    """The coordinator's timers, run by :meth:`poll`.

    Collaborators: the ``shard`` (metadata, timers, the Result being built);
    ``fence_and_abort(m)`` and ``retry_markers(transactional_id)`` from
    :class:`kcompat.txn.completion.TxnCompletion`.
    """

    def __init__(self, shard: TxnShard, config: TxnConfig, *, fence_and_abort: Callable[[TxnMetadata], None],
                 retry_markers: Callable[[str], None]) -> None:
        self._shard = shard
        self._expiration_ms = config.transactional_id_expiration_ms
        self._fence_and_abort = fence_and_abort
        self._retry_markers = retry_markers

    def poll(self, now_ms: int) -> Result:
        """Resend markers and completions due, abort transactions past their timeout (every
        ``abort_timed_out_interval_ms``) and expire idle transactional ids (every
        ``remove_expired_interval_ms``). Nothing happens while no partition is owned or after
        shutdown."""
        shard = self._shard
        shard.begin(now_ms)
        if shard.active and shard.owns_any():
            shard.ensure_timers(now_ms)
            for tid in shard.due_retries(now_ms):
                shard.cancel_retry(tid)
                self._retry_markers(tid)
            # each timer moves on only once its run completed (if a run raises, the next poll retries it)
            if shard.abort_cleanup_due(now_ms):
                self._abort_timed_out_transactions(now_ms)
                shard.abort_cleanup_done(now_ms)
            if shard.expire_cleanup_due(now_ms):
                self._expire_transactional_ids(now_ms)
                shard.expire_cleanup_done(now_ms)
        return shard.end()

    def _abort_timed_out_transactions(self, now_ms: int) -> None:
        """Kafka's abortTimedOutTransactions: Ongoing past txn start + timeout, no pending transition."""
        for m in self._shard.transactions():
            if (m.state is ONGOING and not m.busy and self._shard.owns(m.partition)
                    and m.txn_start_ms + m.timeout_ms < now_ms):
                log.info("transactional id %s: transaction of producer id %d epoch %d timed out after %d ms",
                         m.transactional_id, m.producer_id, m.epoch, m.timeout_ms)
                self._fence_and_abort(m)

    def _expire_transactional_ids(self, now_ms: int) -> None:
        """Kafka's removeExpiredTransactionalIds: tombstones for ids idle longer than
        ``transactional.id.expiration.ms`` (Empty, CompleteCommit or CompleteAbort)."""
        cutoff = now_ms - self._expiration_ms
        for m in self._shard.transactions():
            if (m.visible and m.pending is None and m.state in EXPIRATION_ALLOWED and self._shard.owns(m.partition)
                    and m.last_update_ms <= cutoff):
                self._shard.write(m, None, (TxnEvent.EXPIRE,))
