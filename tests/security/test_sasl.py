"""SASL authentication against a real kcompat process: PLAIN, SCRAM-SHA-256/512, OAUTHBEARER
(unsecured and JWKS-signed), with confluent-kafka and kafka-python, and the refusals Kafka makes
(wrong passwords, unknown users, replayed SCRAM nonces, expired tokens, oversized frames and
non-auth requests before authentication), never writing a password to the broker log."""

from __future__ import annotations

import json
import time
import uuid

import jwt
import pytest
import scramp
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
                                   UserScramCredentialUpsertion)
from cryptography.hazmat.primitives.asymmetric import rsa
from kafka import KafkaConsumer, KafkaProducer

from kcompat.protocol.messages.api_versions import ApiVersionsRequest
from kcompat.protocol.messages.metadata import MetadataRequest
from kcompat.security.oauth import unsecured_token
from kcompat.testing import Broker, wire
from kcompat.testing.ports import free_ports
from tests.security.sasl_support import (AUDIENCE, ISSUER, PASSWORDS, authenticate, closed_by_broker, handshake,
                                         logged, plain_token, recv_frame, sasl_broker, send_frame)

SCRAM_PASSWORD = "scram-pw-5b8e"


@pytest.fixture(scope="module")
def jwt_key(tmp_path_factory):
    """An RSA key the test made and a JWKS file holding its public half (kid ``k1``)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    jwk.update(kid="k1", use="sig", alg="RS256")
    path = tmp_path_factory.mktemp("jwks") / "jwks.json"
    path.write_text(json.dumps({"keys": [jwk]}))
    return key, str(path)


@pytest.fixture(scope="module")
def sasl(jwt_key):
    broker, addrs = sasl_broker(jwt_key[1])
    with broker:
        admin = AdminClient({"bootstrap.servers": addrs["PLAINTEXT"]})
        futures = admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                         SCRAM_PASSWORD.encode()),
            UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                         SCRAM_PASSWORD.encode())])
        for f in futures.values():
            f.result(30)
        yield broker, addrs


def _conf(addr: str, mechanism: str, user: str, password: str) -> dict:
    return {"bootstrap.servers": addr, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password}


def _roundtrip_confluent(conf: dict, topic: str, n: int = 5) -> list[bytes]:
    p = Producer(conf)
    for i in range(n):
        p.produce(topic, f"m{i}".encode())
    assert p.flush(30) == 0
    c = Consumer({**conf, "group.id": f"g-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    return got


def _kafka_python(addr: str, mechanism: str, user: str, password: str, topic: str) -> list[bytes]:
    kw = dict(bootstrap_servers=addr, security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
              sasl_plain_username=user, sasl_plain_password=password)
    p = KafkaProducer(**kw)
    p.send(topic, b"from-kafka-python").get(30)
    p.close()
    c = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=60000, **kw)
    got = []
    for m in c:   # until the record produced last (the iterator stops after 60 s without records)
        got.append(m.value)
        if m.value == b"from-kafka-python":
            break
    c.close()
    return got


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256"])
def test_confluent_and_kafka_python_produce_and_consume(sasl, mechanism):
    broker, addrs = sasl
    user = {"PLAIN": "alice", "SCRAM-SHA-512": "alice", "SCRAM-SHA-256": "bob"}[mechanism]
    password = PASSWORDS[user] if mechanism == "PLAIN" else SCRAM_PASSWORD
    topic = f"sasl-{mechanism.lower()}"
    assert _roundtrip_confluent(_conf(addrs["SASL_PLAINTEXT"], mechanism, user, password), topic) == \
        [f"m{i}".encode() for i in range(5)]
    assert _kafka_python(addrs["SASL_PLAINTEXT"], mechanism, user, password, topic)[-1] == b"from-kafka-python"
    assert logged(broker, f"SASL {mechanism} authentication of User:{user}")


def test_scram_credentials_described_and_refused_as_kafka(sasl):
    _broker, addrs = sasl
    admin = AdminClient({"bootstrap.servers": addrs["PLAINTEXT"]})
    described = admin.describe_user_scram_credentials(["alice"])["alice"].result(30)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == \
        [(ScramMechanism.SCRAM_SHA_512, 8192)]
    with pytest.raises(Exception, match="RESOURCE_NOT_FOUND|does not exist"):
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(30)
    too_few = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b"pw")])
    with pytest.raises(Exception, match="Too few iterations"):
        too_few["carol"].result(30)
    missing = admin.alter_user_scram_credentials([UserScramCredentialDeletion("nobody", ScramMechanism.SCRAM_SHA_256)])
    with pytest.raises(Exception, match="does not exist"):
        missing["nobody"].result(30)


@pytest.mark.parametrize("user,password", [("alice", "wrong-password-1"), ("mallory", "whatever-pw-2")])
def test_plain_failure_does_not_say_whether_the_user_exists(sasl, user, password):
    broker, addrs = sasl
    with wire.connect(addrs["SASL_PLAINTEXT"]) as sock:
        assert handshake(sock, "PLAIN").error_code == 0
        resp = authenticate(sock, plain_token(user, password))
        assert resp.error_code == 58   # SASL_AUTHENTICATION_FAILED
        assert resp.error_message == "Authentication failed: Invalid username or password"
        assert closed_by_broker(sock)
    assert password not in broker.log_text()
    assert wire.call(addrs["SASL_PLAINTEXT"], ApiVersionsRequest(), 0).error_code == 0   # still serving


def test_unsupported_mechanism_lists_the_enabled_ones(sasl):
    _broker, addrs = sasl
    with wire.connect(addrs["SASL_PLAINTEXT"]) as sock:
        resp = handshake(sock, "GSSAPI")
        assert resp.error_code == 33   # UNSUPPORTED_SASL_MECHANISM
        assert sorted(resp.mechanisms) == ["OAUTHBEARER", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert closed_by_broker(sock)


def test_v0_handshake_then_raw_plain_token(sasl):
    _broker, addrs = sasl
    with wire.connect(addrs["SASL_PLAINTEXT"]) as sock:
        assert handshake(sock, "PLAIN", version=0).error_code == 0
        send_frame(sock, plain_token("bob", PASSWORDS["bob"]))
        assert recv_frame(sock) == b""
        wire.send_request(sock, MetadataRequest(topics=[]), 1)
        assert wire.read_response(sock, 3, 1)[1].brokers


def _scram_first(sock, client):
    assert handshake(sock, "SCRAM-SHA-512").error_code == 0
    resp = authenticate(sock, client.get_client_first().encode())
    assert resp.error_code == 0
    return resp.auth_bytes.decode()


def test_scram_exchange_by_hand_and_replayed_nonce_refused(sasl):
    broker, addrs = sasl
    ok = scramp.ScramClient(["SCRAM-SHA-512"], "alice", SCRAM_PASSWORD)
    with wire.connect(addrs["SASL_PLAINTEXT"]) as sock:
        ok.set_server_first(_scram_first(sock, ok))
        final = ok.get_client_final()
        resp = authenticate(sock, final.encode())
        assert resp.error_code == 0
        ok.set_server_final(resp.auth_bytes.decode())   # the server proved it knows the key
    # replay: the same client-final on a new exchange (its nonce is the old session's)
    with wire.connect(addrs["SASL_PLAINTEXT"]) as sock:
        other = scramp.ScramClient(["SCRAM-SHA-512"], "alice", SCRAM_PASSWORD)
        _scram_first(sock, other)
        resp = authenticate(sock, final.encode())
        assert resp.error_code == 58
        assert resp.error_message == ("Authentication failed during authentication due to invalid credentials "
                                      "with SASL mechanism SCRAM-SHA-512")
        assert closed_by_broker(sock)
    # CVE-2024-56128: a client-final whose nonce only ends with the server's nonce, with a proof
    # computed correctly over it, is refused (Kafka before 3.9.1 checked endsWith only)
    with wire.connect(addrs["SASL_PLAINTEXT"]) as sock:
        c = scramp.ScramClient(["SCRAM-SHA-512"], "alice", SCRAM_PASSWORD)
        c.set_server_first(_scram_first(sock, c))
        c.nonce = scramp.core.Nonce("X" + str(c.nonce))
        resp = authenticate(sock, c.get_client_final().encode())
        assert resp.error_code == 58
        assert closed_by_broker(sock)
    assert logged(broker, "Server nonce doesn't match")
    assert SCRAM_PASSWORD not in broker.log_text()


def test_frame_of_1gb_before_authentication_closes_the_connection(sasl):
    broker, addrs = sasl
    with wire.connect(addrs["SASL_PLAINTEXT"]) as sock:
        sock.sendall((1 << 30).to_bytes(4, "big") + b"\0" * 64)
        assert closed_by_broker(sock)
    assert logged(broker, "exceeds sasl.server.max.receive.size before authentication (524288)")
    assert wire.call(addrs["SASL_PLAINTEXT"], ApiVersionsRequest(), 0).error_code == 0


def test_non_auth_request_before_authentication_closes_the_connection(sasl):
    broker, addrs = sasl
    with wire.connect(addrs["SASL_PLAINTEXT"]) as sock:
        wire.send_request(sock, MetadataRequest(topics=[]), 1)
        assert closed_by_broker(sock)
    with wire.connect(addrs["SASL_PLAINTEXT"]) as sock:   # after the handshake: answered first, as Kafka does
        assert handshake(sock, "PLAIN").error_code == 0
        wire.send_request(sock, MetadataRequest(topics=[]), 1, correlation_id=7)
        correlation, resp = wire.read_response(sock, 3, 1)
        assert correlation == 7 and resp.brokers == [] and resp.topics == []   # Kafka's error answer to Metadata
        assert closed_by_broker(sock)
    assert logged(broker, "Unexpected Kafka request of type 3 during SASL handshake")
    assert logged(broker, "Unexpected Kafka request of type 3 during SASL authentication")


def test_oauthbearer_unsecured_token_with_confluent(sasl):
    broker, addrs = sasl
    conf = {"bootstrap.servers": addrs["SASL_PLAINTEXT"], "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": "principal=carol"}
    assert _roundtrip_confluent(conf, "sasl-oauth-unsecured", 3) == [b"m0", b"m1", b"m2"]
    assert logged(broker, "SASL OAUTHBEARER authentication of User:carol")


def _oauth_token_exchange(addr: str, token: str):
    with wire.connect(addr) as sock:
        assert handshake(sock, "OAUTHBEARER").error_code == 0
        first = authenticate(sock, f"n,,\x01auth=Bearer {token}\x01\x01".encode())
        if first.error_code or first.auth_bytes == b"":
            return first, None
        second = authenticate(sock, b"\x01")   # acknowledges the error challenge, as clients do
        return first, second


def _signed(key, **claims) -> str:
    now = int(time.time())
    payload = {"sub": "dave", "aud": AUDIENCE, "iss": ISSUER, "iat": now, "exp": now + 600, **claims}
    return jwt.encode(payload, key, algorithm="RS256", headers={"kid": "k1"})


def test_oauthbearer_jwks_signed_token_with_confluent(sasl, jwt_key):
    broker, addrs = sasl
    key = jwt_key[0]

    def token_cb(_config):
        return _signed(key), time.time() + 600, "dave", {}
    conf = {"bootstrap.servers": addrs["JWT"], "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "oauth_cb": token_cb}
    assert _roundtrip_confluent(conf, "sasl-oauth-jwks", 3) == [b"m0", b"m1", b"m2"]
    assert logged(broker, "SASL OAUTHBEARER authentication of User:dave")


@pytest.mark.parametrize("case", ["expired", "wrong-audience", "other-key", "unsigned"])
def test_oauthbearer_jwks_refuses_bad_tokens(sasl, jwt_key, case):
    _broker, addrs = sasl
    key = jwt_key[0]
    token = {
        "expired": lambda: _signed(key, exp=int(time.time()) - 3600, iat=int(time.time()) - 7200),
        "wrong-audience": lambda: _signed(key, aud="someone-else"),
        "other-key": lambda: _signed(rsa.generate_private_key(public_exponent=65537, key_size=2048)),
        "unsigned": lambda: unsecured_token("dave"),
    }[case]()
    first, second = _oauth_token_exchange(addrs["JWT"], token)
    assert first.error_code == 0 and json.loads(first.auth_bytes) == {"status": "invalid_token"}
    assert second.error_code == 58


def test_oauthbearer_unsecured_expired_token_refused(sasl):
    _broker, addrs = sasl
    first, second = _oauth_token_exchange(addrs["SASL_PLAINTEXT"], unsecured_token("erin", lifetime_s=-120))
    assert json.loads(first.auth_bytes) == {"status": "invalid_token"} and second.error_code == 58


def test_no_password_in_the_broker_log(sasl):
    broker, _addrs = sasl
    text = broker.log_text()
    for secret in [*PASSWORDS.values(), SCRAM_PASSWORD]:
        assert secret not in text


def test_sasl_configs_are_not_reported_as_ignored(sasl):
    broker, _addrs = sasl
    warned = [line for line in broker.log_text().splitlines() if "have no effect in kcompat" in line]
    assert not any("sasl" in line or "connections.max.reauth.ms" in line for line in warned)


def test_malformed_jaas_config_stops_the_start():
    p1, p2 = free_ports(2, "127.0.0.1")
    broker = Broker({"listeners": f"PLAINTEXT://127.0.0.1:{p1},SASL_PLAINTEXT://127.0.0.1:{p2}",
                     "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                                       "CONTROLLER:PLAINTEXT",
                     "sasl.enabled.mechanisms": "PLAIN",
                     "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                         'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="secret-b"'},
                    port=p1)
    with pytest.raises(RuntimeError, match="JAAS config entry not terminated by semi-colon"):
        broker.start(60)
    broker.stop()


def test_sasl_requests_where_they_do_not_belong_answer_illegal_sasl_state(sasl):
    _broker, addrs = sasl
    with wire.connect(addrs["PLAINTEXT"]) as sock:   # a listener without SASL: KafkaApis answers
        assert handshake(sock, "PLAIN").error_code == 34   # ILLEGAL_SASL_STATE
        assert authenticate(sock, b"x").error_code == 34
        wire.send_request(sock, MetadataRequest(topics=[]), 1)
        assert wire.read_response(sock, 3, 1)[1].brokers        # and the connection serves on
    with wire.connect(addrs["SASL_PLAINTEXT"]) as sock:      # after authentication
        assert handshake(sock, "PLAIN").error_code == 0
        assert authenticate(sock, plain_token("alice", PASSWORDS["alice"]), version=0).error_code == 0
        again = authenticate(sock, plain_token("alice", PASSWORDS["alice"]))
        assert again.error_code == 34
        assert again.error_message == "SaslAuthenticate request received after successful authentication"
        assert handshake(sock, "PLAIN").error_code == 34     # v0 SaslAuthenticate: no re-authentication
        wire.send_request(sock, MetadataRequest(topics=[]), 1)
        assert wire.read_response(sock, 3, 1)[1].brokers


def test_describe_configs_never_shows_a_jaas_config(sasl):
    from confluent_kafka.admin import ConfigResource
    _broker, addrs = sasl
    admin = AdminClient({"bootstrap.servers": addrs["PLAINTEXT"]})
    res = ConfigResource(ConfigResource.Type.BROKER, "1")
    entries = admin.describe_configs([res])[res].result(30)
    jaas = {name: e for name, e in entries.items() if "jaas" in name}
    assert "listener.name.sasl_plaintext.plain.sasl.jaas.config" in jaas
    assert all(e.is_sensitive and e.value is None for e in jaas.values())
    assert not any(p in str(e.value) for e in entries.values() for p in PASSWORDS.values())


def test_oauthbearer_jwks_signed_token_with_kafka_python(sasl, jwt_key):
    from kafka.net.sasl.oauth import AbstractTokenProvider
    broker, addrs = sasl
    key = jwt_key[0]

    class Provider(AbstractTokenProvider):
        def token(self):
            return _signed(key, sub="frank")
    kw = dict(bootstrap_servers=addrs["JWT"], security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
              sasl_oauth_token_provider=Provider())
    producer = KafkaProducer(**kw)
    producer.send("sasl-oauth-kafka-python", b"jwt").get(30)
    producer.close()
    consumer = KafkaConsumer("sasl-oauth-kafka-python", auto_offset_reset="earliest", consumer_timeout_ms=60000, **kw)
    assert next(iter(consumer)).value == b"jwt"
    consumer.close()
    assert logged(broker, "SASL OAUTHBEARER authentication of User:frank")
