"""kcompat's cluster metadata log read by Apache Kafka 4.3.1's ``kafka-metadata-shell.sh``
(``org.apache.kafka.shell.MetadataShell --snapshot``), which replays the records into Kafka's own
metadata image and refuses an image that cannot be written at its ``metadata.version``.

kcompat wrote an empty cordoned-log-dirs list (KIP-1066) into the broker registration once the
broker caught up, which Kafka cannot represent below metadata.version 4.3-IV0: the shell loaded
nothing ("Metadata has been lost because the following could not be represented in
metadata.version 3.8-IV0: the cordoned log directories of one or more brokers"). Now the image
loads and shows what kcompat wrote: the topic and its partitions, its config, the features and
the broker. A metadata snapshot kcompat writes (``<offset>-<epoch>.checkpoint``) loads the same way."""

from __future__ import annotations

import subprocess

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from conformance import maven
from conformance.reference import java_command
from kcompat.protocol.messages.describe_quorum import DescribeQuorumRequest as DQ
from kcompat.testing import wire
from tests.support.broker_process import BrokerProcess, wait_for


def _shell(lib, log, *command: str) -> str:
    r = subprocess.run(java_command(lib, "org.apache.kafka.shell.MetadataShell", ["--snapshot", str(log), *command]),
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


@pytest.mark.timeout(1200)   # the first run on a machine resolves Kafka 4.3.1's jars from Maven Central
def test_kafka_metadata_shell_loads_kcompats_metadata_log(tmp_path):
    lib = maven.resolve_shell("4.3.1")
    data = tmp_path / "data"
    with BrokerProcess(data) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("shelltopic", 3, 1, config={"retention.ms": "12345"})])["shelltopic"].result(30)
    (log,) = sorted(data.glob("__cluster_metadata-0/*.log"))

    assert _shell(lib, log, "ls", "/image/topics/byName").split() == ["shelltopic"]
    assert _shell(lib, log, "ls", "/image/topics/byName/shelltopic").split() == ["0", "1", "2", "id", "name"]
    partition = _shell(lib, log, "cat", "/image/topics/byName/shelltopic/0")
    assert "replicas=[1]" in partition and "isr=[1]" in partition and "leader=1" in partition
    assert _shell(lib, log, "cat", "/image/configs/TOPIC:shelltopic/retention.ms").strip() == "12345"
    assert _shell(lib, log, "cat", "/image/features/metadataVersion").strip() == "Optional[3.8-IV0]"
    assert "BrokerRegistration(id=1" in _shell(lib, log, "tree", "/image/cluster/brokers")


@pytest.mark.timeout(1200)
def test_kafka_metadata_shell_loads_a_kcompat_metadata_snapshot(tmp_path):
    lib = maven.resolve_shell("4.3.1")
    data = tmp_path / "data"
    with BrokerProcess(data, {"metadata.log.max.record.bytes.between.snapshots": "1"}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("snaptopic", 2, 1, config={"retention.ms": "777"})])["snaptopic"].result(30)
        request = DQ(topics=[DQ.TopicData(topic_name="__cluster_metadata", partitions=[DQ.PartitionData(partition_index=0)])])
        committed = wire.call(b.bootstrap, request, 1).topics[0].partitions[0].high_watermark

        def snapshot():   # one taken after the topic's records: its end offset is past them
            taken = sorted(data.glob("__cluster_metadata-0/*.checkpoint"))
            return taken[-1] if taken and int(taken[-1].name.split("-")[0]) >= committed else None
        latest = wait_for(snapshot, 60, what="a metadata snapshot holding the topic")

    assert _shell(lib, latest, "ls", "/image/topics/byName").split() == ["snaptopic"]
    assert _shell(lib, latest, "cat", "/image/configs/TOPIC:snaptopic/retention.ms").strip() == "777"
    assert _shell(lib, latest, "cat", "/image/features/metadataVersion").strip() == "Optional[3.8-IV0]"
    assert _shell(lib, latest, "ls", "/image/cluster/brokers").split() == ["1"]
