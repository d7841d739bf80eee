"""DescribeProducers (key 61), version 0: the producer state of partitions this broker leads —
producer id, epoch, last sequence and timestamp, coordinator epoch, and the start offset of an open
transaction (KIP-664, ``kafka-transactions describe-producers``).

With an authorizer READ on the topic is required (TOPIC_AUTHORIZATION_FAILED).
"""

from kcompat.broker.authz import Op, TOPIC
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.describe_producers import DescribeProducersResponse as R

API_KEY = 61
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx, req):
    topics = []
    for t in req.topics:
        parts = []
        readable = ctx.authorize(Op.READ, TOPIC, t.name)
        for index in t.partition_indexes:
            p = ctx.services.replica_manager.get(t.name, index) if readable else None
            if not readable:
                parts.append(R.PartitionResponse(partition_index=index,
                                                 error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                                 error_message=None, active_producers=[]))
                continue
            if p is None:
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
