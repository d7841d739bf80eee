"""Racks (KIP-36 placement as Kafka's KRaft controller does it) on a 6-node cluster of three racks,
two nodes each (nodes 1-3 also the controller quorum, one voter per rack): topics with replication
factor 3 get one replica on each rack for every partition, also for partitions added later, the
racks show in DescribeCluster and in the replicas of described topics, Kafka's
``kafka-reassign-partitions --generate`` proposes plans with one replica per rack, and losing a whole
rack (kill -9 of both its nodes) leaves every partition a leader while an acks=all producer with
min.insync.replicas=2 carries on and loses nothing it had acknowledged.

A mixed configuration (some brokers with a rack, some without) is refused only where Kafka refuses
it: KRaft's controller places replicas with "no rack" as one more rack (its StripedReplicaPlacer keys
racks by ``Optional<String>``), and the reassignment tool's ``--generate`` fails with "Not all
brokers have rack information" unless given ``--disable-rack-aware``.

The reassignment tool is Kafka 4.3.1's, whose ``--generate`` also reads every replica's log
directory (DescribeLogDirs) from every broker."""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from conformance import maven
from conformance.reference import java_command
from kcompat.testing.cluster import wait_until
from tests.support.racks import rack_cluster, rack_of

ROLES = ["broker,controller"] * 3 + ["broker"] * 3
REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
TOOL_VERSION = "4.3.1"   # its --generate reads every replica's log dir (DescribeLogDirs)


def partitions(admin: AdminClient, topic: str):
    return admin.list_topics(topic, timeout=10).topics[topic].partitions


def wait_served(cluster, topics: list[str], count: int) -> None:
    """Wait until every node's metadata has ``count`` partitions for each of ``topics``:
    CreateTopics answers once the controller has committed them, and each broker's metadata
    follows a moment later (as in Kafka), so a Metadata request right after may not know them."""
    for port in cluster.client_ports:
        node = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        wait_until(lambda: all(len(partitions(node, t)) == count for t in topics), 30,
                   f"the new topics in the metadata of the node at {port}")


def racks_of_replicas(admin: AdminClient, topic: str) -> list[list[str | None]]:
    """Per partition, the racks of its replicas as the Admin API describes them (the replica Nodes
    carry the rack DescribeCluster/Metadata gave for each broker)."""
    desc = admin.describe_topics(ck.TopicCollection([topic]))[topic].result(30)
    return [[n.rack for n in p.replicas] for p in desc.partitions]


def generate(lib, bootstrap: str, tmp_path, topics: list[str], brokers: str, *extra: str):
    """``kafka-reassign-partitions --generate`` of Kafka ``TOOL_VERSION``: (return code, proposed
    {(topic, partition): replicas} or None, stderr+stdout)."""
    f = tmp_path / f"move-{uuid.uuid4().hex[:6]}.json"
    f.write_text(json.dumps({"version": 1, "topics": [{"topic": t} for t in topics]}))
    out = subprocess.run(java_command(lib, REASSIGN, ["--bootstrap-server", bootstrap, "--generate",
                                                      "--topics-to-move-json-file", str(f),
                                                      "--broker-list", brokers, *extra]),
                         capture_output=True, text=True, timeout=180)
    text = out.stdout + out.stderr
    marker = "Proposed partition reassignment configuration"
    if out.returncode != 0 or marker not in out.stdout:
        return out.returncode, None, text
    plan = json.loads(out.stdout.split(marker, 1)[1].strip().splitlines()[0])
    return out.returncode, {(p["topic"], p["partition"]): p["replicas"] for p in plan["partitions"]}, text


@pytest.mark.timeout(1200)  # the first run on a machine resolves Kafka's jars from Maven Central
def test_one_replica_per_rack_and_a_lost_rack_loses_nothing(tmp_path):
    lib = maven.resolve_kafka(TOOL_VERSION)
    cluster = rack_cluster(tmp_path, True, n=6, roles=ROLES).start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        topics = [f"racked-{i}-{uuid.uuid4().hex[:6]}" for i in range(3)]
        for f in admin.create_topics([NewTopic(t, 12, 3) for t in topics]).values():
            f.result(60)
        wait_served(cluster, topics, 12)
        for t in topics:
            parts = partitions(admin, t)
            assert len(parts) == 12
            for p in parts.values():
                assert sorted(rack_of(b) for b in p.replicas) == ["rack-a", "rack-b", "rack-c"], (t, p)
        leaders = [p.leader for t in topics for p in partitions(admin, t).values()]
        assert all(leaders.count(node) == 6 for node in range(1, 7)), leaders      # 36 leaders over 6 nodes
        # the racks as clients see them: DescribeCluster, and each replica of a described topic
        nodes = admin.describe_cluster().result(30).nodes
        assert sorted((n.id, n.rack) for n in nodes) == [(b, rack_of(b)) for b in range(1, 7)]
        assert all(sorted(r) == ["rack-a", "rack-b", "rack-c"] for r in racks_of_replicas(admin, topics[0]))
        # added partitions (CreatePartitions) keep to the racks
        grown = topics[1]
        admin.create_partitions([NewPartitions(grown, 18)])[grown].result(60)
        wait_until(lambda: len(partitions(admin, grown)) == 18, 30, "the added partitions in the metadata")
        for i, p in partitions(admin, grown).items():
            assert sorted(rack_of(b) for b in p.replicas) == ["rack-a", "rack-b", "rack-c"], (i, p)
        # reassignment plans: Kafka's tool reads the racks from DescribeCluster and keeps to them
        code, plan, text = generate(lib, cluster.bootstrap, tmp_path, topics, "1,2,3,4,5,6")
        assert code == 0 and plan is not None, text[-3000:]
        assert len(plan) == 12 + 18 + 12
        assert all(sorted(rack_of(b) for b in r) == ["rack-a", "rack-b", "rack-c"] for r in plan.values()), plan

        topic = topics[0]
        wait_until(lambda: all(len(p.isrs) == 3 for p in partitions(admin, topic).values()), 30, "full ISRs")
        acked: dict[int, list[bytes]] = {}
        errors: list = []
        stop = threading.Event()
        producer = ck.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                                "linger.ms": 5, "message.timeout.ms": 120000})

        def on_delivery(err, msg):
            if err is None:
                acked.setdefault(msg.partition(), []).append(msg.value())
            else:
                errors.append(err)

        def load():
            i = 0
            while not stop.is_set():
                producer.produce(topic, b"%07d" % i, partition=i % 12, on_delivery=on_delivery)
                i += 1
                producer.poll(0.001)
            producer.flush(150)

        def count():
            return sum(len(v) for v in acked.values())
        thread = threading.Thread(target=load, daemon=True)
        thread.start()
        wait_until(lambda: count() >= 2000, 60, "records acknowledged before the rack fails")
        for node in (1, 4):                                    # rack-a, one voter and one broker
            cluster.kill(node)
        before = count()
        wait_until(lambda: count() >= before + 3000, 90, "acks=all producing on two racks")
        survivors = AdminClient({"bootstrap.servers": survivors_bootstrap(cluster)})
        wait_until(lambda: all(p.leader in (2, 3, 5, 6) for t in topics
                               for p in partitions(survivors, t).values()), 30, "a leader for every partition")
        stop.set()
        thread.join(180)
        assert not errors, errors[:3]
        consumer = ck.Consumer({"bootstrap.servers": survivors_bootstrap(cluster), "group.id": "check",
                                "enable.auto.commit": False})
        consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(12)])
        read: dict[int, list[bytes]] = {}
        deadline = time.monotonic() + 120
        while sum(len(v) for v in read.values()) < count():
            assert time.monotonic() < deadline, "records missing after the rack failure"
            for m in consumer.consume(1000, 1):
                if m.error() is None:
                    read.setdefault(m.partition(), []).append(m.value())
        consumer.close()
        assert read == acked
    finally:
        cluster.stop()


def survivors_bootstrap(cluster) -> str:
    return ",".join(f"127.0.0.1:{cluster.client_ports[n - 1]}" for n in (2, 3, 5, 6))


@pytest.mark.timeout(1200)  # the first run on a machine resolves Kafka's jars from Maven Central
def test_mixed_rack_configuration_is_refused_only_by_the_reassignment_tool(tmp_path):
    """Nodes 1 and 2 on rack-a and rack-b, node 3 without a rack: CreateTopics succeeds with every
    partition on rack-a, rack-b and the rackless node (Kafka's KRaft placer: "no rack" is a rack of
    its own); DescribeCluster shows node 3 without a rack; ``--generate`` refuses the mix as Kafka's
    tool does, and plans without racks when told ``--disable-rack-aware``."""
    lib = maven.resolve_kafka(TOOL_VERSION)
    cluster = rack_cluster(tmp_path, False, no_rack=(3,)).start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        topic = f"mixed-{uuid.uuid4().hex[:6]}"
        admin.create_topics([NewTopic(topic, 6, 2)])[topic].result(60)
        wait_served(cluster, [topic], 6)
        nodes = admin.describe_cluster().result(30).nodes
        assert sorted((n.id, n.rack) for n in nodes) == [(1, "rack-a"), (2, "rack-b"), (3, None)]
        rack = {1: "rack-a", 2: "rack-b", 3: None}
        parts = partitions(admin, topic)
        assert len(parts) == 6
        for p in parts.values():       # RF 2 over three "racks": never two replicas on one
            assert len({rack[b] for b in p.replicas}) == 2, p
        assert sorted(p.leader for p in parts.values()) == [1, 1, 2, 2, 3, 3]
        code, plan, text = generate(lib, cluster.bootstrap, tmp_path, [topic], "1,2,3")
        assert code != 0 and "Not all brokers have rack information" in text, text[-3000:]
        code, plan, text = generate(lib, cluster.bootstrap, tmp_path, [topic], "1,2,3", "--disable-rack-aware")
        assert code == 0 and plan is not None and len(plan) == 6, text[-3000:]
    finally:
        cluster.stop()
