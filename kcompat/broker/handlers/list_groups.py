"""ListGroups (key 16), versions 0-5: the groups this coordinator hosts (state filter v4+, KIP-518;
type filter v5, KIP-848)."""

from kcompat.protocol.messages.list_groups import ListGroupsResponse as R

API_KEY = 16
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx, req):
    return ctx.broker.groups.list_groups(ctx, req)


def error_response(req, version, code):
    return R(error_code=code, groups=[])
