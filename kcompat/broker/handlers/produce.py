"""Produce (key 0), versions 3-11 (0-11 advertised, see ``ADVERTISED_MIN_VERSION``): append record
batches to partition logs.

As Kafka's ``KafkaApis.handleProduceRequest`` / ``ReplicaManager.appendRecords``:

- ``acks`` must be -1, 0 or 1 (else INVALID_REQUIRED_ACKS for every partition);
- acks=-1 fails with NOT_ENOUGH_REPLICAS when the ISR is smaller than ``min.insync.replicas``
  (before appending); otherwise the answer waits until every ISR member has the batch (the high
  watermark passed it; Kafka's ``DelayedProduce``), at most the request's ``timeout_ms``
  (REQUEST_TIMED_OUT), NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below the minimum
  meanwhile, NOT_LEADER_OR_FOLLOWER if leadership moved; a partition whose only replica is this
  broker completes at once;
- v10+: a NOT_LEADER_OR_FOLLOWER partition carries ``current_leader`` and the response the
  leaders' ``node_endpoints`` (KIP-951, :mod:`kcompat.broker.leader_hints`);
- acks=0 sends no response; if any partition failed, the connection is closed instead so that
  the producer notices (Kafka does the same);
- unknown topics are auto-created when ``auto.create.topics.enable``; an unknown partition of an
  existing topic is UNKNOWN_TOPIC_OR_PARTITION;
- a transactional batch that opens its producer's transaction in a partition is verified with
  the transaction coordinator first (KIP-890 part 1): locally, or with AddPartitionsToTxn
  ``verify_only`` when the coordinator is another broker;
- per-partition validation and idempotence live in :class:`kcompat.isr.partition.Partition`;
- with an authorizer: WRITE on the transactional id when the batches are transactional
  (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for everything) and WRITE on each topic (TOPIC_AUTHORIZATION_FAILED for its partitions); a topic is
  auto-created only with WRITE and CREATE (on the cluster or the topic).
"""

from __future__ import annotations

import asyncio

from kcompat.broker.authz import TOPIC, TRANSACTIONAL_ID, Op, may_create_topic
from kcompat.broker.context import NO_RESPONSE
from kcompat.broker.leader_hints import PRODUCE_HINT_ERRORS, add_leader_hints
from kcompat.kraft.controller import validate_topic_name
from kcompat.protocol import records as rb
from kcompat.protocol.errors import ErrorCode, KafkaError, RecordValidationError
from kcompat.protocol.messages.produce import ProduceResponse as R

API_KEY = 0
MIN_VERSION = 3
MAX_VERSION = 11
# ApiVersions lists Produce from v0 although v0-v2 (the pre-0.11 message formats) are refused with
# UNSUPPORTED_VERSION, as Kafka 4.0 does (KAFKA-18659, ``PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION``):
# librdkafka before 2.8 decides whether the broker can take gzip, snappy and lz4 by whether it
# advertises Produce v0 (librdkafka #4956), and otherwise silently sends such batches uncompressed.
# Clients pick the highest common version, so none of them chooses v0-v2 because of this.
ADVERTISED_MIN_VERSION = 0



def handle(ctx, req):
    """Append at once, or first auto-create the topics that do not exist yet (kcompat, as the
    single-node issue asks; Kafka creates topics only from Metadata)."""
    broker = ctx.broker
    # the batch headers are read only when the principal lacks WRITE on the transactional id
    if req.transactional_id and not ctx.authorize(Op.WRITE, TRANSACTIONAL_ID, req.transactional_id) \
            and _has_transactional_records(req):
        if req.acks == 0:
            ctx.connection.close("a produce request with acks=0 failed; closing so that the producer notices")
            return NO_RESPONSE
        return error_response(req, ctx.api_version, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if broker.config.get("auto.create.topics.enable"):
        missing = [td.name for td in req.topic_data if td.name not in broker.image.topics and _valid(td.name)
                   and ctx.authorize(Op.WRITE, TOPIC, td.name) and may_create_topic(ctx, td.name)]
        if missing:
            return _create_then_append(ctx, req, list(dict.fromkeys(missing)))
    return _verify_then_append(ctx, req)


async def _create_then_append(ctx, req, names: list[str]):
    await ctx.broker.auto_create_topics(names)
    result = _verify_then_append(ctx, req)
    return await result if asyncio.iscoroutine(result) else result


def _verify_then_append(ctx, req):
    """Append; first, if a transactional batch opens the producer's transaction in a partition
    led here while the transaction coordinator is another broker, ask that coordinator (KIP-890
    part 1, Kafka ``ReplicaManager.appendRecordsWithTransactionVerification``)."""
    broker = ctx.broker
    tid = req.transactional_id
    verifying = tid and broker.replica_manager.txn_verifier is not None  # transaction.partition.verification.enable
    node = broker.txn.remote_coordinator(tid) if verifying else None
    if node is None:
        return _append_all(ctx, req)
    by_producer: dict[tuple[int, int], list[tuple[str, int]]] = {}
    for td in req.topic_data:
        for pd in td.partition_data:
            p = broker.replica_manager.get(td.name, pd.index)
            producer = p.transaction_to_verify(pd.records) if p is not None and p.is_leader else None
            if producer is not None:
                by_producer.setdefault(producer, []).append((td.name, pd.index))
    if not by_producer:
        return _append_all(ctx, req)
    return _append_after_remote_verification(ctx, req, node, by_producer)


async def _append_after_remote_verification(ctx, req, node: int, by_producer: dict):
    timeout_s = max(0.1, min(req.timeout_ms, 30_000) / 1000.0)
    verified: dict[tuple[str, int], int] = {}
    for (producer_id, producer_epoch), tps in by_producer.items():
        verified.update(await ctx.broker.txn.verify_remote(node, req.transactional_id, producer_id,
                                                           producer_epoch, tps, timeout_s))
    result = _append_all(ctx, req, verified)
    return await result if asyncio.iscoroutine(result) else result


def _has_transactional_records(req) -> bool:
    """Kafka's ``ProduceRequest.hasTransactionalRecords``: a partition's first batch is transactional
    (only then is WRITE on the transactional id checked)."""
    for td in req.topic_data:
        for pd in td.partition_data:
            records = pd.records
            if records and len(records) >= rb.HEADER_SIZE:
                try:
                    if rb.parse_header(records).is_transactional:
                        return True
                except Exception:   # a corrupt batch: the append answers for it
                    continue
    return False


def _valid(name: str) -> bool:
    try:
        validate_topic_name(name)
    except KafkaError:
        return False
    return True


def _append_all(ctx, req, verified: dict | None = None):
    """Append every partition's batch; ``verified``: ``{(topic, partition): error code}`` from
    the remote transaction coordinator for batches that needed KIP-890 verification."""
    broker = ctx.broker
    version = ctx.api_version
    acks = req.acks
    now = broker.now_ms()
    failed = False
    stats = broker.replica_manager.stats
    topics = []
    waits = []   # (partition response, Partition, required offset) for acks=-1
    for td in req.topic_data:
        parts = []
        writable = ctx.authorize(Op.WRITE, TOPIC, td.name)
        for pd in td.partition_data:
            if acks not in (-1, 0, 1):
                resp, required = _error(pd.index, ErrorCode.INVALID_REQUIRED_ACKS, version, None), -1
            elif not writable:
                resp, required = _error(pd.index, ErrorCode.TOPIC_AUTHORIZATION_FAILED, version, None), -1
            else:
                resp, partition, required = _append(broker, td.name, pd, acks, now, version, req.transactional_id,
                                                    verified.get((td.name, pd.index)) if verified else None)
                if partition is not None and acks == -1 and partition.high_watermark < required:
                    waits.append((resp, partition, required))
            if resp.error_code == ErrorCode.NONE:
                stats.produced(td.name, len(pd.records or b""), max(0, required - resp.base_offset))
            else:
                failed = True
                stats.produce_failed(td.name, len(pd.records or b""))
            parts.append(resp)
        topics.append(R.TopicProduceResponse(name=td.name, partition_responses=parts))
    if acks == 0:
        if failed:
            ctx.connection.close("a produce request with acks=0 failed; closing so that the producer notices")
        return NO_RESPONSE
    if waits:
        return _await_replication(ctx, R(responses=topics, throttle_time_ms=0), waits, req.timeout_ms)
    return _with_leader_hints(ctx, R(responses=topics, throttle_time_ms=0))


async def _await_replication(ctx, response, waits: list, timeout_ms: int):
    """DelayedProduce: wait for the ISR of every acks=-1 partition, together, up to ``timeout_ms``."""
    version = ctx.api_version
    codes = await asyncio.gather(*(p.wait_for_replication(required, timeout_ms) for _, p, required in waits))
    for (resp, partition, _required), code in zip(waits, codes):
        if code != ErrorCode.NONE:
            failed = _error(resp.index, code, version, f"{code.name} for {partition.topic}-{partition.partition_id}")
            resp.error_code, resp.base_offset, resp.log_append_time_ms = failed.error_code, -1, -1
            resp.log_start_offset = -1
            if version >= 8:
                resp.error_message = failed.error_message
    return _with_leader_hints(ctx, response)


def _with_leader_hints(ctx, response):
    """v10+: NOT_LEADER_OR_FOLLOWER partitions name their current leader (KIP-951)."""
    if ctx.api_version >= 10:
        response.node_endpoints = add_leader_hints(
            ctx.broker, ctx.listener_name,
            ((t.name, p.index, p) for t in response.responses for p in t.partition_responses),
            PRODUCE_HINT_ERRORS, R.LeaderIdAndEpoch, R.NodeEndpoint)
    return response


def _append(broker, topic: str, pd, acks: int, now: int, version: int, transactional_id: str | None,
            verified: int | None):
    """Append one partition's batch: (partition response, Partition or None, offset the HW must
    reach for acks=-1). ``verified``: the remote coordinator's verification answer, if asked."""
    resp = _append_one(broker, topic, pd, acks, now, version, transactional_id, verified)
    if isinstance(resp, tuple):
        return resp
    return resp, None, -1


def _append_one(broker, topic: str, pd, acks: int, now: int, version: int, transactional_id: str | None,
                verified: int | None):
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
    if not broker.is_leader(topic, pd.index) or not partition.is_leader:
        return _error(pd.index, ErrorCode.NOT_LEADER_OR_FOLLOWER, version,
                      f"Leader not local for partition {topic}-{pd.index} on broker {broker.node_id}")
    if verified:
        return _error(pd.index, ErrorCode(verified), version,
                      f"Transactional id {transactional_id} has no ongoing transaction with {topic}-{pd.index}")
    try:
        partition.check_min_isr(acks)
        info = partition.append(pd.records, now, transactional_id, txn_verified=verified == 0)
    except RecordValidationError as e:
        # KIP-467: every rejected record by its index; Kafka's ReplicaManager also answers the
        # partition's log start offset here
        resp = _error(pd.index, e.code, version, e.message, e.record_errors)
        resp.log_start_offset = partition.log_start_offset
        return resp
    except KafkaError as e:
        return _error(pd.index, e.code, version, e.message)
    return (R.PartitionProduceResponse(index=pd.index, error_code=ErrorCode.NONE, base_offset=info.base_offset,
                                       log_append_time_ms=info.log_append_time,
                                       log_start_offset=info.log_start_offset),
            partition, info.last_offset + 1)


def _error(index: int, code: ErrorCode, version: int, message: str | None,
           record_errors: list[tuple[int, str]] | None = None):
    """A failed partition; v8+ carries ``message`` and ``record_errors`` ``[(batch index, message)]``
    (KIP-467: only for record-level rejections, empty otherwise, as Kafka answers)."""
    resp = R.PartitionProduceResponse(index=index, error_code=code, base_offset=-1, log_append_time_ms=-1,
                                      log_start_offset=-1)
    if version >= 8:
        resp.error_message = message
        if record_errors:
            resp.record_errors = [R.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
                                  for i, m in record_errors]
    return resp


def error_response(req, version, code):
    return R(responses=[R.TopicProduceResponse(name=td.name, partition_responses=[
        _error(pd.index, code, version, None) for pd in td.partition_data]) for td in req.topic_data])
