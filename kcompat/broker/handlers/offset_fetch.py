"""OffsetFetch (key 9), versions 0-10: committed offsets of one group, or several from v8 (KIP-709).
v10 names topics by id (KIP-848), resolved as :mod:`._topic_ids` says: an unknown id is
UNKNOWN_TOPIC_ID for each of its partitions, an all-topics answer keeps only the topics that exist.

With an authorizer DESCRIBE on the group is required (GROUP_AUTHORIZATION_FAILED); topics
without DESCRIBE are left out of an all-topics answer and TOPIC_AUTHORIZATION_FAILED when named.
"""

from kcompat.broker.authz import GROUP, Op, TOPIC, answer_denied, then
from kcompat.broker.handlers._topic_ids import TOPIC_IDS_MIN_VERSION, resolve_names, set_ids
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.offset_fetch import OffsetFetchResponse as R

API_KEY = 9
MIN_VERSION = 0
MAX_VERSION = 10


def handle(ctx, req):
    version = ctx.api_version
    groups = ctx.services.groups
    if version < 8:
        if not ctx.authorize(Op.DESCRIBE, GROUP, req.group_id):
            return error_response(req, version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        return then(groups.offset_fetch(ctx, req), lambda resp: _topics_described(ctx, resp, req.topics))
    denied = [(g, ErrorCode.GROUP_AUTHORIZATION_FAILED) for g in req.groups
              if not ctx.authorize(Op.DESCRIBE, GROUP, g.group_id)]
    asked = {g.group_id: g.topics for g in req.groups}
    unknown = _resolve_ids(ctx, req) if version >= TOPIC_IDS_MIN_VERSION else None

    def each_group(resp):
        for g in resp.groups:
            _topics_described(ctx, g, asked.get(g.group_id))
            if unknown is not None:
                _with_ids(ctx, g, asked.get(g.group_id) is None, unknown.get(g.group_id, ()))
        return resp
    return answer_denied(ctx, req, "groups", denied, error_response, "groups",
                         lambda: then(groups.offset_fetch(ctx, req), each_group))


def _resolve_ids(ctx, req) -> dict:
    """v10: names of the asked topics from their ids; those with unknown ids leave the request.
    Returns {group id: [unknown request topics]}."""
    unknown = {}
    for g in req.groups:
        if g.topics is not None:
            missing = resolve_names(ctx.services.image, g.topics)
            if missing:
                unknown[g.group_id] = missing
                g.topics = [t for t in g.topics if t.name]
    return unknown


def _with_ids(ctx, group, all_topics: bool, unknown):
    """v10: the group's topics with their ids (an all-topics answer only those that exist), then
    the unknown ids' partitions UNKNOWN_TOPIC_ID (Kafka 4.3.1's ``fetchOffsetsForGroup``)."""
    if group.topics is None or group.error_code:
        return
    group.topics = set_ids(ctx.services.image, group.topics, drop_unknown=all_topics)
    group.topics += [R.OffsetFetchResponseTopics(topic_id=t.topic_id, partitions=[
        R.OffsetFetchResponsePartitions(partition_index=i, committed_offset=-1, committed_leader_epoch=-1,
                                        metadata="", error_code=ErrorCode.UNKNOWN_TOPIC_ID)
        for i in t.partition_indexes]) for t in unknown]


def _topics_described(ctx, holder, asked):
    """Topics the principal may not DESCRIBE: left out when all topics were asked for
    (``asked`` None), their partitions TOPIC_AUTHORIZATION_FAILED when named (Kafka)."""
    if holder.topics is None:
        return holder
    kept = []
    for t in holder.topics:
        if ctx.authorize(Op.DESCRIBE, TOPIC, t.name):
            kept.append(t)
        elif asked is not None:
            for p in t.partitions:
                p.committed_offset, p.committed_leader_epoch, p.metadata = -1, -1, ""
                p.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            kept.append(t)
    holder.topics = kept
    return holder


def error_response(req, version, code):
    if version >= 8:
        return R(groups=[R.OffsetFetchResponseGroup(group_id=g.group_id, topics=[], error_code=code)
                         for g in req.groups])
    return R(error_code=code, topics=[])
