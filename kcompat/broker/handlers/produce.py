"""Produce (key 0), versions 3-13 (0-13 advertised, see ``ADVERTISED_MIN_VERSION``): append record
batches to partition logs.

As Kafka's ``KafkaApis.handleProduceRequest``; the appends, acks and the wait for replication
are :meth:`kcompat.isr.replica_manager.ReplicaManager.append_records` (Kafka's
``ReplicaManager.appendRecords`` and ``DelayedProduce``, see :mod:`kcompat.isr.append_records`):

- ``acks`` must be -1, 0 or 1 (else INVALID_REQUIRED_ACKS for every partition);
- acks=-1 fails with NOT_ENOUGH_REPLICAS when the ISR is smaller than ``min.insync.replicas``
  (before appending); otherwise the answer waits until every ISR member has the batch, at most
  the request's ``timeout_ms`` (REQUEST_TIMED_OUT);
- v10+: a NOT_LEADER_OR_FOLLOWER partition carries ``current_leader`` and the response the
  leaders' ``node_endpoints`` (KIP-951, :mod:`kcompat.broker.leader_hints`);
- acks=0 sends no response; if any partition failed, the connection is closed instead so that
  the producer notices (Kafka does the same);
- unknown topics are auto-created when ``auto.create.topics.enable``; an unknown partition of an
  existing topic is UNKNOWN_TOPIC_OR_PARTITION;
- a transactional batch that opens its producer's transaction in a partition is verified with
  the transaction coordinator first (KIP-890 part 1): locally, or with AddPartitionsToTxn
  ``verify_only`` when the coordinator is another broker (``ReplicaManager.handle_produce_append``);
  a partition not in the transaction is TRANSACTION_ABORTABLE from v11 on, INVALID_TXN_STATE
  before (Kafka 4.3.1's ``genericErrorSupported``);
- v12 is a transaction.version 2 client's (KIP-890 part 2; Kafka's clients send v12+ in a
  transaction only once TV2 is finalized): a transactional batch that opens its producer's
  transaction in a partition has that partition added to the transaction by the coordinator (no
  AddPartitionsToTxn from the client), as Kafka 4.3.1's
  ``produceRequestVersionToTransactionSupportedOperation`` -> ``addPartition`` decides by the
  request version alone; the coordinator's refusals reach the batch as for verification
  (INVALID_PRODUCER_EPOCH when fenced, NOT_ENOUGH_REPLICAS while it is busy, loading or moved);
- v13 names topics by id (KIP-516): ids are resolved through the metadata image, an unknown id is
  UNKNOWN_TOPIC_ID for each of its partitions (never auto-created), and the response carries the
  ids (Kafka 4.3.1's ``KafkaApis.handleProduceRequest``); older versions skip this step;
- per-partition validation (:mod:`kcompat.log.validation`) and idempotence live in
  :class:`kcompat.isr.partition.Partition`;
- with an authorizer: WRITE on the transactional id when the batches are transactional
  (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for everything) and WRITE on each topic (TOPIC_AUTHORIZATION_FAILED for its partitions); a topic is
  auto-created only with WRITE and CREATE (on the cluster or the topic).
"""

from __future__ import annotations

import asyncio

from kcompat.broker.authz import TOPIC, TRANSACTIONAL_ID, Op, may_create_topic, then
from kcompat.broker.context import NO_RESPONSE
from kcompat.broker.quota.throttle import produce_quota
from kcompat.broker.leader_hints import PRODUCE_HINT_ERRORS, add_leader_hints
from kcompat.broker.handlers._topic_ids import resolve_names
from kcompat.isr.append_records import ProducePartitionResult
from kcompat.protocol.topic_names import validate_topic_name
from kcompat.protocol import records as rb
from kcompat.protocol.errors import ErrorCode, KafkaError, txn_abortable_error
from kcompat.protocol.messages.produce import ProduceResponse as R

API_KEY = 0
MIN_VERSION = 3
MAX_VERSION = 13
TOPIC_IDS_MIN_VERSION = 13   # topics by id instead of name (KIP-516)
ADD_PARTITIONS_MIN_VERSION = 12   # partitions added to the transaction by the broker (KIP-890 part 2)
GENERIC_TXN_ERROR_MIN_VERSION = 11   # TRANSACTION_ABORTABLE for a partition not in the transaction (KIP-890)
# ApiVersions lists Produce from v0 although v0-v2 (the pre-0.11 message formats) are refused with
# UNSUPPORTED_VERSION, as Kafka 4.0 does (KAFKA-18659, ``PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION``):
# librdkafka before 2.8 decides whether the broker can take gzip, snappy and lz4 by whether it
# advertises Produce v0 (librdkafka #4956), and otherwise silently sends such batches uncompressed.
# Clients pick the highest common version, so none of them chooses v0-v2 because of this.
ADVERTISED_MIN_VERSION = 0



@produce_quota   # producer_byte_rate (KIP-13, KIP-219)
def handle(ctx, req):
    """Append at once, or first auto-create the topics that do not exist yet (kcompat, as the
    single-node issue asks; Kafka creates topics only from Metadata)."""
    services = ctx.services
    # the batch headers are read only when the principal lacks WRITE on the transactional id
    if req.transactional_id and not ctx.authorize(Op.WRITE, TRANSACTIONAL_ID, req.transactional_id) \
            and _has_transactional_records(req):
        if req.acks == 0:
            ctx.connection.close("a produce request with acks=0 failed; closing so that the producer notices")
            return NO_RESPONSE
        return error_response(req, ctx.api_version, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if ctx.api_version >= TOPIC_IDS_MIN_VERSION:
        return _by_topic_id(ctx, req)
    if services.config.get("auto.create.topics.enable"):
        missing = [td.name for td in req.topic_data if td.name not in services.image.topics and _valid(td.name)
                   and ctx.authorize(Op.WRITE, TOPIC, td.name) and may_create_topic(ctx, td.name)]
        if missing:
            return _create_then_append(ctx, req, list(dict.fromkeys(missing)))
    return _append_all(ctx, req)


def _by_topic_id(ctx, req):
    """v13: each topic's name from its id; the topics with unknown ids leave the request and are
    answered UNKNOWN_TOPIC_ID (with the id) beside the others' results."""
    unknown = resolve_names(ctx.services.image, req.topic_data)
    known = req.topic_data = [td for td in req.topic_data if td.name]
    unknown_responses = [R.TopicProduceResponse(topic_id=td.topic_id, partition_responses=[
        _error(pd.index, ErrorCode.UNKNOWN_TOPIC_ID, TOPIC_IDS_MIN_VERSION, None) for pd in td.partition_data])
        for td in unknown]
    if not known:
        if req.acks == 0:
            ctx.connection.close("a produce request with acks=0 failed; closing so that the producer notices")
            return NO_RESPONSE
        return R(responses=unknown_responses, throttle_time_ms=0)
    return then(_append_all(ctx, req, bool(unknown)), lambda resp: _with_topic_ids(req, resp, unknown_responses))


def _with_topic_ids(req, resp, unknown_responses: list):
    """v13: the answered topics carry their ids (request order), then the unknown ones."""
    if resp is NO_RESPONSE:
        return resp
    for td, tr in zip(req.topic_data, resp.responses):
        tr.topic_id = td.topic_id
    resp.responses.extend(unknown_responses)
    return resp


async def _create_then_append(ctx, req, names: list[str]):
    await ctx.services.auto_create_topics(names)
    result = _append_all(ctx, req)
    return await result if asyncio.iscoroutine(result) else result


def _entries(req) -> list[tuple[str, int, object]]:
    return [(td.name, pd.index, pd.records) for td in req.topic_data for pd in td.partition_data]


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


def _append_all(ctx, req, failed: bool = False):
    """Append the partitions of the topics the principal may write
    (:meth:`ReplicaManager.handle_produce_append`, which verifies transactional batches with a
    remote transaction coordinator first, KIP-890); the others fail with TOPIC_AUTHORIZATION_FAILED."""
    rm = ctx.services.replica_manager
    writable = {td.name: ctx.authorize(Op.WRITE, TOPIC, td.name) for td in req.topic_data}
    entries = [e for e in _entries(req) if writable[e[0]]]
    for td in req.topic_data:
        if not writable[td.name]:
            for pd in td.partition_data:
                rm.stats.produce_failed(td.name, len(pd.records or b""))
    results = rm.handle_produce_append(entries, acks=req.acks, timeout_ms=req.timeout_ms,
                                       transactional_id=req.transactional_id,
                                       add_partitions=ctx.api_version >= ADD_PARTITIONS_MIN_VERSION)
    return then(results, lambda done: _respond(ctx, req, writable, done, failed))


def _respond(ctx, req, writable: dict[str, bool], results: list[ProducePartitionResult], failed: bool = False):
    """The ProduceResponse: the results of the appended partitions, in request order; acks=0
    answers nothing, and closes the connection if any partition failed."""
    version = ctx.api_version
    appended = iter(results)   # the authorized partitions, in request order
    topics = []
    for td in req.topic_data:
        parts = []
        for pd in td.partition_data:
            r = next(appended) if writable[td.name] else None
            if r is None:
                parts.append(_error(pd.index, ErrorCode.TOPIC_AUTHORIZATION_FAILED, version, None))
                failed = True
                continue
            failed = failed or r.error != ErrorCode.NONE
            parts.append(_partition_response(pd.index, r, version))
        topics.append(R.TopicProduceResponse(name=td.name, partition_responses=parts))
    if req.acks == 0:
        if failed:
            ctx.connection.close("a produce request with acks=0 failed; closing so that the producer notices")
        return NO_RESPONSE
    return _with_leader_hints(ctx, R(responses=topics, throttle_time_ms=0))


def _partition_response(index: int, r: ProducePartitionResult, version: int):
    if r.error != ErrorCode.NONE:
        # a partition not in the transaction: TRANSACTION_ABORTABLE from v11 on (KIP-890)
        code = ErrorCode(txn_abortable_error(r.error, version >= GENERIC_TXN_ERROR_MIN_VERSION))
        resp = _error(index, code, version, r.message, r.record_errors)
        resp.log_start_offset = r.log_start_offset
        return resp
    return R.PartitionProduceResponse(index=index, error_code=ErrorCode.NONE, base_offset=r.base_offset,
                                      log_append_time_ms=r.log_append_time, log_start_offset=r.log_start_offset)


def _with_leader_hints(ctx, response):
    """v10+: NOT_LEADER_OR_FOLLOWER partitions name their current leader (KIP-951)."""
    if ctx.api_version >= 10:
        response.node_endpoints = add_leader_hints(
            ctx.services.metadata_cache, ctx.listener_name,
            ((t.name, p.index, p) for t in response.responses for p in t.partition_responses),
            PRODUCE_HINT_ERRORS, R.LeaderIdAndEpoch, R.NodeEndpoint)
    return response


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
    return R(responses=[R.TopicProduceResponse(name=td.name, topic_id=td.topic_id, partition_responses=[
        _error(pd.index, code, version, None) for pd in td.partition_data]) for td in req.topic_data])
