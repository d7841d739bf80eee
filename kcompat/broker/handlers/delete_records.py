"""DeleteRecords (key 21), versions 0-2: advance a partition's log start offset.

As Kafka's ``ReplicaManager.deleteRecords``: offset -1 means the high watermark; an offset above
the high watermark is OFFSET_OUT_OF_RANGE; whole segments below the new log start offset are
deleted; the response carries the new low watermark.

With an authorizer DELETE on the topic is required (TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from kcompat.broker.authz import Op, TOPIC
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.messages.delete_records import DeleteRecordsResponse as R

API_KEY = 21
MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx, req):
    services = ctx.services
    topics = []
    for t in req.topics:
        parts = []
        deletable = ctx.authorize(Op.DELETE, TOPIC, t.name)
        for dp in t.partitions:
            if not deletable:
                parts.append(_error(dp.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            p = services.replica_manager.get(t.name, dp.partition_index)
            if p is None:
                parts.append(_error(dp.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            try:
                low = p.delete_records(dp.offset)
            except KafkaError as e:
                parts.append(_error(dp.partition_index, e.code))
                continue
            parts.append(R.DeleteRecordsPartitionResult(partition_index=dp.partition_index, low_watermark=low,
                                                        error_code=ErrorCode.NONE))
        topics.append(R.DeleteRecordsTopicResult(name=t.name, partitions=parts))
    services.log_manager.checkpoint()
    return R(throttle_time_ms=0, topics=topics)


def _error(index: int, code: ErrorCode):
    return R.DeleteRecordsPartitionResult(partition_index=index, low_watermark=-1, error_code=code)


def error_response(req, version, code):
    return R(topics=[R.DeleteRecordsTopicResult(name=t.name, partitions=[
        _error(dp.partition_index, code) for dp in t.partitions]) for t in req.topics])
