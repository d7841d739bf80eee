"""TLS listeners with real clients against a real kcompat process (issue 19).

One broker serves three listeners: PLAINTEXT (the harness's), SSL (server authentication only)
and MTLS (SSL with ``listener.name.mtls.ssl.client.auth=required`` and principal mapping rules).
kafka-python, confluent-kafka (librdkafka), kcat and Kafka 4.3.1's console producer and consumer
produce and consume over SSL; a client certificate's mapped principal shows in the broker's
DEBUG accept line; clients without a certificate, with an untrusted one, plaintext clients on a
TLS port and TLS clients on a plaintext port are refused with a log line while the broker keeps
serving; no key password or key text reaches the log.
"""

from __future__ import annotations

import re
import shutil
import socket
import ssl
import struct
import subprocess
import uuid

import confluent_kafka as ck
import pytest
from kafka import KafkaConsumer, KafkaProducer

from conformance import maven
from conformance.clients.java import JavaTools
from kcompat.testing.ports import free_ports
from kcompat.testing.process import wait_for
from tests.security.certs import TestCA
from tests.support.broker_process import BrokerProcess

KEY_PASSWORD = "kp-" + uuid.uuid4().hex   # the broker key's password: must never be logged
RULES = "RULE:^CN=(.*?),OU=(.*?),O=.*$/$1@$2/L,DEFAULT"


class DebugBroker(BrokerProcess):
    """A broker logging at DEBUG, so the TLS accept line (with the principal) is written."""

    def args(self) -> list[str]:
        return super().args() + ["--log-level", "DEBUG"]


class TlsSetup:
    def __init__(self, root) -> None:
        self.ca = TestCA(root / "ca")
        self.other_ca = TestCA(root / "other-ca", name="untrusted CA")
        self.server = self.ca.issue("broker", key_password=KEY_PASSWORD)
        self.alice = self.ca.issue("Alice", subject={"OU": "Eng", "O": "Acme", "C": "US"})
        self.mallory = self.other_ca.issue("mallory", subject={"OU": "eng", "O": "Acme"})
        plain, tls, mtls = free_ports(3)
        self.ssl_bootstrap, self.mtls_bootstrap = f"127.0.0.1:{tls}", f"127.0.0.1:{mtls}"
        self.tls_port, self.mtls_port = tls, mtls
        self.broker = DebugBroker(root / "data", {
            "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls},MTLS://127.0.0.1:{mtls}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,CONTROLLER:PLAINTEXT",
            **self.ca.broker_ssl_props(self.server),
            "listener.name.mtls.ssl.client.auth": "required",
            "ssl.principal.mapping.rules": RULES,
            "num.partitions": "1", "offsets.topic.num.partitions": "1",
        }, port=plain)


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    setup = TlsSetup(tmp_path_factory.mktemp("tls"))
    setup.broker.start()
    yield setup
    setup.broker.stop()
    log = setup.broker.log_text()
    assert KEY_PASSWORD not in log
    assert _key_body(setup.server.key_pem) not in log


def _key_body(pem: str) -> str:
    return "".join(pem.strip().splitlines()[1:-1])[:40]


def _topic() -> str:
    return "tls-" + uuid.uuid4().hex[:8]


def _kp_produce_consume(bootstrap: str, n: int = 20, **ssl_kwargs) -> list[bytes]:
    topic = _topic()
    producer = KafkaProducer(bootstrap_servers=bootstrap, security_protocol="SSL", acks="all", **ssl_kwargs)
    for i in range(n):
        producer.send(topic, f"v{i}".encode())
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, security_protocol="SSL",
                             auto_offset_reset="earliest", group_id="g-" + topic, **ssl_kwargs)
    got: list[bytes] = []
    wait_for(lambda: got.extend(r.value for recs in consumer.poll(1000).values() for r in recs) or len(got) >= n,
             60, what="records over TLS")
    consumer.close()
    return got


def test_kafka_python_over_ssl(tls):
    got = _kp_produce_consume(tls.ssl_bootstrap, ssl_cafile=str(tls.ca.ca_path))
    assert got == [f"v{i}".encode() for i in range(20)]


def test_confluent_kafka_over_ssl(tls):
    topic = _topic()
    conf = {"bootstrap.servers": tls.ssl_bootstrap, "security.protocol": "SSL",
            "ssl.ca.location": str(tls.ca.ca_path), "ssl.endpoint.identification.algorithm": "https"}
    producer = ck.Producer({**conf, "acks": "all"})
    for i in range(50):
        producer.produce(topic, f"r{i}".encode())
    assert producer.flush(60) == 0
    consumer = ck.Consumer({**conf, "group.id": "g-" + topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []

    def poll():   # every record ready, not one per wait_for interval (50 ms each)
        got.extend(m.value() for m in consumer.consume(100, 1.0) if m.error() is None)
        return len(got) >= 50
    wait_for(poll, 60, what="librdkafka consumer over TLS")
    consumer.close()
    assert got == [f"r{i}".encode() for i in range(50)]


def test_kcat_over_ssl(tls):
    kcat = shutil.which("kcat")
    assert kcat, "kcat is installed by tools/install_kcat.sh"
    topic = _topic()
    x = ["-b", tls.ssl_bootstrap, "-X", "security.protocol=ssl", "-X", f"ssl.ca.location={tls.ca.ca_path}"]
    lines = [f"k{i}" for i in range(10)]
    subprocess.run([kcat, *x, "-P", "-t", topic], input="\n".join(lines) + "\n", text=True, check=True,
                   timeout=60)
    out = subprocess.run([kcat, *x, "-C", "-t", topic, "-o", "beginning", "-c", "10", "-e"], capture_output=True,
                         text=True, check=True, timeout=60)
    assert out.stdout.split() == lines


def test_java_console_producer_and_consumer_over_ssl(tls, tmp_path):
    tools = JavaTools(str(maven.resolve_kafka("4.3.1")), tmp_path)
    props = tools.properties("client-ssl", {"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                                            "ssl.truststore.location": str(tls.ca.ca_path)})
    topic = _topic()
    lines = [f"java-{i}" for i in range(10)]
    tools.run("org.apache.kafka.tools.ConsoleProducer",
              ["--bootstrap-server", tls.ssl_bootstrap, "--topic", topic, "--command-config", props,
               "--producer-property", "acks=all"], input="\n".join(lines) + "\n", timeout=120)
    res = tools.run("org.apache.kafka.tools.consumer.ConsoleConsumer",
                    ["--bootstrap-server", tls.ssl_bootstrap, "--topic", topic, "--command-config", props,
                     "--from-beginning", "--max-messages", "10", "--timeout-ms", "60000"], timeout=120)
    assert res.stdout.split() == lines
    # the Java client presenting a PEM key store (EC key, PKCS#8) on the mutual-TLS listener
    mtls = tools.properties("client-mtls", {"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                                            "ssl.truststore.location": str(tls.ca.ca_path), "ssl.keystore.type": "PEM",
                                            "ssl.keystore.location": str(tls.alice.keystore_path)})
    res = tools.run("org.apache.kafka.tools.consumer.ConsoleConsumer",
                    ["--bootstrap-server", tls.mtls_bootstrap, "--topic", topic, "--command-config", mtls,
                     "--from-beginning", "--max-messages", "10", "--timeout-ms", "60000"], timeout=120)
    assert res.stdout.split() == lines


def test_mutual_tls_maps_the_certificate_to_a_principal(tls):
    got = _kp_produce_consume(tls.mtls_bootstrap, n=5, ssl_cafile=str(tls.ca.ca_path),
                              ssl_certfile=str(tls.alice.cert_path), ssl_keyfile=str(tls.alice.key_path))
    assert got == [f"v{i}".encode() for i in range(5)]
    # RULE:^CN=(.*?),OU=(.*?),O=.*$/$1@$2/L on "CN=Alice,OU=Eng,O=Acme,C=US"
    line = wait_for(lambda: re.search(r"TLS connection from \S+ on listener MTLS: .*client certificate "
                                      r"CN=Alice,OU=Eng,O=Acme,C=US, principal (\S+)", tls.broker.log_text()),
                    30, what="the MTLS accept line")
    assert line.group(1) == "User:alice@eng"
    # the one-way SSL listener sees no certificate: User:ANONYMOUS
    _kp_produce_consume(tls.ssl_bootstrap, n=1, ssl_cafile=str(tls.ca.ca_path))
    assert re.search(r"on listener SSL: .*client certificate none, principal User:ANONYMOUS", tls.broker.log_text())


def _api_versions_frame() -> bytes:
    body = struct.pack(">hhih", 18, 0, 7, 4) + b"test"     # ApiVersions v0, correlation 7, client "test"
    return struct.pack(">i", len(body)) + body


def _tls_exchange(port: int, ctx: ssl.SSLContext) -> bytes:
    """Handshake, send ApiVersions v0, read until the broker answers or closes: the bytes read
    (b"" when the broker refused). SSL errors on either step count as refused."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
        try:
            with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                s.sendall(_api_versions_frame())
                return s.recv(4)
        except (ssl.SSLError, ConnectionError):
            return b""


def _client_ctx(ca: TestCA, cert=None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca.ca_path))
    if cert is not None:
        ctx.load_cert_chain(str(cert.cert_path), str(cert.key_path))
    return ctx


def _handshake_failures(log: str, port_log_from: int = 0) -> list[str]:
    return re.findall(r"closing connection from (\S+) on TLS listener (\w+): TLS handshake failed: (.*)",
                      log[port_log_from:])


def _still_serves(tls) -> None:
    assert _tls_exchange(tls.mtls_port, _client_ctx(tls.ca, tls.alice))[:4] != b""


def test_client_without_certificate_is_refused_when_required(tls):
    start = len(tls.broker.log_text())
    assert _tls_exchange(tls.mtls_port, _client_ctx(tls.ca)) == b""
    fails = wait_for(lambda: _handshake_failures(tls.broker.log_text(), start), 30, what="the refusal line")
    assert fails[0][1] == "MTLS" and "CERTIFICATE" in fails[0][2].upper()
    _still_serves(tls)


def test_untrusted_client_certificate_is_refused(tls):
    start = len(tls.broker.log_text())
    assert _tls_exchange(tls.mtls_port, _client_ctx(tls.ca, tls.mallory)) == b""
    fails = wait_for(lambda: _handshake_failures(tls.broker.log_text(), start), 30, what="the refusal line")
    assert fails[0][1] == "MTLS" and "CERTIFICATE" in fails[0][2].upper()
    _still_serves(tls)


def test_plaintext_client_on_tls_port(tls):
    start = len(tls.broker.log_text())
    with socket.create_connection(("127.0.0.1", tls.tls_port), timeout=30) as s:
        s.sendall(_api_versions_frame())
        data = b""
        while chunk := s.recv(4096):
            data += chunk
    # no Kafka response: at most a TLS alert record (content type 21), then the close
    assert data == b"" or data[0] == 21
    fails = wait_for(lambda: _handshake_failures(tls.broker.log_text(), start), 30, what="the refusal line")
    assert fails[0][1] == "SSL"
    _still_serves(tls)
    assert _tls_exchange(tls.tls_port, _client_ctx(tls.ca))[:4] != b""


def test_tls_client_on_plaintext_port(tls):
    start = len(tls.broker.log_text())
    host, port = tls.broker.bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=30) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError)):
            with _client_ctx(tls.ca).wrap_socket(raw, server_hostname="localhost"):
                pass
    wait_for(lambda: "closing connection from 127.0.0.1" in tls.broker.log_text()[start:], 30,
             what="the plaintext listener's close line")
    _still_serves(tls)


def test_wrong_key_password_stops_the_start_without_logging_it(tmp_path):
    ca = TestCA(tmp_path / "ca")
    cert = ca.issue("broker", key_password=KEY_PASSWORD)
    plain, port = free_ports(2)
    wrong = "wrong-" + uuid.uuid4().hex
    props = {**ca.broker_ssl_props(cert), "ssl.key.password": wrong,
             "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{port}"}
    b = BrokerProcess(tmp_path / "data", props, port=plain)
    res = subprocess.run(b.args(), capture_output=True, text=True, timeout=120, cwd=b.cwd)
    assert res.returncode == 2
    assert "ssl.keystore.location" in res.stderr and "Failed to load PEM SSL keystore" in res.stderr
    for secret in (wrong, KEY_PASSWORD, _key_body(cert.key_pem)):
        assert secret not in res.stderr + res.stdout


def test_inline_pem_keystore(tmp_path):
    """``ssl.keystore.key`` / ``ssl.keystore.certificate.chain`` / ``ssl.truststore.certificates``
    inline, line breaks removed as a backslash-continued server.properties value joins them."""
    ca = TestCA(tmp_path / "ca")
    cert = ca.issue("broker", key_password=KEY_PASSWORD)
    plain, port = free_ports(2)
    one_line = lambda pem: pem.replace("\n", " ")   # noqa: E731
    props = {"listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{port}",
             "listener.name.ssl.ssl.keystore.type": "PEM",
             "listener.name.ssl.ssl.keystore.key": one_line(cert.key_pem),
             "listener.name.ssl.ssl.keystore.certificate.chain": one_line(cert.chain_pem),
             "listener.name.ssl.ssl.key.password": KEY_PASSWORD,
             "listener.name.ssl.ssl.truststore.type": "PEM",
             "listener.name.ssl.ssl.truststore.certificates": one_line(ca.ca_pem),
             "listener.name.ssl.ssl.client.auth": "requested"}
    b = BrokerProcess(tmp_path / "data", props, port=plain).start()
    try:
        got = _kp_produce_consume(f"127.0.0.1:{port}", n=3, ssl_cafile=str(ca.ca_path))
        assert got == [b"v0", b"v1", b"v2"]
        # requested: a client with a certificate of this CA is accepted too
        alice = ca.issue("alice")
        assert _tls_exchange(port, _client_ctx(ca, alice))[:4] != b""
    finally:
        b.stop()
    log = b.log_text()
    assert KEY_PASSWORD not in log and _key_body(cert.key_pem) not in log


def test_mapped_principal_is_what_the_authorizer_sees(tmp_path):
    """With Kafka's StandardAuthorizer on, ``super.users=User:alice@eng`` lets Alice's certificate
    (CN=Alice,OU=Eng,... mapped by the rules) produce, while Bob's (User:bob@eng, no ACL) is
    refused with TOPIC_AUTHORIZATION_FAILED: the principal of the TLS connection is the mapped DN."""
    ca = TestCA(tmp_path / "ca")
    alice = ca.issue("Alice", subject={"OU": "Eng", "O": "Acme"})
    bob = ca.issue("Bob", subject={"OU": "Eng", "O": "Acme"})
    plain, port = free_ports(2)
    b = BrokerProcess(tmp_path / "data", {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{port}",
        **ca.broker_ssl_props(), "ssl.client.auth": "required", "ssl.principal.mapping.rules": RULES,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:alice@eng", "num.partitions": "1"}, port=plain).start()
    try:
        topic = _topic()

        def produce(cert) -> list:
            errors: list = []
            p = ck.Producer({"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL",
                             "ssl.ca.location": str(ca.ca_path), "ssl.certificate.location": str(cert.cert_path),
                             "ssl.key.location": str(cert.key_path), "message.timeout.ms": 30000})
            for i in range(3):
                p.produce(topic, f"{cert.name}-{i}".encode(), on_delivery=lambda err, msg: errors.append(err))
            p.flush(60)
            return errors
        assert produce(alice) == [None, None, None]
        errors = produce(bob)
        assert len(errors) == 3 and all(e is not None and e.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
                                        for e in errors), errors
    finally:
        b.stop()


def test_container_healthcheck_reaches_a_mutual_tls_listener(tls, tmp_path):
    """``kcompat healthcheck`` in a container whose client listener is SSL with
    ``ssl.client.auth=required``: it connects with the node's own key store (KAFKA_SSL_* variables,
    as apache/kafka's image maps them)."""
    from kcompat.container import healthcheck

    env = {"CLUSTER_ID": "MkU3OEVBNTcwNTJENDM2Qg", "KAFKA_NODE_ID": "1", "KAFKA_PROCESS_ROLES": "broker,controller",
           "KAFKA_LISTENERS": f"MTLS://127.0.0.1:{tls.mtls_port},CONTROLLER://127.0.0.1:{free_ports(1)[0]}",
           "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER", "KAFKA_INTER_BROKER_LISTENER_NAME": "MTLS",
           "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "MTLS:SSL,CONTROLLER:PLAINTEXT",
           "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@127.0.0.1:9093", "KAFKA_LOG_DIRS": str(tmp_path / "d"),
           "KAFKA_SSL_KEYSTORE_TYPE": "PEM", "KAFKA_SSL_KEYSTORE_LOCATION": str(tls.alice.keystore_path),
           "KAFKA_SSL_TRUSTSTORE_TYPE": "PEM", "KAFKA_SSL_TRUSTSTORE_LOCATION": str(tls.ca.ca_path)}
    status, message = healthcheck(env, None, 30)
    assert status == 0, message
    # without a key store the same listener refuses the check
    no_cert = {k: v for k, v in env.items() if "KEYSTORE" not in k}
    no_cert.update({"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "MTLS:SSL,CONTROLLER:PLAINTEXT"})
    status, message = healthcheck({**no_cert, "KAFKA_LISTENERS": f"MTLS://127.0.0.1:{tls.mtls_port}",
                                   "KAFKA_PROCESS_ROLES": "broker"}, None, 30)
    assert status == 1, message


def _peer_cert(port: int, ca: TestCA) -> tuple[str, str]:
    """(CN, serial number) of the certificate the broker presents on ``port``."""
    ctx = _client_ctx(ca)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            cert = s.getpeercert()
    return dict(x[0] for x in cert["subject"])["commonName"], cert["serialNumber"]


def test_key_store_replaced_at_runtime(tmp_path):
    """KIP-226 certificate rotation: AlterConfigs of ``listener.name.ssl.ssl.keystore.location`` on
    the broker gives new TLS connections the new certificate; as in Kafka a certificate of another
    subject DN is refused (``ssl.allow.dn.changes`` false), and so is a store that does not load:
    both logged, the current one kept."""
    from kcompat.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest as Q
    from kcompat.testing.wire import call

    ca = TestCA(tmp_path / "ca")
    first = ca.issue("broker")
    plain, port = free_ports(2)
    b = BrokerProcess(tmp_path / "data", {"listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{port}",
                                          **ca.broker_ssl_props(first, prefix="listener.name.ssl.")},
                      port=plain).start()
    try:
        cn, serial = _peer_cert(port, ca)
        assert cn == "broker"
        renewed = ca.issue("broker", file_stem="broker-renewed")   # same DN and SANs, new key and serial
        other = ca.issue("someone-else")

        def alter(location: str) -> None:   # as kafka-configs.sh --entity-type brokers --entity-name 1 --alter
            resp = call(b.bootstrap, Q(resources=[Q.AlterConfigsResource(resource_type=4, resource_name="1", configs=[
                Q.AlterableConfig(name="listener.name.ssl.ssl.keystore.location", config_operation=0,
                                  value=location)])]), 1)
            assert resp.responses[0].error_code == 0, resp.responses[0].error_message
        alter(str(renewed.keystore_path))
        new_serial = wait_for(lambda: (lambda c: c[1] if c[1] != serial else None)(_peer_cert(port, ca)), 30,
                              what="the renewed certificate")
        alter(str(other.keystore_path))
        wait_for(lambda: "Keystore DistinguishedName does not match" in b.log_text(), 30, what="the DN refusal")
        alter(str(tmp_path / "missing.pem"))
        wait_for(lambda: "Failed to load PEM SSL keystore" in b.log_text(), 30, what="the load refusal")
        assert _peer_cert(port, ca) == ("broker", new_serial)
    finally:
        b.stop()
