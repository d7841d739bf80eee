"""Share state survives the loss of a partition leader in a three-node cluster (KIP-932): with
replication factor 3 the share partitions move to the new leaders, which load their state from the
share coordinator (itself replicated in ``__share_group_state``), so no record a Kafka 4.3.1
``KafkaShareConsumer`` acknowledged is delivered again and none is lost."""

from __future__ import annotations

import uuid

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

from kcompat.testing.process import wait_for
from tests.share.test_share_consumers import BROKER_CONFIGS, ShareConsumer, _committed_offsets, set_group_configs
from tests.support.cluster import Cluster, wait_until
from conformance import maven

N = 3000


def leader_of(bootstrap: str, topic: str, partition: int) -> int:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return md.topics[topic].partitions[partition].leader


def test_share_state_survives_a_kill9_of_a_partition_leader(tmp_path):
    lib = maven.resolve_kafka("4.3.1")
    overrides = dict(BROKER_CONFIGS, **{"offsets.topic.replication.factor": "3",
                                        "share.coordinator.state.topic.replication.factor": "3",
                                        "min.insync.replicas": "2"})
    with Cluster(tmp_path, 3, overrides=overrides) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap})   # alive until the result arrives
        admin.create_topics([NewTopic("t", 3, 3)])["t"].result(30)
        group = f"g-{uuid.uuid4().hex[:6]}"
        wait_until(lambda: _try_set(f"127.0.0.1:{c.client_ports[0]}", group), 30, "the group config set")
        producer = ck.Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
        for i in range(N):
            producer.produce("t", b"%d" % i, partition=i % 3)
        assert producer.flush(60) == 0
        ends = {p: range(0, N // 3) for p in range(3)}
        first = ShareConsumer(lib, c.bootstrap, group, "t", "accept", workdir=tmp_path, name="first")
        wait_for(lambda: len(first.records) >= N // 3, 120, what="a third of the records")
        first.kill()
        committed = _committed_offsets(first)
        killed = leader_of(c.bootstrap, "t", 0)
        c.node(killed).kill9()
        wait_until(lambda: leader_of(c.bootstrap, "t", 0) not in (-1, killed), 30, "a new leader of t-0")
        second = ShareConsumer(lib, c.bootstrap, group, "t", "accept", idle_ms=20_000, workdir=tmp_path,
                               name="second")
        second.wait_done(300)
        again = committed & set(second.offsets())
        assert not again, sorted(again)[:5]
        assert set(first.offsets()) | set(second.offsets()) == {(p, o) for p, r in ends.items() for o in r}


def _try_set(bootstrap: str, group: str) -> bool:
    try:
        set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})
        return True
    except OSError:
        return False
