"""SaslHandshake (key 17), versions 0-1: the client names its SASL mechanism (KIP-43, KIP-152).

On a SASL listener before authentication the connection's :class:`kcompat.security.sasl_server.
SaslSession` answers: the enabled mechanisms, or UNSUPPORTED_SASL_MECHANISM with them (then the
connection closes, as Kafka's ``SaslServerAuthenticator``). v1 means SaslAuthenticate requests
follow; v0 means raw SASL tokens follow. A handshake on an authenticated connection starts
re-authentication (KIP-368) when the client used SaslAuthenticate v1+; otherwise, and on a
listener without SASL, the answer is ILLEGAL_SASL_STATE (Kafka's ``KafkaApis``).
"""

from __future__ import annotations

import asyncio

from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.sasl_handshake import SaslHandshakeResponse as R
from kcompat.security.sasl_server import HANDSHAKE_REQUEST, INITIAL

API_KEY = 17
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx, req):
    conn = ctx.connection
    session = getattr(conn, "sasl", None)
    if session is None or session.state not in (INITIAL, HANDSHAKE_REQUEST):
        return R(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    code, mechanisms = session.handshake(req.mechanism, ctx.api_version)
    if code != ErrorCode.NONE:
        asyncio.get_running_loop().call_soon(conn.close, f"unsupported SASL mechanism {req.mechanism!r}")
    return R(error_code=code, mechanisms=mechanisms)


def error_response(req, version, code):
    return R(error_code=code, mechanisms=[])
