"""AlterShareGroupOffsets (key 91), version 0: new start offsets for the share partitions of an
empty share group (``kafka-share-groups.sh --reset-offsets --execute``,
``Admin.alterShareGroupOffsets``): NON_EMPTY_GROUP while it has members, GROUP_ID_NOT_FOUND for a
group of another type, UNKNOWN_TOPIC_OR_PARTITION per partition (:mod:`kcompat.broker.share_group_admin`).

With an authorizer READ on the group is required (GROUP_AUTHORIZATION_FAILED).
"""

from kcompat.broker.authz import GROUP, Op
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.alter_share_group_offsets import AlterShareGroupOffsetsResponse as R

API_KEY = 91
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx, req):
    if not ctx.authorize(Op.READ, GROUP, req.group_id):
        return error_response(req, ctx.api_version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return ctx.services.groups.share_admin.alter_offsets(ctx, req)


def error_response(req, version, code):
    return R(throttle_time_ms=0, error_code=code, error_message=None, responses=[])
