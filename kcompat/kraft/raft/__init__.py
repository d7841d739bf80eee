"""An I/O-free Raft core for the KRaft ``__cluster_metadata`` quorum (KIP-595, KIP-630, KIP-996).

``RaftClient`` is driven by the caller: requests and responses in, ``poll(now_ms)`` out (messages to
send and the next deadline); the replicated log and the ``quorum-state`` file are injected
(``RaftLog``, ``QuorumStateStore``). See ``client.py`` for the driving loop.
"""

from kcompat.kraft.raft.client import RaftClient
from kcompat.kraft.raft.config import RaftConfig
from kcompat.kraft.raft.log import LeaderEpochCache, MemoryRaftLog, RaftLog
from kcompat.kraft.raft.store import (
    ElectionState, FileQuorumStateStore, MemoryQuorumStateStore, QuorumStateStore,
)
from kcompat.kraft.raft.types import (
    CommittedBatch, LeaderAndEpoch, LeaderChanged, NotLeaderError, OffsetAndEpoch, PollResult,
    RaftInvariantError, Reply, Role, Send, SnapshotId, SnapshotLoaded,
)

__all__ = [
    "RaftClient", "RaftConfig", "RaftLog", "MemoryRaftLog", "LeaderEpochCache",
    "ElectionState", "QuorumStateStore", "MemoryQuorumStateStore", "FileQuorumStateStore",
    "CommittedBatch", "LeaderAndEpoch", "LeaderChanged", "NotLeaderError", "OffsetAndEpoch",
    "PollResult", "RaftInvariantError", "Reply", "Role", "Send", "SnapshotId", "SnapshotLoaded",
]
