"""DescribeProducers (key 61), version 0: the producer state of partitions this broker leads —
producer id, epoch, last sequence and timestamp, coordinator epoch, and the start offset of an open
transaction (KIP-664, ``kafka-transactions describe-producers``).

Per topic, as Kafka 4.3.1 checks it: an invalid name is INVALID_TOPIC_EXCEPTION, and with an
authorizer READ is required (TOPIC_AUTHORIZATION_FAILED), each with Kafka's text; a topic that does
not exist is UNKNOWN_TOPIC_OR_PARTITION with "This server does not host this topic-partition.", a
partition of an existing topic not hosted here the same code without text.
"""

from kcompat.broker.authz import Op, TOPIC
from kcompat.protocol.errors import ErrorCode, KafkaError, default_message
from kcompat.protocol.topic_names import validate_topic_name
from kcompat.protocol.messages.describe_producers import DescribeProducersResponse as R

API_KEY = 61
MIN_VERSION = 0
MAX_VERSION = 0


def _topic_error(ctx, name: str) -> tuple[ErrorCode, str] | None:
    """KafkaApis.handleDescribeProducersRequest's checks of a topic, in its order, with the text
    its ApiError carries: an invalid name, no READ, a topic not in the metadata."""
    try:
        validate_topic_name(name)
    except KafkaError as e:
        return e.code, e.message
    if not ctx.authorize(Op.READ, TOPIC, name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED, default_message(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    if name not in ctx.services.image.topics:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, default_message(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    return None


def handle(ctx, req):
    topics = []
    for t in req.topics:
        parts = []
        error = _topic_error(ctx, t.name)
        for index in t.partition_indexes:
            if error is not None:
                parts.append(R.PartitionResponse(partition_index=index, error_code=error[0], error_message=error[1],
                                                 active_producers=[]))
                continue
            p = ctx.services.replica_manager.get(t.name, index)
            if p is None:   # not hosted here: no text (ReplicaManager.activeProducerState)
                parts.append(R.PartitionResponse(partition_index=index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                 error_message=None, active_producers=[]))
                continue
            producers = [R.ProducerState(producer_id=e.producer_id, producer_epoch=e.producer_epoch,
                                         last_sequence=e.last_seq, last_timestamp=e.last_timestamp,
                                         coordinator_epoch=e.coordinator_epoch,
                                         current_txn_start_offset=e.current_txn_first_offset)
                         for e in p.producer_state.producers.values()]
            parts.append(R.PartitionResponse(partition_index=index, error_code=ErrorCode.NONE, error_message=None,
                                             active_producers=producers))
        topics.append(R.TopicResponse(name=t.name, partitions=parts))
    return R(throttle_time_ms=0, topics=topics)


def error_response(req, version, code):
    return R(topics=[R.TopicResponse(name=t.name, partitions=[
        R.PartitionResponse(partition_index=i, error_code=code, active_producers=[]) for i in t.partition_indexes])
        for t in req.topics])
