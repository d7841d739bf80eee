"""ConsumerGroupDescribe (key 69), versions 0-1: KIP-848 consumer groups with their members'
current and target assignments; GROUP_ID_NOT_FOUND for classic groups (KIP-848, KIP-1099's
member type in v1).

With an authorizer DESCRIBE on each group is required (GROUP_AUTHORIZATION_FAILED);
``authorized_operations`` lists what the ACLs allow on the group.
"""

from kcompat.broker.authz import GROUP, Op, answer_denied, then
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.consumer_group_describe import ConsumerGroupDescribeResponse as R

API_KEY = 69
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx, req):
    denied = [(g, ErrorCode.GROUP_AUTHORIZATION_FAILED) for g in req.group_ids
              if not ctx.authorize(Op.DESCRIBE, GROUP, g)]
    return answer_denied(ctx, req, "group_ids", denied, error_response, "groups",
                         lambda: then(ctx.services.groups.consumer_group_describe(ctx, req),
                                      lambda resp: _with_operations(ctx, resp, req.include_authorized_operations)))


def _with_operations(ctx, resp, include_ops: bool):
    """Each described group's ``authorized_operations`` from the ACLs (when asked)."""
    if include_ops:
        for g in resp.groups:
            if g.error_code == ErrorCode.NONE:
                g.authorized_operations = ctx.authorized_operations(GROUP, g.group_id)
    return resp


def error_response(req, version, code):
    return R(groups=[R.DescribedGroup(error_code=code, group_id=g) for g in req.group_ids])
