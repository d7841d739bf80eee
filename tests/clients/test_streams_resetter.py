"""Kafka 4.3.1's ``kafka-streams-application-reset.sh`` (``org.apache.kafka.tools.StreamsResetter``)
against kcompat, for a Kafka Streams application of the classic protocol that is not running: its
committed input offsets are reset (a dry run first, then ``--to-offset``) and its internal topics
(the ``<application.id>-...-changelog`` / ``-repartition`` topics) deleted. Every line printed is
what Kafka 4.3.1 printed for the same requests (probed side by side)."""

from __future__ import annotations

import subprocess

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conformance import maven
from conformance.reference import java_command
from tests.support.broker_process import BrokerProcess, wait_for

APP = "wc"
STORE = f"{APP}-KSTREAM-AGGREGATE-STATE-STORE-0000000003"
INTERNAL = [f"{STORE}-changelog", f"{STORE}-repartition"]


def _reset(lib, bootstrap: str, *args: str) -> list[str]:
    r = subprocess.run(java_command(lib, "org.apache.kafka.tools.StreamsResetter",
                                    ["--bootstrap-server", bootstrap, "--application-id", APP, "--input-topics", "in",
                                     *args]), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return [" ".join(line.split()) for line in r.stdout.splitlines() if line.strip()]


@pytest.mark.timeout(1200)   # the first run on a machine resolves Kafka 4.3.1's jars from Maven Central
def test_streams_resetter_resets_input_offsets_and_deletes_internal_topics(tmp_path):
    lib = maven.resolve_kafka("4.3.1")
    with BrokerProcess(tmp_path / "data") as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        for f in admin.create_topics([NewTopic(t, 2, 1) for t in ["in", *INTERNAL]]).values():
            f.result(30)
        p = Producer({"bootstrap.servers": b.bootstrap})
        for i in range(10):
            p.produce("in", b"x", partition=i % 2)
        assert p.flush(30) == 0
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": APP})
        c.commit(offsets=[TopicPartition("in", 0, 5), TopicPartition("in", 1, 5)], asynchronous=False)
        c.close()

        steps = ["Reset-offsets for input topics [in]",
                 f"Following input topics offsets will be reset to (for consumer group {APP})"]
        deleting = [f"Deleting inferred internal topics [{', '.join(INTERNAL)}]", "Done."]
        assert _reset(lib, b.bootstrap, "--to-earliest", "--dry-run") == [
            "----Dry run displays the actions which will be performed when running Streams Reset Tool----", *steps,
            "Topic: in Partition: 1 Offset: 0", "Topic: in Partition: 0 Offset: 0", "Done.", *deleting]
        user_topics = lambda: sorted(t for t in admin.list_topics(timeout=10).topics if not t.startswith("__"))  # noqa: E731
        assert user_topics() == sorted(["in", *INTERNAL])   # a dry run changes nothing

        assert _reset(lib, b.bootstrap, "--to-offset", "2", "--force") == [
            *steps, "Topic: in Partition: 1 Offset: 2", "Topic: in Partition: 0 Offset: 2", "Done.", *deleting]
        wait_for(lambda: user_topics() == ["in"], 30, what="the internal topics deleted")
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": APP})
        committed = c.committed([TopicPartition("in", 0), TopicPartition("in", 1)], timeout=10)
        c.close()
        assert [tp.offset for tp in committed] == [2, 2]
