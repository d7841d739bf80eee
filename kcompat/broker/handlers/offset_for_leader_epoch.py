"""OffsetForLeaderEpoch (key 23), versions 0-4: where a leader epoch ends in the leader's log
(KIP-101 follower truncation, KIP-320 consumer log-truncation detection).

As Kafka's ``ReplicaManager.lastOffsetForLeaderEpoch`` / ``Partition.lastOffsetForLeaderEpoch``:

- a partition this broker does not host: NOT_LEADER_OR_FOLLOWER if the metadata knows it,
  UNKNOWN_TOPIC_OR_PARTITION otherwise;
- ``current_leader_epoch`` (v2+, -1 = not given) older than ours: FENCED_LEADER_EPOCH, newer:
  UNKNOWN_LEADER_EPOCH (checked first, as Kafka does); then NOT_LEADER_OR_FOLLOWER unless this
  broker leads the partition - the API is answered by leaders only;
- otherwise ``(leader_epoch, end_offset)`` from the leader-epoch cache
  (:meth:`kcompat.log.leader_epoch.LeaderEpochFileCache.end_offset_for`): the largest epoch <= the
  requested one and the start offset of the next, the LEO for the latest epoch, and (-1, -1) with
  no error when the requested epoch is -1 or above every known epoch.

``replica_id`` (v3+; -1 consumer, -2 debug, >= 0 a follower) does not change the answer, as in
Kafka. Kafka's ``Partition.makeLeader`` puts the leader's epoch into the cache at its LEO; until
the partition does that itself, the first request served for an epoch missing from the cache
does it here, so a leader that has not written in its epoch yet answers (epoch, LEO) as Kafka's.

With an authorizer a follower (``replica_id`` >= 0) needs CLUSTER_ACTION on the cluster, a consumer
DESCRIBE on the topic (TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from kcompat.broker.api_services import ApiServices
from kcompat.broker.authz import Op, TOPIC
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochResponse as R

API_KEY = 23
MIN_VERSION = 0
MAX_VERSION = 4


def handle(ctx, req):
    services = ctx.services
    version = ctx.api_version
    if version >= 3 and req.replica_id >= 0:   # a follower
        follower_ok = ctx.authorize_cluster(Op.CLUSTER_ACTION)
        allowed = lambda name: follower_ok  # noqa: E731
    else:
        allowed = lambda name: ctx.authorize(Op.DESCRIBE, TOPIC, name)  # noqa: E731
    topics = [R.OffsetForLeaderTopicResult(topic=t.topic, partitions=[
        _one(services, t.topic, op, version) if allowed(t.topic) else _error(op.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        for op in t.partitions])
              for t in req.topics]
    return R(throttle_time_ms=0, topics=topics)


def _one(services: ApiServices, topic: str, op, version: int):
    p = services.replica_manager.get(topic, op.partition)
    t = services.image.topics.get(topic)
    meta = t.partitions.get(op.partition) if t is not None else None
    if p is None:
        return _error(op.partition, ErrorCode.NOT_LEADER_OR_FOLLOWER if meta is not None
                      else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    current = op.current_leader_epoch if version >= 2 else -1
    if current >= 0 and current != p.leader_epoch:
        return _error(op.partition, ErrorCode.FENCED_LEADER_EPOCH if current < p.leader_epoch
                      else ErrorCode.UNKNOWN_LEADER_EPOCH)
    if meta is None or meta.leader != services.node_id:
        return _error(op.partition, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    cache = p.log.leader_epoch_cache
    if p.leader_epoch >= 0 and (cache.latest_epoch is None or cache.latest_epoch < p.leader_epoch):
        cache.assign(p.leader_epoch, p.log.log_end_offset)   # Partition.makeLeader's assignment
    epoch, end_offset = p.log.end_offset_for_epoch(op.leader_epoch)
    return R.EpochEndOffset(error_code=ErrorCode.NONE, partition=op.partition, leader_epoch=epoch,
                            end_offset=end_offset)


def _error(partition: int, code: ErrorCode):
    return R.EpochEndOffset(error_code=code, partition=partition, leader_epoch=-1, end_offset=-1)


def error_response(req, version, code):
    return R(throttle_time_ms=0, topics=[R.OffsetForLeaderTopicResult(
        topic=t.topic, partitions=[_error(op.partition, code) for op in t.partitions]) for t in req.topics])
