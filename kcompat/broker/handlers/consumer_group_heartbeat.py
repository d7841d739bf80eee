"""ConsumerGroupHeartbeat (key 68), versions 0-1: membership and assignment of KIP-848 consumer
groups (``group.protocol=consumer``), answered by the group coordinator
(:mod:`kcompat.group.consumer_groups`).

With an authorizer READ on the group (GROUP_AUTHORIZATION_FAILED) and DESCRIBE on every
subscribed topic (TOPIC_AUTHORIZATION_FAILED) are required.
"""

from kcompat.broker.authz import GROUP, Op, TOPIC
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatResponse as R

API_KEY = 68
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx, req):
    if not ctx.authorize(Op.READ, GROUP, req.group_id):
        return error_response(req, ctx.api_version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not all(ctx.authorize(Op.DESCRIBE, TOPIC, t) for t in req.subscribed_topic_names or ()):
        return error_response(req, ctx.api_version, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    return ctx.services.groups.consumer_group_heartbeat(ctx, req)


def error_response(req, version, code):
    return R(error_code=code, member_epoch=0, heartbeat_interval_ms=0)
