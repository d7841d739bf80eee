"""SASL/OAUTHBEARER (RFC 7628) as Kafka's ``OAuthBearerSaslServer``, with PyJWT for the tokens.

Two validators, chosen as Kafka chooses them by ``sasl.server.callback.handler.class``:

- unset: Kafka's ``OAuthBearerUnsecuredValidatorCallbackHandler``: an *unsecured* JWT (header
  ``"alg":"none"``, no signature) whose principal is the ``unsecuredValidatorPrincipalClaimName``
  claim (default ``sub``), with ``exp`` required, ``unsecuredValidatorRequiredScope`` checked against
  the ``unsecuredValidatorScopeClaimName`` claim, ``unsecuredValidatorAllowableClockSkewMs``
  (options of the listener's ``OAuthBearerLoginModule`` JAAS entry). For development only, as in
  Kafka.
- ``org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler``: a signed
  JWT checked against the keys of ``sasl.oauthbearer.jwks.endpoint.url`` (``file://`` read from
  disk, ``http(s)://`` through PyJWT's ``PyJWKClient`` with its cache), the ``kid`` selecting the
  key, ``exp`` required, ``sasl.oauthbearer.expected.audience``/``expected.issuer`` when set,
  the principal from ``sasl.oauthbearer.sub.claim.name``, ``clock.skew.seconds`` of leeway.

A token that fails validation gets Kafka's answer: a JSON error challenge
(``{"status":"invalid_token"}``) with the exchange left open; the client acknowledges it with
``\\x01`` and then the server fails the authentication with that JSON as the message.
The token's expiry bounds the session (KIP-368: ``lifetime_ms``).
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from urllib.parse import urlparse
from urllib.request import url2pathname

import jwt

from kcompat.security.sasl_plain import SaslFailure
from kcompat.security.sasl_config import SECURED_VALIDATOR, SECURED_VALIDATOR_OLD

log = logging.getLogger("kcompat.security.oauth")
_AUTH = re.compile(r"^(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)$")
_GENERIC = "Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER"
_SIGNED_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]


class _InvalidToken(Exception):
    """A token the validator refuses; ``scope``: the required scope it lacks (Kafka then answers
    ``insufficient_scope`` rather than ``invalid_token``)."""

    def __init__(self, message: str, scope: str | None = None) -> None:
        super().__init__(message)
        self.scope = scope


class JwksValidator:
    """Signed-token validation against a JWKS (``settings``: ListenerSasl.oauth).

    The key set is read when the validator is made and kept: a ``file://`` set is read again when
    the file changes, an ``http(s)://`` one is fetched again every
    ``sasl.oauthbearer.jwks.endpoint.refresh.ms`` on a thread of its own, and at once (at most every
    ``sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms``) when a token names a key id it lacks,
    as Kafka's ``RefreshingHttpsJwks``. Validation itself never waits for the network, so a slow
    or hostile issuer cannot stall the broker's event loop; a token whose key is not (yet) known
    is refused."""

    def __init__(self, settings: dict) -> None:
        self.settings = settings
        url = settings.get("jwks_url")
        if not url:
            raise ValueError("sasl.oauthbearer.jwks.endpoint.url must be set for OAuthBearerValidatorCallbackHandler")
        parsed = urlparse(url)
        if parsed.scheme not in ("file", "http", "https"):
            raise ValueError(f"sasl.oauthbearer.jwks.endpoint.url must be a file, http or https URL: {url}")
        self._url = url
        self._file = url2pathname(parsed.path) if parsed.scheme == "file" else None
        self._mtime = None
        self._keys: dict[str | None, object] = {}
        self._lock = threading.Lock()
        self._refresh_s = max(1.0, int(settings.get("jwks_refresh_ms") or 3600000) / 1000.0)
        self._backoff_s = max(0.1, int(settings.get("jwks_backoff_max_ms") or 10000) / 1000.0)
        self._last_fetch = 0.0
        self._wake = threading.Event()
        if self._file is None:
            self._fetch()
            threading.Thread(target=self._refresher, name="kcompat-jwks-refresh", daemon=True).start()

    def _fetch(self) -> None:
        """Fetch the remote key set now (a failure keeps the keys held and is logged)."""
        self._last_fetch = time.monotonic()
        try:
            keys = jwt.PyJWKClient(self._url, cache_jwk_set=False, timeout=10).get_jwk_set()
        except Exception as e:   # network or parse error: keep the last good set
            log.warning("could not fetch the JWKS from %s: %s", self._url, e)
            return
        with self._lock:
            self._keys = {k.key_id: k.key for k in keys.keys}
        log.info("JWKS from %s: %d key(s)", self._url, len(keys.keys))

    def _refresher(self) -> None:
        while True:
            self._wake.wait(self._refresh_s)
            self._wake.clear()
            wait = self._last_fetch + self._backoff_s - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            self._fetch()

    def _file_keys(self) -> dict:
        mtime = os.stat(self._file).st_mtime_ns
        if mtime != self._mtime:
            with open(self._file, encoding="utf-8") as f:
                keys = jwt.PyJWKSet.from_json(f.read())
            self._keys = {k.key_id: k.key for k in keys.keys}
            self._mtime = mtime
        return self._keys

    def _key(self, token: str):
        kid = jwt.get_unverified_header(token).get("kid")
        with self._lock:
            keys = self._file_keys() if self._file is not None else dict(self._keys)
        if kid in keys:
            return keys[kid]
        if kid is None and len(keys) == 1:
            return next(iter(keys.values()))
        if self._file is None:
            self._wake.set()   # maybe a rotated key: fetch again soon (after the back-off)
        raise _InvalidToken(f"no key in the JWKS matches the token's kid {kid!r}")

    def validate(self, token: str) -> tuple[str, int]:
        """``(principal, expiry in ms since the epoch)``; raises _InvalidToken."""
        s = self.settings
        try:
            claims = jwt.decode(token, self._key(token), algorithms=_SIGNED_ALGORITHMS,
                                audience=s["audience"] or None, issuer=s.get("issuer") or None,
                                leeway=s.get("clock_skew_s", 30),
                                options={"require": ["exp"], "verify_aud": bool(s["audience"])})
        except jwt.PyJWTError as e:
            raise _InvalidToken(str(e)) from None
        principal = claims.get(s.get("sub_claim") or "sub")
        if not isinstance(principal, str) or not principal:
            raise _InvalidToken(f"the token has no string claim {s.get('sub_claim') or 'sub'}")
        return principal, int(float(claims["exp"]) * 1000)


class UnsecuredValidator:
    """Kafka's ``OAuthBearerUnsecuredValidatorCallbackHandler`` (``options``: the JAAS options)."""

    def __init__(self, options: dict[str, str]) -> None:
        self.principal_claim = options.get("unsecuredValidatorPrincipalClaimName") or "sub"
        self.scope_claim = options.get("unsecuredValidatorScopeClaimName") or "scope"
        self.required_scope = (options.get("unsecuredValidatorRequiredScope") or "").split()
        self.skew_s = int(options.get("unsecuredValidatorAllowableClockSkewMs") or 0) / 1000.0

    def validate(self, token: str) -> tuple[str, int]:
        try:
            header = jwt.get_unverified_header(token)
            if header.get("alg") != "none":
                raise _InvalidToken("an unsecured token must have alg none")
            claims = jwt.decode(token, options={"verify_signature": False, "verify_exp": True,
                                                "require": ["exp"]}, leeway=self.skew_s)
        except jwt.PyJWTError as e:
            raise _InvalidToken(str(e)) from None
        principal = claims.get(self.principal_claim)
        if not isinstance(principal, str) or not principal:
            raise _InvalidToken(f"no principal claim {self.principal_claim}")
        # Kafka's OAuthBearerUnsecuredJws.calculateScope: a string claim is ONE scope element, a
        # list is a set of them; the failure names the whole required list, as Java prints it
        scope = claims.get(self.scope_claim) or []
        scope = {scope.strip()} if isinstance(scope, str) else {str(x) for x in scope}
        if any(s not in scope for s in self.required_scope):
            raise _InvalidToken("the token lacks a required scope",
                                scope="[" + ", ".join(self.required_scope) + "]")
        return principal, int(float(claims["exp"]) * 1000)


def make_validator(settings: dict, jaas_options: dict[str, str]):
    """The validator a listener's settings ask for; ValueError for an unknown handler class."""
    handler = settings.get("callback_handler")
    if not handler:
        return UnsecuredValidator(jaas_options)
    if handler in (SECURED_VALIDATOR, SECURED_VALIDATOR_OLD):
        return JwksValidator(settings)
    raise ValueError(f"sasl.server.callback.handler.class {handler} is not supported by kcompat")


class OAuthBearerServerExchange:
    """One SASL/OAUTHBEARER exchange; ``validator.validate(token) -> (principal, exp ms)``."""

    mechanism = "OAUTHBEARER"

    def __init__(self, validator) -> None:
        self._validator = validator
        self._error: str | None = None
        self.complete = False
        self.username: str | None = None
        self.lifetime_ms: int | None = None   # the token's expiry, ms since the epoch
        self.detail = ""

    def evaluate(self, message: bytes) -> bytes:
        """Returns b'' on success or the JSON error challenge; raises :class:`SaslFailure`."""
        message = bytes(message)
        if message == b"\x01" and self._error is not None:
            raise SaslFailure(self._error)
        self._error = None
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslFailure("Invalid OAUTHBEARER client first message") from None
        # a malformed message is Kafka's SaslException: the client gets the generic message
        m = re.fullmatch(r"n,(?:a=(?P<authzid>[^,]*))?,\x01(?P<kv>.*)\x01", text, re.S)
        pairs = dict(kv.split("=", 1) for kv in m.group("kv").split("\x01") if "=" in kv) if m else {}
        auth = _AUTH.match(pairs.get("auth", ""))
        if m is None or auth is None or auth.group("scheme").lower() != "bearer":
            self.detail = "malformed client first message"
            raise SaslFailure(_GENERIC)
        try:
            principal, expiry_ms = self._validator.validate(auth.group("token"))
        except _InvalidToken as e:
            self.detail = str(e)
            # Kafka's OAuthBearerSaslServer.jsonErrorResponse: status, and scope when one is missing
            error = {"status": "insufficient_scope", "scope": e.scope} if e.scope else {"status": "invalid_token"}
            self._error = json.dumps(error, separators=(", ", ":"))
            return self._error.encode()
        except Exception as e:   # JWKS unreachable or unreadable: Kafka's internal error wording
            self.detail = f"{type(e).__name__}: {e}"
            raise SaslFailure(_GENERIC) from None
        authzid = m.group("authzid")
        if authzid and authzid != principal:
            raise SaslFailure(f"Authentication failed: Client requested an authorization id ({authzid}) that is "
                              f"different from the token's principal name ({principal})")
        self.username = principal
        self.lifetime_ms = expiry_ms
        self.complete = True
        return b""


def unsecured_token(principal: str, lifetime_s: int = 3600, claim: str = "sub", **claims) -> str:
    """An unsecured JWT as Kafka's ``OAuthBearerUnsecuredLoginCallbackHandler`` makes (tests, and
    the broker's own connections with an unsecured OAUTHBEARER login)."""
    now = int(time.time())
    payload = {claim: principal, "iat": now, "exp": now + lifetime_s, **claims}
    return jwt.encode(payload, None, algorithm="none")
