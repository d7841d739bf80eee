"""KIP-368 re-authentication against a real kcompat process: ``connections.max.reauth.ms`` on a
listener becomes ``session_lifetime_ms``; a client that re-authenticates keeps its connection, one
that does not is disconnected at its next request after the session expired."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from kcompat.protocol.messages.metadata import MetadataRequest
from kcompat.testing import wire
from tests.security.sasl_support import (PASSWORDS, REAUTH_MS, authenticate, closed_by_broker, handshake, logged,
                                         plain_token, sasl_broker)


@pytest.fixture(scope="module")
def sasl(tmp_path_factory):
    jwks = tmp_path_factory.mktemp("jwks") / "jwks.json"
    jwks.write_text('{"keys": []}')
    broker, addrs = sasl_broker(str(jwks))
    with broker:
        yield broker, addrs


def _wait_past_session(start: float) -> None:
    """Sleep until the session that began at ``start`` (monotonic s) has surely expired."""
    while time.monotonic() < start + REAUTH_MS / 1000.0 + 0.5:
        time.sleep(0.1)


def test_session_lifetime_and_expired_session_disconnected(sasl):
    broker, addrs = sasl
    with wire.connect(addrs["REAUTH"]) as sock:
        assert handshake(sock, "PLAIN").error_code == 0
        start = time.monotonic()
        resp = authenticate(sock, plain_token("alice", PASSWORDS["alice"]), version=1)
        assert resp.error_code == 0 and resp.session_lifetime_ms == REAUTH_MS
        wire.send_request(sock, MetadataRequest(topics=[]), 1, correlation_id=2)
        assert wire.read_response(sock, 3, 1)[0] == 2
        _wait_past_session(start)
        wire.send_request(sock, MetadataRequest(topics=[]), 1, correlation_id=3)
        assert closed_by_broker(sock)
    assert logged(broker, "SASL session of User:alice expired")
    # no connections.max.reauth.ms on the other listener: no lifetime
    with wire.connect(addrs["SASL_PLAINTEXT"]) as sock:
        assert handshake(sock, "PLAIN").error_code == 0
        assert authenticate(sock, plain_token("alice", PASSWORDS["alice"]), version=2).session_lifetime_ms == 0


def test_reauthentication_by_hand_keeps_the_connection(sasl):
    broker, addrs = sasl
    with wire.connect(addrs["REAUTH"]) as sock:
        assert handshake(sock, "PLAIN").error_code == 0
        start = time.monotonic()
        assert authenticate(sock, plain_token("bob", PASSWORDS["bob"]), version=2).error_code == 0
        _wait_past_session(start)
        assert handshake(sock, "PLAIN").error_code == 0          # re-authentication begins
        start = time.monotonic()
        resp = authenticate(sock, plain_token("bob", PASSWORDS["bob"]), version=2)
        assert resp.error_code == 0 and resp.session_lifetime_ms == REAUTH_MS
        wire.send_request(sock, MetadataRequest(topics=[]), 1, correlation_id=9)
        assert wire.read_response(sock, 3, 1)[0] == 9
    assert logged(broker, "SASL PLAIN re-authentication of User:bob")


def test_reauthentication_cannot_change_principal(sasl):
    _broker, addrs = sasl
    with wire.connect(addrs["REAUTH"]) as sock:
        assert handshake(sock, "PLAIN").error_code == 0
        assert authenticate(sock, plain_token("bob", PASSWORDS["bob"]), version=2).error_code == 0
        assert handshake(sock, "PLAIN").error_code == 0
        resp = authenticate(sock, plain_token("alice", PASSWORDS["alice"]), version=2)
        assert resp.error_code == 58
        assert resp.error_message == "Cannot change principals during re-authentication from User.bob: User.alice"
        assert closed_by_broker(sock)


def test_librdkafka_reauthenticates_and_keeps_producing(sasl):
    broker, addrs = sasl
    p = Producer({"bootstrap.servers": addrs["REAUTH"], "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": PASSWORDS["alice"]})
    delivered = []
    for round_ in range(3):
        start = time.monotonic()
        p.produce("reauth-topic", f"r{round_}".encode(), on_delivery=lambda err, msg: delivered.append(err))
        assert p.flush(30) == 0
        _wait_past_session(start)
    assert delivered == [None, None, None]
    assert logged(broker, "SASL PLAIN re-authentication of User:alice")
