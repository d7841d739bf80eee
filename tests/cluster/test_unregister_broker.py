"""Apache Kafka 4.3.1's ``kafka-cluster.sh unregister`` (``org.apache.kafka.tools.ClusterTool``,
from Kafka's jars resolved from Maven Central by the conformance suite) against a 3-node kcompat
cluster: UnregisterBroker, sent to a broker and forwarded to the active controller, removes a
stopped broker whose partitions have other in-sync replicas, after which DescribeCluster and
Metadata list the two others and the topic still takes and serves records; an unknown id is
BROKER_ID_NOT_REGISTERED, as is a second unregistration of the same broker; a broker that is the
last in-sync replica of a partition is refused (INVALID_REQUEST naming the partition) and stays
registered."""

from __future__ import annotations

import uuid

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from conformance import maven
from conformance.clients.java import JavaTools
from tests.support.cluster import Cluster, wait_until

CLUSTER_TOOL = "org.apache.kafka.tools.ClusterTool"


@pytest.fixture(scope="module")
def kafka_lib():
    return maven.resolve_kafka("4.3.1")


def _unregister(tools: JavaTools, bootstrap: str, broker_id: int):
    return tools.run(CLUSTER_TOOL, ["unregister", "--bootstrap-server", bootstrap, "--id", broker_id],
                     check=False, timeout=120)


def _brokers(admin: AdminClient) -> tuple[list[int], list[int]]:
    """(DescribeCluster's broker ids, Metadata's broker ids)."""
    described = sorted(n.id for n in admin.describe_cluster(request_timeout=30).result(60).nodes)
    return described, sorted(admin.list_topics(timeout=30).brokers)


def _isrs(admin: AdminClient, topic: str) -> dict[int, list[int]]:
    t = admin.list_topics(topic, timeout=30).topics[topic]
    return {p.id: sorted(p.isrs) for p in t.partitions.values()} if t.error is None else {}


def _produce_and_consume(bootstrap: str, topic: str, n: int) -> None:
    """``n`` records acknowledged by acks=all and read back from every partition."""
    values = [b"v%05d" % i for i in range(n)]
    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                            "message.timeout.ms": 60000})
    errors = []
    for v in values:
        producer.produce(topic, v, key=v, on_delivery=lambda err, _m: err is not None and errors.append(err))
    assert producer.flush(90) == 0 and not errors, errors[:3]
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                            "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    read: list[bytes] = []
    try:
        def drained():   # every record ready, not one per wait_until interval (50 ms each)
            read.extend(m.value() for m in consumer.consume(1000, 0.5) if m.error() is None)
            return set(values) <= set(read)
        wait_until(drained, 90, f"all {n} records read back from {topic}")
    finally:
        consumer.close()


def test_kafka_cluster_tool_unregisters_a_stopped_broker(tmp_path, kafka_lib):
    tools = JavaTools(str(kafka_lib), tmp_path)
    with Cluster(tmp_path) as cluster:
        cluster.wait_for_brokers()
        controller = wait_until(cluster.leader_id, 30, "an active controller")
        gone = next(n for n in (3, 2, 1) if n != controller)
        survivor = next(n for n in (1, 2, 3) if n not in (gone, controller))
        via = f"127.0.0.1:{cluster.client_ports[survivor - 1]}"    # a broker that forwards to the controller
        admin = AdminClient({"bootstrap.servers": via})
        topic, lonely = f"rf2-{uuid.uuid4().hex[:6]}", f"rf1-{uuid.uuid4().hex[:6]}"
        for f in admin.create_topics([NewTopic(topic, 3, 2),
                                      NewTopic(lonely, 1, replica_assignment=[[gone]])]).values():
            f.result(30)
        wait_until(lambda: len(_isrs(admin, topic)) == 3 and all(len(i) == 2 for i in _isrs(admin, topic).values()),
                   60, "every partition of the RF 2 topic fully in sync")
        assert any(gone in isr for isr in _isrs(admin, topic).values())
        _produce_and_consume(via, topic, 300)

        cluster.kill(gone)
        wait_until(lambda: (lambda isrs: len(isrs) == 3 and all(gone not in i and i for i in isrs.values()))(
            _isrs(admin, topic)), 60, f"broker {gone} out of every ISR of {topic}")

        # broker `gone` is the last in-sync replica of lonely-0: refused, still registered
        refused = _unregister(tools, via, gone)
        assert not refused.ok, refused.stdout
        out = refused.stdout + refused.stderr
        assert "InvalidRequestException" in out and f"{lonely}-0" in out, out
        # (a fenced broker is listed by neither DescribeCluster nor Metadata, as in Kafka; that it is
        # still registered shows below: unregistering it later succeeds)

        # an id never registered
        unknown = _unregister(tools, via, 42)
        assert not unknown.ok, unknown.stdout
        out = unknown.stdout + unknown.stderr
        assert "BrokerIdNotRegisteredException" in out and "Broker ID 42 is not currently registered" in out, out

        admin.delete_topics([lonely])[lonely].result(30)
        done = _unregister(tools, via, gone)
        assert done.ok, done.summary()
        remaining = sorted({1, 2, 3} - {gone})
        wait_until(lambda: _brokers(admin) == (remaining, remaining), 30,
                   f"DescribeCluster and Metadata listing {remaining}")
        # the controller itself answers too: the id is no longer registered
        again = _unregister(tools, f"127.0.0.1:{cluster.client_ports[controller - 1]}", gone)
        assert not again.ok and "BrokerIdNotRegisteredException" in again.stdout + again.stderr
        _produce_and_consume(via, topic, 300)
