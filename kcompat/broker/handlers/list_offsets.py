"""ListOffsets (key 2), versions 1-8: offsets by special timestamp or by time.

As Kafka's ``Partition.fetchOffsetForTimestamp``: LATEST (-1) is the high watermark, or the last
stable offset for read_committed; EARLIEST (-2) and EARLIEST_LOCAL (-4, KIP-405) the log start
offset; MAX_TIMESTAMP (-3, KIP-734) the record with the largest timestamp; any other value finds
the first record whose timestamp is >= the target through the time index. No match, or a match at
or above the high watermark / LSO, answers offset -1 and timestamp -1 (Spark's
``startingOffsetsByTimestamp`` depends on it).

A special (negative) timestamp the request's version does not know is refused for that partition
with UNSUPPORTED_VERSION, before the partition is looked up, as Kafka's
``handleListOffsetRequestV1AndAbove`` does: -1/-2 from v1, MAX_TIMESTAMP from v7, EARLIEST_LOCAL
from v8, LATEST_TIERED (-5) from v9 (beyond what kcompat advertises), any other negative value never.

Only the leader answers (NOT_LEADER_OR_FOLLOWER elsewhere, unless ``replica_id`` is -2, Kafka's
debugging id); a follower asking as a replica (``replica_id`` >= 0) gets the log end offset for
LATEST, as Kafka's ``fetchOffsetForTimestamp`` with ``isolationLevel`` None.

With an authorizer, DESCRIBE on the topic is required (TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

from collections import Counter

from kcompat.broker.authz import TOPIC, Op
from kcompat.isr.storage_errors import STORAGE_ERRORS, storage_kafka_error
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.list_offsets import ListOffsetsResponse as R

API_KEY = 2
MIN_VERSION = 1
MAX_VERSION = 8

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
DEBUGGING_REPLICA_ID = -2   # Kafka's ListOffsetsRequest.DEBUGGING_REPLICA_ID: any replica may answer
READ_COMMITTED = 1

# The first ListOffsets version that accepts each special timestamp (Kafka's timestampMinSupportedVersion).
SPECIAL_TIMESTAMP_MIN_VERSION = {EARLIEST: 1, LATEST: 1, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9}


def timestamp_unsupported(timestamp: int, version: int) -> bool:
    """True if ``timestamp`` is a special value ListOffsets ``version`` does not support."""
    return timestamp < 0 and version < SPECIAL_TIMESTAMP_MIN_VERSION.get(timestamp, 1 << 15)


def handle(ctx, req):
    broker = ctx.broker
    version = ctx.api_version
    isolation = req.isolation_level if version >= 2 else 0
    seen = Counter((t.name, lp.partition_index) for t in req.topics for lp in t.partitions)
    topics = []
    for t in req.topics:
        parts = []
        describable = ctx.authorize(Op.DESCRIBE, TOPIC, t.name)
        for lp in t.partitions:
            if not describable:
                parts.append(_error(lp.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            if seen[(t.name, lp.partition_index)] > 1:
                # Kafka's handleListOffsetRequest: a partition listed twice is INVALID_REQUEST
                parts.append(_error(lp.partition_index, ErrorCode.INVALID_REQUEST))
                continue
            if timestamp_unsupported(lp.timestamp, version):
                parts.append(_error(lp.partition_index, ErrorCode.UNSUPPORTED_VERSION))
                continue
            parts.append(_one(broker, t.name, lp, isolation, version, req.replica_id))
        topics.append(R.ListOffsetsTopicResponse(name=t.name, partitions=parts))
    return R(throttle_time_ms=0, topics=topics)


def _one(broker, topic: str, lp, isolation: int, version: int, replica_id: int = -1):
    p = broker.replica_manager.get(topic, lp.partition_index)
    if p is None:
        if broker.leader_of(topic, lp.partition_index) is not None:
            return _error(lp.partition_index, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return _error(lp.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if not p.is_leader and replica_id != DEBUGGING_REPLICA_ID:
        return _error(lp.partition_index, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    if version >= 4 and lp.current_leader_epoch >= 0 and lp.current_leader_epoch != p.leader_epoch:
        return _error(lp.partition_index, ErrorCode.FENCED_LEADER_EPOCH if lp.current_leader_epoch < p.leader_epoch
                      else ErrorCode.UNKNOWN_LEADER_EPOCH)
    if replica_id >= 0:   # a follower after OFFSET_OUT_OF_RANGE: the leader's log end (Kafka)
        fetchable = p.log_end_offset
    else:
        fetchable = p.last_stable_offset if isolation == READ_COMMITTED else p.high_watermark
    ts = lp.timestamp
    if ts == LATEST:
        return _ok(lp.partition_index, -1, fetchable, p.leader_epoch)
    if ts in (EARLIEST, EARLIEST_LOCAL):
        return _ok(lp.partition_index, -1, p.log_start_offset, p.leader_epoch)
    try:   # both decode a stored batch: damaged on disk -> CORRUPT_MESSAGE, an I/O error -> KAFKA_STORAGE_ERROR
        if ts == MAX_TIMESTAMP:
            found_ts, offset = p.log.max_timestamp_and_offset()
            if offset < 0 or offset >= fetchable:
                return _ok(lp.partition_index, -1, -1, -1)
            return _ok(lp.partition_index, found_ts, offset, p.leader_epoch)
        found = p.log.offset_for_timestamp(ts)
    except STORAGE_ERRORS as e:
        return _error(lp.partition_index, storage_kafka_error(e).code)
    if found is None or found[0] >= fetchable:
        return _ok(lp.partition_index, -1, -1, -1)
    offset, found_ts = found
    return _ok(lp.partition_index, found_ts, offset, p.leader_epoch)


def _ok(index: int, timestamp: int, offset: int, leader_epoch: int):
    return R.ListOffsetsPartitionResponse(partition_index=index, error_code=ErrorCode.NONE, timestamp=timestamp,
                                          offset=offset, leader_epoch=leader_epoch)


def _error(index: int, code: ErrorCode):
    return R.ListOffsetsPartitionResponse(partition_index=index, error_code=code, timestamp=-1, offset=-1,
                                          leader_epoch=-1)


def error_response(req, version, code):
    return R(topics=[R.ListOffsetsTopicResponse(name=t.name, partitions=[
        _error(lp.partition_index, code) for lp in t.partitions]) for t in req.topics])
