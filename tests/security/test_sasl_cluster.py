"""A 3-node kcompat cluster whose inter-broker listener (INTERNAL) and controller listener are
SASL_PLAINTEXT, then SASL_SSL (TLS with a certificate authority the test made, host names checked): Raft, broker registration, forwarded admin requests and replica fetches all
authenticate as the broker's own user (``sasl.mechanism.*.protocol`` PLAIN with the listeners'
JAAS ``username``/``password``); clients use the PLAINTEXT listener and see replicated data.
SCRAM between brokers would need credentials before the first broker starts (Kafka's
``kafka-storage format --add-scram``), which kcompat does not have."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (AdminClient, NewTopic, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)

from kcompat.testing.cluster import Cluster, wait_until
from kcompat.testing.ports import free_ports
from kcompat.protocol.messages.api_versions import ApiVersionsRequest
from kcompat.testing import wire
from tests.security.certs import TestCA
from tests.security.sasl_support import PASSWORDS, PLAIN_JAAS, closed_by_broker


REAUTH_MS = 2000
SCRAM_JAAS = ("org.apache.kafka.common.security.scram.ScramLoginModule required "
              f'username="admin" password="{PASSWORDS["admin"]}";')


@pytest.fixture(scope="module", params=["SASL_PLAINTEXT", "SASL_SSL"])
def cluster(request, tmp_path_factory):
    protocol = request.param
    root = tmp_path_factory.mktemp(f"sasl-cluster-{protocol.lower()}")
    tls = {}
    if protocol == "SASL_SSL":   # one broker certificate (SANs localhost, 127.0.0.1) from a CA the test made
        tls = TestCA(root / "ca").broker_ssl_props()
    internal = free_ports(3, "127.0.0.1")
    c = Cluster(root, n=3, overrides={
        "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,INTERNAL:{protocol},CONTROLLER:{protocol}",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.internal.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.internal.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.internal.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        "default.replication.factor": "3", "min.insync.replicas": "2",
        # short sessions (KIP-368): the brokers' own connections must be replaced before they expire
        "listener.name.internal.connections.max.reauth.ms": str(REAUTH_MS),
        "listener.name.controller.connections.max.reauth.ms": str(REAUTH_MS),
        **tls,
    })
    for node, port in zip(c.nodes, internal):
        node.overrides["listeners"] += f",INTERNAL://127.0.0.1:{port}"
    c.protocol, c.internal_ports = protocol, internal
    with c:   # starts the nodes
        yield c


def test_replicated_topic_over_sasl_inter_broker_and_controller_listeners(cluster):
    bootstrap = cluster.bootstrap
    topic = f"sasl-rf3-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, 3, 3)]).values():
        f.result(60)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(30):
        p.produce(topic, f"v{i}".encode(), partition=i % 3)
    assert p.flush(60) == 0

    def all_in_sync() -> bool:
        meta = admin.list_topics(topic, timeout=10).topics[topic]
        return all(len(pm.isrs) == 3 for pm in meta.partitions.values())
    wait_until(all_in_sync, 60, "every partition's ISR has 3 replicas")
    # past several session lifetimes: replication and the quorum keep going on fresh connections
    auths_before = _internal_auths(cluster)
    end = time.monotonic() + 3 * REAUTH_MS / 1000.0
    while time.monotonic() < end:
        time.sleep(0.2)
    for i in range(30, 60):
        p.produce(topic, f"v{i}".encode(), partition=i % 3)
    assert p.flush(60) == 0
    wait_until(all_in_sync, 60, "every partition's ISR has 3 replicas after the sessions expired")
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g-" + topic, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = set()
    wait_until(lambda: _poll_into(c, got) >= 60, 60, "60 records consumed")
    c.close()
    assert got == {f"v{i}".encode() for i in range(60)}
    for listener in ("CONTROLLER", "INTERNAL"):
        wait_until(lambda: any("SASL PLAIN authentication of User:admin from" in line and line.endswith(f"on {listener}")
                               for n in cluster.nodes for line in n.log_text().splitlines()),
                   30, f"the brokers' own SASL authentications on {listener}")
    if cluster.protocol == "SASL_SSL":   # the internal listeners really speak TLS: plaintext bytes are refused
        with wire.connect(f"127.0.0.1:{cluster.internal_ports[0]}") as sock:
            wire.send_request(sock, ApiVersionsRequest(), 0)
            assert closed_by_broker(sock)
    logs = "".join(n.log_text() for n in cluster.nodes)
    assert "SASL authentication failed" not in logs
    assert "SASL session of" not in logs   # no internal connection was left to expire
    assert _internal_auths(cluster) > auths_before   # they were replaced by fresh, authenticated ones
    assert PASSWORDS["admin"] not in logs


def _internal_auths(cluster) -> int:
    return sum(n.log_text().count("SASL PLAIN authentication of User:admin") for n in cluster.nodes)


def _poll_into(consumer, got: set) -> int:
    m = consumer.poll(0.5)
    if m is not None and m.error() is None:
        got.add(m.value())
    return len(got)


def test_rolling_switch_of_inter_broker_mechanism_to_scram(cluster):
    """Kafka's way to SCRAM between brokers: create the brokers' credential (it lives in the
    metadata log), set sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512, restart node by node.
    Replication keeps working throughout and afterwards runs on SCRAM-authenticated connections."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "admin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), PASSWORDS["admin"].encode())])["admin"] \
        .result(60)
    for node_id in (1, 2, 3):
        cluster.node(node_id).overrides["sasl.mechanism.inter.broker.protocol"] = "SCRAM-SHA-512"
        cluster.restart(node_id)
        cluster.wait_for_brokers(60)
    topic = f"sasl-scram-rf3-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for f in admin.create_topics([NewTopic(topic, 1, 3)]).values():
        f.result(60)
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(10):
        p.produce(topic, f"s{i}".encode())
    assert p.flush(60) == 0
    wait_until(lambda: len(admin.list_topics(topic, timeout=10).topics[topic].partitions[0].isrs) == 3, 60,
               "the ISR has 3 replicas")
    wait_until(lambda: any("SASL SCRAM-SHA-512 authentication of User:admin from" in line and line.endswith("on INTERNAL")
                           for n in cluster.nodes for line in n.log_text().splitlines()),
               30, "a broker authenticating with SCRAM-SHA-512 on INTERNAL")
    assert "SASL authentication failed" not in "".join(n.log_text() for n in cluster.nodes)
