"""RenewDelegationToken (key 39), versions 1-2 (KIP-48).

As Kafka 4.3's ``KafkaApis.handleRenewTokenRequest`` then ``ControllerApis`` and
``DelegationTokenControlManager.renewDelegationToken``: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
(expiry -1) over PLAINTEXT, SSL without a client certificate or a token-authenticated connection;
otherwise the active controller checks the HMAC (DELEGATION_TOKEN_NOT_FOUND), the expiry
(DELEGATION_TOKEN_EXPIRED) and that the requester is the owner or a renewer
(DELEGATION_TOKEN_OWNER_MISMATCH), and commits the token with its new expiry timestamp
(:func:`kcompat.kraft.token_control.renew_token`). ``kafka-delegation-tokens.sh --renew``.
"""

from __future__ import annotations

from kcompat.broker.handlers import _tokens
from kcompat.kraft import token_control
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.renew_delegation_token import RenewDelegationTokenResponse as R

API_KEY = 39
MIN_VERSION = 1
MAX_VERSION = 2


def handle(ctx, req):
    principal, forwarded = _tokens.requester(ctx, req)
    if not _tokens.allow_token_requests(ctx, principal, forwarded):
        return error_response(req, ctx.api_version, ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
    settings = _tokens.settings(ctx)

    def local():
        services = ctx.services
        records, response = token_control.renew_token(services.image, settings, req, principal, services.now_ms())
        _tokens.commit(ctx, records)
        return response
    return _tokens.forward(ctx, req, MAX_VERSION, local, error_response)


def error_response(req, version, code):
    return R(error_code=code, expiry_timestamp_ms=token_control.ERROR_TIMESTAMP, throttle_time_ms=0)
