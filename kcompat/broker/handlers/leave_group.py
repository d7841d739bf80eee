"""LeaveGroup (key 13), versions 0-5: members leave (several at once by identity from v3, KIP-345).

With an authorizer READ on the group is required (GROUP_AUTHORIZATION_FAILED).
"""

from kcompat.broker.authz import GROUP, Op
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.leave_group import LeaveGroupResponse as R

API_KEY = 13
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx, req):
    if not ctx.authorize(Op.READ, GROUP, req.group_id):
        return error_response(req, ctx.api_version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return ctx.services.groups.leave_group(ctx, req)


def error_response(req, version, code):
    return R(error_code=code, members=[])
