"""SaslAuthenticate (key 36), versions 0-2: SASL tokens in Kafka requests (KIP-152, KIP-368).

The connection's :class:`kcompat.security.sasl_server.SaslSession` evaluates the token. On success
the server token goes back, and once the exchange completes the connection runs as the
authenticated principal; v1+ answers carry ``session_lifetime_ms`` (``connections.max.reauth.ms``
or the credential's expiry; 0 = none). On failure the answer is SASL_AUTHENTICATION_FAILED with
Kafka's message and the connection closes after it. After authentication (and on a listener
without SASL) the answer is ILLEGAL_SASL_STATE, as Kafka's ``KafkaApis``.
"""

from __future__ import annotations

import asyncio

from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.sasl_authenticate import SaslAuthenticateResponse as R
from kcompat.security.sasl_server import AUTHENTICATE, COMPLETE

API_KEY = 36
MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx, req):
    conn = ctx.connection
    session = getattr(conn, "sasl", None)
    if session is None or session.state != AUTHENTICATE:
        return R(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                 error_message="SaslAuthenticate request received after successful authentication")
    code, message, token, lifetime_ms = session.authenticate(req.auth_bytes, ctx.api_version)
    if code != ErrorCode.NONE:
        # the answer goes out now; the close follows connection.failed.authentication.delay.ms
        # later (Kafka's delayed close of a failed authentication, which also slows down guessing)
        delay_ms = ctx.services.config.get("connection.failed.authentication.delay.ms")
        asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000.0, conn.close, "SASL authentication failed")
    elif session.state == COMPLETE:
        conn.authenticated(session.principal)
    if message is None and code == ErrorCode.NONE:
        message = ""   # what Kafka puts in a successful answer
    return R(error_code=code, error_message=message, auth_bytes=token, session_lifetime_ms=lifetime_ms)


def error_response(req, version, code):
    return R(error_code=code, error_message=None)
