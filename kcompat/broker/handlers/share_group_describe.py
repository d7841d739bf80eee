"""ShareGroupDescribe (key 77), version 1: members, epochs and assignments of KIP-932 share groups
(``kafka-share-groups.sh --describe``, ``Admin.describeShareGroups``), answered by the group
coordinator (:mod:`kcompat.group.share_groups`)."""

from kcompat.protocol.messages.share_group_describe import ShareGroupDescribeResponse as R

API_KEY = 77
MIN_VERSION = 1
MAX_VERSION = 1


def handle(ctx, req):
    return ctx.broker.groups.share_group_describe(ctx, req)


def error_response(req, version, code):
    return R(throttle_time_ms=0, groups=[R.DescribedGroup(error_code=code, group_id=g, group_state="", members=[],
                                                          authorized_operations=-(2**31))
                                         for g in req.group_ids])
