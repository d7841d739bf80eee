"""SyncGroup (key 14), versions 0-5: the leader hands out assignments; every member gets its own.

Followers' responses wait for the leader's SyncGroup (see :mod:`kcompat.group`).

With an authorizer READ on the group is required (GROUP_AUTHORIZATION_FAILED).
"""

from kcompat.broker.authz import GROUP, Op
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.sync_group import SyncGroupResponse as R

API_KEY = 14
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx, req):
    if not ctx.authorize(Op.READ, GROUP, req.group_id):
        return error_response(req, ctx.api_version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return ctx.services.groups.sync_group(ctx, req)


def error_response(req, version, code):
    return R(error_code=code, protocol_type=None, protocol_name=None, assignment=b"")
