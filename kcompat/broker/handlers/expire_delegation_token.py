"""ExpireDelegationToken (key 40), versions 1-2 (KIP-48).

As Kafka 4.3's ``KafkaApis.handleExpireTokenRequest`` then ``ControllerApis`` and
``DelegationTokenControlManager.expireDelegationToken``: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
(expiry -1) over PLAINTEXT, SSL without a client certificate or a token-authenticated connection;
otherwise the active controller checks the HMAC (DELEGATION_TOKEN_NOT_FOUND) and that the
requester is the owner or a renewer (DELEGATION_TOKEN_OWNER_MISMATCH); a negative
``ExpiryTimePeriodMs`` removes the token at once (RemoveDelegationTokenRecord), else its expiry
moves to ``now + period`` (DELEGATION_TOKEN_EXPIRED if already past;
:func:`kcompat.kraft.token_control.expire_token`). ``kafka-delegation-tokens.sh --expire``.
"""

from __future__ import annotations

from kcompat.broker.handlers import _tokens
from kcompat.kraft import token_control
from kcompat.protocol.messages.expire_delegation_token import ExpireDelegationTokenResponse as R

API_KEY = 40
MIN_VERSION = 1
MAX_VERSION = 2


error_response = _tokens.expiry_error_response(R)


def handle(ctx, req):
    return _tokens.handle_token_change(ctx, req, MAX_VERSION, token_control.expire_token, error_response)
