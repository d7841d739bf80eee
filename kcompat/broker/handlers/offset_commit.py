"""OffsetCommit (key 8), versions 0-10: store committed offsets (with metadata and leader epoch)
in ``__consumer_offsets``; the response follows the append. v10 names topics by id (KIP-848),
resolved as :mod:`._topic_ids` says (UNKNOWN_TOPIC_ID for an unknown id), offsets stored by name.

With an authorizer READ on the group (GROUP_AUTHORIZATION_FAILED for everything) and READ on
each topic (TOPIC_AUTHORIZATION_FAILED for its partitions) are required.
"""

from kcompat.broker.authz import GROUP, Op, TOPIC, answer_denied, then
from kcompat.broker.handlers._topic_ids import TOPIC_IDS_MIN_VERSION, resolve_names, set_ids
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.offset_commit import OffsetCommitResponse as R

API_KEY = 8
MIN_VERSION = 0
MAX_VERSION = 10


def handle(ctx, req):
    if not ctx.authorize(Op.READ, GROUP, req.group_id):
        return error_response(req, ctx.api_version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    by_id = ctx.api_version >= TOPIC_IDS_MIN_VERSION
    unknown = resolve_names(ctx.services.image, req.topics) if by_id else ()
    denied = [(t, ErrorCode.UNKNOWN_TOPIC_ID) for t in unknown]
    denied += [(t, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for t in req.topics
               if t.name and not ctx.authorize(Op.READ, TOPIC, t.name)]
    result = answer_denied(ctx, req, "topics", denied, error_response, "topics",
                           lambda: ctx.services.groups.offset_commit(ctx, req))
    return then(result, lambda resp: _with_ids(ctx, resp)) if by_id else result


def _with_ids(ctx, resp):
    resp.topics = set_ids(ctx.services.image, resp.topics)
    return resp


def error_response(req, version, code):
    return R(topics=[R.OffsetCommitResponseTopic(name=t.name, topic_id=t.topic_id, partitions=[
        R.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code) for p in t.partitions])
        for t in req.topics])
