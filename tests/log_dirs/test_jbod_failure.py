"""A failed log dir in a 3-node cluster (KIP-112 / KIP-858): one of broker 2's two log dirs starts
failing every I/O with EIO (the fault-injection hook, ``KCOMPAT_FAULT_INJECTION=1`` and a marker
file: root ignores permissions, so chmod cannot make a dir fail). Only the partitions in that dir
go offline on broker 2: the controller, told by its heartbeat, moves their leadership away and
takes broker 2 out of their ISR; broker 2 keeps serving and replicating the partitions of its other
dir, DescribeLogDirs reports the failed dir with KAFKA_STORAGE_ERROR, and every record the producer
had acknowledged is read back."""

from __future__ import annotations

import re
import time

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient

from kcompat.log.log_dirs import IO_FAULT_MARKER
from kcompat.protocol.errors import ErrorCode as E
from kcompat.protocol.messages.describe_log_dirs import DescribeLogDirsRequest as DQ
from kcompat.protocol.messages.metadata import MetadataRequest as MQ
from kcompat.testing.wire import call
from tests.support.cluster import Cluster, wait_until

TOPIC = "jbod-fail"
FAILING = 2   # the broker whose second log dir fails
ASSIGNED = re.compile(r"broker (\d+): (\d+) replica\(s\) assigned to log dirs")


def partitions(admin: AdminClient) -> dict[int, tuple[int, list[int]]]:
    """{partition: (leader, isr)} from Metadata."""
    md = admin.list_topics(TOPIC, timeout=10).topics[TOPIC]
    return {p.id: (p.leader, sorted(p.isrs)) for p in md.partitions.values()}


def produce(bootstrap: str, start: int, n: int) -> list[bytes]:
    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                     "message.timeout.ms": 60000})
    acked: list[bytes] = []

    failed: list = []

    def done(err, msg):
        if err is None:
            acked.append(msg.value())
        else:
            failed.append((msg.partition(), err))
    for i in range(start, start + n):
        p.produce(TOPIC, b"r%06d" % i, partition=i % 6, on_delivery=done)
    assert p.flush(90) == 0
    assert not failed, failed[:3]
    return acked


def test_failed_log_dir_takes_only_its_partitions_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("KCOMPAT_FAULT_INJECTION", "1")
    # a follower that stopped fetching holds the HW (acks=all) until replica.lag.time.max.ms has
    # passed since it was last caught up, as in Kafka: 3 s instead of 30 keeps the test short
    cluster = Cluster(tmp_path, 3, overrides={"min.insync.replicas": "2", "replica.lag.time.max.ms": "3000"})
    for n in cluster.nodes:
        n.overrides["log.dirs"] = f"{n.data_dir},{n.data_dir}-b"
    with cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([ck.admin.NewTopic(TOPIC, 6, 3)])[TOPIC].result(30)
        node = cluster.node(FAILING)
        failing_dir = f"{node.data_dir}-b"

        def held() -> dict[str, set[int]]:
            return {r.log_dir: {p.partition_index for t in r.topics if t.name == TOPIC for p in t.partitions}
                    for r in call(node.bootstrap, DQ(topics=None), 4).results}
        wait_until(lambda: sum(map(len, held().values())) == 6, 30, "broker 2 hosts its 6 replicas")
        held = held()
        on_failing, on_other = held[failing_dir], held[str(node.data_dir)]
        assert len(on_failing) == len(on_other) == 3, held

        def assigned() -> int:   # the controller knows which dir holds each of broker 2's replicas
            return sum(int(n) for c in cluster.nodes for b, n in ASSIGNED.findall(c.log_text()) if int(b) == FAILING)
        wait_until(lambda: assigned() >= 6, 30, "broker 2's replicas assigned to their dirs")
        wait_until(lambda: all(len(isr) == 3 for _, isr in partitions(admin).values()), 30, "full ISRs")
        before = partitions(admin)
        acked = produce(cluster.bootstrap, 0, 300)

        (node.data_dir.parent / f"{node.data_dir.name}-b" / IO_FAULT_MARKER).touch()
        wait_until(lambda: node.log_text().count("fails every I/O from now on") == 3, 30, "the fault armed")
        acked += produce(cluster.bootstrap, 300, 600)   # the next I/O in that dir fails

        def moved() -> bool:
            now = partitions(admin)
            return all(now[i][0] != FAILING and FAILING not in now[i][1] for i in on_failing)
        wait_until(moved, 30, "leadership and ISR of the failed dir's partitions moved off broker 2")
        after = partitions(admin)
        for i in on_other:   # the other dir keeps serving: broker 2 stays in the ISR, keeps its leaderships
            assert FAILING in after[i][1], (i, after)
            if before[i][0] == FAILING:
                assert after[i][0] == FAILING, (i, before, after)
        dirs = {r.log_dir: r for r in call(node.bootstrap, DQ(topics=None), 4).results}
        assert dirs[failing_dir].error_code == E.KAFKA_STORAGE_ERROR and dirs[failing_dir].topics == []
        good = dirs[str(node.data_dir)]
        assert good.error_code == E.NONE
        assert {p.partition_index for t in good.topics if t.name == TOPIC for p in t.partitions} == on_other
        assert "is offline" in node.log_text() and node.proc.poll() is None
        for c in cluster.nodes:   # every node's Metadata shows broker 2's replicas there as offline
            wait_until(lambda c=c: {p.partition_index: p.offline_replicas for p in call(
                c.bootstrap, MQ(topics=[MQ.MetadataRequestTopic(name=TOPIC)]), 12).topics[0].partitions} ==
                {i: [FAILING] if i in on_failing else [] for i in range(6)}, 10, f"offline replicas on node {c}")

        acked += produce(cluster.bootstrap, 900, 300)
        c = ck.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "check", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
        c.assign([ck.TopicPartition(TOPIC, i, 0) for i in range(6)])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < len(acked) and time.monotonic() < deadline:
            for m in c.consume(500, 1.0):
                assert m.error() is None, m.error()
                got.append(m.value())
        c.close()
        assert sorted(got) == sorted(acked)
