"""Heartbeat (key 12), versions 0-4: a member is alive; REBALANCE_IN_PROGRESS tells it to rejoin.

With an authorizer READ on the group is required (GROUP_AUTHORIZATION_FAILED).
"""

from kcompat.broker.authz import GROUP, Op
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.heartbeat import HeartbeatResponse as R

API_KEY = 12
MIN_VERSION = 0
MAX_VERSION = 4


def handle(ctx, req):
    if not ctx.authorize(Op.READ, GROUP, req.group_id):
        return error_response(req, ctx.api_version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return ctx.services.groups.heartbeat(ctx, req)


def error_response(req, version, code):
    return R(error_code=code)
