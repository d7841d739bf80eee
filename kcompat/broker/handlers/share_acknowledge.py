"""ShareAcknowledge (key 79), versions 1-2: acknowledgements of records a share consumer acquired
(ACCEPT, RELEASE, REJECT, and RENEW from v2; KIP-932, KIP-1222). Served by
:func:`kcompat.broker.share.requests.share_acknowledge`.

With an authorizer READ on the group is required (GROUP_AUTHORIZATION_FAILED for the request) and
READ on each topic (TOPIC_AUTHORIZATION_FAILED for its partitions), as Kafka's
handleShareAcknowledgeRequest.
"""

from kcompat.broker.authz import TOPIC, Op, answer_denied
from kcompat.protocol.errors import ErrorCode
from kcompat.broker.share.requests import acknowledge_refused, refusal, share_acknowledge
from kcompat.protocol.messages.share_acknowledge import ShareAcknowledgeResponse as R

API_KEY = 79
MIN_VERSION = 1
MAX_VERSION = 2


def handle(ctx, req):
    code = refusal(ctx, req)
    if code is not None:
        return error_response(req, ctx.api_version, code)
    by_id = ctx.services.image.topics_by_id
    denied = [(t, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for t in req.topics
              if t.topic_id in by_id and not ctx.authorize(Op.READ, TOPIC, by_id[t.topic_id].name)]
    return answer_denied(ctx, req, "topics", denied, _topic_errors, "responses",
                         lambda: share_acknowledge(ctx, req), message=None, call_when_empty=True)


def _topic_errors(req, version, code):
    """The refused topics' partitions answered with ``code``."""
    return R(throttle_time_ms=0, error_code=0, responses=[R.ShareAcknowledgeTopicResponse(
        topic_id=t.topic_id, partitions=[
            R.PartitionData(partition_index=p.partition_index, error_code=code,
                            current_leader=R.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1))
            for p in t.partitions]) for t in req.topics], node_endpoints=[])


def error_response(req, version, code):
    return acknowledge_refused(code)
