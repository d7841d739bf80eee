"""The Leader state: replica progress, the high watermark, check quorum and BeginQuorumEpoch resends
(Kafka ``LeaderState``, KIP-595).

High watermark rule: the largest offset that a majority of voters (the leader counts, with its own
flushed log end offset) has reached, provided it is above the epoch start offset — a leader commits
nothing until a record of its own epoch (the LeaderChangeMessage it appends on election) is on a
majority. That record is the largest in any log of the voters that elected it, so every later leader
holds it and everything before it: the high watermark never goes backwards across leaders. A new
leader therefore starts with no high watermark.

Check quorum (Kafka ``LeaderState.timeUntilCheckQuorumExpires``): a leader that has not received a
Fetch or FetchSnapshot from a majority (itself included) within 1.5 x fetch timeout resigns, so a
partitioned leader stops accepting writes and followers' pre-votes can succeed.
"""

from __future__ import annotations

from kcompat.kraft.raft.types import Role
from kcompat.protocol.messages.describe_quorum import DescribeQuorumResponse

CHECK_QUORUM_TIMEOUT_FACTOR = 1.5
OBSERVER_SESSION_TIMEOUT_MS = 300_000


class ReplicaState:
    """What the leader knows of one replica (Kafka ``LeaderState.ReplicaState``)."""

    __slots__ = ("replica_id", "end_offset", "last_fetch_ms", "last_caught_up_ms",
                 "last_fetch_leader_end_offset", "acknowledged", "high_watermark_sent")

    def __init__(self, replica_id: int, acknowledged: bool = False) -> None:
        self.replica_id = replica_id
        self.end_offset: int | None = None
        self.last_fetch_ms = -1
        self.last_caught_up_ms = -1
        self.last_fetch_leader_end_offset = -1
        self.acknowledged = acknowledged
        # the high watermark in the last Fetch response sent to this replica (-1: none yet); a
        # fetch that would tell it a newer one is answered at once instead of parked, so a
        # commit reaches followers in one round trip (what KIP-1166 does with a request field)
        self.high_watermark_sent = -1

    def update_follower(self, now_ms: int, fetch_offset: int, leader_end_offset: int) -> None:
        # caught up: fetched at the leader's end, or reached what the leader had at the last fetch
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif self.last_fetch_leader_end_offset > 0 and fetch_offset >= self.last_fetch_leader_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        if self.end_offset is not None and fetch_offset < self.end_offset:
            self.high_watermark_sent = -1  # restarted or truncated: what it knew is unknown
        self.last_fetch_leader_end_offset = leader_end_offset
        self.last_fetch_ms = max(self.last_fetch_ms, now_ms)
        self.end_offset = fetch_offset
        self.acknowledged = True


class LeaderState:
    role = Role.LEADER

    def __init__(self, local_id: int, epoch: int, epoch_start_offset: int, voters: frozenset[int],
                 granting_voters: set[int], fetch_timeout_ms: int, now_ms: int) -> None:
        self.local_id = local_id
        self.epoch = epoch
        self.leader_id = local_id
        self.voted_id = local_id
        self.epoch_start_offset = epoch_start_offset
        self.voters = voters
        self.granting_voters = frozenset(granting_voters)
        self.replicas = {v: ReplicaState(v, acknowledged=(v == local_id)) for v in voters}
        self.observers: dict[int, ReplicaState] = {}
        self.high_watermark: int | None = None
        self.check_quorum_timeout_ms = int(fetch_timeout_ms * CHECK_QUORUM_TIMEOUT_FACTOR)
        self.check_quorum_deadline = now_ms + self.check_quorum_timeout_ms
        self.fetched_voters: set[int] = set()
        self.begin_quorum_interval_ms = fetch_timeout_ms // 2
        self.begin_quorum_deadline = now_ms  # send BeginQuorumEpoch at once
        self.resign_requested = False

    def __repr__(self) -> str:
        return f"Leader(epoch={self.epoch}, start={self.epoch_start_offset}, hw={self.high_watermark})"

    # ------------------------------------------------------------------------ high watermark
    def update_local(self, end_offset: int) -> bool:
        state = self.replicas[self.local_id]
        if state.end_offset is not None and end_offset < state.end_offset:
            raise AssertionError(f"leader end offset went back {state.end_offset} -> {end_offset}")
        state.end_offset = end_offset
        return self._maybe_update_high_watermark()

    def update_replica(self, replica_id: int, now_ms: int, fetch_offset: int) -> bool:
        """A valid Fetch at ``fetch_offset`` from ``replica_id``; True if the high watermark moved."""
        if replica_id < 0:
            return False
        leader_end = self.replicas[self.local_id].end_offset or 0
        if replica_id in self.replicas:
            self.replicas[replica_id].update_follower(now_ms, fetch_offset, leader_end)
            self.record_fetch(replica_id, now_ms)
            return self._maybe_update_high_watermark()
        obs = self.observers.get(replica_id)
        if obs is None:
            obs = self.observers[replica_id] = ReplicaState(replica_id)
        obs.update_follower(now_ms, fetch_offset, leader_end)
        return False

    def replica(self, replica_id: int) -> ReplicaState | None:
        """The tracked state of voter or observer ``replica_id``, or None."""
        return self.replicas.get(replica_id) or self.observers.get(replica_id)

    def _maybe_update_high_watermark(self) -> bool:
        offsets = sorted((s.end_offset if s.end_offset is not None else -1
                          for s in self.replicas.values()), reverse=True)
        candidate = offsets[len(self.replicas) // 2]
        if candidate <= self.epoch_start_offset:
            return False
        if self.high_watermark is None or candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    # ------------------------------------------------------------------------ check quorum
    def record_fetch(self, replica_id: int, now_ms: int) -> None:
        if replica_id == self.local_id or replica_id not in self.replicas:
            return
        self.fetched_voters.add(replica_id)
        needed = len(self.voters) // 2 + 1 - 1  # the leader counts itself
        if len(self.fetched_voters) >= needed:
            self.fetched_voters.clear()
            self.check_quorum_deadline = now_ms + self.check_quorum_timeout_ms

    def check_quorum_expired(self, now_ms: int) -> bool:
        return len(self.voters) > 1 and now_ms >= self.check_quorum_deadline

    def deadline(self) -> int:
        d = self.begin_quorum_deadline
        if len(self.voters) > 1:
            d = min(d, self.check_quorum_deadline)
        return d

    def acknowledge(self, replica_id: int) -> None:
        state = self.replicas.get(replica_id)
        if state is not None:
            state.acknowledged = True

    def successors_by_progress(self) -> list[int]:
        """Other voters, most caught up first (Kafka ``nonLeaderVotersByDescendingFetchOffset``)."""
        others = [s for s in self.replicas.values() if s.replica_id != self.local_id]
        others.sort(key=lambda s: (-(s.end_offset if s.end_offset is not None else -1), s.replica_id))
        return [s.replica_id for s in others]

    # ------------------------------------------------------------------------ DescribeQuorum
    def describe(self, partition_index: int, now_ms: int) -> DescribeQuorumResponse.PartitionData:
        for rid in [r for r, s in self.observers.items()
                    if now_ms - s.last_fetch_ms >= OBSERVER_SESSION_TIMEOUT_MS]:
            del self.observers[rid]

        def rs(s: ReplicaState) -> DescribeQuorumResponse.ReplicaState:
            local = s.replica_id == self.local_id
            return DescribeQuorumResponse.ReplicaState(
                replica_id=s.replica_id,
                log_end_offset=s.end_offset if s.end_offset is not None else -1,
                last_fetch_timestamp=now_ms if local else s.last_fetch_ms,
                last_caught_up_timestamp=now_ms if local else s.last_caught_up_ms)

        return DescribeQuorumResponse.PartitionData(
            partition_index=partition_index, error_code=0, error_message=None,
            leader_id=self.local_id, leader_epoch=self.epoch,
            high_watermark=self.high_watermark if self.high_watermark is not None else -1,
            current_voters=[rs(self.replicas[v]) for v in sorted(self.replicas)],
            observers=[rs(self.observers[o]) for o in sorted(self.observers)])
