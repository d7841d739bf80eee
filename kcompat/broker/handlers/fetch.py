"""Fetch (key 1), versions 4-18: read record batches, with long polling and fetch sessions.

As Kafka's ``KafkaApis.handleFetchRequest``: topics by name (v4-12) or by topic id (v13+,
UNKNOWN_TOPIC_ID if unknown); with an authorizer a consumer needs READ on each topic, a follower
CLUSTER_ACTION on the cluster (TOPIC_AUTHORIZATION_FAILED for the partitions otherwise, as Kafka
answers); v16+ NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH partitions carry the current leader
(KIP-951). v17's ReplicaDirectoryId (KIP-853) and v18's HighWatermark (KIP-1166), tagged fields of
each partition, are decoded and ignored: in Kafka 4.3.1 only KafkaRaftClient reads them (a broker's
FetchRequest.PartitionData carries neither), so a data-plane Fetch v17/v18 is answered as v16.

Fetch sessions (KIP-227, v7+) are :class:`kcompat.isr.fetch_session.FetchSessions`
(``ctx.services.fetch_sessions``): session id 0 with epoch -1 (librdkafka) is a sessionless full
fetch and takes the same path as before sessions existed; epoch 0 (kcompat's replica fetcher, Java
clients) asks for a session, whose id the response carries (0 when the cache has no room); other epochs
are incremental fetches of the session's partitions, answered with the partitions that changed,
or with FETCH_SESSION_ID_NOT_FOUND / INVALID_FETCH_SESSION_EPOCH / FETCH_SESSION_TOPIC_ID_ERROR
and no partitions. A throttled answer (``consumer_byte_rate``) leaves the session as it was
(Kafka's ``getThrottledResponse``).

The reads, the byte limits, read_committed, follower fetches, reads from a follower (KIP-392) and
long polling are :meth:`kcompat.isr.replica_manager.ReplicaManager.fetch_messages` (Kafka's
``ReplicaManager.fetchMessages`` and ``DelayedFetch``, see :mod:`kcompat.isr.fetch_messages`).
"""

from __future__ import annotations

from kcompat.broker.authz import TOPIC, Op, then
from kcompat.broker.leader_hints import FETCH_HINT_ERRORS, add_leader_hints
from kcompat.broker.quota.throttle import fetch_quota
from kcompat.isr.fetch_messages import FetchParams, FetchPartitionRequest, FetchPartitionResult
from kcompat.isr.fetch_session import FINAL_EPOCH, INVALID_SESSION_ID, FetchContext, FetchSessions
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.fetch import FetchResponse as R

API_KEY = 1
MIN_VERSION = 4
MAX_VERSION = 18

FOLLOWER_READS_MIN_VERSION = 11   # Fetch v11 carries rack_id: Kafka's ClientMetadata (KIP-392)

_NO_SESSIONS = FetchSessions(0, lambda topic_id: None)   # services without a session cache: slots=0


def _fetch(ctx, req):
    services = ctx.services
    version = ctx.api_version
    params = _params(ctx, req, version)
    if version >= 7 and (req.session_id != INVALID_SESSION_ID or req.session_epoch != FINAL_EPOCH):
        return _session_fetch(ctx, req, version, params)
    keys, requests = _requests(ctx, req, version)
    _authorize(requests, _readable(ctx, params.replica_id))
    results = services.replica_manager.fetch_messages(params, requests)
    return then(results, lambda done: _response(ctx, keys, requests, done))


def _session_fetch(ctx, req, version: int, params: FetchParams):
    """A fetch that names or asks for a session (Kafka's ``FetchManager.newContext``): read the
    context's partitions; with a ``consumer_byte_rate`` quota the session is updated only once the
    quota let the answer through (:class:`_SessionAnswer`)."""
    services = ctx.services
    sessions = services.fetch_sessions or _NO_SESSIONS
    keys, requests = _requests(ctx, req, version)
    forgotten = [(ft.topic_id if version >= 13 else ft.topic, p)
                 for ft in req.forgotten_topics_data for p in ft.partitions]
    context = sessions.new_context(version, req.session_id, req.session_epoch, params.replica_id >= 0, keys,
                                   requests, forgotten, services.now_ms())
    if context.error is not None:   # Kafka's SessionErrorContext
        return R(throttle_time_ms=0, error_code=context.error, session_id=INVALID_SESSION_ID, responses=[])
    _authorize(context.requests, _readable(ctx, params.replica_id))
    results = services.replica_manager.fetch_messages(params, context.requests)
    deferred = params.replica_id < 0 and services.quotas.fetch.enabled
    return then(results, lambda done: _SessionAnswer(ctx, context, done) if deferred
                else _session_response(ctx, context, done))


def _session_response(ctx, context: FetchContext, results: list[FetchPartitionResult]):
    """The answer, updating the session (Kafka's ``updateAndGenerateResponseData``)."""
    error, session_id, send = context.respond(results, ctx.services.now_ms())
    return _response(ctx, context.keys, context.requests, results, error, session_id, send)


class _SessionAnswer:
    """A session fetch's answer while ``consumer_byte_rate`` decides: ``responses`` are what it
    would send (the bytes the quota is charged, Kafka's ``getResponseSize``); :func:`_settled`
    makes the real answer, :func:`_throttled` the empty one, leaving the session untouched."""

    __slots__ = ("ctx", "context", "results", "responses")

    def __init__(self, ctx, context: FetchContext, results: list[FetchPartitionResult]) -> None:
        self.ctx = ctx
        self.context = context
        self.results = results
        send = context.would_send(results)
        self.responses = _response(ctx, context.keys, context.requests, results, ErrorCode.NONE, 0, send).responses


def _throttled(throttle_ms: int, answer):
    """A consumer over its ``consumer_byte_rate``: no data, the throttle time; an incremental
    fetch keeps its session (Kafka's ``getThrottledResponse``)."""
    error, session_id = answer.context.throttled() if type(answer) is _SessionAnswer else (ErrorCode.NONE, 0)
    return R(throttle_time_ms=throttle_ms, error_code=error, session_id=session_id, responses=[])


def _settled(answer):
    """The answer to send when the quota lets it through."""
    if type(answer) is _SessionAnswer:
        return _session_response(answer.ctx, answer.context, answer.results)
    return answer


handle = fetch_quota(_fetch, _throttled, _settled)   # consumer_byte_rate (KIP-13, KIP-219)


def _params(ctx, req, version: int) -> FetchParams:
    """The request-wide settings; a consumer's fetch from v11 with a ``rack_id`` may be answered
    with a preferred read replica when ``replica.selector.class`` is set (KIP-392)."""
    if version >= 15:
        rs = req.replica_state
        replica_id, replica_epoch = (rs.replica_id, rs.replica_epoch) if rs is not None else (-1, -1)
    else:
        replica_id, replica_epoch = req.replica_id, -1
    follower_reads = version >= FOLLOWER_READS_MIN_VERSION and replica_id < 0
    selector = ctx.services.config.get("replica.selector.class") if follower_reads and req.rack_id else None
    return FetchParams(
        replica_id=replica_id, replica_epoch=replica_epoch, max_wait_ms=req.max_wait_ms, min_bytes=req.min_bytes,
        max_bytes=req.max_bytes, isolation_level=req.isolation_level if replica_id < 0 else 0,
        follower_reads=follower_reads, rack_id=req.rack_id if version >= FOLLOWER_READS_MIN_VERSION else None,
        selector=selector or None,
        racks=lambda: {node: rack for node, _h, _p, rack in ctx.services.metadata_cache.live_broker_endpoints(ctx.listener_name)},
        zero_copy=getattr(ctx.connection, "zero_copy", False))


def _readable(ctx, replica_id: int):
    """``readable(topic name) -> bool``: a follower needs CLUSTER_ACTION, a consumer READ on the topic."""
    if replica_id >= 0:
        follower_ok = ctx.authorize_cluster(Op.CLUSTER_ACTION)
        return lambda name: follower_ok
    return lambda name: ctx.authorize(Op.READ, TOPIC, name)


def _requests(ctx, req, version: int) -> tuple[list, list[FetchPartitionRequest]]:
    """(topic key of each partition as the request named it, the partitions to read); a topic id
    the image does not know leaves the partition's topic name None (:func:`_authorize`)."""
    by_id = ctx.services.image.topics_by_id
    keys = []
    requests = []
    for ft in req.topics:
        if version >= 13:
            t = by_id.get(ft.topic_id)
            name = t.name if t is not None else None
            key = ft.topic_id
        else:
            name = key = ft.topic
        for fp in ft.partitions:
            keys.append(key)
            requests.append(FetchPartitionRequest(
                name, fp.partition, fp.fetch_offset, fp.partition_max_bytes, log_start_offset=fp.log_start_offset,
                current_leader_epoch=fp.current_leader_epoch if version >= 9 else -1,
                last_fetched_epoch=fp.last_fetched_epoch if version >= 12 else -1))
    return keys, requests


def _authorize(requests: list[FetchPartitionRequest], readable) -> None:
    """UNKNOWN_TOPIC_ID / TOPIC_AUTHORIZATION_FAILED on the partitions that get them."""
    allowed: dict[str, bool] = {}
    for r in requests:
        name = r.topic
        if name is None:
            r.error = ErrorCode.UNKNOWN_TOPIC_ID
            continue
        if name not in allowed:
            allowed[name] = readable(name)
        if not allowed[name]:
            r.error = ErrorCode.TOPIC_AUTHORIZATION_FAILED


def _partition_data(index: int, r: FetchPartitionResult):
    aborted = r.aborted
    if aborted is not None:
        aborted = [R.AbortedTransaction(producer_id=pid, first_offset=first) for pid, first in aborted]
    pd = R.PartitionData(partition_index=index, error_code=r.error, high_watermark=r.high_watermark,
                         last_stable_offset=r.last_stable_offset, log_start_offset=r.log_start_offset,
                         aborted_transactions=aborted, preferred_read_replica=r.preferred_read_replica,
                         records=r.records)
    if r.diverging is not None:
        pd.diverging_epoch = R.EpochEndOffset(epoch=r.diverging[0], end_offset=r.diverging[1])
    return pd


def _error_partition(index: int, code: ErrorCode):
    return R.PartitionData(partition_index=index, error_code=code, high_watermark=-1, last_stable_offset=-1,
                           log_start_offset=-1, aborted_transactions=None, preferred_read_replica=-1,
                           records=b"")


def _response(ctx, keys: list, requests: list[FetchPartitionRequest], results: list[FetchPartitionResult],
              error: ErrorCode = ErrorCode.NONE, session_id: int = INVALID_SESSION_ID, send: list[int] | None = None):
    """The FetchResponse, partitions grouped under their topics in request order (only the
    indexes ``send`` if given); v16+ with current-leader hints on NOT_LEADER_OR_FOLLOWER and
    FENCED_LEADER_EPOCH partitions (KIP-951)."""
    version = ctx.api_version
    by_topic: dict = {}
    if send is not None:
        keys = [keys[i] for i in send]
        requests = [requests[i] for i in send]
        results = [results[i] for i in send]
    for key, request, r in zip(keys, requests, results):
        by_topic.setdefault(key, []).append(_partition_data(request.partition, r))
    if version >= 13:
        responses = [R.FetchableTopicResponse(topic_id=k, partitions=v) for k, v in by_topic.items()]
    else:
        responses = [R.FetchableTopicResponse(topic=k, partitions=v) for k, v in by_topic.items()]
    resp = R(throttle_time_ms=0, error_code=error, session_id=session_id, responses=responses)
    if version >= 16 and any(r.error in FETCH_HINT_ERRORS for r in results):
        by_id = ctx.services.image.topics_by_id

        def name(t) -> str:
            if version < 13:
                return t.topic
            topic = by_id.get(t.topic_id)
            return topic.name if topic is not None else ""

        named = ((name(t), p.partition_index, p) for t in responses for p in t.partitions)
        resp.node_endpoints = add_leader_hints(ctx.services.metadata_cache, ctx.listener_name, named, FETCH_HINT_ERRORS,
                                               R.LeaderIdAndEpoch, R.NodeEndpoint)
    return resp


def error_response(req, version, code):
    responses = []
    for ft in req.topics:
        parts = [_error_partition(fp.partition, code) for fp in ft.partitions]
        if version >= 13:
            responses.append(R.FetchableTopicResponse(topic_id=ft.topic_id, partitions=parts))
        else:
            responses.append(R.FetchableTopicResponse(topic=ft.topic, partitions=parts))
    return R(error_code=code, session_id=0, responses=responses)
