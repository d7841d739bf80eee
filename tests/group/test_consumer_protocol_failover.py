"""A KIP-848 consumer group (librdkafka, ``group.protocol=consumer``) keeps its members and their
assignment when its coordinator is killed with SIGKILL in a three-node cluster: the broker that
takes over ``__consumer_offsets`` rebuilds the group from its ConsumerGroup* records, the members
go on heartbeating there with the same member ids and epochs, and every record is read."""

from __future__ import annotations

import time

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

from kcompat.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from kcompat.testing import wire
from tests.group.test_failover_cluster import coordinator
from tests.support.cluster import Cluster, wait_until

GROUP = "kip848-failover"


def describe(cluster: Cluster, node: int):
    r = wire.call(f"127.0.0.1:{cluster.client_ports[node - 1]}", ConsumerGroupDescribeRequest(
        group_ids=[GROUP], include_authorized_operations=False), 1)
    return r.groups[0]


def poll_all(consumers, seen: set[int], until: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while len(seen) < until:
        assert time.monotonic() < deadline, f"read {len(seen)} of {until} records"
        for c in consumers:
            m = c.poll(0.05)
            if m is not None and m.error() is None:
                seen.add(int(m.value()))


def test_consumer_group_survives_a_kill9_of_its_coordinator(tmp_path):
    overrides = {"offsets.topic.replication.factor": "3", "group.consumer.heartbeat.interval.ms": "500",
                 "group.consumer.min.heartbeat.interval.ms": "500", "group.consumer.session.timeout.ms": "20000",
                 "group.consumer.min.session.timeout.ms": "20000"}
    with Cluster(tmp_path, 3, overrides=overrides) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap})  # alive until the result arrives
        admin.create_topics([NewTopic("t", 4, 3)])["t"].result(15)
        producer = ck.Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
        consumers = [ck.Consumer({"bootstrap.servers": c.bootstrap, "group.id": GROUP, "group.protocol": "consumer",
                                  "auto.offset.reset": "earliest"}) for _ in range(2)]
        try:
            for consumer in consumers:
                consumer.subscribe(["t"])
            for i in range(400):
                producer.produce("t", b"%d" % i, partition=i % 4)
            assert producer.flush(30) == 0
            seen: set[int] = set()
            poll_all(consumers, seen, 400, 60)
            killed = wait_until(lambda: coordinator(c, GROUP), 10, "the group's coordinator")
            before = describe(c, killed)
            assert before.group_state == "Stable" and len(before.members) == 2
            c.node(killed).kill9()
            new = wait_until(lambda: coordinator(c, GROUP) not in (None, killed) and coordinator(c, GROUP), 30,
                             "a new coordinator")
            for i in range(400, 800):
                producer.produce("t", b"%d" % i, partition=i % 4)
            assert producer.flush(60) == 0
            poll_all(consumers, seen, 800, 90)
            after = wait_until(lambda: (d := describe(c, new)).error_code == 0 and d.group_state == "Stable" and d,
                               30, "the group stable on its new coordinator")
            assert {m.member_id for m in after.members} == {m.member_id for m in before.members}
            assert after.group_epoch == before.group_epoch            # nobody was fenced or rejoined
        finally:
            for consumer in consumers:
                consumer.close()
