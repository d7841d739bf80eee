"""JoinGroup (key 11), versions 0-9: join a consumer group and take part in a rebalance.

The response waits until the group's join phase completes (all members rejoined, the rebalance
timeout, or the initial delay of a new group); see :mod:`kcompat.group`. v4+ new members first get
MEMBER_ID_REQUIRED with their member id (KIP-394).

With an authorizer READ on the group is required (GROUP_AUTHORIZATION_FAILED).
"""

from kcompat.broker.authz import GROUP, Op
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.join_group import JoinGroupResponse as R

API_KEY = 11
MIN_VERSION = 0
MAX_VERSION = 9


def handle(ctx, req):
    if not ctx.authorize(Op.READ, GROUP, req.group_id):
        return error_response(req, ctx.api_version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return ctx.services.groups.join_group(ctx, req)


def error_response(req, version, code):
    return R(error_code=code, generation_id=-1, protocol_type=None, protocol_name=None if version >= 7 else "",
             leader="", member_id=req.member_id, members=[])
