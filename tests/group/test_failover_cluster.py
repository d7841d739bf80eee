"""The group coordinator moves with the leader of its ``__consumer_offsets`` partition: a
three-node cluster (replication factor 3), offsets committed through confluent-kafka, the
coordinator's process killed with SIGKILL. Every commit that was acknowledged is still there when
another broker took over (commits are answered only once replicated), commits go on there, and
nothing goes backwards when the killed broker comes back as a follower."""

from __future__ import annotations

import time

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

from kcompat.protocol.messages.find_coordinator import FindCoordinatorRequest
from kcompat.testing import wire
from tests.support.cluster import Cluster, wait_until


def coordinator(cluster: Cluster, key: str, key_type: int = 0) -> int | None:
    for port, node in zip(cluster.client_ports, cluster.nodes):
        if node.proc is None:
            continue
        try:
            r = wire.call(f"127.0.0.1:{port}", FindCoordinatorRequest(key=key, key_type=key_type), 1)
        except OSError:
            continue
        if r.error_code == 0:
            return r.node_id
    return None


RETRIABLE = {ck.KafkaError.NOT_COORDINATOR, ck.KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
             ck.KafkaError.COORDINATOR_NOT_AVAILABLE, ck.KafkaError.REQUEST_TIMED_OUT}


def commit(consumer, topic: str, offset: int) -> None:
    """A synchronous commit, retried as an application does: librdkafka hands coordinator errors
    back (a new coordinator loading, or one not yet known to the broker answering)."""
    for _ in range(150):
        try:
            consumer.commit(offsets=[ck.TopicPartition(topic, 0, offset)], asynchronous=False)
            return
        except ck.KafkaException as e:
            if e.args[0].code() not in RETRIABLE:
                raise
            time.sleep(0.2)
    raise AssertionError(f"could not commit offset {offset}")


def committed(consumer, topic: str) -> int:
    """The committed offset; a retriable coordinator error (the coordinator is moving, as after
    the kill) is retried, as Kafka clients do, for up to 30 s."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return consumer.committed([ck.TopicPartition(topic, 0)], timeout=30)[0].offset
        except ck.KafkaException as e:
            if e.args[0].code() not in RETRIABLE or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_committed_offsets_survive_a_kill9_of_the_coordinator(tmp_path):
    with Cluster(tmp_path, 3, overrides={"offsets.topic.replication.factor": "3"}) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap})  # alive until the result arrives
        admin.create_topics([NewTopic("t", 1, 3)])["t"].result(15)
        consumer = ck.Consumer({"bootstrap.servers": c.bootstrap, "group.id": "g", "enable.auto.commit": False})
        try:
            for n in range(1, 31):
                commit(consumer, "t", n)
            killed = wait_until(lambda: coordinator(c, "g"), 10, "a group coordinator")
            c.node(killed).kill9()
            assert committed(consumer, "t") == 30
            assert wait_until(lambda: coordinator(c, "g") not in (None, killed), 30, "a new coordinator")
            for n in range(31, 41):
                commit(consumer, "t", n)
            assert committed(consumer, "t") == 40
            c.start([c.node(killed)])
            c.wait_for_brokers(20)
            assert committed(consumer, "t") == 40
        finally:
            consumer.close()
