"""DescribeTopicPartitions (key 75) against a real broker: pagination with Kafka's cursor rules,
the errors of named topics and bad cursors, and ``kafka-topics --describe`` of Kafka 3.9.2 and 4.3.1
(which use it when the broker offers it) printing every partition."""

from __future__ import annotations

import subprocess

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from conformance import maven
from conformance.reference import java_command
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.describe_topic_partitions import DescribeTopicPartitionsRequest as Q
from kcompat.testing import wire
from tests.support.broker_process import BrokerProcess

TOPICS = {"Alpha": 3, "Bravo": 2, "Charlie": 1}     # upper case: sorted before the internal topics


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """A broker of its own: no topics but these three (no internal topic is created)."""
    with BrokerProcess(tmp_path_factory.mktemp("dtp") / "data") as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for f in admin.create_topics([NewTopic(t, n, 1) for t, n in TOPICS.items()]).values():
            f.result(30)
        yield b


def describe(broker, topics=(), limit=2000, cursor=None):
    req = Q(topics=[Q.TopicRequest(name=t) for t in topics], response_partition_limit=limit,
            cursor=None if cursor is None else Q.Cursor(topic_name=cursor[0], partition_index=cursor[1]))
    return wire.call(broker.bootstrap, req, 0)


def shape(resp):
    """[(topic, error, [partitions])], next cursor."""
    cur = resp.next_cursor
    return ([(t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in resp.topics],
            None if cur is None else (cur.topic_name, cur.partition_index))


def test_every_topic_in_pages_with_kafkas_cursor(broker):
    assert shape(describe(broker)) == ([("Alpha", 0, [0, 1, 2]), ("Bravo", 0, [0, 1]), ("Charlie", 0, [0])], None)
    first = describe(broker, limit=4)
    assert shape(first) == ([("Alpha", 0, [0, 1, 2]), ("Bravo", 0, [0])], ("Bravo", 1))
    assert shape(describe(broker, limit=4, cursor=("Bravo", 1))) == ([("Bravo", 0, [1]), ("Charlie", 0, [0])], None)
    # the limit falls exactly at a topic's end: the cursor names the next topic at partition 0
    assert shape(describe(broker, limit=3)) == ([("Alpha", 0, [0, 1, 2])], ("Bravo", 0))
    p = describe(broker, ["Alpha"]).topics[0].partitions[0]
    assert (p.leader_id, p.replica_nodes, p.isr_nodes, p.offline_replicas, p.eligible_leader_replicas) == \
        (1, [1], [1], [], [])


def test_named_topics_and_bad_cursors(broker):
    got, cursor = shape(describe(broker, ["Charlie", "missing", "bad name!"]))
    assert got == [("Charlie", 0, [0]), ("bad name!", ErrorCode.INVALID_TOPIC_EXCEPTION, []),
                   ("missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, [])] and cursor is None
    # only topics at or after the cursor's topic; the cursor's topic must be one of the named ones
    assert shape(describe(broker, ["Alpha", "Charlie"], cursor=("Charlie", 0)))[0] == [("Charlie", 0, [0])]
    bad = describe(broker, ["Alpha"], cursor=("Charlie", 0))
    assert [(t.name, t.error_code) for t in bad.topics] == [("Alpha", ErrorCode.INVALID_REQUEST)]
    negative = describe(broker, ["Alpha"], cursor=("Alpha", -1))
    assert [(t.name, t.error_code) for t in negative.topics] == [("Alpha", ErrorCode.INVALID_REQUEST)]


@pytest.mark.timeout(1200)  # the first run on a machine resolves Kafka's jars from Maven Central
@pytest.mark.parametrize("version", ["3.9.2", "4.3.1"])
def test_kafka_topics_describe(broker, version):
    lib = maven.resolve_kafka(version)
    out = subprocess.run(java_command(lib, "org.apache.kafka.tools.TopicCommand",
                                      ["--bootstrap-server", broker.bootstrap, "--describe",
                                       "--partition-size-limit-per-response", "2"]),   # several pages
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line.split() for line in out.stdout.splitlines() if "\tPartition: " in line or " Partition: " in line]
    described = sorted((r[r.index("Topic:") + 1], int(r[r.index("Partition:") + 1])) for r in rows)
    assert described == sorted((t, p) for t, n in TOPICS.items() for p in range(n)), out.stdout
