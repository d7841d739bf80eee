"""Leader-side replica tracking of one partition: each follower's fetch state, the ISR with its
pending AlterPartition change, the high watermark, and the acks=all / min.insync.replicas checks
(Kafka ``kafka.cluster.Replica`` / ``ReplicaState`` and the ISR half of ``kafka.cluster.Partition``;
KIP-497 maximal ISR, KIP-966 part 1 HW rule).

I/O free: no log, no clock, no network. The owner (the leader's ``Partition``) passes the time
(``now_ms``, milliseconds) and gives a callable returning its log end offset; it sends the
AlterPartition requests this class proposes and reports their outcome back. Offsets are Kafka
offsets (int64), ``-1`` means unknown (Kafka ``UnifiedLog.UnknownOffset``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from kcompat.protocol.errors import ErrorCode, KafkaError

UNKNOWN_OFFSET = -1


@dataclass
class FollowerReplica:
    """What the leader knows about follower ``replica_id`` (Kafka ``ReplicaState``).

    ``log_end_offset`` / ``log_start_offset``: from its last Fetch (the fetch offset is its LEO);
    ``last_fetch_leader_log_end_offset`` / ``last_fetch_time_ms``: the leader's LEO and the time
    at that fetch; ``last_caught_up_time_ms``: the last time t at which the follower had fetched up
    to the leader's LEO as of t (drives ISR shrink); ``broker_epoch``: from the Fetch (KIP-903),
    None until one arrived.
    """

    replica_id: int
    log_start_offset: int = UNKNOWN_OFFSET
    log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_leader_log_end_offset: int = 0
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0
    broker_epoch: int | None = None

    def update_fetch_state(self, fetch_offset: int, log_start_offset: int, fetch_time_ms: int,
                           leader_end_offset: int, broker_epoch: int = -1) -> None:
        """Record a Fetch from this follower (Kafka ``Replica.updateFetchStateOrThrow``): caught
        up now if ``fetch_offset`` >= the leader's LEO at the fetch (``leader_end_offset``, read
        before the fetch's read); caught up as of the previous fetch if ``fetch_offset`` reached
        the leader's LEO of that fetch - so a follower always one batch behind a busy leader still
        counts as caught up."""
        if fetch_offset >= leader_end_offset:
            caught_up = max(self.last_caught_up_time_ms, fetch_time_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            caught_up = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        else:
            caught_up = self.last_caught_up_time_ms
        self.log_start_offset = log_start_offset
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = max(leader_end_offset, self.last_fetch_leader_log_end_offset)
        self.last_fetch_time_ms = fetch_time_ms
        self.last_caught_up_time_ms = caught_up
        self.broker_epoch = broker_epoch

    def is_caught_up(self, leader_end_offset: int, now_ms: int, max_lag_ms: int) -> bool:
        """At the leader's LEO, or caught up within the last ``max_lag_ms`` (Kafka
        ``ReplicaState.isCaughtUp``)."""
        return leader_end_offset == self.log_end_offset or now_ms - self.last_caught_up_time_ms <= max_lag_ms

    def reset(self, now_ms: int, leader_end_offset: int, *, new_leader: bool, in_sync: bool) -> None:
        """This broker (re)became leader (Kafka ``Replica.resetReplicaState``): an ISR member
        counts as caught up now, others as never; a new leader forgets the offsets."""
        caught_up = now_ms if in_sync else 0
        if new_leader:
            self.log_start_offset = self.log_end_offset = UNKNOWN_OFFSET
            self.last_fetch_leader_log_end_offset = UNKNOWN_OFFSET
            self.last_fetch_time_ms = 0
            self.broker_epoch = None
        else:
            self.last_fetch_leader_log_end_offset = leader_end_offset
            self.last_fetch_time_ms = now_ms if in_sync else 0
        self.last_caught_up_time_ms = caught_up


@dataclass(frozen=True)
class PendingIsrChange:
    """An AlterPartition in flight (Kafka ``PendingExpandIsr`` / ``PendingShrinkIsr``):
    ``proposed_isr`` was sent with ``leader_epoch`` / ``partition_epoch``; ``maximal_isr`` is the
    ISR the HW must respect meanwhile - the proposed one for an expansion, the committed one for a
    shrink (KIP-497)."""

    kind: str   # "expand" | "shrink"
    proposed_isr: tuple[int, ...]
    maximal_isr: frozenset[int]
    leader_epoch: int
    partition_epoch: int


class ReplicaState:
    """The leader's replication state of one partition led by ``local_id``.

    ``replicas``: the assignment (leader included); ``isr``: the committed ISR; ``leader_epoch``
    and ``partition_epoch`` as in the metadata; ``leader_epoch_start_offset``: the leader's LEO
    when it took this epoch (a follower must reach it to join the ISR); ``high_watermark``: the
    HW this leader starts from (its checkpointed one); ``leader_log_end_offset()``: the leader's
    current LEO; ``is_eligible(id)``: the replica may join the ISR (KRaft: not fenced, not shutting
    down, matching broker epoch; default all).
    """

    def __init__(self, local_id: int, *, replicas: Iterable[int], isr: Iterable[int], leader_epoch: int,
                 partition_epoch: int, leader_epoch_start_offset: int, high_watermark: int,
                 leader_log_end_offset: Callable[[], int], min_insync_replicas: int = 1,
                 replica_lag_time_max_ms: int = 30_000, now_ms: int = 0,
                 is_eligible: Callable[[int], bool] | None = None) -> None:
        self.local_id = local_id
        self.min_insync_replicas = min_insync_replicas
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.is_eligible = is_eligible or (lambda _replica_id: True)
        self._leo = leader_log_end_offset
        self._hw = high_watermark
        self.followers: dict[int, FollowerReplica] = {}
        self.replicas: tuple[int, ...] = ()
        self.isr: frozenset[int] = frozenset()
        self.pending: PendingIsrChange | None = None
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.leader_epoch_start_offset = leader_epoch_start_offset
        self.become_leader(leader_epoch=leader_epoch, partition_epoch=partition_epoch, replicas=replicas,
                           isr=isr, leader_epoch_start_offset=leader_epoch_start_offset, now_ms=now_ms,
                           new_leader=True)

    # -- leadership and assignment ----------------------------------------------------------------
    def become_leader(self, *, leader_epoch: int, partition_epoch: int, replicas: Iterable[int], isr: Iterable[int],
                      leader_epoch_start_offset: int, now_ms: int, new_leader: bool) -> None:
        """Apply a leader (re-)election of this broker (Kafka ``Partition.makeLeader``): the
        assignment and ISR from the metadata, followers reset (``new_leader``: this broker was not
        leading before). The caller assigns ``leader_epoch`` at ``leader_epoch_start_offset`` (its
        LEO) in the leader-epoch cache and then calls :meth:`maybe_increment_high_watermark`."""
        self.leader_epoch = leader_epoch
        self.leader_epoch_start_offset = leader_epoch_start_offset
        self.update_assignment(replicas, isr, partition_epoch)
        leo = self._leo()
        for f in self.followers.values():
            f.reset(now_ms, leo, new_leader=new_leader, in_sync=f.replica_id in self.isr)

    def update_assignment(self, replicas: Iterable[int], isr: Iterable[int], partition_epoch: int) -> None:
        """A committed partition change (metadata, or the AlterPartition response): new replica
        set and ISR, pending change cleared (Kafka ``updateAssignmentAndIsr``). Followers keep
        their fetch state; new ones start unknown."""
        self.replicas = tuple(replicas)
        self.isr = frozenset(isr)
        self.partition_epoch = partition_epoch
        self.pending = None
        followers = [r for r in self.replicas if r != self.local_id]
        self.followers = {r: self.followers.get(r) or FollowerReplica(r) for r in followers}

    @property
    def maximal_isr(self) -> frozenset[int]:
        """The ISR the HW and acks=all respect: the committed one, widened by an expansion in
        flight (KIP-497)."""
        return self.pending.maximal_isr if self.pending is not None else self.isr

    @property
    def is_inflight(self) -> bool:
        """An AlterPartition of ours awaits its answer (no further ISR change is proposed)."""
        return self.pending is not None

    @property
    def high_watermark(self) -> int:
        """HW: offsets below it are on every member of the (maximal) ISR; never decreases here."""
        return self._hw

    @property
    def effective_min_isr(self) -> int:
        """``min.insync.replicas`` capped at the replication factor (Kafka ``effectiveMinIsr``)."""
        return min(self.min_insync_replicas, len(self.replicas))

    @property
    def under_min_isr(self) -> bool:
        return len(self.isr) < self.effective_min_isr

    # -- follower fetches -------------------------------------------------------------------------
    def follower(self, replica_id: int) -> FollowerReplica | None:
        return self.followers.get(replica_id)

    def update_follower_fetch(self, replica_id: int, *, fetch_offset: int, log_start_offset: int, fetch_time_ms: int,
                              leader_end_offset: int, broker_epoch: int = -1) -> bool:
        """A Fetch from follower ``replica_id`` at ``fetch_offset`` (its LEO); ``leader_end_offset``:
        the leader's LEO before the read. Returns True if the HW advanced (complete delayed produces
        and fetches). Kafka ``Partition.updateFollowerFetchState``, minus the ISR expansion: call
        :meth:`can_join_isr` then :meth:`prepare_isr_expand`. Raises KafkaError(UNKNOWN_LEADER_EPOCH)
        for a replica outside the assignment (Kafka's answer to a Fetch carrying a leader epoch)."""
        f = self.followers.get(replica_id)
        if f is None:
            raise KafkaError(ErrorCode.UNKNOWN_LEADER_EPOCH,
                             f"Replica {replica_id} is not a replica of this partition in leader epoch "
                             f"{self.leader_epoch}")
        before = f.log_end_offset
        f.update_fetch_state(fetch_offset, log_start_offset, fetch_time_ms, leader_end_offset, broker_epoch)
        return before != f.log_end_offset and self.maybe_increment_high_watermark(fetch_time_ms)

    def maybe_increment_high_watermark(self, now_ms: int) -> bool:
        """Advance the HW to the smallest LEO among the leader, the maximal ISR and the caught-up
        eligible replicas not yet in it (so a catching-up follower is not outrun forever); never
        while the ISR is below min.insync.replicas (KIP-966). True if it moved. Call it after
        every leader append, follower fetch and ISR change (Kafka ``maybeIncrementLeaderHW``)."""
        if self.under_min_isr:
            return False
        leo = self._leo()
        new_hw = leo
        maximal = self.maximal_isr
        for f in self.followers.values():
            if f.log_end_offset < new_hw and (
                    f.replica_id in maximal
                    or (f.is_caught_up(leo, now_ms, self.replica_lag_time_max_ms) and self.is_eligible(f.replica_id))):
                new_hw = f.log_end_offset
        if new_hw > self._hw:
            self._hw = new_hw
            return True
        return False

    def low_watermark(self, leader_log_start_offset: int, is_alive: Callable[[int], bool] | None = None) -> int:
        """The smallest log start offset among the leader and the live followers (DeleteRecords
        completes when it reaches the request's offset; Kafka ``lowWatermarkIfLeader``)."""
        low = leader_log_start_offset
        for f in self.followers.values():
            if (is_alive is None or is_alive(f.replica_id)) and f.log_start_offset < low:
                low = f.log_start_offset
        return low

    # -- ISR changes --------------------------------------------------------------------------------
    def can_join_isr(self, replica_id: int) -> bool:
        """Kafka ``needsExpandIsr``: no change in flight, ``replica_id`` outside the ISR, eligible,
        and its LEO at or above both the HW and the start of this leader's epoch (a follower still
        missing committed records of the current epoch could otherwise become leader and lose them)."""
        f = self.followers.get(replica_id)
        return (f is not None and self.pending is None and replica_id not in self.isr
                and self.is_eligible(replica_id)
                and f.log_end_offset >= self._hw and f.log_end_offset >= self.leader_epoch_start_offset)

    def out_of_sync_replicas(self, now_ms: int, replica_lag_time_max_ms: int | None = None) -> set[int]:
        """ISR followers not caught up for longer than ``replica_lag_time_max_ms`` (default: the
        configured ``replica.lag.time.max.ms``): stuck or too slow (Kafka ``getOutOfSyncReplicas``).
        Empty while an ISR change is in flight."""
        if self.pending is not None:
            return set()
        lag = self.replica_lag_time_max_ms if replica_lag_time_max_ms is None else replica_lag_time_max_ms
        leo = self._leo()
        out = set()
        for r in self.isr:
            if r == self.local_id:
                continue
            f = self.followers.get(r)
            if f is None or not f.is_caught_up(leo, now_ms, lag):
                out.add(r)
        return out

    def prepare_isr_expand(self, replica_id: int) -> PendingIsrChange:
        """Propose ISR + ``replica_id`` (send it with AlterPartition). From now on the HW waits for
        that replica too (Kafka ``prepareIsrExpand``). Raises ValueError unless :meth:`can_join_isr`."""
        if not self.can_join_isr(replica_id):
            raise ValueError(f"replica {replica_id} cannot join the ISR {sorted(self.isr)} now")
        proposed = self.isr | {replica_id}
        self.pending = PendingIsrChange("expand", tuple(sorted(proposed)), frozenset(proposed), self.leader_epoch,
                                        self.partition_epoch)
        return self.pending

    def prepare_isr_shrink(self, out_of_sync: Iterable[int]) -> PendingIsrChange:
        """Propose the ISR without ``out_of_sync`` (send it with AlterPartition). The HW keeps
        respecting the current ISR until the controller commits (Kafka ``prepareIsrShrink``)."""
        if self.pending is not None:
            raise ValueError("an ISR change is already in flight")
        drop = set(out_of_sync) - {self.local_id}
        proposed = self.isr - drop
        self.pending = PendingIsrChange("shrink", tuple(sorted(proposed)), self.isr, self.leader_epoch,
                                        self.partition_epoch)
        return self.pending

    def isr_change_committed(self, isr: Iterable[int], partition_epoch: int, now_ms: int) -> bool:
        """The controller accepted an AlterPartition (or newer metadata arrived): install ``isr``
        at ``partition_epoch`` and re-evaluate the HW (a shrink may let it advance). Returns True
        if the HW advanced. Stale answers (``partition_epoch`` not newer) are ignored."""
        if partition_epoch <= self.partition_epoch:
            return False
        self.update_assignment(self.replicas, isr, partition_epoch)
        return self.maybe_increment_high_watermark(now_ms)

    def isr_change_failed(self) -> None:
        """The AlterPartition was rejected for good (e.g. INELIGIBLE_REPLICA, OPERATION_NOT_ATTEMPTED):
        back to the committed ISR so a new change may be proposed."""
        self.pending = None

    # -- produce ------------------------------------------------------------------------------------
    def check_min_isr_before_append(self, required_acks: int) -> None:
        """acks=all (-1) on an ISR smaller than the effective ``min.insync.replicas``: raise
        KafkaError(NOT_ENOUGH_REPLICAS) before anything is appended (Kafka
        ``appendRecordsToLeader``; the committed ISR counts, not a pending expansion)."""
        if required_acks == -1 and self.under_min_isr:
            raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS,
                             f"The size of the current ISR {sorted(self.isr)} is insufficient to satisfy the "
                             f"min.isr requirement of {self.effective_min_isr}")

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, ErrorCode]:
        """For a waiting acks=all produce whose last offset is ``required_offset - 1``: ``(True,
        NONE)`` once the HW reached ``required_offset`` (every maximal-ISR member has the
        records); ``(True, NOT_ENOUGH_REPLICAS_AFTER_APPEND)`` if by then the ISR shrank below
        ``min.insync.replicas``; ``(False, NONE)`` while waiting (Kafka
        ``checkEnoughReplicasReachOffset``)."""
        if self._hw < required_offset:
            return False, ErrorCode.NONE
        if self.effective_min_isr <= len(self.maximal_isr):
            return True, ErrorCode.NONE
        return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
