"""kcompat's cluster metadata read into Apache Kafka 4.3.1's own metadata image.

``tests/kraft/java/MetadataImageCheck.java`` (run in Java's source-file mode on Kafka 4.3.1's jars)
replays a metadata log segment or snapshot file into Kafka's ``MetadataImage``, as a Kafka broker
or ``kafka-metadata-shell.sh`` loads it, and writes the image back at its metadata.version with a
loss handler that fails on anything that version cannot represent.

kcompat wrote an empty cordoned-log-dirs list (KIP-1066) into the broker registration once the
broker caught up, which Kafka cannot represent below metadata.version 4.3-IV0:
``kafka-metadata-shell.sh --snapshot`` loaded nothing from a kcompat data dir ("Metadata has been
lost because the following could not be represented in metadata.version 3.8-IV0: the cordoned log
directories of one or more brokers"). The shell itself is not used here: its non-interactive mode
may run its command before the last batch is applied (its ``waitUntilCaughtUp`` and the
off-by-one between ``SnapshotFileReader``'s and the loader's high watermark), which showed under
load as an empty image."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from conformance import maven
from conformance.reference import java_command
from kcompat.protocol.messages.describe_quorum import DescribeQuorumRequest as DQ
from kcompat.testing import wire
from tests.support.broker_process import BrokerProcess, wait_for

CHECK = Path(__file__).parent / "java" / "MetadataImageCheck.java"


def image_of(lib, path: Path, *topics: str) -> list[str]:
    """What Kafka's image holds after replaying ``path`` (lines ``<what> <value>``); fails if the
    image cannot be written at its metadata.version."""
    cmd = java_command(lib, "MetadataImageCheck", [str(path), *topics], heap="256m")
    cmd[cmd.index("MetadataImageCheck")] = str(CHECK)   # source-file mode
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.splitlines()


@pytest.mark.timeout(1200)   # the first run on a machine resolves Kafka 4.3.1's jars from Maven Central
def test_kafkas_metadata_image_loads_kcompats_metadata_log_and_snapshot(tmp_path):
    lib = maven.resolve_kafka("4.3.1")
    data = tmp_path / "data"
    with BrokerProcess(data, {"metadata.log.max.record.bytes.between.snapshots": "1"}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("imaged", 3, 1, config={"retention.ms": "777"})])["imaged"].result(30)
        request = DQ(topics=[DQ.TopicData(topic_name="__cluster_metadata", partitions=[DQ.PartitionData(partition_index=0)])])
        committed = wire.call(b.bootstrap, request, 1).topics[0].partitions[0].high_watermark

        def snapshot():   # one taken after the topic's records: its end offset is past them
            taken = sorted(data.glob("__cluster_metadata-0/*.checkpoint"))
            return taken[-1] if taken and int(taken[-1].name.split("-")[0]) >= committed else None
        latest = wait_for(snapshot, 60, what="a metadata snapshot holding the topic")
    (segment,) = sorted(data.glob("__cluster_metadata-0/*.log"))

    for path in (segment, latest):
        lines = image_of(lib, path, "imaged")
        assert lines[1:6] == ["metadata.version 3.8-IV0", "topics [imaged]", "partitions imaged 3", "brokers [1]",
                              "configs imaged {retention.ms=777}"], path.name
