"""Produce (key 0), versions 3-11: append record batches to partition logs.

As Kafka's ``KafkaApis.handleProduceRequest`` / ``ReplicaManager.appendRecords``:

- ``acks`` must be -1, 0 or 1 (else INVALID_REQUIRED_ACKS for every partition);
- acks=-1 fails with NOT_ENOUGH_REPLICAS when the ISR is smaller than ``min.insync.replicas``;
  on a single node the ISR is this broker, so acks=-1 completes as soon as the batch is written;
- acks=0 sends no response; if any partition failed, the connection is closed instead so that
  the producer notices (Kafka does the same);
- unknown topics are auto-created when ``auto.create.topics.enable``; an unknown partition of an
  existing topic is UNKNOWN_TOPIC_OR_PARTITION;
- per-partition validation and idempotence live in :class:`kcompat.isr.partition.Partition`.
"""

from __future__ import annotations

from kcompat.broker.context import NO_RESPONSE
from kcompat.kraft.controller import validate_topic_name
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.messages.produce import ProduceResponse as R

API_KEY = 0
MIN_VERSION = 3
MAX_VERSION = 11

# errors that Kafka reports with record_errors (ProduceResponse v8+, KIP-467)
_RECORD_ERRORS = (ErrorCode.INVALID_TIMESTAMP, ErrorCode.INVALID_RECORD)


def handle(ctx, req):
    """Append at once, or first auto-create the topics that do not exist yet (kcompat, as the
    single-node issue asks; Kafka creates topics only from Metadata)."""
    broker = ctx.broker
    if broker.config.get("auto.create.topics.enable"):
        missing = [td.name for td in req.topic_data if td.name not in broker.image.topics and _valid(td.name)]
        if missing:
            return _create_then_append(ctx, req, list(dict.fromkeys(missing)))
    return _append_all(ctx, req)


async def _create_then_append(ctx, req, names: list[str]):
    await ctx.broker.auto_create_topics(names)
    return _append_all(ctx, req)


def _valid(name: str) -> bool:
    try:
        validate_topic_name(name)
    except KafkaError:
        return False
    return True


def _append_all(ctx, req):
    broker = ctx.broker
    version = ctx.api_version
    acks = req.acks
    now = broker.now_ms()
    failed = False
    topics = []
    for td in req.topic_data:
        parts = []
        for pd in td.partition_data:
            if acks not in (-1, 0, 1):
                resp = _error(pd.index, ErrorCode.INVALID_REQUIRED_ACKS, version, None)
            else:
                resp = _append(broker, td.name, pd, acks, now, version, req.transactional_id)
            failed = failed or resp.error_code != ErrorCode.NONE
            parts.append(resp)
        topics.append(R.TopicProduceResponse(name=td.name, partition_responses=parts))
    if acks == 0:
        if failed:
            ctx.connection.close("a produce request with acks=0 failed; closing so that the producer notices")
        return NO_RESPONSE
    return R(responses=topics, throttle_time_ms=0)


def _append(broker, topic: str, pd, acks: int, now: int, version: int, transactional_id: str | None):
    partition = broker.replica_manager.get(topic, pd.index)
    if partition is None:
        if topic not in broker.image.topics:
            try:
                validate_topic_name(topic)
            except KafkaError as e:
                # Kafka: a topic not in the metadata cache is UNKNOWN_TOPIC_OR_PARTITION for
                # Produce, whatever its name (INVALID_TOPIC_EXCEPTION is Metadata's answer)
                return _error(pd.index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, version,
                              f"This server does not host this topic-partition. ({e.message})")
        if broker.leader_of(topic, pd.index) is not None:  # exists, hosted elsewhere
            return _error(pd.index, ErrorCode.NOT_LEADER_OR_FOLLOWER, version,
                          f"Leader not local for partition {topic}-{pd.index} on broker {broker.node_id}")
        return _error(pd.index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, version,
                      "This server does not host this topic-partition.")
    if not broker.is_leader(topic, pd.index):
        return _error(pd.index, ErrorCode.NOT_LEADER_OR_FOLLOWER, version,
                      f"Leader not local for partition {topic}-{pd.index} on broker {broker.node_id}")
    if acks == -1:
        isr_size, min_isr = broker.isr_size_and_min(topic, pd.index)
        if isr_size < min_isr:
            return _error(pd.index, ErrorCode.NOT_ENOUGH_REPLICAS, version,
                          f"The size of the current ISR {isr_size} is insufficient to satisfy the "
                          f"min.isr requirement of {min_isr} for partition {topic}-{pd.index}")
    try:
        info = partition.append(pd.records, now, transactional_id)
    except KafkaError as e:
        return _error(pd.index, e.code, version, e.message)
    return R.PartitionProduceResponse(index=pd.index, error_code=ErrorCode.NONE, base_offset=info.base_offset,
                                      log_append_time_ms=info.log_append_time,
                                      log_start_offset=info.log_start_offset)


def _error(index: int, code: ErrorCode, version: int, message: str | None):
    resp = R.PartitionProduceResponse(index=index, error_code=code, base_offset=-1, log_append_time_ms=-1,
                                      log_start_offset=-1)
    if version >= 8:
        resp.error_message = message
        if code in _RECORD_ERRORS:
            resp.record_errors = [R.BatchIndexAndErrorMessage(batch_index=0, batch_index_error_message=message)]
    return resp


def error_response(req, version, code):
    return R(responses=[R.TopicProduceResponse(name=td.name, partition_responses=[
        _error(pd.index, code, version, None) for pd in td.partition_data]) for td in req.topic_data])
