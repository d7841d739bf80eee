"""ShareGroupDescribe (key 77), version 1: members, epochs and assignments of KIP-932 share groups
(``kafka-share-groups.sh --describe``, ``Admin.describeShareGroups``), answered by the group
coordinator (:mod:`kcompat.group.share_groups`).

With an authorizer DESCRIBE on each group is required (GROUP_AUTHORIZATION_FAILED);
``authorized_operations`` lists what the ACLs allow on the group.
"""

from kcompat.broker.authz import GROUP, Op, answer_denied, then
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.share_group_describe import ShareGroupDescribeResponse as R

API_KEY = 77
MIN_VERSION = 1
MAX_VERSION = 1


def handle(ctx, req):
    denied = [(g, ErrorCode.GROUP_AUTHORIZATION_FAILED) for g in req.group_ids
              if not ctx.authorize(Op.DESCRIBE, GROUP, g)]
    return answer_denied(ctx, req, "group_ids", denied, error_response, "groups",
                         lambda: then(ctx.services.groups.share_group_describe(ctx, req),
                                      lambda resp: _with_operations(ctx, resp, req.include_authorized_operations)))


def _with_operations(ctx, resp, include_ops: bool):
    """Each described group's ``authorized_operations`` from the ACLs (when asked)."""
    if include_ops:
        for g in resp.groups:
            if g.error_code == ErrorCode.NONE:
                g.authorized_operations = ctx.authorized_operations(GROUP, g.group_id)
    return resp


def error_response(req, version, code):
    return R(throttle_time_ms=0, groups=[R.DescribedGroup(error_code=code, group_id=g, group_state="", members=[],
                                                          authorized_operations=-(2**31))
                                         for g in req.group_ids])
