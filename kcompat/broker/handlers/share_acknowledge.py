"""ShareAcknowledge (key 79), versions 1-2: acknowledgements of records a share consumer acquired
(ACCEPT, RELEASE, REJECT, and RENEW from v2; KIP-932, KIP-1222). Served by
:func:`kcompat.broker.share.requests.share_acknowledge`."""

from kcompat.broker.share.requests import share_acknowledge
from kcompat.protocol.messages.share_acknowledge import ShareAcknowledgeResponse as R

API_KEY = 79
MIN_VERSION = 1
MAX_VERSION = 2


def handle(ctx, req):
    return share_acknowledge(ctx, req)


def error_response(req, version, code):
    return R(throttle_time_ms=0, error_code=code, responses=[], node_endpoints=[])
