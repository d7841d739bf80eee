"""DeleteShareGroupOffsets (key 92), version 0: delete the share state of topics of an empty share
group (``kafka-share-groups.sh --delete-offsets``, ``Admin.deleteShareGroupOffsets``):
NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, UNKNOWN_TOPIC_OR_PARTITION per topic
(:mod:`kcompat.broker.share_group_admin`).

With an authorizer DELETE on the group is required (GROUP_AUTHORIZATION_FAILED).
"""

from kcompat.broker.authz import GROUP, Op
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.delete_share_group_offsets import DeleteShareGroupOffsetsResponse as R

API_KEY = 92
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx, req):
    if not ctx.authorize(Op.DELETE, GROUP, req.group_id):
        return error_response(req, ctx.api_version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return ctx.services.groups.share_admin.delete_offsets(ctx, req)


def error_response(req, version, code):
    return R(throttle_time_ms=0, error_code=code, error_message=None, responses=[])
