"""DescribeShareGroupOffsets (key 90), versions 0-1 (v1: Lag, KIP-1226): the start offset, leader
epoch and lag of a share group's share partitions (``kafka-share-groups.sh --describe``,
``Admin.listShareGroupOffsets``), read from the share coordinator
(:mod:`kcompat.broker.share_group_admin`). Topics null: every partition the group has state of.

With an authorizer DESCRIBE on each group is required (GROUP_AUTHORIZATION_FAILED).
"""

from kcompat.broker.authz import GROUP, Op, answer_denied
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.describe_share_group_offsets import DescribeShareGroupOffsetsResponse as R

API_KEY = 90
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx, req):
    denied = [(g, ErrorCode.GROUP_AUTHORIZATION_FAILED) for g in req.groups
              if not ctx.authorize(Op.DESCRIBE, GROUP, g.group_id)]
    return answer_denied(ctx, req, "groups", denied, error_response, "groups",
                         lambda: ctx.services.groups.share_admin.describe_offsets(ctx, req))


def error_response(req, version, code):
    return R(throttle_time_ms=0, groups=[R.DescribeShareGroupOffsetsResponseGroup(group_id=g.group_id, topics=[],
                                                                                  error_code=code)
                                         for g in req.groups])
