"""DeleteGroups (key 42), versions 0-2: delete empty groups and their offsets (NON_EMPTY_GROUP,
GROUP_ID_NOT_FOUND otherwise)."""

from kcompat.protocol.messages.delete_groups import DeleteGroupsResponse as R

API_KEY = 42
MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx, req):
    return ctx.broker.groups.delete_groups(ctx, req)


def error_response(req, version, code):
    return R(results=[R.DeletableGroupResult(group_id=g, error_code=code) for g in req.groups_names])
