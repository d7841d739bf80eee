"""Metadata (key 3): brokers, cluster id, controller, topics with their partitions.

As Kafka's ``KafkaApis.handleTopicMetadataRequest``: v0 with an empty topic list and v1+ with a
null list mean every topic; topics may be looked up by id (v10+, UNKNOWN_TOPIC_ID if absent).
An unknown topic is auto-created when ``auto.create.topics.enable`` and the request allows it
(``allow_auto_topic_creation``, implicitly true before v4) — our controller commits synchronously,
so the response already carries the new topic's partitions. Invalid names get
INVALID_TOPIC_EXCEPTION; otherwise UNKNOWN_TOPIC_OR_PARTITION.

With an authorizer (Kafka's checks): a topic the principal may not DESCRIBE is left out of an
all-topics answer and answered TOPIC_AUTHORIZATION_FAILED when asked for by name (its existence
is not disclosed); auto-creation needs CREATE on the cluster or the topic (else
TOPIC_AUTHORIZATION_FAILED); ``topic_authorized_operations`` / ``cluster_authorized_operations``
(v8+) list what the ACLs allow.
"""

from __future__ import annotations

from kcompat.broker.authz import TOPIC, Op, may_create_topic
from kcompat.protocol.topic_names import INTERNAL_TOPICS, validate_topic_name
from kcompat.security.acl import ResourceType
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.messages.metadata import MetadataResponse as R
from kcompat.protocol.primitives import ZERO_UUID

API_KEY = 3
MIN_VERSION = 0
MAX_VERSION = 13   # v13: top-level ErrorCode (KIP-1102), 0 unless the whole request fails

AUTHORIZED_OPS_NOT_REQUESTED = -2147483648
# Without an authorizer every operation is allowed (AclOperation codes).
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))


def handle(ctx, req):
    """Answer at once, or first auto-create the requested topics that do not exist (through the
    active controller) and then answer."""
    version = ctx.api_version
    services = ctx.services
    if req.topics and (req.allow_auto_topic_creation if version >= 4 else True) \
            and services.config.get("auto.create.topics.enable"):
        missing = [t.name for t in req.topics if t.name is not None and t.name not in services.image.topics
                   and _valid_name(t.name)
                   and ctx.authorize(Op.DESCRIBE, TOPIC, t.name) and may_create_topic(ctx, t.name)]
        if missing and not (version < 12 and any(t.topic_id != ZERO_UUID for t in req.topics)):
            return _create_then_answer(ctx, req, list(dict.fromkeys(missing)))
    return _answer(ctx, req, {})


async def _create_then_answer(ctx, req, names: list[str]):
    results = await ctx.services.auto_create_topics(names)
    return _answer(ctx, req, {r.name: r.error for r in results
                              if r.error not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS)})


def _valid_name(name: str) -> bool:
    try:
        validate_topic_name(name)
    except KafkaError:
        return False
    return True


def _answer(ctx, req, create_errors: dict):
    services = ctx.services
    version = ctx.api_version
    image = services.image
    topics_out = []
    want_all = req.topics is None or (version == 0 and not req.topics)
    include_ops = version >= 8 and req.include_topic_authorized_operations
    if not want_all and version < 12 and any(t.name is None or t.topic_id != ZERO_UUID for t in req.topics):
        # Kafka: "Topic name can not be null" / "Topic IDs are not supported" before v12
        # (InvalidRequestException -> every topic answered INVALID_REQUEST)
        return error_response(req, version, ErrorCode.INVALID_REQUEST)
    if want_all:
        for name in sorted(image.topics):
            if ctx.authorize(Op.DESCRIBE, TOPIC, name):
                topics_out.append(_topic(ctx, name, include_ops))
    else:
        allow_create = req.allow_auto_topic_creation if version >= 4 else True
        for t in req.topics:
            if t.name is None:
                found = image.topics_by_id.get(t.topic_id)
                if found is None:
                    topics_out.append(R.MetadataResponseTopic(
                        error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=t.topic_id,
                        topic_authorized_operations=AUTHORIZED_OPS_NOT_REQUESTED))
                elif not ctx.authorize(Op.DESCRIBE, TOPIC, found.name):
                    # topic ids are not sensitive: Kafka answers the id with the error
                    topics_out.append(R.MetadataResponseTopic(
                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=None, topic_id=t.topic_id,
                        partitions=[], topic_authorized_operations=AUTHORIZED_OPS_NOT_REQUESTED))
                else:
                    topics_out.append(_topic(ctx, found.name, include_ops))
                continue
            topics_out.append(_lookup(ctx, t.name, allow_create, include_ops, create_errors))
    resp = R(
        throttle_time_ms=0,
        brokers=[R.MetadataResponseBroker(node_id=node, host=host, port=port, rack=rack)
                 for node, host, port, rack in services.metadata_cache.live_broker_endpoints(ctx.listener_name)],
        cluster_id=services.cluster_id,
        controller_id=services.node_id,
        topics=topics_out,
        cluster_authorized_operations=(cluster_operations(ctx) if version >= 8 and
                                       req.include_cluster_authorized_operations
                                       else AUTHORIZED_OPS_NOT_REQUESTED))
    return resp


def cluster_operations(ctx) -> int:
    """The cluster's authorized operations bitfield: 0 without DESCRIBE on the cluster (Kafka)."""
    if not ctx.authorize_cluster(Op.DESCRIBE):
        return 0
    return ctx.authorized_operations(ResourceType.CLUSTER, "kafka-cluster")


def _lookup(ctx, name: str, allow_create: bool, include_ops: bool, create_errors: dict):
    services = ctx.services
    if not ctx.authorize(Op.DESCRIBE, TOPIC, name):
        return _error_topic(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, internal=False)
    if name in services.image.topics:
        return _topic(ctx, name, include_ops)
    if not _valid_name(name):
        return _error_topic(name, ErrorCode.INVALID_TOPIC_EXCEPTION)
    if name in create_errors:
        return _error_topic(name, create_errors[name])
    if allow_create and services.config.get("auto.create.topics.enable"):
        if not may_create_topic(ctx, name):
            return _error_topic(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        # created but not in this node's image yet: Kafka's answer for a topic being created
        return _error_topic(name, ErrorCode.LEADER_NOT_AVAILABLE)
    return _error_topic(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


def _error_topic(name: str, code: ErrorCode, topic_id=ZERO_UUID, *, internal: bool | None = None):
    """A topic answered with an error; ``is_internal`` is Kafka's Topic.isInternal of the name
    unless ``internal`` says otherwise (false for a topic the client may not describe)."""
    return R.MetadataResponseTopic(error_code=code, name=name, topic_id=topic_id,
                                   is_internal=name in INTERNAL_TOPICS if internal is None else internal,
                                   partitions=[], topic_authorized_operations=AUTHORIZED_OPS_NOT_REQUESTED)


def _topic(ctx, name: str, include_ops: bool):
    services = ctx.services
    t = services.image.topics[name]
    partitions = []
    for pid in sorted(t.partitions):
        p = t.partitions[pid]
        # Kafka's KRaftMetadataCache: no leader -> LEADER_NOT_AVAILABLE; a replica is offline when
        # its broker is not registered (a fenced broker's replicas are not offline) or its log dir
        # is offline (KIP-858)
        partitions.append(R.MetadataResponsePartition(
            error_code=ErrorCode.NONE if p.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE, partition_index=pid,
            leader_id=p.leader, leader_epoch=p.leader_epoch, replica_nodes=list(p.replicas), isr_nodes=list(p.isr),
            offline_replicas=services.image.offline_replicas(p)))
    return R.MetadataResponseTopic(
        error_code=ErrorCode.NONE, name=name, topic_id=t.topic_id, is_internal=name in INTERNAL_TOPICS,
        partitions=partitions,
        topic_authorized_operations=(ctx.authorized_operations(TOPIC, name) if include_ops
                                     else AUTHORIZED_OPS_NOT_REQUESTED))


def error_response(req, version, code):
    # the response name is not nullable before v12: Kafka answers a null name as ""
    """Kafka's ``MetadataRequest.getErrorResponse``: every requested topic (with its id) and, from
    v13 (KIP-1102), the top-level error code carry ``code``."""
    topics = [] if req.topics is None else [_error_topic(t.name if t.name is not None else "", code, t.topic_id,
                                                         internal=False) for t in req.topics]
    return R(brokers=[], cluster_id=None, controller_id=-1, topics=topics,
             cluster_authorized_operations=AUTHORIZED_OPS_NOT_REQUESTED, error_code=code)
