"""Delegation token secrets and their SCRAM credentials (KIP-48).

A delegation token's password is the HMAC-SHA512 of its id under ``delegation.token.secret.key``
(Kafka ``DelegationTokenManager.createHmac``), given to clients in standard base64. A client
authenticates with SASL/SCRAM (either mechanism) with the token id as user name, that base64
string as password and the SCRAM extension ``tokenauth=true`` in its client-first message; the
session's principal is then ``User:<owner name>``, marked token-authenticated (Kafka
``ScramSaslServer`` / ``DelegationTokenCredentialCallback``). Kafka keeps a SCRAM credential per
mechanism for each token (4096 iterations, a random salt: ``prepareScramCredentials``);
:class:`TokenCredentials` derives and caches the same from the metadata image's tokens.
"""

from __future__ import annotations

import base64
import hashlib
import hmac as _hmac
from dataclasses import dataclass

from kcompat.security.scram import MIN_ITERATIONS, make_credential

TOKEN_AUTH_EXTENSION = "tokenauth"   # Kafka ScramLoginModule.TOKEN_AUTH_CONFIG


@dataclass(frozen=True)
class TokenSettings:
    """A node's delegation token configuration: ``secret`` (the UTF-8 bytes of
    ``delegation.token.secret.key``; None = tokens disabled. Kafka 4.0 removed its alias
    ``delegation.token.master.key``, which enables nothing any more), ``max_lifetime_ms``, ``expiry_time_ms`` (the renew period) and
    ``check_interval_ms`` (how often the controller removes expired tokens), in ms."""

    secret: bytes | None
    max_lifetime_ms: int = 7 * 24 * 3600 * 1000
    expiry_time_ms: int = 24 * 3600 * 1000
    check_interval_ms: int = 3600 * 1000

    @classmethod
    def from_config(cls, config) -> "TokenSettings":
        """From a :class:`kcompat.config.broker.BrokerConfig` (Kafka ``DelegationTokenManagerConfigs``)."""
        key = config.get("delegation.token.secret.key")
        return cls(secret=key.encode("utf-8") if key else None,
                   max_lifetime_ms=config.get("delegation.token.max.lifetime.ms"),
                   expiry_time_ms=config.get("delegation.token.expiry.time.ms"),
                   check_interval_ms=config.get("delegation.token.expiry.check.interval.ms"))

    @property
    def enabled(self) -> bool:
        return bool(self.secret)

    def hmac(self, token_id: str) -> bytes:
        """HMAC-SHA512 of ``token_id`` (UTF-8) under the secret key (64 bytes)."""
        return _hmac.new(self.secret, token_id.encode("utf-8"), hashlib.sha512).digest()

    def password(self, token_id: str) -> str:
        """A token's SCRAM password: its HMAC in standard base64 (Kafka ``hmacAsBase64String``)."""
        return base64.b64encode(self.hmac(token_id)).decode("ascii")


class TokenCredentials:
    """SCRAM credentials of the delegation tokens in a metadata image.

    ``image``: the :class:`kcompat.kraft.image.MetadataImage` (its ``delegation_tokens``, token id
    -> DelegationTokenRecord); ``settings``: this node's :class:`TokenSettings`. :meth:`lookup`
    answers a ``tokenauth=true`` SCRAM exchange."""

    def __init__(self, image, settings: TokenSettings) -> None:
        self.image = image
        self.settings = settings
        self._cache: dict[tuple[str, int], tuple] = {}

    def lookup(self, mechanism_type: int, token_id: str) -> tuple[str, int, tuple] | None:
        """``(owner name, expiry timestamp ms, (salt, stored key, server key, iterations))`` of the
        token ``token_id`` for SCRAM mechanism type 1 or 2, or None when tokens are disabled or
        the image has no such token (a removed or expired-and-swept token)."""
        token = self.image.delegation_tokens.get(token_id)
        if token is None or not self.settings.enabled:
            return None
        key = (token_id, mechanism_type)
        cred = self._cache.get(key)
        if cred is None:
            if len(self._cache) > 10_000:
                self._cache.clear()
            cred = self._cache[key] = make_credential(mechanism_type, self.settings.password(token_id),
                                                      MIN_ITERATIONS)
        owner = token.owner.partition(":")[2]   # "User:alice" -> "alice" (Kafka tokenOwner: the name)
        return owner, token.expiration_timestamp, cred
