"""The replication role of a hosted partition: leader or follower (Kafka ``kafka.cluster.Partition``
``makeLeader`` / ``makeFollower``, ``fetchRecords`` for follower fetches, ``checkEnoughReplicasReachOffset``
for acks=all, ``maybeShrinkIsr`` / ``maybeExpandIsr``).

Mixed into :class:`kcompat.isr.partition.Partition`. A partition whose only replica is this
broker (replication factor 1) is *solo*: its high watermark is its log end offset and nothing
here costs anything on the append path. Otherwise:

- as **leader** a :class:`~kcompat.isr.replica_state.ReplicaState` tracks each follower's log end
  offset (from its Fetch requests) and the ISR; the HW is the smallest LEO of the (maximal) ISR and
  never advances while the ISR is below the effective ``min.insync.replicas``; acks=all produces
  and coordinator writes wait in :meth:`ReplicationMixin.wait_for_replication`; ISR changes are
  proposed through ``isr_change_listener`` (the broker sends AlterPartition to the controller);
- as **follower** the log is written only by the replica fetcher (``append_as_follower``,
  :meth:`ReplicationMixin.truncate_to`) and the HW is the leader's, capped at the local LEO.

Offsets are Kafka offsets; times are milliseconds.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable, Iterable

from kcompat.isr.replica_state import PendingIsrChange, ReplicaState
from kcompat.isr.storage_errors import STORAGE_ERRORS
from kcompat.log import OffsetOutOfRangeError
from kcompat.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("kcompat.isr")

NO_LEADER = -1

# AlterPartition answers meaning this leader's view of the partition is stale: the proposal stays
# in flight (no new ones) until the metadata brings the partition's new state (Kafka
# ``Partition.handleAlterPartitionError``: no retry for these)
STALE_STATE_ERRORS = frozenset({
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_UPDATE_VERSION, ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.INVALID_REQUEST,
    ErrorCode.NEW_LEADER_ELECTED,   # the change completed a reassignment that moved leadership away
})


class ReplicationMixin:
    """Leader/follower state of a partition; see the module docstring. Expects ``self.log``,
    ``self.leader_epoch``, ``self.producer_state``, ``self._wake()`` and
    ``self._load_producer_state()`` from :class:`~kcompat.isr.partition.Partition`."""

    def _init_replication(self, local_id: int, high_watermark: int | None) -> None:
        self.local_id = local_id
        self.leader_id = local_id          # until the metadata says otherwise (single node: always)
        self.replicas: tuple[int, ...] = (local_id,)
        self.replica_state: ReplicaState | None = None
        self._solo = True
        # the HW while not leading (and the starting HW of a new leader): the checkpointed one
        self._follower_hw = self.log.log_end_offset if high_watermark is None else \
            min(high_watermark, self.log.log_end_offset)
        self._replication_waiters: list[tuple[int, asyncio.Future]] = []
        # the topic's min.insync.replicas, given with each make_leader (config changes re-apply it)
        self.min_insync_replicas = 1
        # (partition, pending change) -> None: send AlterPartition (set by the ReplicaManager)
        self.isr_change_listener: Callable[["ReplicationMixin", PendingIsrChange], None] | None = None

    # -- role ------------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_id

    @property
    def high_watermark(self) -> int:
        """HW: a solo partition's LEO; a leader's smallest (maximal) ISR LEO; a follower's copy of
        the leader's, capped at its own LEO."""
        if self._solo:
            return self.log.log_end_offset
        rs = self.replica_state
        if rs is not None:
            return rs.high_watermark
        return min(self._follower_hw, self.log.log_end_offset)

    @property
    def isr(self) -> frozenset[int]:
        """The committed ISR as this broker knows it (leader), else just this broker if solo."""
        rs = self.replica_state
        if rs is not None:
            return rs.isr
        return frozenset((self.local_id,)) if self._solo else frozenset()

    def make_leader(self, *, leader_epoch: int, partition_epoch: int, replicas: Iterable[int], isr: Iterable[int],
                    now_ms: int, min_insync_replicas: int = 1, replica_lag_time_max_ms: int = 30_000,
                    is_eligible: Callable[[int], bool] | None = None) -> bool:
        """This broker leads the partition at ``leader_epoch`` (Kafka ``Partition.makeLeader``): the
        epoch is assigned at the LEO in the leader-epoch cache, followers are tracked, the HW
        starts from the current one. Called again for every metadata change while leading (a new
        ISR or partition epoch). Returns True if this broker was not leading before."""
        replicas = tuple(replicas)
        self.min_insync_replicas = min_insync_replicas
        new_leader = not self.is_leader or self.leader_epoch != leader_epoch
        was_leader = self.is_leader and self.replica_state is not None
        start_hw = self.high_watermark
        self.leader_id = self.local_id
        self.leader_epoch = leader_epoch
        self.replicas = replicas
        leo = self.log.log_end_offset
        cache = self.log.leader_epoch_cache
        if leader_epoch >= 0 and (cache.latest_epoch is None or cache.latest_epoch < leader_epoch):
            cache.assign(leader_epoch, leo)
        if len(replicas) <= 1:
            self._solo = True
            self.replica_state = None
            self._complete_replication_waiters()
            self._wake()
            return new_leader
        self._solo = False
        rs = self.replica_state
        if rs is None:
            rs = ReplicaState(self.local_id, replicas=replicas, isr=isr, leader_epoch=leader_epoch,
                              partition_epoch=partition_epoch, leader_epoch_start_offset=leo,
                              high_watermark=start_hw, leader_log_end_offset=lambda: self.log.log_end_offset,
                              min_insync_replicas=min_insync_replicas,
                              replica_lag_time_max_ms=replica_lag_time_max_ms, now_ms=now_ms,
                              is_eligible=is_eligible)
            self.replica_state = rs
        else:
            rs.min_insync_replicas = min_insync_replicas
            rs.replica_lag_time_max_ms = replica_lag_time_max_ms
            if is_eligible is not None:
                rs.is_eligible = is_eligible
            if new_leader or not was_leader:
                rs.become_leader(leader_epoch=leader_epoch, partition_epoch=partition_epoch, replicas=replicas,
                                 isr=isr, leader_epoch_start_offset=leo, now_ms=now_ms, new_leader=True)
            elif partition_epoch > rs.partition_epoch or tuple(replicas) != rs.replicas:
                before = frozenset(rs.isr)
                rs.update_assignment(replicas, isr, partition_epoch)
                # the controller changed the ISR of a partition we lead (a follower fenced or
                # shut down): counted with the leader's own shrinks and expansions
                self._count_isr_change(before, rs.isr)
        rs.maybe_increment_high_watermark(now_ms)
        self._complete_replication_waiters()
        self._wake()
        return new_leader

    def make_follower(self, *, leader_id: int, leader_epoch: int, replicas: Iterable[int]) -> bool:
        """Another broker (or none: ``leader_id`` -1) leads at ``leader_epoch`` (Kafka
        ``Partition.makeFollower``): leader state dropped, waiting acks=all produces fail with
        NOT_LEADER_OR_FOLLOWER, the HW kept as the starting point. Returns True if the leader or
        epoch changed (the fetcher must restart from the new leader)."""
        replicas = tuple(replicas)
        changed = leader_id != self.leader_id or leader_epoch != self.leader_epoch
        if len(replicas) > 1 or leader_id not in (NO_LEADER, self.local_id):
            self._follower_hw = self.high_watermark
            self._solo = False
        self.replica_state = None
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.replicas = replicas
        self._complete_replication_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        self._wake()
        return changed

    # -- leader: follower fetches ----------------------------------------------------------------

    def read_for_follower(self, replica_id: int, *, fetch_offset: int, log_start_offset: int, last_fetched_epoch: int,
                          max_bytes: int, now_ms: int, broker_epoch: int = -1, zero_copy: bool = False):
        """A follower's Fetch of this partition (Kafka ``Partition.fetchRecords`` for a replica):
        ``(records, diverging)``. ``diverging`` is ``(epoch, end offset)`` when the follower's
        ``last_fetched_epoch`` / ``fetch_offset`` do not match this log (KIP-320): then no records
        and no fetch-state update. Otherwise records up to the LEO (not the HW), the follower's
        position recorded, the HW advanced and an ISR expansion proposed if it caught up.
        ``zero_copy``: the records may be a FileRecords range (:meth:`kcompat.log.Log.read`).

        Raises KafkaError(NOT_LEADER_OR_FOLLOWER) if not leading, (OFFSET_OUT_OF_RANGE) outside
        [log start, LEO], (UNKNOWN_LEADER_EPOCH) for a replica outside the assignment."""
        if not self.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                             f"Broker {self.local_id} is not the leader of {self.topic}-{self.partition_id}")
        self.check_online()
        leo = self.log.log_end_offset
        if last_fetched_epoch >= 0:
            try:
                diverging = self.log.leader_epoch_cache.diverging_epoch(last_fetched_epoch, fetch_offset,
                                                                        self.log.log_start_offset, leo)
            except OffsetOutOfRangeError as e:
                raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE, str(e)) from None
            if diverging is not None:
                return b"", diverging
        if self.log.config.remote_storage_enable and \
                self.log.log_start_offset <= fetch_offset < self.log.local_log_start_offset:
            raise KafkaError(ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE,
                             f"Fetch offset {fetch_offset} of {self.topic}-{self.partition_id} is only in remote "
                             f"storage; the local log starts at {self.log.local_log_start_offset}")
        if fetch_offset > leo or fetch_offset < self.log.log_start_offset:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"Fetch offset {fetch_offset} is out of range [{self.log.log_start_offset}, {leo}] "
                             f"of {self.topic}-{self.partition_id}")
        try:
            records = self.log.read(fetch_offset, max_bytes, max_offset=leo, min_one_batch=True,
                                    zero_copy=zero_copy) if fetch_offset < leo else b""
        except OffsetOutOfRangeError as e:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE, str(e)) from None
        except STORAGE_ERRORS as e:
            raise self.storage_error(e) from e
        rs = self.replica_state
        if rs is not None:
            if rs.update_follower_fetch(replica_id, fetch_offset=fetch_offset, log_start_offset=log_start_offset,
                                        fetch_time_ms=now_ms, leader_end_offset=leo, broker_epoch=broker_epoch):
                self._on_high_watermark_advanced()
            if rs.can_join_isr(replica_id):
                self._propose_isr_change(rs.prepare_isr_expand(replica_id))
        return records, None

    # -- leader: ISR changes ---------------------------------------------------------------------

    def maybe_shrink_isr(self, now_ms: int) -> bool:
        """Propose removing ISR followers that have not caught up for ``replica.lag.time.max.ms``
        (Kafka ``Partition.maybeShrinkIsr``, run periodically). True if a change was proposed."""
        rs = self.replica_state
        if rs is None or not self.is_leader:
            return False
        out = rs.out_of_sync_replicas(now_ms)
        if not out:
            return False
        log.info("%s: shrinking ISR %s: replicas %s out of sync", self, sorted(rs.isr), sorted(out))
        self._propose_isr_change(rs.prepare_isr_shrink(out))
        return True

    def _count_isr_change(self, before: Iterable[int], after: Iterable[int]) -> None:
        """A committed ISR change of a partition this broker leads, for the broker's ISR shrink and
        expand counters (``self.stats``, set by the ReplicaManager on a Partition)."""
        stats = getattr(self, "stats", None)
        before, after = frozenset(before), frozenset(after)
        if stats is not None and before != after:
            stats.isr_changed(before, after)

    def _propose_isr_change(self, change: PendingIsrChange) -> None:
        listener = self.isr_change_listener
        if listener is None:
            self.replica_state.isr_change_failed()
            return
        listener(self, change)

    def on_isr_change_result(self, error: ErrorCode, *, isr: Iterable[int] | None = None, partition_epoch: int = -1,
                             leader_epoch: int = -1, now_ms: int = 0) -> None:
        """The controller's answer to our AlterPartition: install the committed ISR (and advance
        the HW); on an error that says our partition state is stale (:data:`STALE_STATE_ERRORS`)
        keep the proposal in flight until the metadata updates the partition; on any other error
        drop it so a new one may be made."""
        rs = self.replica_state
        if rs is None or leader_epoch not in (-1, self.leader_epoch) and error == ErrorCode.NONE:
            return
        if error == ErrorCode.NONE and isr is not None:
            self._count_isr_change(rs.isr, isr)
            if rs.isr_change_committed(isr, partition_epoch, now_ms):
                self._on_high_watermark_advanced()
            elif rs.pending is not None and partition_epoch <= rs.partition_epoch:
                rs.isr_change_failed()
            self._complete_replication_waiters()
        elif error in STALE_STATE_ERRORS:
            pending = rs.pending
            log.info("%s: AlterPartition answered %s for leader epoch %s, partition epoch %s; waiting for the "
                     "metadata before proposing again", self, error.name,
                     pending.leader_epoch if pending else "-", pending.partition_epoch if pending else "-")
        else:
            rs.isr_change_failed()

    # -- leader: acks=all ------------------------------------------------------------------------

    async def wait_for_replication(self, required_offset: int, timeout_ms: int) -> ErrorCode:
        """Wait until every ISR member has the records below ``required_offset`` (the HW reached
        it): NONE; NOT_ENOUGH_REPLICAS_AFTER_APPEND if by then the ISR is below
        ``min.insync.replicas``; NOT_LEADER_OR_FOLLOWER if leadership moves away;
        REQUEST_TIMED_OUT after ``timeout_ms`` (Kafka ``DelayedProduce``). Immediate on a solo
        partition."""
        if self._solo:
            return ErrorCode.NONE
        rs = self.replica_state
        if rs is None or not self.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        done, err = rs.check_enough_replicas_reach_offset(required_offset)
        if done:
            return err
        fut = asyncio.get_running_loop().create_future()
        entry = (required_offset, fut)
        self._replication_waiters.append(entry)
        try:
            return await asyncio.wait_for(fut, max(timeout_ms, 0) / 1000.0)
        except asyncio.TimeoutError:
            return ErrorCode.REQUEST_TIMED_OUT
        finally:
            try:
                self._replication_waiters.remove(entry)
            except ValueError:
                pass

    def _on_high_watermark_advanced(self) -> None:
        self._complete_replication_waiters()
        self._wake()

    def _complete_replication_waiters(self, error: ErrorCode | None = None) -> None:
        if not self._replication_waiters:
            return
        rs = self.replica_state
        keep = []
        for required, fut in self._replication_waiters:
            if fut.done():
                continue
            if error is not None:
                fut.set_result(error)
            elif rs is None:
                fut.set_result(ErrorCode.NONE if self._solo and self.is_leader else ErrorCode.NOT_LEADER_OR_FOLLOWER)
            else:
                done, err = rs.check_enough_replicas_reach_offset(required)
                if done:
                    fut.set_result(err)
                else:
                    keep.append((required, fut))
        self._replication_waiters[:] = keep

    def check_min_isr(self, required_acks: int, min_insync_replicas: int | None = None) -> None:
        """acks=all on a committed ISR smaller than the effective ``min.insync.replicas`` (default:
        the topic's, as given to :meth:`make_leader`): raise KafkaError(NOT_ENOUGH_REPLICAS) before
        appending (Kafka ``Partition.appendRecordsToLeader``). Effective: capped at the number of
        assigned replicas (Kafka's ``effectiveMinIsr``), so a topic of replication factor 1 with
        ``min.insync.replicas=2`` takes acks=all produces, as Kafka 3.9.2 and 4.3.1 do."""
        if required_acks != -1:
            return
        if min_insync_replicas is None:
            min_insync_replicas = self.min_insync_replicas
        min_isr = min(min_insync_replicas, max(1, len(self.replicas)))
        if len(self.isr) < min_isr:
            raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS,
                             f"The size of the current ISR {sorted(self.isr)} is insufficient to satisfy the "
                             f"min.isr requirement of {min_isr} for partition "
                             f"{self.topic}-{self.partition_id}")

    def after_leader_append(self, now_ms: int) -> None:
        """Re-evaluate the HW after an append on a replicated leader (the ISR may be just us)."""
        rs = self.replica_state
        if rs is not None and rs.maybe_increment_high_watermark(now_ms):
            self._complete_replication_waiters()

    # -- follower --------------------------------------------------------------------------------

    def set_follower_high_watermark(self, high_watermark: int) -> None:
        """The leader's HW from a fetch response (capped at the LEO when read)."""
        if self.replica_state is None:
            if high_watermark != self._follower_hw:
                self._follower_hw = high_watermark
                self._wake()

    def truncate_to(self, offset: int, now_ms: int) -> None:
        """Follower truncation to ``offset`` (KIP-101/KIP-320): log, leader epochs and producer
        state (reloaded from the latest snapshot at or below the new LEO). At or past the LEO the
        log stays, but leader epochs starting at or above the LEO are dropped, as Kafka's
        ``UnifiedLog.truncateTo`` does: this replica may have started an epoch as leader and lost
        leadership before appending to it; the new leader never had that epoch and would answer
        every fetch carrying it as its last epoch with a diverging epoch ending at our LEO."""
        if offset >= self.log.log_end_offset:
            dropped = self.log.leader_epoch_cache.truncate_from_end(self.log.log_end_offset)
            if dropped:
                log.info("%s: dropped leader epoch(s) %s without records at the log end offset %d", self,
                         [e.epoch for e in dropped], self.log.log_end_offset)
            return
        if self.log.truncate_to(offset, now_ms=now_ms):
            log.info("%s: truncated to offset %d (log end offset now %d)", self, offset, self.log.log_end_offset)
            self.producer_state.truncate_and_reload(None)
            self._load_producer_state()
            self._follower_hw = min(self._follower_hw, self.log.log_end_offset)
            self._wake()

    def truncate_fully_and_start_at(self, offset: int, now_ms: int, *, log_start_offset: int | None = None,
                                    producer_snapshot: bytes | None = None, epochs=()) -> None:
        """Follower whose log is entirely below the leader's log start (or, tiered, its local log
        start; then ``log_start_offset`` is the leader's log start): restart empty at ``offset``.
        A tiered restart may bring the producer-state snapshot at ``offset`` and the leader epochs
        (``[(epoch, start offset)]``) from remote storage (Kafka ``buildRemoteLogAuxState``): they
        become this replica's, so idempotence and epoch checks work as if it had the whole log."""
        log.info("%s: restarting the log empty at the leader's %slog start offset %d", self,
                 "local " if log_start_offset is not None else "", offset)
        self.log.truncate_fully_and_start_at(offset, now_ms=now_ms, log_start_offset=log_start_offset)
        for epoch, start in epochs:
            if self.log.log_start_offset <= start <= offset:
                self.log.leader_epoch_cache.assign(epoch, start)
        if producer_snapshot:
            try:
                self.producer_state.truncate_and_reload(producer_snapshot)
                self.log.write_snapshot(offset, producer_snapshot)
                self._follower_hw = offset
                self._wake()
                return
            except ValueError as e:
                log.warning("%s: ignoring the remote producer snapshot at %d: %s", self, offset, e)
        self.producer_state.truncate_and_reload(None)
        self._follower_hw = offset
        self._wake()
