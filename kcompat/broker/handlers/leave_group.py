"""LeaveGroup (key 13), versions 0-5: members leave (several at once by identity from v3, KIP-345)."""

from kcompat.protocol.messages.leave_group import LeaveGroupResponse as R

API_KEY = 13
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx, req):
    return ctx.broker.groups.leave_group(ctx, req)


def error_response(req, version, code):
    return R(error_code=code, members=[])
