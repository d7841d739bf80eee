"""Small value types shared by the Raft core: offsets with epochs, leader identity, the core's
outbound messages and the events it hands to the application.

Names follow Kafka's ``org.apache.kafka.raft`` (``OffsetAndEpoch``, ``LeaderAndEpoch``,
``ValidOffsetAndEpoch``, ``RaftClient.Listener``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Hashable, NamedTuple, Union

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
NO_LEADER = -1


class OffsetAndEpoch(NamedTuple):
    """An end offset (exclusive) and the epoch of the record before it — Kafka ``OffsetAndEpoch``.

    Ordered by epoch first, then offset (``OffsetAndEpoch.compareTo``), which is the order used to
    decide whether a candidate's log is at least as up to date as a voter's (KIP-595).
    """

    offset: int
    epoch: int

    def newer_or_equal(self, other: "OffsetAndEpoch") -> bool:
        return (self.epoch, self.offset) >= (other.epoch, other.offset)


# A snapshot is named by the end offset (exclusive) and epoch of its last contained record (KIP-630).
SnapshotId = OffsetAndEpoch


class LeaderAndEpoch(NamedTuple):
    """Kafka ``LeaderAndEpoch``: ``leader_id`` is -1 while the leader of ``epoch`` is unknown."""

    leader_id: int
    epoch: int


class ValidKind(enum.Enum):
    """Kafka ``ValidOffsetAndEpoch.Kind``: how a leader judges a follower's fetch position."""

    VALID = 0
    DIVERGING = 1
    SNAPSHOT = 2


class ValidOffsetAndEpoch(NamedTuple):
    kind: ValidKind
    offset_and_epoch: OffsetAndEpoch


class NotLeaderError(Exception):
    """Kafka ``NotLeaderException``: append or resign on a replica that is not the leader (of the
    given epoch). ``leader`` is what this replica knows of the current leader."""

    def __init__(self, leader: LeaderAndEpoch, message: str = "not the leader") -> None:
        super().__init__(f"{message} (leader {leader.leader_id}, epoch {leader.epoch})")
        self.leader = leader


class RaftInvariantError(AssertionError):
    """A rule of the protocol that must never break did (Kafka raises IllegalStateException):
    e.g. truncation below the high watermark or a high watermark moving backwards. The replica
    must stop; the simulation reports the seed."""


# ------------------------------------------------------------------------------------------------
# outbound messages: what poll() hands to the transport
# ------------------------------------------------------------------------------------------------

@dataclass(slots=True)
class Send:
    """Send ``request`` to node ``destination``; deliver its response (or failure) back through
    ``RaftClient.handle_response(request_id, ...)``."""

    request_id: int
    destination: int
    request: object


@dataclass(slots=True)
class Reply:
    """Answer the inbound request that was handed in with ``reply_to``."""

    reply_to: Hashable
    response: object


Outbound = Union[Send, Reply]


# ------------------------------------------------------------------------------------------------
# events for the application (Kafka RaftClient.Listener: handleCommit, handleLoadSnapshot,
# handleLeaderChange), delivered in log order by RaftClient.take_events()
# ------------------------------------------------------------------------------------------------

@dataclass(slots=True, frozen=True)
class CommittedBatch:
    """One committed record batch (RecordBatch v2 bytes with base offset and partition leader epoch
    set). Control batches (LeaderChangeMessage) are included; ``is_control`` tells them apart."""

    base_offset: int
    last_offset: int
    epoch: int
    is_control: bool
    data: bytes


@dataclass(slots=True, frozen=True)
class SnapshotLoaded:
    """Replace all application state with this snapshot; the next batch starts at
    ``snapshot_id.offset``."""

    snapshot_id: SnapshotId
    data: bytes


@dataclass(slots=True, frozen=True)
class LeaderChanged:
    """The leader (or epoch) changed. For the local replica it is fired only once the application
    has been handed every committed batch before the leader's first offset, so an active
    controller starts from a complete image (Kafka ``ListenerContext.maybeFireLeaderChange``)."""

    leader: LeaderAndEpoch
    epoch_start_offset: int | None = None


RaftEvent = Union[CommittedBatch, SnapshotLoaded, LeaderChanged]


@dataclass(slots=True)
class PollResult:
    """What one ``poll`` returns: messages to put on the wire and the absolute time (ms) by which
    ``poll`` must be called again even if nothing arrives."""

    outbound: list
    deadline_ms: int


class Role(enum.Enum):
    """The states of a replica (Kafka ``QuorumState``; KIP-595, KIP-996 adds Prospective).

    The voted state of older Kafka is Unattached with a vote (Kafka 4.0 ``UnattachedState``
    with ``votedKey``)."""

    UNATTACHED = "Unattached"
    PROSPECTIVE = "Prospective"
    CANDIDATE = "Candidate"
    LEADER = "Leader"
    FOLLOWER = "Follower"
    RESIGNED = "Resigned"
