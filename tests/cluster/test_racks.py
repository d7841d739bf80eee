"""Racks (KIP-36 placement as Kafka's KRaft controller does it) on a 6-node cluster of three racks,
two nodes each (nodes 1-3 also the controller quorum, one voter per rack): topics with replication
factor 3 get one replica on each rack for every partition, and losing a whole rack (kill -9 of both
its nodes) leaves every partition a leader while an acks=all producer with min.insync.replicas=2
carries on and loses nothing it had acknowledged."""

from __future__ import annotations

import threading
import time
import uuid

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

from kcompat.testing.cluster import wait_until
from tests.support.racks import rack_cluster, rack_of

ROLES = ["broker,controller"] * 3 + ["broker"] * 3


def partitions(admin: AdminClient, topic: str):
    return admin.list_topics(topic, timeout=10).topics[topic].partitions


def test_one_replica_per_rack_and_a_lost_rack_loses_nothing(tmp_path):
    cluster = rack_cluster(tmp_path, True, n=6, roles=ROLES).start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        topics = [f"racked-{i}-{uuid.uuid4().hex[:6]}" for i in range(3)]
        for f in admin.create_topics([NewTopic(t, 12, 3) for t in topics]).values():
            f.result(60)
        for t in topics:
            parts = partitions(admin, t)
            assert len(parts) == 12
            for p in parts.values():
                assert sorted(rack_of(b) for b in p.replicas) == ["rack-a", "rack-b", "rack-c"], (t, p)
        leaders = [p.leader for t in topics for p in partitions(admin, t).values()]
        assert all(leaders.count(node) == 6 for node in range(1, 7)), leaders      # 36 leaders over 6 nodes

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
