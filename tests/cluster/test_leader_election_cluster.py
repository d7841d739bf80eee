"""Leader elections over the wire: confluent-kafka's ``AdminClient.elect_leaders`` (ElectLeaders,
KIP-460) against real kcompat processes, and ``unclean.leader.election.enable`` acting on
unfencing and on a config change, as Kafka 3.9 KRaft does.

Node 1 is the whole controller quorum (controller only), nodes 2 and 3 are brokers, so both
brokers can be down while metadata keeps changing.
"""

from __future__ import annotations

from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.elect_leaders import ElectLeadersRequest as Q
from kcompat.testing import wire
from tests.support.cluster import Cluster, wait_until


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000})


def _elect(bootstrap: str, kind: ElectionType, *tps: tuple[str, int]) -> dict:
    """{(topic, partition): librdkafka's error name or None}."""
    admin = _admin(bootstrap)  # keep the handle alive until the result arrives
    result = admin.elect_leaders(kind, [TopicPartition(t, p) for t, p in tps]).result(timeout=15)
    return {(tp.topic, tp.partition): None if e is None else e.name() for tp, e in result.items()}


def _partition(bootstrap: str, topic: str):
    md = _admin(bootstrap).list_topics(topic, timeout=10)
    p = md.topics[topic].partitions.get(0)   # None until the answering broker applied the topic
    return None if p is None else (p.leader, sorted(p.isrs))


def test_preferred_and_unclean_elections_and_unclean_config(tmp_path):
    with Cluster(tmp_path, roles=["controller", "broker", "broker"]) as cluster:
        try:
            _scenario(cluster)
        finally:  # brokers first: with the quorum gone their controlled shutdown would wait
            cluster.node(3).stop()
            cluster.node(2).stop()


def _scenario(cluster: Cluster) -> None:
    both = "127.0.0.1:%d,127.0.0.1:%d" % (cluster.client_ports[1], cluster.client_ports[2])
    only2 = "127.0.0.1:%d" % cluster.client_ports[1]
    only3 = "127.0.0.1:%d" % cluster.client_ports[2]
    wait_until(lambda: sorted(_admin(both).list_topics(timeout=10).brokers) == [2, 3], 10, "two brokers")
    admin = _admin(both)
    futures = admin.create_topics([NewTopic("pref", 1, replica_assignment=[[3, 2]]),
                                   NewTopic("manual", 1, replica_assignment=[[3, 2]]),
                                   NewTopic("auto", 1, replica_assignment=[[3, 2]],
                                            config={"unclean.leader.election.enable": "true"})],
                                  operation_timeout=15, request_timeout=15)
    for f in futures.values():
        f.result(15)
    wait_until(lambda: _partition(both, "pref") == (3, [2, 3]), 10, "pref led by its preferred replica")

    assert _elect(both, ElectionType.PREFERRED, ("pref", 0), ("pref", 5), ("nope", 0)) == {
        ("pref", 0): "ELECTION_NOT_NEEDED", ("pref", 5): "UNKNOWN_TOPIC_OR_PART",
        ("nope", 0): "UNKNOWN_TOPIC_OR_PART"}
    assert _elect(both, ElectionType.UNCLEAN, ("pref", 0)) == {("pref", 0): "ELECTION_NOT_NEEDED"}
    # v0 (no election type, no top-level error) for all partitions: only those needing an election
    # are listed; v1 with an unknown election type; both forwarded from broker 2 to the controller
    every = wire.call(only2, Q(topic_partitions=None), 0)
    assert sorted((t.topic, t.partition_result) for t in every.replica_election_results) == \
        [("auto", []), ("manual", []), ("pref", [])]
    bad = wire.call(only2, Q(election_type=7, topic_partitions=[Q.TopicPartitions(topic="pref", partitions=[0])]), 1)
    assert bad.error_code == ErrorCode.INVALID_REQUEST
    assert [(r.topic, [(p.partition_id, p.error_code) for p in r.partition_result])
            for r in bad.replica_election_results] == [("pref", [(0, ErrorCode.INVALID_REQUEST)])]

    # broker 3 shuts down cleanly: 2 leads; the preferred replica is not available
    cluster.node(3).stop()
    wait_until(lambda: _partition(only2, "pref") == (2, [2]), 10, "leadership to move to 2")
    assert _elect(only2, ElectionType.PREFERRED, ("pref", 0)) == {("pref", 0): "PREFERRED_LEADER_NOT_AVAILABLE"}

    # broker 2 goes too (the partitions keep ISR [2], no leader), then 3 comes back out of sync
    cluster.node(2).stop()
    cluster.node(3).start()
    wait_until(lambda: _partition(only3, "auto") == (3, [3]), 10, "unclean election on unfencing")
    assert _partition(only3, "manual") == (-1, [2]) and _partition(only3, "pref") == (-1, [2])

    # an unclean ElectLeaders elects the live out-of-sync replica; a preferred one does not
    assert _elect(only3, ElectionType.PREFERRED, ("manual", 0)) == \
        {("manual", 0): "PREFERRED_LEADER_NOT_AVAILABLE"}
    assert _elect(only3, ElectionType.UNCLEAN, ("manual", 0)) == {("manual", 0): None}
    assert _partition(only3, "manual") == (3, [3])

    # turning the config on elects within a periodic pass
    r = ConfigResource("topic", "pref", incremental_configs=[ConfigEntry(
        "unclean.leader.election.enable", "true", incremental_operation=AlterConfigOpType.SET)])
    admin3 = _admin(only3)
    admin3.incremental_alter_configs([r])[r].result(15)
    wait_until(lambda: _partition(only3, "pref") == (3, [3]), 5, "unclean election after the config change")
    assert _elect(only3, ElectionType.UNCLEAN, ("pref", 0)) == {("pref", 0): "ELECTION_NOT_NEEDED"}


def test_auto_leader_rebalance_moves_leadership_back_to_the_preferred_replica(tmp_path):
    """auto.leader.rebalance.enable (default true) with a 1 s leader.imbalance.check.interval.seconds:
    once the restarted preferred replica is back in the ISR, it leads again."""
    with Cluster(tmp_path, roles=["controller", "broker", "broker"],
                 overrides={"leader.imbalance.check.interval.seconds": "1"}) as cluster:
        try:
            only2 = "127.0.0.1:%d" % cluster.client_ports[1]
            both = "%s,127.0.0.1:%d" % (only2, cluster.client_ports[2])
            wait_until(lambda: sorted(_admin(both).list_topics(timeout=10).brokers) == [2, 3], 10, "two brokers")
            admin = _admin(both)
            admin.create_topics([NewTopic("bal", 1, replica_assignment=[[3, 2]])],
                                operation_timeout=15, request_timeout=15)["bal"].result(15)
            wait_until(lambda: _partition(both, "bal") == (3, [2, 3]), 10, "bal led by 3")
            cluster.node(3).stop()
            wait_until(lambda: _partition(only2, "bal") == (2, [2]), 10, "leadership to move to 2")
            cluster.node(3).start()
            wait_until(lambda: _partition(both, "bal") == (3, [2, 3]), 15, "leadership back on 3")
            assert "auto leader rebalance: 1 partition(s)" in cluster.node(1).log_text()
        finally:
            cluster.node(3).stop()
            cluster.node(2).stop()
