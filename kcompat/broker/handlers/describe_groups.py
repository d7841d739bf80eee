"""DescribeGroups (key 15), versions 0-6: state, protocol and members of groups. A group that
does not exist or is not a classic group is Dead, from v6 with GROUP_ID_NOT_FOUND and a message
(KIP-1043, Kafka 4.3.1's ``GroupMetadataManager.describeGroups``).

With an authorizer DESCRIBE on each group is required (GROUP_AUTHORIZATION_FAILED);
``authorized_operations`` (v3+) lists what the ACLs allow on the group.
"""

from kcompat.broker.authz import GROUP, Op, answer_denied, then
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.describe_groups import DescribeGroupsResponse as R

API_KEY = 15
MIN_VERSION = 0
MAX_VERSION = 6


def handle(ctx, req):
    denied = [(g, ErrorCode.GROUP_AUTHORIZATION_FAILED) for g in req.groups if not ctx.authorize(Op.DESCRIBE, GROUP, g)]
    include_ops = ctx.api_version >= 3 and req.include_authorized_operations
    return answer_denied(ctx, req, "groups", denied, error_response, "groups",
                         lambda: then(ctx.services.groups.describe_groups(ctx, req),
                                      lambda resp: _with_operations(ctx, resp, include_ops)))


def _with_operations(ctx, resp, include_ops: bool):
    """Each described group's ``authorized_operations`` from the ACLs (v3+, when asked)."""
    if include_ops:
        for g in resp.groups:
            if g.error_code == ErrorCode.NONE:
                g.authorized_operations = ctx.authorized_operations(GROUP, g.group_id)
    return resp


def error_response(req, version, code):
    return R(groups=[R.DescribedGroup(error_code=code, group_id=g, group_state="", protocol_type="",
                                      protocol_data="", members=[]) for g in req.groups])
