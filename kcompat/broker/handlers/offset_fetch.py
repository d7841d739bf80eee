"""OffsetFetch (key 9), versions 0-9: committed offsets of one group, or several from v8 (KIP-709).

With an authorizer DESCRIBE on the group is required (GROUP_AUTHORIZATION_FAILED); topics
without DESCRIBE are left out of an all-topics answer and TOPIC_AUTHORIZATION_FAILED when named.
"""

from kcompat.broker.authz import GROUP, Op, TOPIC, answer_denied, then
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.offset_fetch import OffsetFetchResponse as R

API_KEY = 9
MIN_VERSION = 0
MAX_VERSION = 9


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

    def each_group(resp):
        for g in resp.groups:
            _topics_described(ctx, g, asked.get(g.group_id))
        return resp
    return answer_denied(ctx, req, "groups", denied, error_response, "groups",
                         lambda: then(groups.offset_fetch(ctx, req), each_group))


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
