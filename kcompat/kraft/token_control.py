"""Delegation tokens in the metadata log (KIP-48, as KRaft keeps them since KIP-900).

Kafka 4.3's ``DelegationTokenControlManager`` (controller) and ``DelegationTokenManager`` (brokers):
the active controller creates, renews and expires tokens by committing ``DelegationTokenRecord``
(type 10: token id, owner, requester and renewers as ``User:name`` strings, issue, max and
expiration timestamps in ms) and ``RemoveDelegationTokenRecord`` (type 26); every node's image
(:attr:`kcompat.kraft.image.MetadataImage.delegation_tokens`) holds them. The HMAC is never stored:
each node computes HMAC-SHA512 of the token id under ``delegation.token.secret.key`` (which must be
the same on every node), as Kafka does. Without a secret key every token request answers
DELEGATION_TOKEN_AUTH_DISABLED.

Rules (Kafka's): a new token lives ``min(max.lifetime.ms, requested MaxLifetimeMs if > 0)`` and
expires after ``delegation.token.expiry.time.ms`` unless renewed; only the owner, the requester's
named renewers (``User`` principals, else INVALID_PRINCIPAL_TYPE) or the owner may renew or expire
(DELEGATION_TOKEN_OWNER_MISMATCH); an unknown HMAC is DELEGATION_TOKEN_NOT_FOUND; renewing (or
expiring with a period >= 0) a token past its expiry or max timestamp is DELEGATION_TOKEN_EXPIRED;
expiring with a negative period removes the token at once; a cluster whose ``metadata.version``
is below 3.6-IV2 (14) answers UNSUPPORTED_VERSION to create, renew and expire. The controller removes expired tokens
every ``delegation.token.expiry.check.interval.ms`` (:func:`sweep_expired`, at most 1000 per pass).
"""

from __future__ import annotations

import base64
import hmac as _hmac
import uuid

from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.create_delegation_token import CreateDelegationTokenResponse as CR
from kcompat.protocol.messages.expire_delegation_token import ExpireDelegationTokenResponse as XR
from kcompat.protocol.messages.renew_delegation_token import RenewDelegationTokenResponse as RR
from kcompat.protocol.metadata_records import DelegationTokenRecord, RemoveDelegationTokenRecord
from kcompat.security.delegation_token import TokenSettings
from kcompat.security.principal import USER_TYPE, KafkaPrincipal

MAX_RECORDS_PER_EXPIRATION = 1000   # Kafka DelegationTokenControlManager
MIN_METADATA_VERSION = 14           # 3.6-IV2: MetadataVersion.isDelegationTokenSupported
ERROR_TIMESTAMP = -1                # Kafka DelegationTokenManager.ERROR_TIMESTAMP
_LONG_MAX = 2**63 - 1

__all__ = ["TokenSettings", "create_token", "renew_token", "expire_token", "sweep_expired", "token_for_hmac",
           "owner_or_renewer"]


def principal_of(text: str) -> KafkaPrincipal:
    """A record's ``User:name`` string as a principal."""
    return KafkaPrincipal.parse(text)


def owner_or_renewer(token: DelegationTokenRecord, principal: KafkaPrincipal) -> bool:
    """Kafka ``TokenInformation.ownerOrRenewer``: the owner, the requester or a renewer (who may
    describe the token)."""
    text = str(principal)
    return token.owner == text or token.requester == text or text in token.renewers


def _may_renew(token: DelegationTokenRecord, principal: KafkaPrincipal) -> bool:
    """Kafka ``allowedToRenew``: the owner or a named renewer (not the requester)."""
    text = str(principal)
    return token.owner == text or text in token.renewers


def token_for_hmac(image, settings: TokenSettings, hmac: bytes) -> DelegationTokenRecord | None:
    """The token of ``image`` whose HMAC is ``hmac`` (constant-time compare), or None."""
    hmac = bytes(hmac)
    for token in image.delegation_tokens.values():
        if _hmac.compare_digest(settings.hmac(token.token_id), hmac):
            return token
    return None


def new_token_id() -> str:
    """A random token id as Kafka's ``Uuid.randomUuid().toString()`` writes it: the 16 bytes in
    URL-safe base64 without padding (22 characters), never starting with ``-``."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not text.startswith("-"):
            return text


def _sum(now: int, duration: int) -> int:
    return _LONG_MAX if now > _LONG_MAX - duration else now + duration


def _expired(token: DelegationTokenRecord, now_ms: int) -> bool:
    return token.max_timestamp < now_ms or token.expiration_timestamp < now_ms


def _with_expiration(token: DelegationTokenRecord, expiration_ms: int) -> DelegationTokenRecord:
    return DelegationTokenRecord(owner=token.owner, requester=token.requester, renewers=list(token.renewers),
                                 issue_timestamp=token.issue_timestamp, max_timestamp=token.max_timestamp,
                                 expiration_timestamp=expiration_ms, token_id=token.token_id)


def _metadata_version_supports_tokens(image) -> bool:
    """The finalized ``metadata.version`` has delegation token records (3.6-IV2 and later; an
    image without one yet counts as current)."""
    return image.features.get("metadata.version", MIN_METADATA_VERSION) >= MIN_METADATA_VERSION


def create_token(image, settings: TokenSettings, req, requester: KafkaPrincipal, now_ms: int,
                 token_id: str | None = None) -> tuple[list, CR]:
    """``(records, response)`` for CreateDelegationToken from ``requester`` (the client's
    principal, also the owner unless v3's OwnerPrincipalName names another). Timestamps in ms;
    ``token_id`` a fresh :func:`new_token_id` unless given (tests)."""
    owner = requester
    if req.owner_principal_name:
        owner = KafkaPrincipal(req.owner_principal_type or "", req.owner_principal_name)
    resp = CR(error_code=0, principal_type=owner.principal_type, principal_name=owner.name,
              token_requester_principal_type=requester.principal_type,
              token_requester_principal_name=requester.name, issue_timestamp_ms=0, expiry_timestamp_ms=0,
              max_timestamp_ms=0, token_id="", hmac=b"", throttle_time_ms=0)
    if not settings.enabled:
        resp.error_code = ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
        return [], resp
    if not _metadata_version_supports_tokens(image):
        resp.error_code = ErrorCode.UNSUPPORTED_VERSION
        return [], resp
    max_life = settings.max_lifetime_ms
    if req.max_lifetime_ms > 0:
        max_life = min(max_life, req.max_lifetime_ms)
    max_ts = _sum(now_ms, max_life)
    expiry_ts = min(max_ts, _sum(now_ms, settings.expiry_time_ms))
    renewers = []
    for r in req.renewers:
        if r.principal_type != USER_TYPE:
            resp.error_code = ErrorCode.INVALID_PRINCIPAL_TYPE
            return [], resp
        renewers.append(str(KafkaPrincipal(r.principal_type, r.principal_name)))
    token_id = token_id or new_token_id()
    resp.issue_timestamp_ms, resp.expiry_timestamp_ms, resp.max_timestamp_ms = now_ms, expiry_ts, max_ts
    resp.token_id, resp.hmac = token_id, settings.hmac(token_id)
    record = DelegationTokenRecord(owner=str(owner), requester=str(requester), renewers=renewers,
                                   issue_timestamp=now_ms, max_timestamp=max_ts, expiration_timestamp=expiry_ts,
                                   token_id=token_id)
    return [record], resp


def _checked(image, settings: TokenSettings, hmac: bytes, principal: KafkaPrincipal, now_ms: int,
             expired_first: bool) -> tuple[DelegationTokenRecord | None, int]:
    """``(token, error code)`` for a renew (``expired_first``: an expired token is
    DELEGATION_TOKEN_EXPIRED before the owner check) or an expire request, in Kafka's order."""
    if not settings.enabled:
        return None, ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
    if not _metadata_version_supports_tokens(image):
        return None, ErrorCode.UNSUPPORTED_VERSION
    token = token_for_hmac(image, settings, hmac)
    if token is None:
        return None, ErrorCode.DELEGATION_TOKEN_NOT_FOUND
    if expired_first and _expired(token, now_ms):
        return token, ErrorCode.DELEGATION_TOKEN_EXPIRED
    if not _may_renew(token, principal):
        return token, ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
    return token, ErrorCode.NONE


def renew_token(image, settings: TokenSettings, req, principal: KafkaPrincipal, now_ms: int) -> tuple[list, RR]:
    """``(records, response)`` for RenewDelegationToken: the new expiry is
    ``min(max timestamp, now + min(expiry.time.ms, RenewPeriodMs if > 0))``."""
    token, code = _checked(image, settings, req.hmac, principal, now_ms, expired_first=True)
    resp = RR(error_code=code, expiry_timestamp_ms=0, throttle_time_ms=0)
    if code:
        return [], resp
    period = settings.expiry_time_ms
    if req.renew_period_ms > 0:
        period = min(period, req.renew_period_ms)
    resp.expiry_timestamp_ms = min(token.max_timestamp, now_ms + period)
    return [_with_expiration(token, resp.expiry_timestamp_ms)], resp


def expire_token(image, settings: TokenSettings, req, principal: KafkaPrincipal, now_ms: int) -> tuple[list, XR]:
    """``(records, response)`` for ExpireDelegationToken: a negative ``ExpiryTimePeriodMs``
    removes the token now (expiry timestamp = now), else its expiry becomes
    ``min(max timestamp, now + period)``."""
    token, code = _checked(image, settings, req.hmac, principal, now_ms, expired_first=False)
    resp = XR(error_code=code, expiry_timestamp_ms=0, throttle_time_ms=0)
    if code:
        return [], resp
    if req.expiry_time_period_ms < 0:   # expire immediately
        resp.expiry_timestamp_ms = now_ms
        return [RemoveDelegationTokenRecord(token_id=token.token_id)], resp
    if _expired(token, now_ms):
        resp.error_code = ErrorCode.DELEGATION_TOKEN_EXPIRED
        return [], resp
    resp.expiry_timestamp_ms = min(token.max_timestamp, _sum(now_ms, req.expiry_time_period_ms))
    return [_with_expiration(token, resp.expiry_timestamp_ms)], resp


def sweep_expired(image, now_ms: int) -> list:
    """RemoveDelegationTokenRecords for the tokens past their expiry or max timestamp, at most
    :data:`MAX_RECORDS_PER_EXPIRATION` (Kafka ``sweepExpiredDelegationTokens``)."""
    out = [RemoveDelegationTokenRecord(token_id=t.token_id)
           for t in image.delegation_tokens.values() if _expired(t, now_ms)]
    return out[:MAX_RECORDS_PER_EXPIRATION]
