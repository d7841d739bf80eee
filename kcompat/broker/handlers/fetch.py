"""Fetch (key 1), versions 4-16: read record batches, with long polling.

As Kafka's ``KafkaApis.handleFetchRequest`` / ``ReplicaManager.fetchMessages`` / ``DelayedFetch``:

- topics by name (v4-12) or by topic id (v13+, UNKNOWN_TOPIC_ID if unknown);
- per partition at most ``partition_max_bytes`` and in total at most ``max_bytes``; the first
  partition that has data returns at least one whole batch even if it is larger (KIP-74);
- a fetch offset inside a batch returns the whole batch (the consumer skips earlier records);
- OFFSET_OUT_OF_RANGE outside [log start offset, log end offset], an empty answer from the high
  watermark to the log end offset (Kafka ``LocalLog.read``); FENCED_LEADER_EPOCH /
  UNKNOWN_LEADER_EPOCH when ``current_leader_epoch`` is older / newer than ours (KIP-320);
- read_committed reads only below the last stable offset;
- if fewer than ``min_bytes`` are available and no partition has an error, the request waits up to
  ``max_wait_ms``; whatever moves the end of what it may read (an append for a follower, a
  high-watermark or LSO advance for a consumer) wakes it (no polling), and it answers as soon as
  ``min_bytes`` are available or the time is up;
- fetch sessions (KIP-227): we answer session id 0 (sessionless full fetches); a request for an
  existing session id gets FETCH_SESSION_ID_NOT_FOUND, since we never hand one out;
- a follower's fetch (``replica_id`` before v15, ``replica_state`` from v15; KIP-903) reads up to
  the log end offset, not the HW, records the follower's position (which advances the HW and
  may expand the ISR) and, from v12, answers ``diverging_epoch`` instead of records when the
  follower's ``last_fetched_epoch`` does not match this log (KIP-320); its long poll also ends
  when the HW moves, so followers learn the HW promptly;
- v16+: NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH partitions carry ``current_leader`` and the
  response the leaders' ``node_endpoints`` (KIP-951, :mod:`kcompat.broker.leader_hints`);
- fetch from the closest replica (KIP-392): a consumer's fetch from v11 (which carries its
  ``rack_id``) may be served by a follower, up to the follower's high watermark (LSO for
  read_committed; an empty answer from there to its log end offset, OFFSET_OUT_OF_RANGE above it,
  FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH against the follower's leader epoch, and
  NOT_LEADER_OR_FOLLOWER once it no longer holds the partition, as Kafka's
  ``Partition.fetchRecords`` with ``fetchOnlyLeader`` false); the leader, when
  ``replica.selector.class`` is Kafka's RackAwareReplicaSelector, answers such a fetch with
  ``preferred_read_replica`` and no records when a follower in the consumer's rack should serve it
  (:mod:`kcompat.isr.replica_selector`), and answers at once. Older consumers read from the leader;
- with an authorizer: a consumer needs READ on each topic, a follower CLUSTER_ACTION on the
  cluster (TOPIC_AUTHORIZATION_FAILED for the partitions otherwise, as Kafka answers).
"""

from __future__ import annotations

import asyncio

from kcompat.broker.authz import TOPIC, Op
from kcompat.broker.leader_hints import FETCH_HINT_ERRORS, add_leader_hints
from kcompat.isr.replica_selector import NO_PREFERRED_REPLICA, preferred_read_replica
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.messages.fetch import FetchResponse as R

API_KEY = 1
MIN_VERSION = 4
MAX_VERSION = 16

READ_COMMITTED = 1
FOLLOWER_READS_MIN_VERSION = 11   # Fetch v11 carries rack_id: Kafka's ClientMetadata (KIP-392)


class _Plan:
    """The resolved partitions of one fetch request: (topic key, name, FetchPartition, Partition|err)."""

    __slots__ = ("entries",)

    def __init__(self) -> None:
        self.entries = []


def handle(ctx, req):
    broker = ctx.broker
    version = ctx.api_version
    if version >= 7 and req.session_id != 0:
        return R(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0, responses=[])
    plan = _resolve(broker, req, version, _readable(ctx, req, version))
    responses, total, has_error = _read_all(broker, req, plan, version, _replica_of(req, version),
                                            ctx.listener_name)
    if req.max_wait_ms <= 0 or total >= max(req.min_bytes, 1) or has_error or not plan.entries \
            or broker.shutting_down:
        return _response(ctx, responses)
    return _delayed(ctx, req, plan, version)


def _readable(ctx, req, version: int):
    """``name -> bool``: may this fetch read the topic (a follower: CLUSTER_ACTION on the
    cluster; a consumer: READ on the topic)."""
    if _replica_of(req, version)[0] >= 0:
        follower_ok = ctx.authorize_cluster(Op.CLUSTER_ACTION)
        return lambda name: follower_ok
    return lambda name: ctx.authorize(Op.READ, TOPIC, name)


def _replica_of(req, version: int) -> tuple[int, int]:
    """(replica id, broker epoch) of the fetching follower; replica id -1 for consumers."""
    if version >= 15:
        rs = req.replica_state
        return (rs.replica_id, rs.replica_epoch) if rs is not None else (-1, -1)
    return req.replica_id, -1


def _resolve(broker, req, version: int, readable=lambda name: True) -> _Plan:
    plan = _Plan()
    image = broker.image
    # a consumer with client metadata may read from a follower (Kafka FetchParams.fetchOnlyLeader)
    any_replica = version >= FOLLOWER_READS_MIN_VERSION and _replica_of(req, version)[0] < 0
    for ft in req.topics:
        if version >= 13:
            t = image.topics_by_id.get(ft.topic_id)
            name = t.name if t is not None else None
            key = ft.topic_id
        else:
            name = ft.topic
            key = ft.topic
        for fp in ft.partitions:
            if name is None:
                target = ErrorCode.UNKNOWN_TOPIC_ID
            elif not readable(name):
                target = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            else:
                target = broker.replica_manager.get(name, fp.partition)
                leader = broker.leader_of(name, fp.partition)
                if target is None and leader is None:
                    target = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif target is None or (leader != broker.node_id and not any_replica):
                    target = ErrorCode.NOT_LEADER_OR_FOLLOWER
                elif version >= 9 and fp.current_leader_epoch >= 0 and fp.current_leader_epoch != target.leader_epoch:
                    target = (ErrorCode.FENCED_LEADER_EPOCH if fp.current_leader_epoch < target.leader_epoch
                              else ErrorCode.UNKNOWN_LEADER_EPOCH)
            plan.entries.append((key, fp, target))
    return plan


def _read_all(broker, req, plan: _Plan, version: int, replica: tuple[int, int] = (-1, -1),
              listener_name: str | None = None):
    """Read every partition of the plan; returns (topic responses, bytes read, answer now: an
    error, a diverging epoch or a preferred read replica)."""
    replica_id, replica_epoch = replica
    now = broker.now_ms()
    selector = broker.config.get("replica.selector.class") \
        if replica_id < 0 and version >= FOLLOWER_READS_MIN_VERSION and req.rack_id else None
    racks = None
    isolation = req.isolation_level if replica_id < 0 else 0
    limit = req.max_bytes if version >= 3 else 2**31 - 1
    min_one = True
    total = 0
    has_error = False
    stats = broker.replica_manager.stats
    by_topic: dict = {}
    order = []
    for key, fp, target in plan.entries:
        if key not in by_topic:
            by_topic[key] = []
            order.append(key)
        if isinstance(target, ErrorCode):
            has_error = True
            by_topic[key].append(_error_partition(fp.partition, target))
            continue
        p = target
        max_bytes = min(fp.partition_max_bytes, limit)
        if max_bytes < 0:
            # Kafka's LogSegment.read rejects a negative size (IllegalArgumentException): the
            # partition fails with UNKNOWN_SERVER_ERROR, the rest of the fetch goes on
            has_error = True
            by_topic[key].append(_error_partition(fp.partition, ErrorCode.UNKNOWN_SERVER_ERROR))
            continue
        diverging = None
        if selector is not None and p.is_leader:
            if racks is None:
                racks = {node: rack for node, _h, _p, rack in broker.live_broker_endpoints(listener_name)}
            preferred = preferred_read_replica(selector, p, req.rack_id, fp.fetch_offset, now,
                                               lambda b: (b in racks, racks.get(b)))
            if preferred != NO_PREFERRED_REPLICA:
                has_error = True   # answer at once (Kafka: "has a preferred read replica")
                # no read, so no aborted transactions list at all (Kafka's empty FetchDataInfo: null)
                by_topic[key].append(R.PartitionData(
                    partition_index=fp.partition, error_code=ErrorCode.NONE, high_watermark=p.high_watermark,
                    last_stable_offset=p.last_stable_offset, log_start_offset=p.log_start_offset,
                    aborted_transactions=None, preferred_read_replica=preferred, records=b""))
                continue
        try:
            if replica_id >= 0:
                records, diverging = p.read_for_follower(
                    replica_id, fetch_offset=fp.fetch_offset, log_start_offset=fp.log_start_offset,
                    last_fetched_epoch=fp.last_fetched_epoch if version >= 12 else -1, max_bytes=max_bytes,
                    now_ms=now, broker_epoch=replica_epoch)
            else:
                records = p.read(fp.fetch_offset, max_bytes, isolation_level=isolation, min_one_batch=min_one)
            code = ErrorCode.NONE
        except KafkaError as e:
            records = b""
            code = e.code
            has_error = True
        n = len(records)
        if replica_id < 0:
            stats.fetched(p.topic, n, code != ErrorCode.NONE)
        if n:
            if replica_id < 0:
                p.count_consumer_bytes(n)
            min_one = False
            limit = max(0, limit - n)
            total += n
        aborted = None
        if isolation == READ_COMMITTED:
            # the aborted transactions the fetched batches may hold (KIP-98); the consumer drops them
            aborted = [R.AbortedTransaction(producer_id=pid, first_offset=first)
                       for pid, first in p.aborted_transactions(fp.fetch_offset, p.last_stable_offset)] \
                if n else []
        pd = R.PartitionData(
            partition_index=fp.partition, error_code=code, high_watermark=p.high_watermark,
            last_stable_offset=p.last_stable_offset, log_start_offset=p.log_start_offset,
            aborted_transactions=aborted, preferred_read_replica=-1, records=records)
        if diverging is not None:
            pd.diverging_epoch = R.EpochEndOffset(epoch=diverging[0], end_offset=diverging[1])
            has_error = True   # answer at once: the follower must truncate first
        by_topic[key].append(pd)
    responses = []
    for key in order:
        if version >= 13:
            responses.append(R.FetchableTopicResponse(topic_id=key, partitions=by_topic[key]))
        else:
            responses.append(R.FetchableTopicResponse(topic=key, partitions=by_topic[key]))
    return responses, total, has_error


def _error_partition(index: int, code: ErrorCode):
    return R.PartitionData(partition_index=index, error_code=code, high_watermark=-1, last_stable_offset=-1,
                           log_start_offset=-1, aborted_transactions=None, preferred_read_replica=-1,
                           records=b"")


def _response(ctx, responses):
    """The FetchResponse; v16+ with current-leader hints on NOT_LEADER_OR_FOLLOWER and
    FENCED_LEADER_EPOCH partitions (KIP-951)."""
    resp = R(throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=0, responses=responses)
    if ctx.api_version >= 16:
        by_id = ctx.broker.image.topics_by_id

        def name(t) -> str:
            if ctx.api_version < 13:
                return t.topic
            topic = by_id.get(t.topic_id)
            return topic.name if topic is not None else ""

        named = ((name(t), p.partition_index, p) for t in responses for p in t.partitions)
        resp.node_endpoints = add_leader_hints(ctx.broker, ctx.listener_name, named, FETCH_HINT_ERRORS,
                                               R.LeaderIdAndEpoch, R.NodeEndpoint)
    return resp


def _visible_end(p, replica_id: int, isolation: int) -> int:
    """The offset below which this fetch may read ``p``: the LEO for a follower, the LSO for
    read_committed, else the high watermark (Kafka ``FetchIsolation``)."""
    if replica_id >= 0:
        return p.log.log_end_offset
    return p.last_stable_offset if isolation == READ_COMMITTED else p.high_watermark


def _delayed(ctx, req, plan: _Plan, version: int):
    """DelayedFetch: wait until min_bytes are readable or max_wait_ms passes.

    What the fetch can read of each partition ends at its visible end (:func:`_visible_end`), so
    the wait ends on what moves that end: an append for a follower, a high-watermark advance (or
    an LSO advance for read_committed) for a consumer — an append alone, not yet replicated, makes
    nothing readable for a consumer, and a high watermark that moves without an append must wake
    it. The visible ends and the wake-ups are taken now, right after the read: a change before the
    returned coroutine first runs must not go unnoticed until max_wait_ms."""
    broker = ctx.broker
    replica_id = _replica_of(req, version)[0]
    isolation = req.isolation_level if replica_id < 0 else 0
    partitions = [t for _, _, t in plan.entries if not isinstance(t, ErrorCode)]
    roles = [(p.is_leader, p.leader_epoch) for p in partitions]
    ends = [_visible_end(p, replica_id, isolation) for p in partitions]
    start_hws = [p.high_watermark for p in partitions]
    event = asyncio.Event()
    wake = event.set
    for p in partitions:
        p.add_waiter(wake)
    broker.fetch_waiters.add(wake)
    return _wait(ctx, req, version, partitions, roles, ends, start_hws, event)


async def _wait(ctx, req, version: int, partitions: list, roles: list, ends: list, start_hws: list,
                event: asyncio.Event):
    """Wait for ``event`` (set by the partitions' wake-ups); re-read only when some partition's
    visible end moved (Kafka ``DelayedFetch.tryComplete``) and answer once ``min_bytes`` are read,
    on an error, on a leadership change, for a follower when a high watermark moved (so followers
    learn it promptly), or at ``max_wait_ms`` with whatever there is."""
    broker = ctx.broker
    wake = event.set
    loop = asyncio.get_running_loop()
    deadline = loop.time() + req.max_wait_ms / 1000.0
    replica = _replica_of(req, version)
    isolation = req.isolation_level if replica[0] < 0 else 0
    need = max(req.min_bytes, 1)
    try:
        while not broker.shutting_down:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            try:
                await asyncio.wait_for(event.wait(), remaining)
            except asyncio.TimeoutError:
                break
            event.clear()
            if any(broker.replica_manager.get(p.topic, p.partition_id) is not p
                   or (p.is_leader, p.leader_epoch) != role for p, role in zip(partitions, roles)):
                break   # a leadership change: answer, the client finds the new leader
            if replica[0] >= 0 and any(p.high_watermark != h for p, h in zip(partitions, start_hws)):
                break   # a follower learns the new HW now, not after replica.fetch.wait.max.ms
            now_ends = [_visible_end(p, replica[0], isolation) for p in partitions]
            if now_ends == ends:
                continue
            ends = now_ends
            plan = _resolve(broker, req, version, _readable(ctx, req, version))
            responses, total, has_error = _read_all(broker, req, plan, version, replica, ctx.listener_name)
            if total >= need or has_error:
                return _response(ctx, responses)
    finally:
        for p in partitions:
            p.remove_waiter(wake)
        broker.fetch_waiters.discard(wake)
    plan = _resolve(broker, req, version, _readable(ctx, req, version))
    responses, _total, _err = _read_all(broker, req, plan, version, replica, ctx.listener_name)
    return _response(ctx, responses)


def error_response(req, version, code):
    responses = []
    for ft in req.topics:
        parts = [_error_partition(fp.partition, code) for fp in ft.partitions]
        if version >= 13:
            responses.append(R.FetchableTopicResponse(topic_id=ft.topic_id, partitions=parts))
        else:
            responses.append(R.FetchableTopicResponse(topic=ft.topic, partitions=parts))
    return R(error_code=code, session_id=0, responses=responses)
