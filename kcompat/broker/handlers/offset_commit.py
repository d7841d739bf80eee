"""OffsetCommit (key 8), versions 0-9: store committed offsets (with metadata and leader epoch)
in ``__consumer_offsets``; the response follows the append.

With an authorizer READ on the group (GROUP_AUTHORIZATION_FAILED for everything) and READ on
each topic (TOPIC_AUTHORIZATION_FAILED for its partitions) are required.
"""

from kcompat.broker.authz import GROUP, Op, TOPIC, answer_denied
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.offset_commit import OffsetCommitResponse as R

API_KEY = 8
MIN_VERSION = 0
MAX_VERSION = 9


def handle(ctx, req):
    if not ctx.authorize(Op.READ, GROUP, req.group_id):
        return error_response(req, ctx.api_version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    denied = [(t, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for t in req.topics if not ctx.authorize(Op.READ, TOPIC, t.name)]
    return answer_denied(ctx, req, "topics", denied, error_response, "topics",
                         lambda: ctx.services.groups.offset_commit(ctx, req))


def error_response(req, version, code):
    return R(topics=[R.OffsetCommitResponseTopic(name=t.name, partitions=[
        R.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code) for p in t.partitions])
        for t in req.topics])
