"""ConsumerGroupDescribe (key 69), versions 0-1: KIP-848 consumer groups with their members'
current and target assignments; GROUP_ID_NOT_FOUND for classic groups (KIP-848, KIP-1099's
member type in v1)."""

from kcompat.protocol.messages.consumer_group_describe import ConsumerGroupDescribeResponse as R

API_KEY = 69
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx, req):
    return ctx.broker.groups.consumer_group_describe(ctx, req)


def error_response(req, version, code):
    return R(groups=[R.DescribedGroup(error_code=code, group_id=g) for g in req.group_ids])
