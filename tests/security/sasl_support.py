"""Helpers for the SASL tests: a kcompat broker with SASL listeners and raw SASL exchanges.

``sasl_broker(**extra)`` starts one broker process with listeners

- ``PLAINTEXT`` (admin and readiness),
- ``SASL_PLAINTEXT``: PLAIN (users admin, alice, bob from the JAAS config), SCRAM-SHA-256/512
  (credentials created by the tests), OAUTHBEARER with Kafka's unsecured validator,
- ``JWT`` (SASL_PLAINTEXT): OAUTHBEARER with the JWKS validator (``jwks_path``, audience
  ``kcompat-test``, issuer ``https://issuer.test``),
- ``REAUTH`` (SASL_PLAINTEXT): PLAIN with ``connections.max.reauth.ms`` = ``REAUTH_MS``.

Raw helpers speak SaslHandshake/SaslAuthenticate with kcompat's codecs (``kcompat.testing.wire``).
"""

from __future__ import annotations

import socket
import struct
from pathlib import Path

from conformance import maven
from conformance.reference import ReferenceKafka

from kcompat.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from kcompat.protocol.messages.sasl_handshake import SaslHandshakeRequest
from kcompat.testing import Broker
from kcompat.testing import wire
from kcompat.testing.ports import free_ports
from kcompat.testing.process import BrokerProcess

PASSWORDS = {"admin": "admin-secret-7d1", "alice": "alice-secret-93a", "bob": "bob-secret-c4e"}
REAUTH_MS = 3000
PLAIN_JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
              f'username="admin" password="{PASSWORDS["admin"]}" '
              + " ".join(f'user_{u}="{p}"' for u, p in PASSWORDS.items()) + ";")
UNSECURED_JAAS = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                  'unsecuredLoginStringClaim_sub="admin";')
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
AUDIENCE = "kcompat-test"
ISSUER = "https://issuer.test"


def sasl_broker(jwks_path: str, **extra) -> tuple[Broker, dict[str, str]]:
    """A started (not yet entered) broker and its listener addresses by name."""
    ports = free_ports(4, "127.0.0.1")
    names = ["PLAINTEXT", "SASL_PLAINTEXT", "JWT", "REAUTH"]
    addrs = {n: f"127.0.0.1:{p}" for n, p in zip(names, ports)}
    props = {
        "listeners": ",".join(f"{n}://{a}" for n, a in addrs.items()),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,JWT:SASL_PLAINTEXT,"
                                          "REAUTH:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": UNSECURED_JAAS,
        "listener.name.jwt.sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.jwt.oauthbearer.sasl.jaas.config":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
        "listener.name.jwt.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
        "listener.name.jwt.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": f"file://{jwks_path}",
        "listener.name.jwt.oauthbearer.sasl.oauthbearer.expected.audience": AUDIENCE,
        "listener.name.jwt.oauthbearer.sasl.oauthbearer.expected.issuer": ISSUER,
        "listener.name.reauth.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.reauth.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.reauth.connections.max.reauth.ms": str(REAUTH_MS),
        "num.partitions": "1",
        **extra,
    }
    return Broker(props, port=ports[0]), addrs


def handshake(sock: socket.socket, mechanism: str, version: int = 1):
    """SaslHandshake; returns the response."""
    wire.send_request(sock, SaslHandshakeRequest(mechanism=mechanism), version)
    return wire.read_response(sock, 17, version)[1]


def authenticate(sock: socket.socket, token: bytes, version: int = 2):
    """SaslAuthenticate with ``token``; returns the response."""
    wire.send_request(sock, SaslAuthenticateRequest(auth_bytes=token), version)
    return wire.read_response(sock, 36, version)[1]


def plain_token(user: str, password: str, authzid: str = "") -> bytes:
    return f"{authzid}\0{user}\0{password}".encode()


def closed_by_broker(sock: socket.socket) -> bool:
    """Whether the broker closed ``sock`` (reads EOF or a reset; waits up to the socket timeout)."""
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


def send_frame(sock: socket.socket, payload: bytes) -> None:
    """A frame of raw bytes (size prefix + payload)."""
    sock.sendall(struct.pack(">i", len(payload)) + payload)


def recv_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", wire.recv_exact(sock, 4))
    return wire.recv_exact(sock, size)


def logged(broker, text: str, timeout: float = 30.0) -> bool:
    """Wait until the broker's log holds ``text`` (its lines reach the file a moment after they
    are written); AssertionError after ``timeout`` s."""
    from kcompat.testing.process import wait_for
    return bool(wait_for(lambda: text in broker.log_text(), timeout, what=f"log line {text!r}"))


def reference_probes(tmp_path_factory, probes, props: dict[str, str]) -> dict:
    """``probes(plaintext address, sasl address)`` run against Apache Kafka 4.3.1 (KRaft, one node)
    with a SASL_PLAINTEXT listener beside its PLAINTEXT one and ``props`` in its server.properties."""
    class _SaslKafka(ReferenceKafka):
        def __init__(self, *a, **kw) -> None:
            super().__init__(*a, **kw)
            self.sasl_port = free_ports(1, self.host)[0]

        def server_properties(self) -> dict[str, str]:
            server = super().server_properties()
            extra = f",SASL_PLAINTEXT://{self.host}:{self.sasl_port}"
            server["listeners"] += extra
            server["advertised.listeners"] += extra
            server["listener.security.protocol.map"] += ",SASL_PLAINTEXT:SASL_PLAINTEXT"
            return {**server, **props}

    kafka = _SaslKafka(maven.resolve_kafka("4.3.1"), "4.3.1", Path(tmp_path_factory.mktemp("kafka")))
    kafka.start()
    try:
        return probes(kafka.bootstrap, f"{kafka.host}:{kafka.sasl_port}")
    finally:
        kafka.stop()


def assert_answers_as_kafka(reference: dict, probes, props: dict[str, str], tmp_path) -> None:
    """Run ``probes`` against a kcompat process with the same listeners and ``props`` and assert
    every answer equals Kafka's (``reference``, from :func:`reference_probes`)."""
    plain, sasl = free_ports(2, "127.0.0.1")
    broker = BrokerProcess(tmp_path / "data", {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        **props}, port=plain).start()
    try:
        ours = probes(f"127.0.0.1:{plain}", f"127.0.0.1:{sasl}")
    finally:
        broker.stop()
    differences = {k: (ours.get(k), v) for k, v in reference.items() if ours.get(k) != v}
    assert not differences, "\n".join(f"{k}:\n  kcompat {o}\n  kafka   {r}" for k, (o, r) in differences.items())
    assert set(ours) == set(reference)
