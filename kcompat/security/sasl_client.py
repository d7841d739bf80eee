"""The broker as a SASL client: its own connections to other nodes' SASL listeners.

Kafka's inter-broker and controller channels authenticate with
``sasl.mechanism.inter.broker.protocol`` / ``sasl.mechanism.controller.protocol`` and the login
module of the target listener's JAAS entry for that mechanism (``username``/``password`` of
``PlainLoginModule`` or ``ScramLoginModule``; ``unsecuredLoginStringClaim_sub`` of an unsecured
``OAuthBearerLoginModule``). :func:`inter_broker_sasl` and :func:`controller_sasl` build a
:class:`ClientSasl` for those listeners (None when they are not SASL listeners);
``kcompat.broker.node_client`` runs :meth:`ClientSasl.exchange` right after connecting (after the
TLS handshake on SASL_SSL), as Kafka's ``SaslClientAuthenticator``: SaslHandshake v1, then
SaslAuthenticate v2 tokens. SCRAM uses scramp's client, which also verifies the server's final
signature. The session lifetime the server grants (KIP-368) is returned, so the connection can be
replaced before it expires.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Awaitable, Callable

import scramp

from kcompat.security.sasl_config import client_credentials, client_mechanism

SASL_HANDSHAKE_VERSION = 1
SASL_AUTHENTICATE_VERSION = 2


class SaslClientError(ConnectionError):
    """The server refused the authentication (message: the server's, or what went wrong)."""


@dataclass
class ClientSasl:
    """Mechanism and credentials for the broker's connections to one listener."""

    mechanism: str
    username: str | None
    password: str | None
    options: dict

    async def exchange(self, send: Callable[[object, int], Awaitable[object]]) -> int:
        """Authenticate over ``send(request, version) -> response``; returns the session lifetime
        in ms (0 = none). Raises :class:`SaslClientError`."""
        from kcompat.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
        from kcompat.protocol.messages.sasl_handshake import SaslHandshakeRequest

        resp = await send(SaslHandshakeRequest(mechanism=self.mechanism), SASL_HANDSHAKE_VERSION)
        if resp.error_code:
            raise SaslClientError(f"SASL mechanism {self.mechanism} refused (error {resp.error_code}); "
                                  f"the listener enables {resp.mechanisms}")

        async def step(token: bytes):
            r = await send(SaslAuthenticateRequest(auth_bytes=token), SASL_AUTHENTICATE_VERSION)
            if r.error_code:
                raise SaslClientError(f"SASL {self.mechanism} authentication failed: {r.error_message}")
            return r

        if self.mechanism == "PLAIN":
            r = await step(f"\0{self.username}\0{self.password}".encode())
        elif self.mechanism.startswith("SCRAM-"):
            client = scramp.ScramClient([self.mechanism], self.username, self.password)
            first = await step(client.get_client_first().encode())
            try:
                client.set_server_first(bytes(first.auth_bytes).decode())
                r = await step(client.get_client_final().encode())
                client.set_server_final(bytes(r.auth_bytes).decode())
            except scramp.ScramException as e:
                raise SaslClientError(f"SASL {self.mechanism}: the server's answer did not verify: {e}") from None
        elif self.mechanism == "OAUTHBEARER":
            from kcompat.security.oauth import unsecured_token
            claim = self.options.get("unsecuredLoginPrincipalClaimName") or "sub"
            principal = self.options.get(f"unsecuredLoginStringClaim_{claim}")
            if not principal:
                raise SaslClientError("OAUTHBEARER for the broker's own connections needs an unsecured "
                                      f"login module with unsecuredLoginStringClaim_{claim}")
            lifetime_s = int(self.options.get("unsecuredLoginLifetimeSeconds") or 3600)
            token = unsecured_token(principal, lifetime_s, claim=claim)
            r = await step(f"n,,\x01auth=Bearer {token}\x01\x01".encode())
            if r.auth_bytes:   # an error challenge: acknowledge it to get the failure
                await step(b"\x01")
        else:
            raise SaslClientError(f"SASL mechanism {self.mechanism} is not supported by kcompat")
        return r.session_lifetime_ms


def client_sasl(config, listener: str | None) -> ClientSasl | None:
    """The :class:`ClientSasl` for connections to ``listener``, None unless it is a SASL listener."""
    if not listener:
        return None
    mechanism = client_mechanism(config, listener)
    if mechanism is None:
        return None
    entry = client_credentials(config, listener, mechanism)
    options = dict(entry.options) if entry else {}
    return ClientSasl(mechanism, options.get("username"), options.get("password"), options)


def inter_broker_sasl(config) -> ClientSasl | None:
    """SASL for ``inter.broker.listener.name`` (replica fetchers, coordinator forwarding, ...)."""
    return client_sasl(config, config.inter_broker_listener_name)


def controller_sasl(config) -> ClientSasl | None:
    """SASL for the first of ``controller.listener.names`` (Raft, registration, forwarding)."""
    names = config.controller_listener_names
    return client_sasl(config, names[0]) if names else None
