"""OffsetDelete (key 47), version 0: delete a group's committed offsets for topics it no longer
consumes (GROUP_SUBSCRIBED_TO_TOPIC otherwise, KIP-496)."""

from kcompat.protocol.messages.offset_delete import OffsetDeleteResponse as R

API_KEY = 47
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx, req):
    return ctx.broker.groups.offset_delete(ctx, req)


def error_response(req, version, code):
    return R(error_code=code, topics=[])
