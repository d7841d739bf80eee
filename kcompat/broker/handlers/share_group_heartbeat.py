"""ShareGroupHeartbeat (key 76), version 1: membership and assignment of KIP-932 share groups
(``KafkaShareConsumer``), answered by the group coordinator (:mod:`kcompat.group.share_groups`).
Version 0 was Kafka 4.0's early access and was removed in 4.1, as here.

With an authorizer READ on the group (GROUP_AUTHORIZATION_FAILED) and DESCRIBE on every
subscribed topic (TOPIC_AUTHORIZATION_FAILED) are required.
"""

from kcompat.broker.authz import GROUP, Op, TOPIC
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatResponse as R

API_KEY = 76
MIN_VERSION = 1
MAX_VERSION = 1


def handle(ctx, req):
    if not ctx.authorize(Op.READ, GROUP, req.group_id):
        return error_response(req, ctx.api_version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not all(ctx.authorize(Op.DESCRIBE, TOPIC, t) for t in req.subscribed_topic_names or ()):
        return error_response(req, ctx.api_version, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    return ctx.services.groups.share_group_heartbeat(ctx, req)


def error_response(req, version, code):
    return R(error_code=code, member_epoch=0, heartbeat_interval_ms=0)
