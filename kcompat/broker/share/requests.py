"""ShareFetch and ShareAcknowledge as Kafka's ``KafkaApis`` handles them (KIP-932): the share
session, acknowledgements first, then the fetch, and the response with current-leader hints.

The handlers (:mod:`kcompat.broker.handlers.share_fetch`, :mod:`...share_acknowledge`) decode and
call :func:`share_fetch` / :func:`share_acknowledge`; the work is done by the broker's
:class:`kcompat.broker.share.partitions.SharePartitionManager` and
:class:`kcompat.broker.share.sessions.ShareSessionCache`.
"""

from __future__ import annotations

import uuid

from kcompat.broker.api_services import ApiServices
from kcompat.broker.authz import GROUP, Op
from kcompat.broker.leader_hints import current_leader, leader_endpoints
from kcompat.broker.share.partitions import FetchedPartition
from kcompat.broker.share.sessions import FINAL_EPOCH, INITIAL_EPOCH
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.share_acknowledge import ShareAcknowledgeResponse as AR
from kcompat.protocol.messages.share_fetch import ShareFetchResponse as FR

RECORD_LIMIT_MODE = 1   # ShareFetch v2 ShareAcquireMode: 0 batch-optimized, 1 record-limit (KIP-1206)
HINT_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})


def refusal(ctx, req) -> ErrorCode | None:
    """What KafkaApis checks of a ShareFetch / ShareAcknowledge first, in its order: a null group
    id (INVALID_REQUEST), READ on the group (GROUP_AUTHORIZATION_FAILED), a member id of 1-36
    characters (``isMemberIdValid``: INVALID_REQUEST); None if the request passes."""
    if req.group_id is None:
        return ErrorCode.INVALID_REQUEST
    if not ctx.authorize(Op.READ, GROUP, req.group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    if not req.member_id or len(req.member_id) > 36:
        return ErrorCode.INVALID_REQUEST
    return None


def fetch_refused(code: ErrorCode) -> FR:
    """A ShareFetch refused as a whole: no message and no lock timeout, whatever the reason
    (Kafka's ShareFetchRequest.getErrorResponse)."""
    return FR(throttle_time_ms=0, error_code=int(code), error_message=None, acquisition_lock_timeout_ms=0,
              responses=[], node_endpoints=[])


def acknowledge_refused(code: ErrorCode) -> AR:
    """A ShareAcknowledge refused as a whole, as :func:`fetch_refused`."""
    return AR(throttle_time_ms=0, error_code=int(code), error_message=None, acquisition_lock_timeout_ms=0,
              responses=[], node_endpoints=[])


def _acks(topics, image) -> tuple[dict, dict]:
    """({(topic id, partition): [(first, last, types)]}, {(topic id, partition): error}) of a
    request's acknowledgement batches; unknown topic ids get UNKNOWN_TOPIC_ID."""
    acks: dict[tuple[uuid.UUID, int], list] = {}
    errors: dict[tuple[uuid.UUID, int], ErrorCode] = {}
    for t in topics:
        known = t.topic_id in image.topics_by_id
        for p in t.partitions:
            batches = [(b.first_offset, b.last_offset, list(b.acknowledge_types)) for b in p.acknowledgement_batches]
            if not batches:
                continue
            if not known:
                errors[(t.topic_id, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_ID
            else:
                acks.setdefault((t.topic_id, p.partition_index), []).extend(batches)
    return acks, errors


def _leader(services: ApiServices, topic_id: uuid.UUID, partition: int) -> tuple[int, int]:
    t = services.image.topics_by_id.get(topic_id)
    return current_leader(services.metadata_cache, t.name, partition) if t is not None else (-1, -1)


async def share_fetch(ctx, req) -> FR:
    """One ShareFetch v1-v2. Top-level errors (after :func:`refusal`): INVALID_REQUEST
    (acknowledgements in a session-opening request, partitions to fetch in a closing one),
    SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_LIMIT_REACHED. Per
    partition: UNKNOWN_TOPIC_ID, NOT_LEADER_OR_FOLLOWER (with the current leader), and the
    acknowledgement's error in ``acknowledge_error_code``."""
    services = ctx.services
    manager, sessions = services.share.partitions, services.share.sessions
    now = services.now_ms()
    group_id, member_id, epoch = req.group_id, req.member_id, req.share_session_epoch
    lock_ms = manager.record_lock_duration_ms(group_id)
    image = services.image
    requested = [(t.topic_id, p.partition_index) for t in req.topics for p in t.partitions]
    acks, ack_errors = _acks(req.topics, image)
    forgotten = [(t.topic_id, p) for t in req.forgotten_topics_data for p in t.partitions]
    if epoch == INITIAL_EPOCH:
        if acks or ack_errors:
            return fetch_refused(ErrorCode.INVALID_REQUEST)   # acknowledgements in a session-opening request
        code, session, replaced = sessions.open(group_id, member_id, requested, now, ctx.connection)
        if code != ErrorCode.NONE:
            return fetch_refused(code)
        if replaced is not None:
            manager.release_member(group_id, member_id, list(replaced.partitions))
    elif epoch == FINAL_EPOCH:
        code = sessions.check_final(group_id, member_id)
        if code != ErrorCode.NONE:
            return fetch_refused(code)
        if requested and not acks:
            return fetch_refused(ErrorCode.INVALID_REQUEST)   # a closing request may only acknowledge
        session = None
    else:
        code, session = sessions.advance(group_id, member_id, epoch, now, ctx.connection)
        if code != ErrorCode.NONE:
            return fetch_refused(code)
        for tp in requested:
            session.partitions.setdefault(tp, None)
        for tp in forgotten:
            session.partitions.pop(tp, None)
    ack_results = dict(ack_errors)
    applied = await manager.apply_acknowledgements(group_id, member_id, acks) if acks else ({}, [])
    if epoch == FINAL_EPOCH:
        services.share.close_session(group_id, member_id)
        fetch_from: list = []
    elif req.is_renew_ack if ctx.api_version >= 2 else False:
        fetch_from = []   # KIP-1222: a renew-only request does not fetch
    else:
        fetch_from = [tp for tp in session.partitions if tp[0] in image.topics_by_id]
    fetched: dict = {}
    if fetch_from:
        fetched = await manager.fetch(
            group_id, member_id, fetch_from, max_records=req.max_records if req.max_records > 0 else 500,
            batch_size=req.batch_size, record_limit=ctx.api_version >= 2 and req.share_acquire_mode == RECORD_LIMIT_MODE,
            max_bytes=req.max_bytes if req.max_bytes > 0 else 2**31 - 1, max_wait_ms=req.max_wait_ms,
            is_shutting_down=services.is_shutting_down)
    ack_results.update(await manager.acknowledged(applied))   # durable before the answer
    unknown = {tp: FetchedPartition(ErrorCode.UNKNOWN_TOPIC_ID) for tp in requested if tp[0] not in image.topics_by_id}
    full = epoch == INITIAL_EPOCH
    by_topic: dict[uuid.UUID, list] = {}
    leaders: set[int] = set()
    order = list(dict.fromkeys(list(session.partitions if session is not None else []) + requested
                               + list(ack_results)))
    for tp in order:
        f = fetched.get(tp) or unknown.get(tp)
        ack = ack_results.get(tp)
        if not full and ack is None and (f is None or (f.error == ErrorCode.NONE and not f.acquired)):
            continue   # an incremental response lists only partitions with news
        f = f or FetchedPartition()
        leader_id, leader_epoch = _leader(services, *tp)
        if f.error in HINT_ERRORS and leader_id >= 0:
            leaders.add(leader_id)
        by_topic.setdefault(tp[0], []).append(FR.PartitionData(
            partition_index=tp[1], error_code=int(f.error), error_message=f.message,
            acknowledge_error_code=int(ack or ErrorCode.NONE), acknowledge_error_message=None,
            current_leader=FR.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=leader_epoch),
            records=f.records if f.acquired else b"",
            acquired_records=[FR.AcquiredRecords(first_offset=a.first_offset, last_offset=a.last_offset,
                                                 delivery_count=a.delivery_count) for a in f.acquired]))
    return FR(throttle_time_ms=0, error_code=0, error_message=None, acquisition_lock_timeout_ms=lock_ms,
              responses=[FR.ShareFetchableTopicResponse(topic_id=t, partitions=ps) for t, ps in by_topic.items()],
              node_endpoints=leader_endpoints(services.metadata_cache, ctx.listener_name, leaders, FR.NodeEndpoint))


async def share_acknowledge(ctx, req) -> AR:
    """One ShareAcknowledge v1-v2: acknowledgements of records fetched in the member's share
    session. Top-level errors: INVALID_REQUEST, SHARE_SESSION_NOT_FOUND,
    INVALID_SHARE_SESSION_EPOCH (also for epoch 0: a session is opened by ShareFetch only). Per
    partition: INVALID_RECORD_STATE, UNKNOWN_TOPIC_ID, NOT_LEADER_OR_FOLLOWER (with the leader)."""
    services = ctx.services
    manager, sessions = services.share.partitions, services.share.sessions
    group_id, member_id, epoch = req.group_id, req.member_id, req.share_session_epoch
    lock_ms = manager.record_lock_duration_ms(group_id)
    if epoch == INITIAL_EPOCH:   # only ShareFetch opens a share session
        return acknowledge_refused(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
    if epoch == FINAL_EPOCH:
        code = sessions.check_final(group_id, member_id)
    else:
        code, _session = sessions.advance(group_id, member_id, epoch, services.now_ms(), ctx.connection)
    if code != ErrorCode.NONE:
        return acknowledge_refused(code)
    acks, results = _acks(req.topics, services.image)
    if acks:
        results.update(await manager.acknowledge(group_id, member_id, acks))
    if epoch == FINAL_EPOCH:
        services.share.close_session(group_id, member_id)
    by_topic: dict[uuid.UUID, list] = {}
    leaders: set[int] = set()
    for tp, code in results.items():
        leader_id, leader_epoch = _leader(services, *tp)
        if code in HINT_ERRORS and leader_id >= 0:
            leaders.add(leader_id)
        by_topic.setdefault(tp[0], []).append(AR.PartitionData(
            partition_index=tp[1], error_code=int(code),
            current_leader=AR.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=leader_epoch)))
    return AR(throttle_time_ms=0, error_code=0, error_message=None, acquisition_lock_timeout_ms=lock_ms,
              responses=[AR.ShareAcknowledgeTopicResponse(topic_id=t, partitions=ps) for t, ps in by_topic.items()],
              node_endpoints=leader_endpoints(services.metadata_cache, ctx.listener_name, leaders, AR.NodeEndpoint))
