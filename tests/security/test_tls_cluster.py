"""A 3-node cluster whose node-to-node traffic is TLS (issue 19): the Raft quorum, broker
registration and heartbeats on an SSL ``CONTROLLER`` listener (``controller.listener.names``) and
replication on an SSL ``INTERNAL`` listener (``inter.broker.listener.name``), both with
``ssl.client.auth=required``: every node presents its own certificate to the others and checks
theirs (host names included: ``ssl.endpoint.identification.algorithm`` keeps Kafka's ``https``).
Clients use the PLAINTEXT listener; acks=all needs the followers' fetches over TLS.
"""

from __future__ import annotations

import uuid

from kafka import KafkaConsumer, KafkaProducer

from kcompat.protocol.messages.metadata import MetadataRequest
from kcompat.testing import admin, wire
from kcompat.testing.cluster import Cluster
from kcompat.testing.ports import free_ports
from kcompat.testing.process import wait_for
from tests.security.certs import TestCA


def _isr(bootstrap: str, topic: str) -> list[int]:
    resp = wire.call(bootstrap.split(",")[0], MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                                allow_auto_topic_creation=False), 9)
    return sorted(resp.topics[0].partitions[0].isr_nodes)


def _segment_bytes(partition_dir) -> int:
    return sum(p.stat().st_size for p in partition_dir.glob("*.log"))


def _tls_cluster(tmp_path) -> Cluster:
    """Three nodes: PLAINTEXT for clients, CONTROLLER and INTERNAL on SSL with mutual TLS."""
    ca = TestCA(tmp_path / "ca")
    cluster = Cluster(tmp_path, n=3)
    internal = free_ports(3)
    for i, node in enumerate(cluster.nodes):
        cert = ca.issue(f"node{i + 1}")
        node.overrides.update({
            "listeners": f"PLAINTEXT://127.0.0.1:{cluster.client_ports[i]},"
                         f"CONTROLLER://127.0.0.1:{cluster.controller_ports[i]},INTERNAL://127.0.0.1:{internal[i]}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL,INTERNAL:SSL",
            "inter.broker.listener.name": "INTERNAL",
            **ca.broker_ssl_props(cert),
            "ssl.client.auth": "required",
            "default.replication.factor": "3", "min.insync.replicas": "2",
        })
    return cluster


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> list[int]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    futures = [producer.send(topic, v) for v in values]
    producer.flush()
    offsets = [f.get(timeout=60).offset for f in futures]
    producer.close()
    return offsets


def _consume(bootstrap: str, topic: str, n: int) -> list[bytes]:
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             group_id="g-" + uuid.uuid4().hex[:8])
    got: list[bytes] = []
    wait_for(lambda: got.extend(r.value for rs in consumer.poll(1000).values() for r in rs) or len(got) >= n,
             60, what="records back")
    consumer.close()
    return got


def test_three_nodes_replicate_and_vote_over_tls(tmp_path):
    cluster = _tls_cluster(tmp_path)
    with cluster:
        topic = "tls-repl-" + uuid.uuid4().hex[:8]
        admin.create_topic(cluster.bootstrap, topic, partitions=1, replication_factor=3)
        wait_for(lambda: _isr(cluster.bootstrap, topic) == [1, 2, 3], 60, what="a full ISR")
        assert _produce(cluster.bootstrap, topic, [f"m{i}".encode() for i in range(200)]) == list(range(200))
        # each replica's segment holds the same bytes: the followers fetched them over INTERNAL (SSL)
        wait_for(lambda: len({_segment_bytes(tmp_path / f"node{i}" / f"{topic}-0") for i in (1, 2, 3)}) == 1,
                 60, what="three equal replicas")
        assert _segment_bytes(tmp_path / "node1" / f"{topic}-0") > 200 * 2
        assert _consume(cluster.bootstrap, topic, 200) == [f"m{i}".encode() for i in range(200)]
        quorum = cluster.quorum()
        assert quorum is not None and len(quorum.current_voters) == 3
        assert all(v.log_end_offset >= 0 for v in quorum.current_voters)
        # every handshake while the cluster ran succeeded; the logs are read before the nodes stop,
        # since a node stopping in the middle of a handshake (a Raft or heartbeat connection it
        # was opening) resets it, and its peer rightly logs that
        logs = [node.log_text() for node in cluster.nodes]
    for log in logs:
        assert "TLS handshake failed" not in log


def _leader(bootstrap: str, topic: str) -> int:
    resp = wire.call(bootstrap.split(",")[0], MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                                                allow_auto_topic_creation=False), 9)
    return resp.topics[0].partitions[0].leader_id


def test_tls_cluster_fails_over_and_takes_a_node_back(tmp_path):
    """kill -9 of the partition leader: a new leader is elected (Raft over TLS), acks=all writes go
    on with the two left (min.insync.replicas=2), and the restarted node reconnects over TLS, catches
    up through the INTERNAL listener and rejoins the ISR."""
    cluster = _tls_cluster(tmp_path)
    with cluster:
        topic = "tls-failover-" + uuid.uuid4().hex[:8]
        admin.create_topic(cluster.bootstrap, topic, partitions=1, replication_factor=3)
        wait_for(lambda: _isr(cluster.bootstrap, topic) == [1, 2, 3], 60, what="a full ISR")
        assert _produce(cluster.bootstrap, topic, [f"a{i}".encode() for i in range(100)]) == list(range(100))
        leader = _leader(cluster.bootstrap, topic)
        cluster.kill(leader)
        wait_for(lambda: _leader(cluster.bootstrap, topic) not in (leader, -1), 60, what="a new leader")
        assert _produce(cluster.bootstrap, topic, [f"b{i}".encode() for i in range(100)]) == list(range(100, 200))
        cluster.restart(leader)
        wait_for(lambda: _isr(cluster.bootstrap, topic) == [1, 2, 3], 90, what="the restarted node in the ISR")
        got = _consume(cluster.bootstrap, topic, 200)
        assert got == [f"a{i}".encode() for i in range(100)] + [f"b{i}".encode() for i in range(100)]
