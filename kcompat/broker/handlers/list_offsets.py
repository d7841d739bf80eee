"""ListOffsets (key 2), versions 1-11: offsets by special timestamp or by time.

As Kafka's ``Partition.fetchOffsetForTimestamp``: LATEST (-1) is the high watermark, or the last
stable offset for read_committed; EARLIEST (-2) the log start offset; EARLIEST_LOCAL (-4, KIP-1005)
the local log start offset (the log start offset unless older segments are only in remote
storage, KIP-405) with the leader epoch of that offset; LATEST_TIERED (-5, KIP-1005) the highest
offset copied to remote storage (-1 if none, and -1 with epoch -1 on a topic that is not tiered);
EARLIEST_PENDING_UPLOAD (-6, KIP-1023) the first offset not yet copied to remote storage, as Kafka
4.3.1's ``UnifiedLog.fetchEarliestPendingUploadOffset``: -1 (epoch -1) on a topic that is not
tiered; on a tiered one the highest remote offset + 1 (at least the log start offset) with its
epoch, or when nothing is remote the EARLIEST answer if the local log starts at the log start
offset, else -1 (the leader does not know what was uploaded yet);
MAX_TIMESTAMP (-3, KIP-734) the record with the largest timestamp; any other value finds the first
record whose timestamp is >= the target through the time index - of the remote segments first on
a tiered topic (Kafka ``RemoteLogManager.findOffsetByTimestamp``, answered once the remote lookup
is done). No match, or a match at or above the high watermark / LSO, answers offset -1 and
timestamp -1 (Spark's ``startingOffsetsByTimestamp`` depends on it).

A special (negative) timestamp the request's version does not know is refused for that partition
with UNSUPPORTED_VERSION, before the partition is looked up, as Kafka's
``handleListOffsetRequestV1AndAbove`` does: -1/-2 from v1, MAX_TIMESTAMP from v7, EARLIEST_LOCAL
from v8, LATEST_TIERED (-5) from v9, EARLIEST_PENDING_UPLOAD (-6) from v11, any other negative value
never.

The remote timestamp lookups of one request run together and are bounded as Kafka's
``DelayedRemoteListOffsets``: by v10's TimeoutMs (KIP-1075) when positive, else by
``remote.list.offsets.request.timeout.ms``; a partition whose lookup is not done by then is
REQUEST_TIMED_OUT.

Only the leader answers (NOT_LEADER_OR_FOLLOWER elsewhere, unless ``replica_id`` is -2, Kafka's
debugging id); a follower asking as a replica (``replica_id`` >= 0) gets the log end offset for
LATEST, as Kafka's ``fetchOffsetForTimestamp`` with ``isolationLevel`` None.

With an authorizer, DESCRIBE on the topic is required (TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter

from kcompat.broker.api_services import ApiServices
from kcompat.broker.authz import TOPIC, Op
from kcompat.isr.storage_errors import STORAGE_ERRORS, storage_kafka_error
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.list_offsets import ListOffsetsResponse as R

log = logging.getLogger("kcompat.broker")

API_KEY = 2
MIN_VERSION = 1
MAX_VERSION = 11

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5, -6
DEBUGGING_REPLICA_ID = -2   # Kafka's ListOffsetsRequest.DEBUGGING_REPLICA_ID: any replica may answer
READ_COMMITTED = 1

# The first ListOffsets version that accepts each special timestamp (Kafka's timestampMinSupportedVersion).
SPECIAL_TIMESTAMP_MIN_VERSION = {EARLIEST: 1, LATEST: 1, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9,
                                 EARLIEST_PENDING_UPLOAD: 11}


def timestamp_unsupported(timestamp: int, version: int) -> bool:
    """True if ``timestamp`` is a special value ListOffsets ``version`` does not support."""
    return timestamp < 0 and version < SPECIAL_TIMESTAMP_MIN_VERSION.get(timestamp, 1 << 15)


def handle(ctx, req):
    services = ctx.services
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
            parts.append(_one(services, t.name, lp, isolation, version, req.replica_id))
        topics.append(R.ListOffsetsTopicResponse(name=t.name, partitions=parts))
    if any(isinstance(part, _RemoteLookup) for t in topics for part in t.partitions):
        return _with_remote_lookups(services, topics, _remote_timeout_ms(services, req, version))
    return R(throttle_time_ms=0, topics=topics)


def _remote_timeout_ms(services: ApiServices, req, version: int) -> int:
    """Kafka's ``ReplicaManager.fetchOffset``: the request's TimeoutMs (v10+) if positive, else
    ``remote.list.offsets.request.timeout.ms``."""
    if version >= 10 and req.timeout_ms > 0:
        return req.timeout_ms
    return services.config.get("remote.list.offsets.request.timeout.ms")


class _RemoteLookup:
    """A timestamp lookup that starts in the remote segments of a tiered partition."""

    __slots__ = ("partition", "index", "timestamp", "fetchable", "local")

    def __init__(self, p, index: int, timestamp: int, fetchable: int, local) -> None:
        self.partition, self.index, self.timestamp, self.fetchable, self.local = p, index, timestamp, fetchable, local


async def _with_remote_lookups(services: ApiServices, topics, timeout_ms: int):
    """The response once every remote lookup is done, or after ``timeout_ms`` with the unfinished
    ones REQUEST_TIMED_OUT (Kafka's ``DelayedRemoteListOffsets`` starts each partition so)."""
    slots = [(t.partitions, i, part) for t in topics for i, part in enumerate(t.partitions)
             if isinstance(part, _RemoteLookup)]
    tasks = [asyncio.ensure_future(_remote_lookup(services, part)) for _, _, part in slots]
    done, _pending = await asyncio.wait(tasks, timeout=timeout_ms / 1000)
    for (parts, i, look), task in zip(slots, tasks):
        if task in done:
            parts[i] = task.result()
        else:
            task.cancel()
            parts[i] = _error(look.index, ErrorCode.REQUEST_TIMED_OUT)
    return R(throttle_time_ms=0, topics=topics)


async def _remote_lookup(services: ApiServices, look: _RemoteLookup):
    p = look.partition
    try:
        found = await services.remote_log.offset_for_timestamp(p, look.timestamp)
    except Exception as e:   # the store failed: Kafka answers the partition with the error
        log.warning("%s-%d: remote timestamp lookup failed: %s", p.topic, p.partition_id, e)
        return _error(look.index, ErrorCode.UNKNOWN_SERVER_ERROR)
    found = found or look.local
    if found is None or found[0] >= look.fetchable:
        return _ok(look.index, -1, -1, -1)
    return _ok(look.index, found[1], found[0], p.leader_epoch)


def _one(services: ApiServices, topic: str, lp, isolation: int, version: int, replica_id: int = -1):
    p = services.replica_manager.get(topic, lp.partition_index)
    if p is None:
        if services.metadata_cache.leader_of(topic, lp.partition_index) is not None:
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
    if ts == EARLIEST:
        return _ok(lp.partition_index, -1, p.log_start_offset, p.leader_epoch)
    if ts == EARLIEST_LOCAL:
        local_start = p.log.local_log_start_offset
        return _ok(lp.partition_index, -1, local_start, _epoch_of(p, local_start))
    if ts == LATEST_TIERED:
        if not p.log.config.remote_storage_enable:
            return _ok(lp.partition_index, -1, -1, -1)
        highest = p.log.highest_offset_in_remote_storage
        return _ok(lp.partition_index, -1, highest, -1 if highest < 0 else _epoch_of(p, highest))
    if ts == EARLIEST_PENDING_UPLOAD:
        return _earliest_pending_upload(p, lp.partition_index)
    try:   # both decode a stored batch: damaged on disk -> CORRUPT_MESSAGE, an I/O error -> KAFKA_STORAGE_ERROR
        if ts == MAX_TIMESTAMP:
            found_ts, offset = p.log.max_timestamp_and_offset()
            if offset < 0 or offset >= fetchable:
                return _ok(lp.partition_index, -1, -1, -1)
            return _ok(lp.partition_index, found_ts, offset, p.leader_epoch)
        found = p.log.offset_for_timestamp(ts)
    except STORAGE_ERRORS as e:
        return _error(lp.partition_index, storage_kafka_error(e).code)
    if p.log.config.remote_storage_enable and services.remote_log is not None \
            and p.log_start_offset < p.log.local_log_start_offset:
        return _RemoteLookup(p, lp.partition_index, ts, fetchable, found)
    if found is None or found[0] >= fetchable:
        return _ok(lp.partition_index, -1, -1, -1)
    offset, found_ts = found
    return _ok(lp.partition_index, found_ts, offset, p.leader_epoch)


def _earliest_pending_upload(p, index: int):
    """Kafka 4.3.1's ``UnifiedLog.fetchEarliestPendingUploadOffset`` (KIP-1023)."""
    if not p.log.config.remote_storage_enable:
        return _ok(index, -1, -1, -1)
    highest = p.log.highest_offset_in_remote_storage
    if highest < 0:
        if p.log.local_log_start_offset == p.log_start_offset:   # nothing uploaded yet: EARLIEST's answer
            return _ok(index, -1, p.log_start_offset, p.leader_epoch)
        return _ok(index, -1, -1, -1)
    offset = max(highest + 1, p.log_start_offset)
    return _ok(index, -1, offset, _epoch_of(p, offset))


def _epoch_of(p, offset: int) -> int:
    epoch = p.log.leader_epoch_cache.epoch_for_offset(offset)
    return -1 if epoch is None else epoch


def _ok(index: int, timestamp: int, offset: int, leader_epoch: int):
    return R.ListOffsetsPartitionResponse(partition_index=index, error_code=ErrorCode.NONE, timestamp=timestamp,
                                          offset=offset, leader_epoch=leader_epoch)


def _error(index: int, code: ErrorCode):
    return R.ListOffsetsPartitionResponse(partition_index=index, error_code=code, timestamp=-1, offset=-1,
                                          leader_epoch=-1)


def error_response(req, version, code):
    return R(topics=[R.ListOffsetsTopicResponse(name=t.name, partitions=[
        _error(lp.partition_index, code) for lp in t.partitions]) for t in req.topics])
