"""SASL side by side: kcompat and Apache Kafka 4.3.1 with the same SASL listeners get the same raw
requests and must answer alike (issue 19).

Both run a PLAINTEXT listener and a SASL_PLAINTEXT one with PLAIN (JAAS users) and SCRAM-SHA-512,
``connections.max.reauth.ms`` 60 s. Compared: what the handshake answers for an unknown mechanism,
the failure messages for a wrong password and for unknown PLAIN and SCRAM users (and that the
connection is then closed), requests before and after the handshake, ApiVersions twice, a 1 GB
frame, a v0 handshake followed by a raw token, the session lifetime, SaslAuthenticate and
SaslHandshake after authentication and on a plaintext listener, and the errors of
DescribeUserScramCredentials and AlterUserScramCredentials, and OAUTHBEARER with Kafka's unsecured
validator (valid, expired, scope-less, exp-less and signed tokens, a malformed message).
"""

from __future__ import annotations

import struct
import time

import jwt
import pytest

from kcompat.protocol.messages.alter_user_scram_credentials import AlterUserScramCredentialsRequest as AReq
from kcompat.protocol.messages.api_versions import ApiVersionsRequest
from kcompat.protocol.messages.describe_user_scram_credentials import DescribeUserScramCredentialsRequest as DReq
from kcompat.protocol.messages.metadata import MetadataRequest
from kcompat.security.oauth import unsecured_token
from kcompat.testing import wire
from tests.security.sasl_support import (assert_answers_as_kafka, authenticate, closed_by_broker, handshake, plain_token,
                                         reference_probes)

USER, PASSWORD = "ref-user", "ref-secret-6c2"
PROPS = {
    "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512,OAUTHBEARER",
    # Kafka's unsecured validator, requiring scope s1
    "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'unsecuredLoginStringClaim_sub="broker" unsecuredValidatorRequiredScope="s1";',
    "listener.name.sasl_plaintext.plain.sasl.jaas.config":
        f'org.apache.kafka.common.security.plain.PlainLoginModule required username="{USER}" '
        f'password="{PASSWORD}" user_{USER}="{PASSWORD}";',
    "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config":
        "org.apache.kafka.common.security.scram.ScramLoginModule required;",
    "connections.max.reauth.ms": "60000",
}


def _after_close_or_answer(sock) -> str:
    try:
        (size,) = struct.unpack(">i", wire.recv_exact(sock, 4))
        wire.recv_exact(sock, size)
    except (ConnectionError, OSError):
        return "closed"
    return "answered, then closed" if closed_by_broker(sock) else "answered"


def probes(plain: str, sasl: str) -> dict:
    """Each probe on a connection of its own: {name: what the broker answered}."""
    out = {}
    with wire.connect(sasl) as s:
        r = handshake(s, "GSSAPI")
        out["unknown mechanism"] = (r.error_code, sorted(r.mechanisms), closed_by_broker(s))
    for name, user, password in (("wrong password", USER, "wrong"), ("unknown user", "nobody", "wrong")):
        with wire.connect(sasl) as s:
            handshake(s, "PLAIN")
            r = authenticate(s, plain_token(user, password))
            out[f"PLAIN {name}"] = (r.error_code, r.error_message, closed_by_broker(s))
    with wire.connect(sasl) as s:
        handshake(s, "SCRAM-SHA-512")
        r = authenticate(s, b"n,,n=nobody,r=abcdefghijklmnop")
        out["SCRAM unknown user"] = (r.error_code, r.error_message, closed_by_broker(s))
    with wire.connect(sasl) as s:
        wire.send_request(s, MetadataRequest(topics=[]), 1)
        out["Metadata before the handshake"] = _after_close_or_answer(s)
    with wire.connect(sasl) as s:
        handshake(s, "PLAIN")
        wire.send_request(s, MetadataRequest(topics=[]), 1)
        out["Metadata after the handshake"] = _after_close_or_answer(s)
    with wire.connect(sasl) as s:
        wire.send_request(s, ApiVersionsRequest(), 0)
        wire.read_response(s, 18, 0)
        wire.send_request(s, ApiVersionsRequest(), 0)
        out["ApiVersions twice"] = _after_close_or_answer(s)
    with wire.connect(sasl) as s:
        s.sendall((1 << 30).to_bytes(4, "big") + b"\0" * 64)
        out["1 GB frame"] = closed_by_broker(s)
    with wire.connect(sasl) as s:
        handshake(s, "PLAIN", 0)
        token = plain_token(USER, PASSWORD)
        s.sendall(struct.pack(">i", len(token)) + token)
        out["v0 handshake, raw token"] = wire.recv_exact(s, 4)
    with wire.connect(sasl) as s:
        handshake(s, "PLAIN")
        out["session lifetime"] = authenticate(s, plain_token(USER, PASSWORD), 1).session_lifetime_ms
        r = authenticate(s, b"x")
        out["SaslAuthenticate after authentication"] = (r.error_code, r.error_message)
        out["SaslHandshake after authentication (re-authentication)"] = handshake(s, "PLAIN").error_code
    for name, token in (("valid", unsecured_token("carol", scope=["s1", "s2"])),
                        ("scope string", unsecured_token("carol", scope="s1 s2")),   # one element for Kafka
                        ("expired", unsecured_token("carol", lifetime_s=-600, scope="s1")),
                        ("scope missing", unsecured_token("carol", scope="s2")),
                        ("no exp", jwt.encode({"sub": "carol", "scope": "s1"}, None, algorithm="none")),
                        ("signed", jwt.encode({"sub": "carol", "scope": "s1", "exp": int(time.time()) + 60},
                                              "k" * 32, algorithm="HS256"))):
        with wire.connect(sasl) as s:
            handshake(s, "OAUTHBEARER")
            first = authenticate(s, f"n,,\x01auth=Bearer {token}\x01\x01".encode())
            answer = [first.error_code, bytes(first.auth_bytes).decode()]
            if first.error_code == 0 and first.auth_bytes:
                second = authenticate(s, b"\x01")
                answer += [second.error_code, second.error_message, closed_by_broker(s)]
            out[f"OAUTHBEARER unsecured, {name} token"] = answer
    # (Kafka 4.3.1 closes without an answer on a non-Bearer scheme: its error message reads a
    # group of the wrong matcher and throws IllegalArgumentException; kcompat answers the generic failure)
    for name, message in (("no auth", b"n,,\x01x=y\x01\x01"), ("not a GS2 header", b"garbage"),
                          ("bad token characters", b"n,,\x01auth=Bearer a b\x01\x01")):
        with wire.connect(sasl) as s:
            handshake(s, "OAUTHBEARER")
            try:
                r = authenticate(s, message)
                out[f"OAUTHBEARER malformed: {name}"] = (r.error_code, r.error_message, closed_by_broker(s))
            except ConnectionError:
                out[f"OAUTHBEARER malformed: {name}"] = "closed"
    with wire.connect(plain) as s:
        r = handshake(s, "PLAIN")
        out["SaslHandshake on a plaintext listener"] = (r.error_code, list(r.mechanisms))
    with wire.connect(plain) as s:
        wire.send_request(s, DReq(users=[DReq.UserName(name=n) for n in ("nobody", "x", "x")]), 0)
        r = wire.read_response(s, 50, 0)[1]
        out["DescribeUserScramCredentials"] = sorted((x.user, x.error_code, x.error_message) for x in r.results)

    def up(name, mechanism=1, iterations=4096):
        return AReq.ScramCredentialUpsertion(name=name, mechanism=mechanism, iterations=iterations, salt=b"salt",
                                             salted_password=b"p" * 32)
    with wire.connect(plain) as s:
        wire.send_request(s, AReq(deletions=[AReq.ScramCredentialDeletion(name="ghost", mechanism=1)], upsertions=[
            up("few", iterations=100), up("many", iterations=16385), up("odd", mechanism=3), up("twice"),
            up("twice", mechanism=2), up("")]), 0)
        r = wire.read_response(s, 51, 0)[1]
        out["AlterUserScramCredentials"] = sorted((x.user, x.error_code, x.error_message) for x in r.results)
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return reference_probes(tmp_path_factory, probes, PROPS)


def test_kcompat_answers_sasl_as_kafka_4_3_1(reference, tmp_path):
    assert_answers_as_kafka(reference, probes, PROPS, tmp_path)
