"""ShareFetch (key 78), versions 1-2: a share consumer's fetch of records it acquires, with the
acknowledgements of earlier ones piggybacked (KIP-932; v2: record-limit acquisition and RENEW,
KIP-1206/KIP-1222). Served by :func:`kcompat.broker.share.requests.share_fetch`.

With an authorizer READ on the group (GROUP_AUTHORIZATION_FAILED) and on every topic
(TOPIC_AUTHORIZATION_FAILED for the request) are required.
"""

from kcompat.broker.authz import GROUP, TOPIC, Op, known_topic_names
from kcompat.protocol.errors import ErrorCode
from kcompat.broker.share.requests import share_fetch
from kcompat.protocol.messages.share_fetch import ShareFetchResponse as R

API_KEY = 78
MIN_VERSION = 1
MAX_VERSION = 2


def handle(ctx, req):
    if not ctx.authorize(Op.READ, GROUP, req.group_id):
        return error_response(req, ctx.api_version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not all(ctx.authorize(Op.READ, TOPIC, name) for name in known_topic_names(ctx, req.topics)):
        return error_response(req, ctx.api_version, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    return share_fetch(ctx, req)


def error_response(req, version, code):
    return R(throttle_time_ms=0, error_code=code, responses=[], node_endpoints=[])
