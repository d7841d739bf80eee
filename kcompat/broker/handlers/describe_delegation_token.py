"""DescribeDelegationToken (key 41), versions 1-3 (KIP-48; v3 token requester: KIP-373).

Answered by the broker from its metadata image, as Kafka 4.3's
``KafkaApis.handleDescribeTokensRequest`` and ``DelegationTokenManager.filterToken``:
DELEGATION_TOKEN_REQUEST_NOT_ALLOWED over PLAINTEXT, SSL without a client certificate or a
token-authenticated connection; DELEGATION_TOKEN_AUTH_DISABLED without
``delegation.token.secret.key``; an empty owner list describes nothing, a null one every token the
requester may see. A token is listed when it belongs to one of the owners asked for (as owner,
requester or renewer) and the requester is its owner, requester or a renewer, or may DESCRIBE the
``DelegationToken`` resource of its id, or DESCRIBE_TOKENS on the owner's ``User`` resource.
Expired tokens stay listed until the controller removes them. ``kafka-delegation-tokens.sh
--describe`` sends this request.
"""

from __future__ import annotations

from kcompat.broker.handlers import _tokens
from kcompat.kraft.token_control import owner_or_renewer, principal_of
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.describe_delegation_token import DescribeDelegationTokenResponse as R
from kcompat.security.acl import AclOperation, ResourceType
from kcompat.security.principal import KafkaPrincipal

API_KEY = 41
MIN_VERSION = 1
MAX_VERSION = 3


def handle(ctx, req):
    principal = ctx.principal
    if not _tokens.allow_token_requests(ctx, principal, False):
        return error_response(req, ctx.api_version, ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
    settings = _tokens.settings(ctx)
    if not settings.enabled:
        return error_response(req, ctx.api_version, ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED)
    if req.owners is not None and not req.owners:
        return error_response(req, ctx.api_version, ErrorCode.NONE)
    owners = None if req.owners is None else [KafkaPrincipal(o.principal_type, o.principal_name) for o in req.owners]
    tokens = []
    for token in list(ctx.services.image.delegation_tokens.values()):
        if owners is not None and not any(owner_or_renewer(token, o) for o in owners):
            continue
        if not (owner_or_renewer(token, principal)
                or ctx.authorize(AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN, token.token_id)
                or ctx.authorize(AclOperation.DESCRIBE_TOKENS, ResourceType.USER, token.owner)):
            continue
        owner, requester = principal_of(token.owner), principal_of(token.requester)
        renewers = [principal_of(r) for r in token.renewers]
        tokens.append(R.DescribedDelegationToken(
            principal_type=owner.principal_type, principal_name=owner.name,
            token_requester_principal_type=requester.principal_type, token_requester_principal_name=requester.name,
            issue_timestamp=token.issue_timestamp, expiry_timestamp=token.expiration_timestamp,
            max_timestamp=token.max_timestamp, token_id=token.token_id, hmac=settings.hmac(token.token_id),
            renewers=[R.DescribedDelegationTokenRenewer(principal_type=r.principal_type, principal_name=r.name)
                      for r in renewers]))
    return R(error_code=0, tokens=tokens, throttle_time_ms=0)


def error_response(req, version, code):
    return R(error_code=code, tokens=[], throttle_time_ms=0)
