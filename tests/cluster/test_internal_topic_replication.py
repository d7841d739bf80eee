"""Internal topics get their full replication factor, or wait for it, as in Kafka.

In a cluster of several controllers, ``__consumer_offsets`` and ``__transaction_state`` are not
created while fewer brokers are registered than ``offsets.topic.replication.factor`` /
``transaction.state.log.replication.factor`` (default 3): FindCoordinator answers
COORDINATOR_NOT_AVAILABLE, which clients retry. Created early with fewer replicas, they would keep
them for good and a single broker failure would lose committed offsets and transaction state.
Once enough brokers are up the topics are created with every replica.
"""

from __future__ import annotations

from kcompat.protocol.messages.find_coordinator import FindCoordinatorRequest
from kcompat.protocol.messages.metadata import MetadataRequest
from kcompat.testing import wire
from tests.support.cluster import Cluster, wait_until

COORDINATOR_NOT_AVAILABLE = 15
GROUP, TRANSACTION = 0, 1
INTERNAL = {GROUP: "__consumer_offsets", TRANSACTION: "__transaction_state"}


def find_coordinator(addr: str, key: str, key_type: int):
    return wire.call(addr, FindCoordinatorRequest(key=key, key_type=key_type), 3)


def internal_topics(addr: str) -> dict[str, list[list[int]]]:
    """Internal topic name -> replica lists of its partitions, from Metadata (all topics)."""
    resp = wire.call(addr, MetadataRequest(topics=None, allow_auto_topic_creation=False), 12)
    return {t.name: [p.replica_nodes for p in t.partitions] for t in resp.topics if t.name in INTERNAL.values()}


def test_internal_topics_wait_until_enough_brokers_are_registered(tmp_path):
    cluster = Cluster(tmp_path, 3)
    try:
        cluster.start(nodes=cluster.nodes[:2])        # a quorum (2 of 3 voters) and two brokers
        cluster.wait_for_brokers()
        addr = f"127.0.0.1:{cluster.client_ports[0]}"
        for key_type in (GROUP, TRANSACTION):
            for _ in range(3):                         # clients retry; every answer is the same
                resp = find_coordinator(addr, "early", key_type)
                assert (resp.error_code, resp.node_id) == (COORDINATOR_NOT_AVAILABLE, -1), resp
        assert internal_topics(addr) == {}
        assert "not creating __consumer_offsets yet" in cluster.node(1).log_text()

        cluster.node(3).start(60)
        cluster.wait_for_brokers()
        for key_type in (GROUP, TRANSACTION):
            resp = wait_until(lambda kt=key_type: (lambda r: r if r.error_code == 0 else None)(
                find_coordinator(addr, "early", kt)), 20, f"coordinator of key type {key_type}")
            assert resp.node_id in (1, 2, 3)
        topics = wait_until(lambda: (lambda t: t if len(t) == 2 else None)(internal_topics(addr)), 10,
                            "both internal topics in Metadata")
        for name, replicas in topics.items():
            assert replicas and all(sorted(r) == [1, 2, 3] for r in replicas), (name, replicas)
    finally:
        cluster.stop()
