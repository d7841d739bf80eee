"""StreamsGroupHeartbeat (key 88), version 0: membership and task assignment of KIP-1071 streams
groups (Kafka Streams with ``group.protocol=streams``), answered by the group coordinator
(:mod:`kcompat.group.streams_groups`); the broker creates the internal topics the coordinator
finds missing (:meth:`kcompat.broker.group_runtime.GroupRuntime.streams_group_heartbeat`).

As Kafka 4.3.1's ``KafkaApis.handleStreamsGroupHeartbeat``: UNSUPPORTED_VERSION unless "streams"
is in ``group.coordinator.rebalance.protocols`` and ``streams.version`` is finalized at 1 or more;
with an authorizer READ on the group (GROUP_AUTHORIZATION_FAILED); a topology naming Kafka's
internal topics or invalid topic names is STREAMS_INVALID_TOPOLOGY; DESCRIBE on every topic of the
topology is required (TOPIC_AUTHORIZATION_FAILED).
"""

from kcompat.broker.authz import GROUP, Op, TOPIC
from kcompat.protocol.topic_names import INTERNAL_TOPICS, validate_topic_name
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.messages.streams_group_heartbeat import StreamsGroupHeartbeatResponse as R

API_KEY = 88
MIN_VERSION = 0
MAX_VERSION = 0


def streams_enabled(services) -> bool:
    """KafkaApis.isStreamsGroupProtocolEnabled."""
    protocols = [p.strip().lower() for p in services.config.get("group.coordinator.rebalance.protocols")]
    return "streams" in protocols and services.image.features.get("streams.version", 0) >= 1


def handle(ctx, req):
    if not streams_enabled(ctx.services):
        return error_response(req, ctx.api_version, ErrorCode.UNSUPPORTED_VERSION)
    if not ctx.authorize(Op.READ, GROUP, req.group_id):
        return error_response(req, ctx.api_version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if req.topology is not None:
        required = list(dict.fromkeys(
            t for s in req.topology.subtopologies or ()
            for t in (*(s.source_topics or ()), *(s.repartition_sink_topics or ()),
                      *(x.name for x in s.repartition_source_topics or ()),
                      *(x.name for x in s.state_changelog_topics or ()))))
        prohibited = [t for t in required if t in INTERNAL_TOPICS]
        if prohibited:
            return R(error_code=ErrorCode.STREAMS_INVALID_TOPOLOGY, status=[], error_message=(
                f"Use of Kafka internal topics {','.join(prohibited)} in a Kafka Streams topology is prohibited."))
        invalid = [t for t in required if not _valid(t)]
        if invalid:
            return R(error_code=ErrorCode.STREAMS_INVALID_TOPOLOGY, status=[],
                     error_message=f"Topic names {','.join(invalid)} are not valid topic names.")
        if not all(ctx.authorize(Op.DESCRIBE, TOPIC, t) for t in required):
            return error_response(req, ctx.api_version, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    return ctx.services.groups.streams_group_heartbeat(ctx, req)


def _valid(name: str) -> bool:
    try:
        validate_topic_name(name)
        return True
    except KafkaError:
        return False


def error_response(req, version, code):
    return R(error_code=code, status=[])
