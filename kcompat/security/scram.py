"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802/7677) for Kafka's SASL/SCRAM, with the scramp library.

Kafka stores a user's credential per mechanism as ``UserScramCredentialRecord`` (salt, stored
key, server key, iterations; never the password) in the metadata log: the image keeps them
(:attr:`kcompat.kraft.image.MetadataImage.scram`). :class:`ScramServerExchange` runs the server
side of one authentication against such credentials (Kafka's ``ScramSaslServer``); scramp does the
message parsing, the proof check in constant time, and the nonce check that CVE-2024-56128 is
about: the client-final nonce must *equal* the nonce of server-first (client nonce + server
nonce), not merely end with the server's part as Kafka before 3.9.1/4.0.0 checked.

Mechanism types are Kafka's ``ScramMechanism`` ids: 1 = SCRAM-SHA-256, 2 = SCRAM-SHA-512; both
accept 4096..16384 iterations.
"""

from __future__ import annotations

from typing import Callable

import scramp
from scramp.core import _c_key_stored_key_s_key  # RFC 5802 ClientKey/StoredKey/ServerKey from a SaltedPassword

MECHANISM_NAMES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MECHANISM_TYPES = {name: t for t, name in MECHANISM_NAMES.items()}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


class ScramAuthenticationError(Exception):
    """The exchange failed. ``message`` is safe to send to the client (Kafka's wording, never
    saying whether the user exists); ``detail`` is for a debug log line and holds no secret."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail


def keys_from_salted_password(mechanism_type: int, salted_password: bytes) -> tuple[bytes, bytes]:
    """``(stored_key, server_key)`` for a SaltedPassword (what AlterUserScramCredentials carries;
    Kafka's ``ScramFormatter.storedKey(clientKey(..))`` / ``serverKey``). KeyError for an
    unknown mechanism type."""
    mech = scramp.ScramMechanism(MECHANISM_NAMES[mechanism_type])
    _client_key, stored_key, server_key = _c_key_stored_key_s_key(mech.hf, salted_password)
    return stored_key, server_key


def make_credential(mechanism_type: int, password: str, iterations: int = MAX_ITERATIONS,
                    salt: bytes | None = None) -> tuple[bytes, bytes, bytes, int]:
    """``(salt, stored_key, server_key, iterations)`` for a password (tests and tools)."""
    mech = scramp.ScramMechanism(MECHANISM_NAMES[mechanism_type])
    return mech.make_auth_info(password, iteration_count=iterations, salt=salt)


class ScramServerExchange:
    """The server side of one SASL/SCRAM exchange (two client messages).

    ``lookup(user) -> (salt, stored_key, server_key, iterations) | None`` reads the stored
    credential. :meth:`evaluate` takes each client token and returns the server's token;
    :attr:`complete` and :attr:`username` tell the outcome. A client-first message with the
    extension ``tokenauth=true`` authenticates a delegation token (KIP-48): ``token_lookup(token id)
    -> (owner name, expiry timestamp ms, credential) | None`` reads it, and :attr:`token_owner` /
    :attr:`lifetime_ms` (the token's expiry, ms since the epoch) are set (Kafka ``ScramSaslServer``;
    other extensions are ignored, as Kafka does). Raises
    :class:`ScramAuthenticationError` on any failure (unknown user, bad proof, nonce mismatch,
    malformed message, any GS2 authorization id: scramp refuses them all, where Kafka accepts one
    equal to the user name, which Kafka's clients never send)."""

    def __init__(self, mechanism: str, lookup: Callable[[str], tuple | None],
                 token_lookup: Callable[[str], tuple | None] | None = None) -> None:
        self.mechanism = mechanism
        self._lookup = lookup
        self._token_lookup = token_lookup
        self.token_auth = False
        self.token_owner: str | None = None
        self.lifetime_ms: int | None = None
        self._server = scramp.ScramMechanism(mechanism).make_server(self._auth_fn)
        self._step = 0
        self.complete = False
        self.username: str | None = None

    def _auth_fn(self, user: str):
        self.username = user
        if self.token_auth:
            found = self._token_lookup(user) if self._token_lookup is not None else None
            if found is None:
                return None
            self.token_owner, self.lifetime_ms, cred = found
        else:
            cred = self._lookup(user)
        if cred is None or not MIN_ITERATIONS <= cred[3] <= MAX_ITERATIONS:
            return None
        return cred

    def evaluate(self, token: bytes) -> bytes:
        """Process one client message; returns server-first, then server-final."""
        failed = f"Authentication failed during authentication due to invalid credentials with SASL mechanism {self.mechanism}"
        try:
            text = bytes(token).decode("utf-8")
        except UnicodeDecodeError:
            raise ScramAuthenticationError(failed, "client message is not UTF-8") from None
        try:
            if self._step == 0:
                self._step = 1
                stripped, bare, extensions = _split_extensions(text)
                self.token_auth = extensions.get("tokenauth", "").lower() == "true"
                self._server.set_client_first(stripped)
                # the AuthMessage the proofs sign holds the extensions (Kafka clientFirstMessageBare)
                self._server.client_first_bare = bare
                return self._server.get_server_first().encode()
            if self._step == 1:
                self._step = 2
                self._server.set_client_final(text)
                final = self._server.get_server_final().encode()
                self.complete = True
                return final
        except scramp.ScramException as e:
            raise ScramAuthenticationError(failed, str(e)) from None
        raise ScramAuthenticationError(failed, "unexpected message after the exchange completed")



def _split_extensions(client_first: str) -> tuple[str, str, dict[str, str]]:
    """``(client-first without extensions, client-first-bare with them, {extension: value})``:
    scramp accepts only one-letter attributes, Kafka's clients append ``,tokenauth=true`` after
    the nonce (``ScramMessages.ClientFirstMessage``). A malformed message is passed on unchanged
    for scramp to refuse."""
    try:
        second_comma = client_first.index(",", client_first.index(",") + 1)
    except ValueError:
        return client_first, "", {}
    header, bare = client_first[:second_comma + 1], client_first[second_comma + 1:]
    parts = bare.split(",")
    if len(parts) <= 2 or not parts[0].startswith("n=") or not parts[1].startswith("r="):
        return client_first, bare, {}
    extensions = {}
    for part in parts[2:]:
        key, sep, value = part.partition("=")
        if not sep or len(key) == 1:   # a one-letter attribute is SCRAM's own: scramp judges it
            return client_first, bare, {}
        extensions[key] = value
    return header + ",".join(parts[:2]), bare, extensions
