"""Heartbeat (key 12), versions 0-4: a member is alive; REBALANCE_IN_PROGRESS tells it to rejoin."""

from kcompat.protocol.messages.heartbeat import HeartbeatResponse as R

API_KEY = 12
MIN_VERSION = 0
MAX_VERSION = 4


def handle(ctx, req):
    return ctx.broker.groups.heartbeat(ctx, req)


def error_response(req, version, code):
    return R(error_code=code)
