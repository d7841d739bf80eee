"""OffsetFetch (key 9), versions 0-9: committed offsets of one group, or several from v8 (KIP-709)."""

from kcompat.protocol.messages.offset_fetch import OffsetFetchResponse as R

API_KEY = 9
MIN_VERSION = 0
MAX_VERSION = 9


def handle(ctx, req):
    return ctx.broker.groups.offset_fetch(ctx, req)


def error_response(req, version, code):
    if version >= 8:
        return R(groups=[R.OffsetFetchResponseGroup(group_id=g.group_id, topics=[], error_code=code)
                         for g in req.groups])
    return R(error_code=code, topics=[])
