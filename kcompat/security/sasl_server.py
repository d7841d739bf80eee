"""The server side of SASL authentication on one connection (Kafka's ``SaslServerAuthenticator``).

States, as Kafka's ``SaslState``::

    INITIAL --ApiVersions--> HANDSHAKE_REQUEST --SaslHandshake--> AUTHENTICATE --SaslAuthenticate*--> COMPLETE
    INITIAL --SaslHandshake v1--> AUTHENTICATE
    INITIAL --SaslHandshake v0--> RAW (size-prefixed SASL tokens without Kafka headers, pre-KIP-152 clients)
    any failure --> FAILED (the response is sent, then the connection closes)
    COMPLETE --SaslHandshake (client used SaslAuthenticate v1+)--> AUTHENTICATE (re-authentication, KIP-368)

Before authentication only ApiVersions (once, before the handshake), SaslHandshake and
SaslAuthenticate are accepted; any other request closes the connection with a log line, as
Kafka's ``IllegalSaslStateException`` does (after the handshake, as in Kafka, the request is first
answered with ILLEGAL_SASL_STATE: :attr:`SaslSession.reject_reason` tells the connection). Frames are limited to ``sasl.server.max.receive.size``
until authentication completes. A session whose lifetime ended (``connections.max.reauth.ms`` or
an OAUTHBEARER token's expiry) is closed at its next request other than a SaslHandshake that
starts re-authentication (Kafka's ``SocketServer`` "Disconnecting expired channel"). Failures answer
SASL_AUTHENTICATION_FAILED with Kafka's message, never naming a password nor saying whether a
user exists; log lines carry the user name at most.

The connection (``kcompat.broker.connection``) calls :meth:`SaslSession.intercept` for each frame
on a SASL listener; the SaslHandshake and SaslAuthenticate handlers call :meth:`handshake` and
:meth:`authenticate`.
"""

from __future__ import annotations

import logging
import struct
import time

from kcompat.protocol.errors import ErrorCode
from kcompat.security.delegation_token import TokenCredentials, TokenSettings
from kcompat.security.jaas import plain_users
from kcompat.security.principal import user
from kcompat.security.sasl_config import ListenerSasl, listener_sasl
from kcompat.security.sasl_plain import PlainServerExchange, SaslFailure
from kcompat.security.scram import MECHANISM_TYPES, ScramAuthenticationError, ScramServerExchange

log = logging.getLogger("kcompat.security.sasl")

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
INITIAL, HANDSHAKE_REQUEST, AUTHENTICATE, RAW, COMPLETE, FAILED = (
    "INITIAL", "HANDSHAKE_REQUEST", "AUTHENTICATE", "RAW", "COMPLETE", "FAILED")
SUPPORTED = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
_HEAD = struct.Struct(">hh")


class SaslListeners:
    """The SASL settings of one node's listeners, each read once (at start-up by
    :meth:`check_listener`), and their OAUTHBEARER token validators, shared by the connections.

    ``config``: the :class:`~kcompat.config.broker.BrokerConfig` (``sasl.enabled.mechanisms``,
    ``listener.name.<l>.<mechanism>.sasl.jaas.config``, ...: :func:`kcompat.security.sasl_config.listener_sasl`);
    ``image``: the :class:`~kcompat.kraft.image.MetadataImage`, whose SCRAM credentials (KIP-554)
    and delegation tokens (KIP-48, SCRAM with ``tokenauth=true``) the sessions check.
    """

    def __init__(self, config, image) -> None:
        self.config = config
        self.image = image
        self.tokens = TokenCredentials(image, TokenSettings.from_config(config))
        self.settings: dict[str, ListenerSasl | None] = {}   # listener name -> its settings (None: no SASL)
        self.oauth_validators: dict[str, object] = {}       # listener name -> its OAUTHBEARER validator

    def session_for(self, listener_name: str) -> "SaslSession | None":
        """A new session for a connection on ``listener_name``; None unless it is a SASL listener."""
        if listener_name not in self.settings:
            self.settings[listener_name] = listener_sasl(self.config, listener_name)
        settings = self.settings[listener_name]
        return None if settings is None else SaslSession(settings, self.image, self.oauth_validators, self.tokens)

    def check_listener(self, listener_name: str) -> None:
        """Read a listener's SASL settings at start-up, as Kafka builds its authenticators then: a
        malformed JAAS configuration or an unusable OAUTHBEARER validator stops the start with
        :class:`kcompat.config.errors.ConfigError`; a mechanism kcompat lacks (GSSAPI) is logged."""
        from kcompat.config.errors import ConfigError
        try:
            settings = self.settings[listener_name] = listener_sasl(self.config, listener_name)
        except ValueError as e:
            raise ConfigError(f"listener.name.{listener_name.lower()}.sasl.jaas.config",
                              f"Invalid JAAS configuration of listener {listener_name}: {e}") from None
        if settings is None:
            return
        missing = [m for m in settings.mechanisms if m not in SUPPORTED]
        if missing:
            log.warning("SASL listener %s enables %s, which kcompat does not implement: handshakes asking for "
                        "them are refused", listener_name, ",".join(missing))
        if "OAUTHBEARER" in settings.mechanisms:
            from kcompat.security.oauth import make_validator
            entry = settings.jaas.get("OAUTHBEARER")
            try:
                self.oauth_validators[listener_name] = make_validator(settings.oauth, entry.options if entry else {})
            except ValueError as e:
                raise ConfigError(
                    f"listener.name.{listener_name.lower()}.oauthbearer.sasl.server.callback.handler.class",
                    str(e)) from None


class SaslSession:
    """SASL state of one connection. ``settings``: its listener's; ``image``: the metadata image
    holding the SCRAM credentials; ``oauth_validators``: the OAUTHBEARER validator of each
    listener (listener name -> validator), made on first use when start-up did not; ``tokens``:
    the delegation tokens' SCRAM credentials (:class:`~kcompat.security.delegation_token.TokenCredentials`)."""

    def __init__(self, settings: ListenerSasl, image, oauth_validators: dict[str, object],
                 tokens: TokenCredentials | None = None) -> None:
        self.settings = settings
        self.image = image
        self.oauth_validators = oauth_validators
        self.tokens = tokens
        self.state = INITIAL
        self.mechanism: str | None = None
        self.exchange = None
        self.principal = None
        self.expires_at: float | None = None      # time.monotonic() seconds
        self.reauth_supported = False
        self.reauthenticating = False
        self.peer = "?"
        # set when a request must be answered with ILLEGAL_SASL_STATE and the connection closed
        self.reject_reason: str | None = None

    @property
    def authenticated(self) -> bool:
        return self.state == COMPLETE

    # -- the connection's hook ------------------------------------------------------------------

    def intercept(self, conn, frame) -> bool:
        """Called by the connection for each frame before it is decoded; True when the frame was
        consumed here (a raw SASL token) or the connection was closed."""
        state = self.state
        if state == COMPLETE:   # the per-request path of an authenticated connection: keep it cheap
            if self.reauth_supported and frame[0] == 0 and frame[1] == SASL_HANDSHAKE:
                self.state = INITIAL   # re-authentication: the SaslHandshake handler moves on
                self.reauthenticating = True
                return False
            if self.expires_at is not None and time.monotonic() > self.expires_at:
                conn.close(f"SASL session of {self.principal} expired (connections.max.reauth.ms or token "
                           "expiry) and the client did not re-authenticate")
                return True
            return False
        self.peer = conn.peer
        if state == RAW:
            self._raw_token(conn, frame)
            return True
        if state == FAILED:
            conn.close("request after a failed SASL authentication")
            return True
        if len(frame) < 4:
            return False   # the connection closes it as too short
        api_key, version = _HEAD.unpack_from(frame, 0)
        if state == INITIAL and api_key == API_VERSIONS and not self.reauthenticating:
            if version <= 4:
                self.state = HANDSHAKE_REQUEST   # an unsupported version gets KIP-511 and may retry
            return False
        if state in (INITIAL, HANDSHAKE_REQUEST) and api_key == SASL_HANDSHAKE:
            return False
        if state == AUTHENTICATE and api_key == SASL_AUTHENTICATE:
            return False
        self.state = FAILED
        if state == AUTHENTICATE:   # Kafka answers ILLEGAL_SASL_STATE, then closes
            self.reject_reason = f"Unexpected Kafka request of type {api_key} during SASL authentication"
            return False
        conn.close(f"Unexpected Kafka request of type {api_key} during SASL handshake (ILLEGAL_SASL_STATE)")
        return True

    # -- SaslHandshake -----------------------------------------------------------------------------

    def handshake(self, mechanism: str, version: int) -> tuple[ErrorCode, list[str]]:
        """``(error code, enabled mechanisms)``; UNSUPPORTED_SASL_MECHANISM (then the caller
        closes) for a mechanism not enabled on the listener, or for a re-authentication that
        changes mechanism."""
        enabled = list(self.settings.mechanisms)
        if mechanism not in enabled or mechanism not in SUPPORTED or (
                self.reauthenticating and mechanism != self.mechanism):
            log.info("SASL handshake from %s on %s: mechanism %r is not enabled (%s)", self.peer,
                     self.settings.listener, mechanism, ",".join(enabled))
            self.state = FAILED
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM, enabled
        try:
            self.exchange = self._new_exchange(mechanism)
        except ValueError as e:
            log.error("SASL %s on listener %s is misconfigured: %s", mechanism, self.settings.listener, e)
            self.state = FAILED
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM, enabled
        self.mechanism = mechanism
        self.state = AUTHENTICATE if version >= 1 else RAW
        return ErrorCode.NONE, enabled

    def _new_exchange(self, mechanism: str):
        entry = self.settings.jaas.get(mechanism)
        if mechanism == "PLAIN":
            return PlainServerExchange(plain_users(entry))
        if mechanism in MECHANISM_TYPES:
            mtype = MECHANISM_TYPES[mechanism]

            def lookup(name: str):
                rec = self.image.scram.get((mtype, name))
                return None if rec is None else (bytes(rec.salt), bytes(rec.stored_key), bytes(rec.server_key),
                                                  rec.iterations)
            tokens = self.tokens
            token_lookup = None if tokens is None else (lambda token_id: tokens.lookup(mtype, token_id))
            return ScramServerExchange(mechanism, lookup, token_lookup)
        from kcompat.security.oauth import OAuthBearerServerExchange, make_validator
        validators = self.oauth_validators
        key = self.settings.listener
        if key not in validators:
            validators[key] = make_validator(self.settings.oauth, entry.options if entry else {})
        return OAuthBearerServerExchange(validators[key])

    # -- SaslAuthenticate --------------------------------------------------------------------------

    def authenticate(self, token: bytes, version: int) -> tuple[ErrorCode, str | None, bytes, int]:
        """``(error code, error message, server token, session lifetime ms)`` for one client
        token. On failure the state is FAILED and the caller closes after the response."""
        if version > 0:
            self.reauth_supported = True
        try:
            response = self._evaluate(token)
        except SaslFailure as e:
            return ErrorCode.SASL_AUTHENTICATION_FAILED, e.message, b"", 0
        return ErrorCode.NONE, None, response, self._lifetime_ms() if self.state == COMPLETE else 0

    def _evaluate(self, token: bytes) -> bytes:
        ex = self.exchange
        what = "re-authentication" if self.reauthenticating else "authentication"
        try:
            response = ex.evaluate(token)
        except (SaslFailure, ScramAuthenticationError) as e:
            self.state = FAILED
            detail = getattr(e, "detail", "") or getattr(ex, "detail", "")
            log.warning("SASL %s %s failed for %s from %s on %s: %s%s", self.mechanism, what,
                        _user_text(ex.username), self.peer, self.settings.listener, e.message,
                        f" ({detail})" if detail else "")
            raise SaslFailure(e.message) from None
        if not ex.complete:
            return response
        token_owner = getattr(ex, "token_owner", None)
        principal = user(ex.username) if token_owner is None else user(token_owner, token_authenticated=True)
        if self.reauthenticating and principal != self.principal:
            self.state = FAILED
            raise SaslFailure(f"Cannot change principals during re-authentication from {self.principal.principal_type}."
                              f"{self.principal.name}: {principal.principal_type}.{principal.name}")
        self.principal = principal
        self.state = COMPLETE
        log.info("SASL %s %s of %s from %s on %s", self.mechanism, what, principal, self.peer, self.settings.listener)
        return response

    def _lifetime_ms(self) -> int:
        """KIP-368 session lifetime: min(connections.max.reauth.ms, credential expiry), 0 = none."""
        max_reauth = self.settings.reauth_ms.get(self.mechanism, 0)
        expiry_ms = getattr(self.exchange, "lifetime_ms", None)
        lifetime = None
        if expiry_ms is not None:
            lifetime = max(0, expiry_ms - int(time.time() * 1000))
        if max_reauth > 0:
            lifetime = max_reauth if lifetime is None else min(lifetime, max_reauth)
        self.expires_at = None if lifetime is None else time.monotonic() + lifetime / 1000.0
        return lifetime or 0

    # -- v0 handshake: raw tokens ----------------------------------------------------------------------

    def _raw_token(self, conn, frame) -> None:
        """A SASL token framed only by its size (after a v0 SaslHandshake): evaluated, the answer
        sent the same way; a failure closes the connection (no Kafka response exists to say it)."""
        try:
            response = self._evaluate(bytes(frame))
        except SaslFailure:
            conn.close("SASL authentication failed (v0 handshake, raw tokens)")
            return
        if self.state == COMPLETE:
            self._lifetime_ms()
            conn.authenticated(self.principal)
        conn.send_raw(response)


def _user_text(name: str | None) -> str:
    return f"user {name!r}" if name else "an unnamed user"
