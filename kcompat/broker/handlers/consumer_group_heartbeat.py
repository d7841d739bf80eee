"""ConsumerGroupHeartbeat (key 68), versions 0-1: membership and assignment of KIP-848 consumer
groups (``group.protocol=consumer``), answered by the group coordinator
(:mod:`kcompat.group.consumer_groups`)."""

from kcompat.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatResponse as R

API_KEY = 68
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx, req):
    return ctx.broker.groups.consumer_group_heartbeat(ctx, req)


def error_response(req, version, code):
    return R(error_code=code, member_epoch=0, heartbeat_interval_ms=0)
