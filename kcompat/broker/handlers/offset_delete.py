"""OffsetDelete (key 47), version 0: delete a group's committed offsets for topics it no longer
consumes (GROUP_SUBSCRIBED_TO_TOPIC otherwise, KIP-496).

With an authorizer DELETE on the group is required (GROUP_AUTHORIZATION_FAILED); topics without
READ are answered TOPIC_AUTHORIZATION_FAILED.
"""

from kcompat.broker.authz import GROUP, TOPIC, Op, answer_denied, then
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.offset_delete import OffsetDeleteResponse as R

API_KEY = 47
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx, req):
    if not ctx.authorize(Op.DELETE, GROUP, req.group_id):
        return error_response(req, ctx.api_version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    denied = [(t, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for t in req.topics if not ctx.authorize(Op.READ, TOPIC, t.name)]
    return then(answer_denied(ctx, req, "topics", denied, _topic_errors, "topics",
                              lambda: ctx.services.groups.offset_delete(ctx, req)), _group_error_only)


def _group_error_only(resp):
    """A group-level error answers without topics, the refused ones included (Kafka)."""
    if resp.error_code:
        resp.topics = []
    return resp


def _topic_errors(req, version, code):
    return R(error_code=0, topics=[R.OffsetDeleteResponseTopic(name=t.name, partitions=[
        R.OffsetDeleteResponsePartition(partition_index=p.partition_index, error_code=code) for p in t.partitions])
        for t in req.topics])


def error_response(req, version, code):
    return R(error_code=code, topics=[])
