"""CreateDelegationToken (key 38), versions 1-3 (KIP-48; v3 OwnerPrincipal: KIP-373).

As Kafka 4.3's ``KafkaApis.handleCreateTokenRequest`` then ``ControllerApis`` and
``DelegationTokenControlManager.createDelegationToken``: refused with
DELEGATION_TOKEN_REQUEST_NOT_ALLOWED over PLAINTEXT, SSL without a client certificate or a
token-authenticated connection; a token for another owner (v3 ``OwnerPrincipalName``) needs
CREATE_TOKENS on that ``User`` resource (DELEGATION_TOKEN_AUTHORIZATION_FAILED); a renewer that is
not a ``User`` is INVALID_PRINCIPAL_TYPE. The active controller then makes the token
(:func:`kcompat.kraft.token_control.create_token`: DELEGATION_TOKEN_AUTH_DISABLED without
``delegation.token.secret.key``) and commits its DelegationTokenRecord before answering with the
token id and HMAC. ``kafka-delegation-tokens.sh --create`` sends this request.
"""

from __future__ import annotations

from kcompat.broker.handlers import _tokens
from kcompat.kraft import token_control
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.create_delegation_token import CreateDelegationTokenResponse as R
from kcompat.security.acl import AclOperation, ResourceType
from kcompat.security.principal import USER_TYPE, KafkaPrincipal

API_KEY = 38
MIN_VERSION = 1
MAX_VERSION = 3


def handle(ctx, req):
    requester, forwarded = _tokens.requester(ctx, req)
    owner = requester
    if req.owner_principal_name:
        owner = KafkaPrincipal(req.owner_principal_type or "", req.owner_principal_name)
    if not _tokens.allow_token_requests(ctx, requester, forwarded):
        return _error(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, owner, requester)
    if not forwarded and owner != requester and not ctx.authorize(AclOperation.CREATE_TOKENS, ResourceType.USER,
                                                                  str(owner)):
        return _error(ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED, owner, requester)
    if any(r.principal_type != USER_TYPE for r in req.renewers):
        return _error(ErrorCode.INVALID_PRINCIPAL_TYPE, owner, requester)
    settings = _tokens.settings(ctx)

    def local():
        records, response = token_control.create_token(ctx.services.image, settings, req, requester,
                                                       ctx.services.now_ms())
        _tokens.commit(ctx, records)
        return response
    return _tokens.forward(ctx, req, MAX_VERSION, local, error_response)


def _error(code: int, owner: KafkaPrincipal, requester: KafkaPrincipal) -> R:
    """Kafka ``CreateDelegationTokenResponse.prepareResponse(version, throttle, error, owner,
    requester)``: timestamps -1, no token id, an empty HMAC."""
    return R(error_code=code, principal_type=owner.principal_type, principal_name=owner.name,
             token_requester_principal_type=requester.principal_type,
             token_requester_principal_name=requester.name, issue_timestamp_ms=-1, expiry_timestamp_ms=-1,
             max_timestamp_ms=-1, token_id="", hmac=b"", throttle_time_ms=0)


def error_response(req, version, code):
    owner = KafkaPrincipal(req.owner_principal_type or "", req.owner_principal_name or "")
    return _error(code, owner, KafkaPrincipal("", ""))
