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
from kcompat.protocol.messages.renew_delegation_token import RenewDelegationTokenResponse as R

API_KEY = 39
MIN_VERSION = 1
MAX_VERSION = 2


error_response = _tokens.expiry_error_response(R)


def handle(ctx, req):
    return _tokens.handle_token_change(ctx, req, MAX_VERSION, token_control.renew_token, error_response)
