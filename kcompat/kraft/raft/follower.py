"""The Follower state and the follower's replication rules (Kafka ``FollowerState``, KIP-595).

A follower fetches from the leader with its log end offset and the epoch of its last batch. The
leader either returns the batches that follow, or — when that (offset, epoch) is not in its log —
the largest epoch <= the follower's last epoch and where that epoch ends in the leader's log
(``diverging_epoch``). The follower then truncates exactly the divergent suffix
(:func:`truncation_offset`, Kafka ``ReplicatedLog.truncateToEndOffset``) and fetches again; each
round trip moves to an earlier epoch, so it converges on the longest common prefix. A follower whose
position is below the leader's log start gets a snapshot id instead and downloads it with
FetchSnapshot (KIP-630).

A follower's high watermark is ``min(leader's high watermark, own log end offset)``: its log up to its
end offset matched the leader's when the fetch was validated.
"""

from __future__ import annotations

from kcompat.kraft.raft.log import RaftLog
from kcompat.kraft.raft.types import OffsetAndEpoch, Role, SnapshotId


class SnapshotDownload:
    """A snapshot being fetched in chunks; lost on restart like Kafka's partial ``.checkpoint.part``."""

    __slots__ = ("snapshot_id", "data", "size")

    def __init__(self, snapshot_id: SnapshotId) -> None:
        self.snapshot_id = snapshot_id
        self.data = bytearray()
        self.size: int | None = None

    @property
    def position(self) -> int:
        return len(self.data)


class FollowerState:
    role = Role.FOLLOWER

    def __init__(self, epoch: int, leader_id: int, voted_id: int, fetch_timeout_ms: int,
                 now_ms: int) -> None:
        self.epoch = epoch
        self.leader_id = leader_id
        self.voted_id = voted_id
        self.fetch_timeout_ms = fetch_timeout_ms
        self.fetch_deadline = now_ms + fetch_timeout_ms
        # KIP-996: until the first successful fetch the leader may be unreachable from here, so the
        # follower still grants pre-votes (Kafka FollowerState.hasFetchedFromLeader).
        self.has_fetched_from_leader = False
        self.snapshot: SnapshotDownload | None = None

    def __repr__(self) -> str:
        return f"Follower(epoch={self.epoch}, leader={self.leader_id})"

    def reset_fetch_timeout(self, now_ms: int) -> None:
        self.fetch_deadline = now_ms + self.fetch_timeout_ms
        self.has_fetched_from_leader = True

    def override_fetch_timeout(self, now_ms: int, timeout_ms: int) -> None:
        """The leader resigned (EndQuorumEpoch): stand for election after ``timeout_ms`` and let
        others' pre-votes through (the leader said it is going away)."""
        self.fetch_deadline = min(self.fetch_deadline, now_ms + timeout_ms)
        self.has_fetched_from_leader = False

    def fetch_timed_out(self, now_ms: int) -> bool:
        return now_ms >= self.fetch_deadline


def truncation_offset(log: RaftLog, diverging: OffsetAndEpoch) -> int:
    """Where a follower truncates when the leader answers ``diverging_epoch`` (Kafka
    ``ReplicatedLog.truncateToEndOffset``): the end of that epoch in the follower's own log if it
    has the same epoch, bounded by the leader's end of it; else the end of the follower's largest
    epoch below it (the next fetch narrows further)."""
    if diverging.epoch == 0:
        offset = min(diverging.offset, log.end_offset)
    else:
        local = log.end_offset_for_epoch(diverging.epoch)
        offset = min(local.offset, diverging.offset) if local.epoch == diverging.epoch else local.offset
    # below the log start lies a snapshot of committed records, which cannot diverge
    return max(offset, log.start_offset)
