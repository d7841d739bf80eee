"""Helpers for the delegation token tests (KIP-48): a kcompat broker with a SASL listener and
delegation tokens enabled, raw SASL/PLAIN and SASL/SCRAM logins (SCRAM with extensions such as
``tokenauth=true``, which scramp's client cannot send), written from RFC 5802."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import socket

from kcompat.testing import Broker
from kcompat.testing import wire
from kcompat.testing.ports import free_ports
from tests.security.sasl_support import PASSWORDS, PLAIN_JAAS, authenticate, handshake, plain_token

SECRET = "kcompat-token-secret-5e1"


def token_broker(**extra) -> tuple[Broker, dict[str, str]]:
    """A (not yet entered) broker with listeners PLAINTEXT and SASL_PLAINTEXT (PLAIN users admin,
    alice, bob; SCRAM-SHA-256/512) and ``delegation.token.secret.key`` = :data:`SECRET` (unless
    ``extra`` says otherwise), and its addresses by listener name."""
    p_plain, p_sasl = free_ports(2, "127.0.0.1")
    props = {
        "listeners": f"PLAINTEXT://127.0.0.1:{p_plain},SASL_PLAINTEXT://127.0.0.1:{p_sasl}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "delegation.token.secret.key": SECRET,
        "num.partitions": "1",
        **extra,
    }
    props = {k: v for k, v in props.items() if v is not None}
    return Broker(props, port=p_plain), {"PLAINTEXT": f"127.0.0.1:{p_plain}", "SASL_PLAINTEXT": f"127.0.0.1:{p_sasl}"}


def plain_login(addr: str, user: str, password: str | None = None) -> socket.socket:
    """A connection authenticated with SASL/PLAIN as ``user`` (password from :data:`PASSWORDS`
    unless given)."""
    sock = wire.connect(addr)
    assert handshake(sock, "PLAIN").error_code == 0
    resp = authenticate(sock, plain_token(user, password or PASSWORDS[user]))
    assert resp.error_code == 0, resp
    return sock


def scram_exchange(sock: socket.socket, mechanism: str, user: str, password: str, extensions: str = ""):
    """SaslHandshake and a SCRAM exchange on ``sock``; returns the last SaslAuthenticate response
    (error_code 0 when authenticated). ``extensions``: e.g. ``"tokenauth=true"``."""
    assert handshake(sock, mechanism).error_code == 0
    hf = hashlib.sha256 if mechanism.endswith("256") else hashlib.sha512
    bare = f"n={user},r={base64.b64encode(os.urandom(18)).decode()}" + (f",{extensions}" if extensions else "")
    first = authenticate(sock, f"n,,{bare}".encode())
    if first.error_code:
        return first
    server_first = bytes(first.auth_bytes).decode()
    attrs = dict(kv.split("=", 1) for kv in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(hf().name, password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", hf).digest()
    without_proof = f"c=biws,r={attrs['r']}"
    auth_message = f"{bare},{server_first},{without_proof}".encode()
    signature = hmac.new(hf(client_key).digest(), auth_message, hf).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
    return authenticate(sock, f"{without_proof},p={proof}".encode())


def token_login(addr: str, token_id: str, hmac_bytes: bytes, mechanism: str = "SCRAM-SHA-512"):
    """``(socket, last SaslAuthenticate response)`` of a SCRAM login with a delegation token."""
    sock = wire.connect(addr)
    resp = scram_exchange(sock, mechanism, token_id, base64.b64encode(hmac_bytes).decode(), "tokenauth=true")
    return sock, resp


def call(sock: socket.socket, request, version: int):
    """One request/response on an open connection."""
    wire.send_request(sock, request, version)
    return wire.read_response(sock, type(request).API_KEY, version)[1]
