"""DescribeTopicPartitions (key 75), version 0: topics' partitions with leaders, replicas and ISR,
paginated (KIP-966; what ``kafka-topics --describe`` and the Java admin's ``describeTopics`` use
from Kafka 3.7 when the broker offers it).

As Kafka's ``DescribeTopicPartitionsRequestHandler`` and ``KRaftMetadataCache``:

- an empty topic list means every topic; the topics are answered sorted by name, from the
  request's ``cursor`` (topic name, partition index) on;
- at most ``min(max.request.partition.size.limit, response_partition_limit)`` partitions (at least
  one) per response; when the limit cuts a topic, ``next_cursor`` names the next partition, and
  when it falls exactly at a topic's end, the next topic at partition 0;
- a named topic that does not exist answers UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for
  an invalid name); with an empty list such topics cannot occur;
- a cursor whose topic is not in the requested list, or with a negative partition, fails the whole
  request with INVALID_REQUEST (every requested topic carries the error);
- partitions carry no error, a leader of -1 when they have none, and no eligible leader replicas
  (kcompat does not implement KIP-966's ELR); a replica is offline when its broker is not
  registered, as in Metadata;
- with an authorizer, topics without DESCRIBE are left out of an all-topics answer and answered
  TOPIC_AUTHORIZATION_FAILED by name; ``topic_authorized_operations`` lists what the ACLs allow.
"""

from __future__ import annotations

from kcompat.broker.authz import TOPIC, Op
from kcompat.protocol.topic_names import INTERNAL_TOPICS, validate_topic_name
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.messages.describe_topic_partitions import DescribeTopicPartitionsResponse as R
from kcompat.protocol.primitives import ZERO_UUID

API_KEY = 75
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx, req):
    services = ctx.services
    image = services.image
    cursor = req.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    fetch_all = not req.topics
    names = set(image.topics) if fetch_all else {t.name for t in req.topics}
    names = {n for n in names if n >= cursor_topic}
    if cursor is not None and (cursor.partition_index < 0 or (not fetch_all and cursor.topic_name not in names)):
        return error_response(req, ctx.api_version, ErrorCode.INVALID_REQUEST)
    remaining = max(min(services.config.get("max.request.partition.size.limit"), req.response_partition_limit), 1)
    topics_out = []
    refused = []   # Kafka lists the topics that may not be described after the others
    next_cursor = None
    for name in sorted(names):
        if remaining <= 0:
            next_cursor = R.Cursor(topic_name=name, partition_index=0)
            break
        if not ctx.authorize(Op.DESCRIBE, TOPIC, name):
            if not fetch_all:   # not disclosed: left out of "all", refused by name
                refused.append(R.DescribeTopicPartitionsResponseTopic(
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=ZERO_UUID,
                    is_internal=False, partitions=[]))
            continue
        t = image.topics.get(name)
        if t is None:
            if not fetch_all:
                topics_out.append(R.DescribeTopicPartitionsResponseTopic(
                    error_code=_missing_error(name), name=name, topic_id=ZERO_UUID,
                    is_internal=name in INTERNAL_TOPICS, partitions=[]))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor_topic else 0
        upper = min(len(t.partitions), start + remaining)
        partitions = []
        for pid in range(start, upper):
            p = t.partitions.get(pid)
            if p is None:
                continue
            partitions.append(R.DescribeTopicPartitionsResponsePartition(
                error_code=ErrorCode.NONE, partition_index=pid, leader_id=p.leader, leader_epoch=p.leader_epoch,
                replica_nodes=list(p.replicas), isr_nodes=list(p.isr), eligible_leader_replicas=[],
                last_known_elr=[], offline_replicas=image.offline_replicas(p)))
        topics_out.append(R.DescribeTopicPartitionsResponseTopic(
            error_code=ErrorCode.NONE, name=name, topic_id=t.topic_id, is_internal=name in INTERNAL_TOPICS,
            partitions=partitions, topic_authorized_operations=ctx.authorized_operations(TOPIC, name)))
        if upper < len(t.partitions):
            next_cursor = R.Cursor(topic_name=name, partition_index=upper)
            break
        remaining -= len(partitions)
    return R(throttle_time_ms=0, topics=topics_out + refused, next_cursor=next_cursor)


def _missing_error(name: str) -> ErrorCode:
    try:
        validate_topic_name(name)
    except KafkaError:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def error_response(req, version, code):
    """Kafka's ``DescribeTopicPartitionsRequest.getErrorResponse``: each requested topic with the error."""
    return R(throttle_time_ms=0, next_cursor=None, topics=[
        R.DescribeTopicPartitionsResponseTopic(error_code=code, name=t.name, topic_id=ZERO_UUID, is_internal=False,
                                               partitions=[]) for t in req.topics])
