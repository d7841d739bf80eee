"""A 3-node kcompat cluster (three processes, each broker + controller voter) with real clients.

What the KRaft issue asks of a cluster: clients bootstrapping from any node see every broker;
admin requests sent to any node are forwarded to the active controller and take effect on every
node; kill -9 of the active controller elects a new one within 3 seconds while topic creation
keeps working and the old one catches up on restart; with two of three voters down metadata
changes stop (no split brain) and resume when one returns.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.support.cluster import Cluster, wait_until


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path)
    c.start()
    yield c
    c.stop()


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000})


def _create(bootstrap: str, name: str, partitions: int = 1, timeout: float = 15):
    """Create a topic, retrying NOT_CONTROLLER (retriable, as the Java AdminClient treats it) while
    a new controller is being elected."""
    deadline = time.monotonic() + timeout
    while True:
        admin = _admin(bootstrap)  # keep the handle alive until the result arrives
        try:
            admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=timeout,
                                request_timeout=timeout)[name].result(timeout)
            return
        except KafkaException as e:
            err = e.args[0]
            if err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return   # an earlier attempt went through
            if err.code() != KafkaError.NOT_CONTROLLER or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _topics_seen_by(port: int) -> set[str]:
    md = _admin(f"127.0.0.1:{port}").list_topics(timeout=10)
    return set(md.topics)


def test_every_node_shows_every_broker_and_forwards_admin_requests(cluster):
    for port in cluster.client_ports:  # bootstrap from each node alone
        md = _admin(f"127.0.0.1:{port}").list_topics(timeout=10)
        assert sorted(md.brokers) == [1, 2, 3]
        assert {(b.host, b.port) for b in md.brokers.values()} == \
            {("127.0.0.1", p) for p in cluster.client_ports}
    leader = cluster.leader_id()
    follower_port = next(p for i, p in enumerate(cluster.client_ports) if i + 1 != leader)
    via = f"127.0.0.1:{follower_port}"
    _create(via, "spread", 6)  # sent to a node that is not the active controller: forwarded
    for port in cluster.client_ports:
        wait_until(lambda: "spread" in _topics_seen_by(port), 10, f"topic on the node at {port}")
    # the topic can be known before all its partitions reach this node's image: wait for all 6
    md = wait_until(lambda: (lambda m: m if len(m.topics["spread"].partitions) == 6 else None)(
        _admin(via).list_topics("spread", timeout=10)), 10, "all partitions of the topic")
    leaders = sorted(p.leader for p in md.topics["spread"].partitions.values())
    assert leaders == [1, 1, 2, 2, 3, 3]  # placement spreads leaders over the brokers

    admin = _admin(via)
    admin.create_partitions([NewPartitions("spread", 9)])["spread"].result(15)
    res = ConfigResource(ConfigResource.Type.TOPIC, "spread", set_config={"retention.ms": "123456"})
    admin.alter_configs([res])[res].result(15)
    for port in cluster.client_ports:
        other = _admin(f"127.0.0.1:{port}")
        wait_until(lambda: len(other.list_topics("spread", timeout=10).topics["spread"].partitions) == 9, 10,
                   "9 partitions everywhere")
        cfg = ConfigResource(ConfigResource.Type.TOPIC, "spread")
        wait_until(lambda: other.describe_configs([cfg])[cfg].result(10)["retention.ms"].value == "123456",
                   10, "the new retention.ms everywhere")

    # clients produce to and consume from every partition's leader, wherever it is
    producer = KafkaProducer(bootstrap_servers=via)
    for i in range(90):
        producer.send("spread", value=b"%d" % i, partition=i % 9)
    producer.flush(30)
    consumer = KafkaConsumer("spread", bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=10000, group_id=f"g-{uuid.uuid4().hex[:6]}")
    got = []
    for r in consumer:   # the 90 records, without waiting out consumer_timeout_ms after them
        got.append(int(r.value))
        if len(got) == 90:
            break
    assert sorted(got) == list(range(90))
    # and nothing more: each partition holds exactly its 10
    assert consumer.end_offsets([TopicPartition("spread", p) for p in range(9)]) == \
        {TopicPartition("spread", p): 10 for p in range(9)}
    consumer.close()

    admin.delete_topics(["spread"], operation_timeout=15)["spread"].result(15)
    for port in cluster.client_ports:
        wait_until(lambda: "spread" not in _topics_seen_by(port), 10, "the deletion everywhere")


def test_kill9_of_the_active_controller_elects_a_new_one_within_3s(cluster):
    old = cluster.leader_id()
    assert old is not None
    t0 = time.monotonic()
    cluster.node(old).kill9()
    new = wait_until(lambda: (lambda lid: lid if lid not in (None, old) else None)(cluster.leader_id()), 10,
                     "a new active controller")
    elapsed = time.monotonic() - t0
    assert elapsed < 3.0, f"new controller {new} after {elapsed:.2f}s"
    # topic creation keeps working through the survivors
    for i in range(3):
        _create(cluster.bootstrap, f"after-failover-{i}", 2)
    # the old controller comes back and catches up
    cluster.start([cluster.node(old)])
    wait_until(lambda: {"after-failover-0", "after-failover-2"} <= _topics_seen_by(cluster.client_ports[old - 1]),
               15, "the restarted node to catch up")
    q = wait_until(lambda: (lambda q: q if q and all(v.log_end_offset == q.high_watermark for v in q.current_voters)
                            else None)(cluster.quorum()), 15, "every voter at the high watermark")
    assert sorted(v.replica_id for v in q.current_voters) == [1, 2, 3]


def test_two_of_three_voters_down_stops_metadata_changes_until_one_returns(cluster):
    survivor = 1
    for node_id in (2, 3):
        cluster.node(node_id).kill9()
    via = f"127.0.0.1:{cluster.client_ports[survivor - 1]}"
    time.sleep(2.0)  # past the fetch timeout: no majority, no leader that can commit
    # the survivor holds the forwarded request while no controller can be elected (as Kafka's
    # forwarding does): the client times out, or gets NOT_CONTROLLER at the broker's own deadline
    with pytest.raises((KafkaException, TimeoutError)):
        _create(via, "no-majority", 1, timeout=4)
    assert "no-majority" not in _topics_seen_by(cluster.client_ports[0])
    cluster.start([cluster.node(2)])
    wait_until(lambda: cluster.leader_id() in (1, 2), 15, "a leader again")
    _create(cluster.bootstrap, "majority-back", 1)
    wait_until(lambda: "majority-back" in _topics_seen_by(cluster.client_ports[0]), 10, "the topic on node 1")


def test_a_lagging_node_catches_up_from_a_snapshot_after_the_log_was_truncated(tmp_path):
    """Snapshots (``<offset>-<epoch>.checkpoint``) replace the log below them; a node that was down
    meanwhile gets the snapshot with FetchSnapshot, then the rest of the log (KIP-630)."""
    with Cluster(tmp_path, overrides={"metadata.log.max.record.bytes.between.snapshots": "2000",
                                      "internal.metadata.log.segment.bytes": "4096"}) as cluster:
        cluster.node(3).kill9()
        for i in range(15):
            _create(cluster.bootstrap, f"snap-{i}", 3)
        leader = cluster.leader_id()
        meta = cluster.node(leader).data_dir / "__cluster_metadata-0"
        wait_until(lambda: list(meta.glob("*.checkpoint")) and
                   min(int(p.name.split(".")[0]) for p in meta.glob("*.log")) > 0, 10,
                   "a metadata snapshot on the leader and the log below it deleted")
        cluster.start([cluster.node(3)])
        wait_until(lambda: {f"snap-{i}" for i in range(15)} <= _topics_seen_by(cluster.client_ports[2]), 15,
                   "node 3 to catch up")
        assert "loaded metadata snapshot" in cluster.node(3).log_text()
        assert list((cluster.node(3).data_dir / "__cluster_metadata-0").glob("*.checkpoint"))
    # a restart of the whole cluster rebuilds the same metadata from snapshots + log
    with cluster:
        assert {f"snap-{i}" for i in range(15)} <= _topics_seen_by(cluster.client_ports[0])


def _leaders(bootstrap: str, topic: str) -> dict[int, int]:
    md = _admin(bootstrap).list_topics(topic, timeout=10)
    return {pid: p.leader for pid, p in md.topics[topic].partitions.items()}


def test_controlled_shutdown_moves_leadership_before_the_process_exits(cluster):
    admin = _admin(cluster.bootstrap)
    admin.create_topics([NewTopic("cs", 6, 3)], operation_timeout=15)["cs"].result(15)
    wait_until(lambda: sorted(_leaders(cluster.bootstrap, "cs").values()) == [1, 1, 2, 2, 3, 3], 10, "leaders")
    victim = next(i for i in (1, 2, 3) if i != cluster.leader_id())
    t0 = time.monotonic()
    assert cluster.node(victim).stop() == 0
    assert time.monotonic() - t0 < 3.0  # no waiting for a session timeout
    assert "controlled shutdown complete" in cluster.node(victim).log_text()
    # committed before the process exited; the survivors apply it within moments
    leaders = wait_until(lambda: (lambda ls: ls if victim not in ls.values() else None)(
        _leaders(cluster.bootstrap, "cs")), 2, "the survivors to show the new leaders")
    assert -1 not in leaders.values(), leaders


def test_a_broker_without_heartbeats_is_fenced_and_loses_leadership(cluster):
    admin = _admin(cluster.bootstrap)
    admin.create_topics([NewTopic("fence", 3, 3)], operation_timeout=15)["fence"].result(15)
    victim = next(i for i in (1, 2, 3) if i != cluster.leader_id())
    t0 = time.monotonic()
    cluster.node(victim).kill9()
    wait_until(lambda: victim not in _admin(cluster.bootstrap).list_topics(timeout=10).brokers, 10,
               "the dead broker to leave the cluster metadata")
    elapsed = time.monotonic() - t0
    assert elapsed >= 2.0, f"fenced after {elapsed:.1f}s, before broker.session.timeout.ms (3 s)"
    wait_until(lambda: victim not in _leaders(cluster.bootstrap, "fence").values(), 5, "leadership to move")
    assert -1 not in _leaders(cluster.bootstrap, "fence").values()


def test_separate_roles_a_controller_only_node_and_two_broker_only_observers(tmp_path):
    """process.roles as Kafka: node 1 is the whole quorum (controller only, no client listener);
    nodes 2 and 3 are brokers that replicate the metadata log as observers and forward to it."""
    with Cluster(tmp_path, roles=["controller", "broker", "broker"]) as cluster:
        brokers = "127.0.0.1:%d,127.0.0.1:%d" % (cluster.client_ports[1], cluster.client_ports[2])
        wait_until(lambda: sorted(_admin(brokers).list_topics(timeout=10).brokers) == [2, 3], 10, "two brokers")
        _create(brokers, "roles", 4)
        # CreateTopics answers once the controller has committed the topic; the answering broker's
        # metadata image catches up on its own time (as in Kafka), so read the leaders once it has
        def leaders():
            parts = _admin(brokers).list_topics("roles", timeout=10).topics["roles"].partitions.values()
            return sorted(p.leader for p in parts)
        wait_until(lambda: len(leaders()) == 4 and -1 not in leaders(), 10, "the topic's leaders known")
        assert leaders() == [2, 2, 3, 3]
        q = cluster.quorum(via=2)
        assert q.leader_id == 1 and [v.replica_id for v in q.current_voters] == [1]
        assert sorted(o.replica_id for o in q.observers) == [2, 3]
        assert "controller" in cluster.node(1).log_text() and not list(cluster.node(1).data_dir.glob("roles-*"))
