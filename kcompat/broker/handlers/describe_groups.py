"""DescribeGroups (key 15), versions 0-5: state, protocol and members of groups."""

from kcompat.protocol.messages.describe_groups import DescribeGroupsResponse as R

API_KEY = 15
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx, req):
    return ctx.broker.groups.describe_groups(ctx, req)


def error_response(req, version, code):
    return R(groups=[R.DescribedGroup(error_code=code, group_id=g, group_state="", protocol_type="",
                                      protocol_data="", members=[]) for g in req.groups])
