"""Building and reading the KRaft RPCs for the single partition ``__cluster_metadata-0``.

The core produces and consumes the generated message classes of ``kcompat.protocol.messages`` so a
transport can put them on the wire unchanged (Kafka ``RaftUtil.singleton*``). Every builder fills the
fields of all versions (e.g. Fetch ``replica_id`` for v0-14 and ``replica_state`` for v15+, topic
name for v0-12 and topic id for v13+); the version is the transport's choice.

Pre-vote (KIP-996) travels in VoteRequest v2's ``PreVote`` field in Kafka 4.0. The generated codec
here stops at Vote v1, so until it is regenerated the flag rides in a kcompat-private tagged field of
the partition (tag :data:`PRE_VOTE_TAG`); :func:`is_pre_vote` and :func:`vote_request` are the only
places that know. A peer that ignores the tag treats the request as a standard vote, which is safe
(it is how a KIP-996 replica talks to an older one).
"""

from __future__ import annotations

import uuid

from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.begin_quorum_epoch import BeginQuorumEpochRequest, BeginQuorumEpochResponse
from kcompat.protocol.messages.describe_quorum import DescribeQuorumRequest, DescribeQuorumResponse
from kcompat.protocol.messages.end_quorum_epoch import EndQuorumEpochRequest, EndQuorumEpochResponse
from kcompat.protocol.messages.fetch import FetchRequest, FetchResponse
from kcompat.protocol.messages.fetch_snapshot import FetchSnapshotRequest, FetchSnapshotResponse
from kcompat.protocol.messages.vote import VoteRequest, VoteResponse

# Kafka Uuid.METADATA_TOPIC_ID (0L, 1L): the fixed topic id of __cluster_metadata.
METADATA_TOPIC_ID = uuid.UUID(int=1)
PRE_VOTE_TAG = 10_000
_PRE_VOTE_FIELD = [(PRE_VOTE_TAG, b"\x01")]

NONE = 0
FENCED_LEADER_EPOCH = int(ErrorCode.FENCED_LEADER_EPOCH)
UNKNOWN_LEADER_EPOCH = int(ErrorCode.UNKNOWN_LEADER_EPOCH)
NOT_LEADER_OR_FOLLOWER = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
INVALID_REQUEST = int(ErrorCode.INVALID_REQUEST)
INCONSISTENT_CLUSTER_ID = int(ErrorCode.INCONSISTENT_CLUSTER_ID)
INCONSISTENT_VOTER_SET = int(ErrorCode.INCONSISTENT_VOTER_SET)
BROKER_NOT_AVAILABLE = int(ErrorCode.BROKER_NOT_AVAILABLE)
SNAPSHOT_NOT_FOUND = int(ErrorCode.SNAPSHOT_NOT_FOUND)
POSITION_OUT_OF_RANGE = int(ErrorCode.POSITION_OUT_OF_RANGE)
UNKNOWN_TOPIC_OR_PARTITION = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

REQUEST_TYPES = (VoteRequest, BeginQuorumEpochRequest, EndQuorumEpochRequest, FetchRequest,
                 FetchSnapshotRequest, DescribeQuorumRequest)
RESPONSE_TYPES = (VoteResponse, BeginQuorumEpochResponse, EndQuorumEpochResponse, FetchResponse,
                  FetchSnapshotResponse, DescribeQuorumResponse)


class Partition:
    """Names the one partition the core serves and picks it out of requests and responses."""

    __slots__ = ("topic", "partition")

    def __init__(self, topic: str, partition: int = 0) -> None:
        self.topic = topic
        self.partition = partition

    def single(self, topics, name_attr: str = "topic_name", index_attr: str = "partition_index"):
        """The partition entry of a request/response naming exactly our partition, else None."""
        if len(topics) != 1:
            return None
        t = topics[0]
        if getattr(t, name_attr) != self.topic or len(t.partitions) != 1:
            return None
        p = t.partitions[0]
        if getattr(p, index_attr) != self.partition:
            return None
        return p

    def fetch_partition(self, topics):
        """Fetch names the topic by name (v0-12) or id (v13+)."""
        if len(topics) != 1:
            return None
        t = topics[0]
        if t.topic != self.topic and t.topic_id != METADATA_TOPIC_ID:
            return None
        if len(t.partitions) != 1:
            return None
        p = t.partitions[0]
        if p.partition != self.partition:
            return None
        return p

    def fetch_response_partition(self, responses):
        if len(responses) != 1:
            return None
        t = responses[0]
        if t.topic != self.topic and t.topic_id != METADATA_TOPIC_ID:
            return None
        if len(t.partitions) != 1 or t.partitions[0].partition_index != self.partition:
            return None
        return t.partitions[0]


# ------------------------------------------------------------------------------------------------ Vote
def vote_request(p: Partition, cluster_id: str, epoch: int, candidate_id: int, voter_id: int,
                 last_epoch: int, last_offset: int, pre_vote: bool) -> VoteRequest:
    part = VoteRequest.PartitionData(
        partition_index=p.partition, candidate_epoch=epoch, candidate_id=candidate_id,
        last_offset_epoch=last_epoch, last_offset=last_offset,
        unknown_tagged_fields=list(_PRE_VOTE_FIELD) if pre_vote else None)
    return VoteRequest(cluster_id=cluster_id, voter_id=voter_id,
                       topics=[VoteRequest.TopicData(topic_name=p.topic, partitions=[part])])


def is_pre_vote(part: VoteRequest.PartitionData) -> bool:
    tags = part.unknown_tagged_fields
    if not tags:
        return False
    for tag, data in tags:
        if tag == PRE_VOTE_TAG:
            return data[:1] == b"\x01"
    return False


def vote_response(p: Partition, error: int, leader_id: int = -1, epoch: int = -1,
                  granted: bool = False, top_error: int = NONE) -> VoteResponse:
    if top_error != NONE:
        return VoteResponse(error_code=top_error)
    return VoteResponse(topics=[VoteResponse.TopicData(topic_name=p.topic, partitions=[
        VoteResponse.PartitionData(partition_index=p.partition, error_code=error,
                                   leader_id=leader_id, leader_epoch=epoch, vote_granted=granted)])])


# ------------------------------------------------------------------------------------------------ BeginQuorumEpoch
def begin_quorum_epoch_request(p: Partition, cluster_id: str, leader_id: int, epoch: int,
                               voter_id: int) -> BeginQuorumEpochRequest:
    part = BeginQuorumEpochRequest.PartitionData(partition_index=p.partition, leader_id=leader_id,
                                                 leader_epoch=epoch)
    return BeginQuorumEpochRequest(cluster_id=cluster_id, voter_id=voter_id, topics=[
        BeginQuorumEpochRequest.TopicData(topic_name=p.topic, partitions=[part])])


def begin_quorum_epoch_response(p: Partition, error: int, leader_id: int = -1, epoch: int = -1,
                                top_error: int = NONE) -> BeginQuorumEpochResponse:
    if top_error != NONE:
        return BeginQuorumEpochResponse(error_code=top_error)
    return BeginQuorumEpochResponse(topics=[BeginQuorumEpochResponse.TopicData(
        topic_name=p.topic, partitions=[BeginQuorumEpochResponse.PartitionData(
            partition_index=p.partition, error_code=error, leader_id=leader_id, leader_epoch=epoch)])])


# ------------------------------------------------------------------------------------------------ EndQuorumEpoch
def end_quorum_epoch_request(p: Partition, cluster_id: str, leader_id: int, epoch: int,
                             successors: list[int]) -> EndQuorumEpochRequest:
    part = EndQuorumEpochRequest.PartitionData(
        partition_index=p.partition, leader_id=leader_id, leader_epoch=epoch,
        preferred_successors=list(successors),
        preferred_candidates=[EndQuorumEpochRequest.ReplicaInfo(candidate_id=s) for s in successors])
    return EndQuorumEpochRequest(cluster_id=cluster_id, topics=[
        EndQuorumEpochRequest.TopicData(topic_name=p.topic, partitions=[part])])


def preferred_successors(part: EndQuorumEpochRequest.PartitionData) -> list[int]:
    if part.preferred_candidates:
        return [c.candidate_id for c in part.preferred_candidates]
    return list(part.preferred_successors)


def end_quorum_epoch_response(p: Partition, error: int, leader_id: int = -1, epoch: int = -1,
                              top_error: int = NONE) -> EndQuorumEpochResponse:
    if top_error != NONE:
        return EndQuorumEpochResponse(error_code=top_error)
    return EndQuorumEpochResponse(topics=[EndQuorumEpochResponse.TopicData(
        topic_name=p.topic, partitions=[EndQuorumEpochResponse.PartitionData(
            partition_index=p.partition, error_code=error, leader_id=leader_id, leader_epoch=epoch)])])


# ------------------------------------------------------------------------------------------------ Fetch
def fetch_request(p: Partition, cluster_id: str, replica_id: int, epoch: int, fetch_offset: int,
                  last_fetched_epoch: int, max_wait_ms: int, max_bytes: int) -> FetchRequest:
    part = FetchRequest.FetchPartition(partition=p.partition, current_leader_epoch=epoch,
                                       fetch_offset=fetch_offset, last_fetched_epoch=last_fetched_epoch,
                                       partition_max_bytes=max_bytes)
    return FetchRequest(
        cluster_id=cluster_id, replica_id=replica_id,
        replica_state=FetchRequest.ReplicaState(replica_id=replica_id, replica_epoch=-1),
        max_wait_ms=max_wait_ms, min_bytes=0, max_bytes=max_bytes,
        topics=[FetchRequest.FetchTopic(topic=p.topic, topic_id=METADATA_TOPIC_ID, partitions=[part])])


def fetch_replica_id(req: FetchRequest) -> int:
    """Kafka ``FetchRequest.replicaId``: from ReplicaState (v15+) or the top-level field."""
    rid = req.replica_state.replica_id if req.replica_state is not None else -1
    return rid if rid >= 0 else req.replica_id


def fetch_response(p: Partition, error: int, leader_id: int, epoch: int, high_watermark: int = -1,
                   log_start_offset: int = -1, records: bytes = b"",
                   diverging: tuple[int, int] | None = None,
                   snapshot_id: tuple[int, int] | None = None,
                   top_error: int = NONE) -> FetchResponse:
    """``diverging`` and ``snapshot_id`` are (end_offset, epoch)."""
    if top_error != NONE:
        return FetchResponse(error_code=top_error)
    part = FetchResponse.PartitionData(
        partition_index=p.partition, error_code=error, high_watermark=high_watermark,
        last_stable_offset=high_watermark, log_start_offset=log_start_offset,
        current_leader=FetchResponse.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=epoch),
        records=records)
    if diverging is not None:
        part.diverging_epoch = FetchResponse.EpochEndOffset(epoch=diverging[1], end_offset=diverging[0])
    if snapshot_id is not None:
        part.snapshot_id = FetchResponse.SnapshotId(end_offset=snapshot_id[0], epoch=snapshot_id[1])
    return FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
        topic=p.topic, topic_id=METADATA_TOPIC_ID, partitions=[part])])


# ------------------------------------------------------------------------------------------------ FetchSnapshot
def fetch_snapshot_request(p: Partition, cluster_id: str, replica_id: int, epoch: int,
                           snapshot_id: tuple[int, int], position: int,
                           max_bytes: int) -> FetchSnapshotRequest:
    part = FetchSnapshotRequest.PartitionSnapshot(
        partition=p.partition, current_leader_epoch=epoch,
        snapshot_id=FetchSnapshotRequest.SnapshotId(end_offset=snapshot_id[0], epoch=snapshot_id[1]),
        position=position)
    return FetchSnapshotRequest(cluster_id=cluster_id, replica_id=replica_id, max_bytes=max_bytes,
                                topics=[FetchSnapshotRequest.TopicSnapshot(name=p.topic, partitions=[part])])


def fetch_snapshot_response(p: Partition, error: int, leader_id: int, epoch: int,
                            snapshot_id: tuple[int, int] = (-1, -1), size: int = 0,
                            position: int = 0, data: bytes = b"",
                            top_error: int = NONE) -> FetchSnapshotResponse:
    if top_error != NONE:
        return FetchSnapshotResponse(error_code=top_error)
    part = FetchSnapshotResponse.PartitionSnapshot(
        index=p.partition, error_code=error,
        snapshot_id=FetchSnapshotResponse.SnapshotId(end_offset=snapshot_id[0], epoch=snapshot_id[1]),
        current_leader=FetchSnapshotResponse.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=epoch),
        size=size, position=position, unaligned_records=data)
    return FetchSnapshotResponse(topics=[FetchSnapshotResponse.TopicSnapshot(name=p.topic, partitions=[part])])


# ------------------------------------------------------------------------------------------------ DescribeQuorum
def describe_quorum_error(p: Partition, error: int, message: str | None = None) -> DescribeQuorumResponse:
    return DescribeQuorumResponse(topics=[DescribeQuorumResponse.TopicData(
        topic_name=p.topic, partitions=[DescribeQuorumResponse.PartitionData(
            partition_index=p.partition, error_code=error, error_message=message,
            leader_id=-1, leader_epoch=-1, high_watermark=-1)])])
