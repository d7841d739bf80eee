"""ShareFetch (key 78), versions 1-2: a share consumer's fetch of records it acquires, with the
acknowledgements of earlier ones piggybacked (KIP-932; v2: record-limit acquisition and RENEW,
KIP-1206/KIP-1222). Served by :func:`kcompat.broker.share.requests.share_fetch`.

With an authorizer READ on the group is required (GROUP_AUTHORIZATION_FAILED for the request) and
READ on each topic (TOPIC_AUTHORIZATION_FAILED for its partitions, and for their piggybacked
acknowledgements), as Kafka's handleShareFetchRequest.
"""

from kcompat.broker.authz import TOPIC, Op, answer_denied
from kcompat.protocol.errors import ErrorCode
from kcompat.broker.share.requests import fetch_refused, refusal, share_fetch
from kcompat.protocol.messages.share_fetch import ShareFetchResponse as R

API_KEY = 78
MIN_VERSION = 1
MAX_VERSION = 2


def handle(ctx, req):
    code = refusal(ctx, req)
    if code is not None:
        return error_response(req, ctx.api_version, code)
    by_id = ctx.services.image.topics_by_id
    denied = [(t, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for t in req.topics
              if t.topic_id in by_id and not ctx.authorize(Op.READ, TOPIC, by_id[t.topic_id].name)]
    return answer_denied(ctx, req, "topics", denied, _topic_errors, "responses", lambda: share_fetch(ctx, req),
                         message=None, call_when_empty=True)


def _topic_errors(req, version, code):
    """The refused topics' partitions (and their acknowledgements) answered with ``code``."""
    return R(throttle_time_ms=0, error_code=0, responses=[R.ShareFetchableTopicResponse(topic_id=t.topic_id, partitions=[
        R.PartitionData(partition_index=p.partition_index, error_code=code,
                        acknowledge_error_code=code if p.acknowledgement_batches else 0,
                        current_leader=R.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1), records=b"",
                        acquired_records=[])
        for p in t.partitions]) for t in req.topics], node_endpoints=[])


def error_response(req, version, code):
    return fetch_refused(code)
