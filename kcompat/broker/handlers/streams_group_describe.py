"""StreamsGroupDescribe (key 89), version 0: KIP-1071 streams groups with their topology and their
members' current and target task assignments; GROUP_ID_NOT_FOUND for groups of other types.

As Kafka 4.3.1's ``KafkaApis.handleStreamsGroupDescribe``: UNSUPPORTED_VERSION unless streams
groups are enabled (:func:`.streams_group_heartbeat.streams_enabled`); with an authorizer DESCRIBE
on each group is required (GROUP_AUTHORIZATION_FAILED) and ``authorized_operations`` lists what
the ACLs allow on the group.
"""

from kcompat.broker.authz import GROUP, Op, answer_denied, then
from kcompat.broker.handlers.consumer_group_describe import _with_operations
from kcompat.broker.handlers.streams_group_heartbeat import streams_enabled
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.streams_group_describe import StreamsGroupDescribeResponse as R

API_KEY = 89
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx, req):
    if not streams_enabled(ctx.services):
        return error_response(req, ctx.api_version, ErrorCode.UNSUPPORTED_VERSION)
    denied = [(g, ErrorCode.GROUP_AUTHORIZATION_FAILED) for g in req.group_ids
              if not ctx.authorize(Op.DESCRIBE, GROUP, g)]
    return answer_denied(ctx, req, "group_ids", denied, error_response, "groups",
                         lambda: then(ctx.services.groups.streams_group_describe(ctx, req),
                                      lambda resp: _with_operations(ctx, resp, req.include_authorized_operations)))


def error_response(req, version, code):
    return R(groups=[R.DescribedGroup(error_code=code, group_id=g, group_state="", members=[])
                     for g in req.group_ids])
