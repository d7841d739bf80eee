"""SASL/PLAIN (RFC 4616) as Kafka's ``PlainSaslServer`` with ``PlainServerCallbackHandler``.

The client sends one message, ``[authzid] NUL authcid NUL passwd``; users and passwords come from
the ``user_<name>="<password>"`` options of the listener's ``PlainLoginModule`` JAAS entry.
Passwords are compared with :func:`hmac.compare_digest`, and an unknown user is compared against a
dummy so both failures take the same path and give the same message.
"""

from __future__ import annotations

import hmac


class SaslFailure(Exception):
    """Authentication failed; ``message`` is what Kafka sends the client (no secret in it)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class PlainServerExchange:
    """One SASL/PLAIN exchange against ``users`` ({name: password})."""

    mechanism = "PLAIN"

    def __init__(self, users: dict[str, str]) -> None:
        self._users = users
        self.complete = False
        self.username: str | None = None
        self.lifetime_ms: int | None = None

    def evaluate(self, token: bytes) -> bytes:
        """Check the client's message; returns b'' on success, raises :class:`SaslFailure`."""
        parts = bytes(token).decode("utf-8", "replace").split("\0")
        if len(parts) != 3:
            raise SaslFailure(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        authzid, user, password = parts
        if not user:
            raise SaslFailure("Authentication failed: username not specified")
        if not password:
            raise SaslFailure("Authentication failed: password not specified")
        self.username = user   # for the log line only: the outcome says nothing about it
        expected = self._users.get(user)
        ok = hmac.compare_digest(password.encode(), (expected if expected is not None else "\0" + password).encode())
        if expected is None or not ok:
            raise SaslFailure("Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            raise SaslFailure("Authentication failed: Client requested an authorization id that is different from username")
        self.complete = True
        return b""
