"""SASL with Kafka's own tools and kcat against a real kcompat process: Kafka 4.3.1's
``kafka-configs.sh`` (ConfigCommand) creating, describing and deleting SCRAM credentials, its
console producer and consumer (``--command-config``) with PLAIN, SCRAM-SHA-512 and an unsecured
OAUTHBEARER token, kcat with PLAIN and (on a current librdkafka) SCRAM-SHA-512,
and SASL_SSL (SCRAM-SHA-512 over TLS with a certificate authority the test made)."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from conformance import maven
from conformance.clients.java import JavaTools
from kcompat.testing import Broker
from kcompat.testing.ports import free_ports
from kcompat.testing.process import wait_for
from tests.security.certs import TestCA
from tests.security.sasl_support import PASSWORDS, PLAIN_JAAS, logged

SCRAM_PASSWORD = "tools-scram-pw-41f"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("sasl-tools")
    ca = TestCA(root / "ca")
    p_plain, p_sasl, p_ssl = free_ports(3, "127.0.0.1")
    props = {
        "listeners": f"PLAINTEXT://127.0.0.1:{p_plain},SASL_PLAINTEXT://127.0.0.1:{p_sasl},"
                     f"SASL_SSL://127.0.0.1:{p_ssl}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,"
                                          "CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "num.partitions": "1",
        **ca.broker_ssl_props(),
    }
    with Broker(props, port=p_plain) as broker:
        tools = JavaTools(str(maven.resolve_kafka("4.3.1")), root)
        yield broker, tools, ca, {"PLAINTEXT": f"127.0.0.1:{p_plain}", "SASL_PLAINTEXT": f"127.0.0.1:{p_sasl}",
                                  "SASL_SSL": f"127.0.0.1:{p_ssl}"}


def _configs(tools, bootstrap, *args):
    return tools.run("kafka.admin.ConfigCommand", ["--bootstrap-server", bootstrap, *args], timeout=120)


def test_kafka_configs_sh_scram_credentials(setup):
    broker, tools, _ca, addrs = setup
    # one mechanism per request: Kafka's ScramControlManager refuses a user altered twice in one
    # request (DUPLICATE_RESOURCE), and kafka-configs.sh sends both mechanisms in one
    for mech in (f"SCRAM-SHA-256=[iterations=8192,password={SCRAM_PASSWORD}]", f"SCRAM-SHA-512=[password={SCRAM_PASSWORD}]"):
        _configs(tools, addrs["PLAINTEXT"], "--alter", "--add-config", mech, "--entity-type", "users",
                 "--entity-name", "alice")
    out = _configs(tools, addrs["PLAINTEXT"], "--describe", "--entity-type", "users", "--entity-name", "alice").stdout
    assert "SCRAM-SHA-256=iterations=8192" in out and "SCRAM-SHA-512=iterations=4096" in out
    _configs(tools, addrs["PLAINTEXT"], "--alter", "--add-config", f"SCRAM-SHA-512=[password={SCRAM_PASSWORD}]",
             "--entity-type", "users", "--entity-name", "temp")
    _configs(tools, addrs["PLAINTEXT"], "--alter", "--delete-config", "SCRAM-SHA-512",
             "--entity-type", "users", "--entity-name", "temp")
    out = _configs(tools, addrs["PLAINTEXT"], "--describe", "--entity-type", "users").stdout
    assert "alice" in out and "temp" not in out
    assert SCRAM_PASSWORD not in broker.log_text()


def _client_props(mechanism: str, user: str, password: str, ssl_ca=None) -> dict[str, str]:
    module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mechanism == "PLAIN"
              else "org.apache.kafka.common.security.scram.ScramLoginModule")
    jaas = f'{module} required username="{user}" password="{password}";'
    if mechanism == "OAUTHBEARER":   # the Java client's unsecured token (OAuthBearerUnsecuredLoginCallbackHandler)
        jaas = f'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ' \
               f'unsecuredLoginStringClaim_sub="{user}";'
    props = {"security.protocol": "SASL_SSL" if ssl_ca else "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
             "sasl.jaas.config": jaas}
    if ssl_ca:
        props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(ssl_ca)})
    return props


@pytest.mark.parametrize("mechanism,listener", [("PLAIN", "SASL_PLAINTEXT"), ("SCRAM-SHA-512", "SASL_PLAINTEXT"),
                                                ("SCRAM-SHA-512", "SASL_SSL"), ("OAUTHBEARER", "SASL_PLAINTEXT")])
def test_java_console_producer_and_consumer(setup, mechanism, listener):
    broker, tools, ca, addrs = setup
    if mechanism.startswith("SCRAM"):
        test_kafka_configs_sh_scram_credentials(setup)
    password = PASSWORDS["alice"] if mechanism == "PLAIN" else SCRAM_PASSWORD
    props = tools.properties(f"client-{mechanism}-{listener}",
                             _client_props(mechanism, "alice", password, ca.ca_path if listener == "SASL_SSL" else None))
    topic = f"java-{mechanism.lower()}-{listener.lower()}-{uuid.uuid4().hex[:6]}"
    lines = [f"j{i}" for i in range(10)]
    tools.run("org.apache.kafka.tools.ConsoleProducer",
              ["--bootstrap-server", addrs[listener], "--topic", topic, "--command-config", str(props),
               "--producer-property", "acks=all"], input="\n".join(lines) + "\n", timeout=120)
    res = tools.run("org.apache.kafka.tools.consumer.ConsoleConsumer",
                    ["--bootstrap-server", addrs[listener], "--topic", topic, "--command-config", str(props),
                     "--from-beginning", "--max-messages", "10", "--timeout-ms", "60000"], timeout=120)
    assert res.stdout.split() == lines
    assert logged(broker, f"SASL {mechanism} authentication of User:alice from")


def _modern_librdkafka(tmp_path) -> dict:
    """An environment running kcat on confluent-kafka's bundled librdkafka (2.16). Debian's kcat
    links librdkafka 2.0.2, whose SCRAM client-final repeats the client nonce before the
    server-first nonce: Kafka since 3.9.1/4.0 (CVE-2024-56128) and kcompat refuse it; librdkafka
    2.6.1 fixed it."""
    import confluent_kafka
    libs = Path(confluent_kafka.__file__).resolve().parent.parent / "confluent_kafka.libs"
    bundled = sorted(libs.glob("librdkafka*.so*"))
    assert bundled, f"confluent-kafka's wheel bundles librdkafka in {libs}"
    (tmp_path / "librdkafka.so.1").symlink_to(bundled[0])
    return {**os.environ, "LD_LIBRARY_PATH": str(tmp_path)}


@pytest.mark.parametrize("mechanism,listener", [("PLAIN", "SASL_PLAINTEXT"), ("PLAIN", "SASL_SSL"),
                                                ("SCRAM-SHA-512", "SASL_SSL")])
def test_kcat(setup, mechanism, listener, tmp_path):
    broker, _tools, ca, addrs = setup
    kcat = shutil.which("kcat")
    assert kcat, "kcat is installed by tools/install_kcat.sh"
    env = None
    if mechanism.startswith("SCRAM"):
        test_kafka_configs_sh_scram_credentials(setup)
        env = _modern_librdkafka(tmp_path)
    password = PASSWORDS["alice"] if mechanism == "PLAIN" else SCRAM_PASSWORD
    x = ["-b", addrs[listener], "-X", f"security.protocol={listener.lower()}", "-X", f"sasl.mechanism={mechanism}",
         "-X", "sasl.username=alice", "-X", f"sasl.password={password}"]
    if listener == "SASL_SSL":
        x += ["-X", f"ssl.ca.location={ca.ca_path}"]
    topic = f"kcat-{mechanism.lower()}-{uuid.uuid4().hex[:6]}"
    lines = [f"k{i}" for i in range(10)]
    subprocess.run([kcat, *x, "-P", "-t", topic], input="\n".join(lines) + "\n", text=True, check=True, timeout=60,
                   env=env)
    out = subprocess.run([kcat, *x, "-C", "-t", topic, "-o", "beginning", "-c", "10", "-e"], capture_output=True,
                         text=True, check=True, timeout=60, env=env)
    assert out.stdout.split() == lines
    assert password not in broker.log_text()


def test_scram_credentials_survive_a_restart(setup):
    """Credentials are UserScramCredentialRecords: a restarted broker replays them from its
    metadata log, and kafka-configs.sh still describes them."""
    broker, tools, ca, addrs = setup
    test_kafka_configs_sh_scram_credentials(setup)
    line = "SASL SCRAM-SHA-512 authentication of User:alice from"
    before = broker.log_text().count(line)
    broker.restart()
    out = _configs(tools, addrs["PLAINTEXT"], "--describe", "--entity-type", "users", "--entity-name", "alice").stdout
    assert "SCRAM-SHA-512=iterations=4096" in out
    props = tools.properties("client-after-restart", _client_props("SCRAM-SHA-512", "alice", SCRAM_PASSWORD,
                                                                   ca.ca_path))
    topic = f"after-restart-{uuid.uuid4().hex[:6]}"
    tools.run("org.apache.kafka.tools.ConsoleProducer",
              ["--bootstrap-server", addrs["SASL_SSL"], "--topic", topic, "--command-config", str(props)],
              input="one\n", timeout=120)
    wait_for(lambda: broker.log_text().count(line) > before, 30, what="an authentication after the restart")
