"""Growing and draining a cluster with Kafka 4.3.1's own tools (issue 17's scenario, scaled to CI).

Three brokers (also the controller quorum) serve a topic of 6 partitions with replication factor 3
under an acks=all idempotent load. A fourth broker starts, registers and gets nothing until
``kafka-reassign-partitions.sh --generate`` / ``--execute --throttle`` / ``--verify`` move replicas
onto it: during the move Metadata shows the adding replicas in the replica lists, the throttle
configs are set on the brokers and topic, and ``--verify`` reports completion and clears them;
a preferred leader election (``kafka-leader-election.sh``) then makes broker 4 lead partitions.
Then broker 1 is drained (every replica of every topic moved off it, its log directories emptied),
stopped and unregistered (``kafka-cluster.sh unregister``). After each step a consumer reads every
acknowledged record exactly once.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from conformance import maven
from conformance.clients.java import JavaTools
from kcompat.testing.cluster import Cluster, wait_until
from tests.support.reassign import (
    CLUSTER_TOOL, LEADER_ELECTION, AckedLoad, ReassignTool, assert_exactly_once, read_all, replicas_of,
)

THROTTLE = 20_000_000   # bytes/s: more than the load, so the move is throttled but not slowed to a crawl


@pytest.fixture(scope="module")
def kafka_lib():
    return maven.resolve_kafka("4.3.1")


def _throttle_configs(admin, topic: str, brokers: list[int]) -> dict:
    """The throttle configs set on ``topic`` and each broker (non-default values only)."""
    res = [ConfigResource(ConfigResource.Type.TOPIC, topic)] + \
        [ConfigResource(ConfigResource.Type.BROKER, str(b)) for b in brokers]
    out = {}
    for one in res:   # librdkafka: one BROKER resource per call
        for r, f in admin.describe_configs([one]).items():
            for name, entry in f.result(30).items():
                if "replication.throttled" in name and not entry.is_default:
                    out[(r.name, name)] = entry.value
    return out


def _topic_dirs(cluster: Cluster, node_id: int, topic: str) -> list[str]:
    """Partition directories of ``topic`` in node ``node_id``'s log dir."""
    return sorted(p.name for p in cluster.node(node_id).data_dir.iterdir()
                  if p.is_dir() and p.name.rsplit("-", 1)[0] == topic)


def test_add_a_broker_move_replicas_onto_it_then_drain_and_unregister_broker_1(tmp_path, kafka_lib):
    tools = JavaTools(str(kafka_lib), tmp_path)
    cluster = Cluster(tmp_path, n=4, roles=["broker,controller"] * 3 + ["broker"])
    cluster.start(cluster.nodes[:3])
    load = None
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        topic = f"grow-{uuid.uuid4().hex[:6]}"
        admin.create_topics([NewTopic(topic, 6, 3)])[topic].result(30)
        wait_until(lambda: all(len(i) == 3 for _r, i, _l in replicas_of(admin, topic).values()), 30, "full ISRs")
        load = AckedLoad(cluster.bootstrap, topic).start()
        load.wait_for(2000)

        # a fourth broker registers but hosts nothing until a reassignment gives it replicas
        cluster.start([cluster.nodes[3]])
        assert all(4 not in r for r, _i, _l in replicas_of(admin, topic).values())
        reassign = ReassignTool(tools, cluster.bootstrap, tmp_path)
        plan = reassign.generate([topic], [1, 2, 3, 4])
        assert len(plan) == 6 and sum(r.count(4) for r in plan.values()) >= 4, plan
        out = reassign.execute(plan, throttle=THROTTLE).stdout
        assert "Successfully started partition reassignment" in out, out
        configs = _throttle_configs(admin, topic, [1, 2, 3, 4])
        assert configs[(topic, "follower.replication.throttled.replicas")], configs
        assert configs[(topic, "leader.replication.throttled.replicas")], configs
        assert configs[("4", "follower.replication.throttled.rate")] == str(THROTTLE), configs
        load.wait_for(1000)
        out = reassign.verify_until_done(plan)
        assert all(f"Reassignment of partition {t}-{p} is completed" in out for t, p in plan), out
        wait_until(lambda: not _throttle_configs(admin, topic, [1, 2, 3, 4]), 30, "throttles cleared by --verify")
        placed = replicas_of(admin, topic)
        assert {p: r for p, (r, _i, _l) in placed.items()} == {p: r for (_t, p), r in plan.items()}
        assert all(sorted(i) == sorted(r) for r, i, _l in placed.values()), placed
        # the moved replicas' old copies are gone from the brokers that lost them
        for b in (1, 2, 3):
            expect = sorted(f"{topic}-{p}" for (_t, p), r in plan.items() if b in r)
            wait_until(lambda b=b, expect=expect: _topic_dirs(cluster, b, topic) == expect, 30,
                       f"broker {b} holding only its assigned partitions")
        res = tools.run(LEADER_ELECTION, ["--bootstrap-server", cluster.bootstrap, "--election-type", "PREFERRED",
                                          "--all-topic-partitions"], check=False, timeout=120)
        assert res.ok or "Valid replica already elected" in res.stdout + res.stderr, res.summary()
        wait_until(lambda: sum(1 for _r, _i, lead in replicas_of(admin, topic).values() if lead == 4) >= 1, 30,
                   "broker 4 leading partitions")
        load.wait_for(1000)

        # drain broker 1: every replica of every topic (the internal ones too) moves off it
        drain = {}
        metadata = admin.list_topics(timeout=30)
        for name, t in metadata.topics.items():
            for p in t.partitions.values():
                if 1 in p.replicas:
                    spare = next(b for b in (2, 3, 4) if b not in p.replicas)
                    drain[(name, p.id)] = [spare if r == 1 else r for r in p.replicas]
        assert drain
        reassign.execute(drain)
        reassign.verify_until_done(drain)
        wait_until(lambda: _topic_dirs(cluster, 1, topic) == [], 30, "broker 1's partitions deleted")
        load.wait_for(1000)
        cluster.node(1).stop()
        res = tools.run(CLUSTER_TOOL, ["unregister", "--bootstrap-server", f"127.0.0.1:{cluster.client_ports[1]}",
                                       "--id", "1"], check=False, timeout=120)
        assert res.ok, res.summary()
        wait_until(lambda: sorted(admin.list_topics(timeout=30).brokers) == [2, 3, 4], 30, "brokers 2, 3, 4")
        load.wait_for(1000)
        load.stop()
        assert_exactly_once(load, read_all(cluster.bootstrap, topic))
    finally:
        if load is not None:
            load._stop.set()
        cluster.stop()
