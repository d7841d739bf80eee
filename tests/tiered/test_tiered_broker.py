"""Tiered storage end to end on one kcompat process with the local filesystem backend (KIP-405):
closed segments are copied once each, local disk shrinks to the tail, every record stays
readable from offset 0 by real clients."""

from __future__ import annotations

import subprocess

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kcompat.testing.ports import free_ports
from tests.broker.test_http_metrics import scrape, value
from tests.support.broker_process import BrokerProcess, wait_for
from tests.tiered.helpers import (
    TIERED_BROKER, TIERED_TOPIC, complete_segments_have_companions, consume_from_zero, local_log_bytes, local_segments,
    remote_objects,
)

RECORDS = 20_000
VALUE = 1000     # ~20 MB


@pytest.fixture(scope="module")
def tiered(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiered")
    remote = root / "remote"
    http_port = free_ports(1)[0]
    broker = BrokerProcess(root / "data", {**TIERED_BROKER, "rsm.config.dir": str(remote),
                                           "http.listeners": f"HTTP://127.0.0.1:{http_port}"}).start()
    broker.metrics_url = f"http://127.0.0.1:{http_port}/metrics"
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("tiered", 1, 1, config=TIERED_TOPIC)])["tiered"].result(30)
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.size": 64 * 1024})
        for i in range(RECORDS):
            p.produce("tiered", key=b"%d" % i, value=(b"%08d" % i) * (VALUE // 8))
            if i % 1000 == 0:
                p.poll(0)
        assert p.flush(60) == 0
        yield broker, root / "data" / "tiered-0", remote
    finally:
        broker.stop()


def test_segments_are_copied_once_and_local_disk_shrinks(tiered):
    broker, local_dir, remote = tiered
    # every closed segment ends up remote; the local log keeps only its tail
    _wait_tiered(tiered)
    assert local_log_bytes(local_dir) < 3 * int(TIERED_TOPIC["local.retention.bytes"]) // 2
    logs = remote_objects(remote / next(d.name for d in remote.iterdir() if d.name.startswith("tiered-")), "log")
    starts = sorted(int(p.name.split("-")[0]) for p in logs)
    assert starts[0] == 0
    assert len(starts) == len(set(starts)), "a segment was copied twice"
    assert complete_segments_have_companions([str(p) for p in remote.rglob("*") if p.is_file()])
    local_bases = sorted(int(f.name[:20]) for f in local_dir.glob("*.log"))
    assert local_bases[0] in starts   # local retention deletes whole copied segments only


def _expected(i: int) -> bytes:
    return (b"%08d" % i) * (VALUE // 8)


def _offset(bootstrap: str, topic: str, ts: int, version: int = 9) -> int:
    """ListOffsets ``version`` of ``topic``-0 at ``ts`` (-1 latest, -2 earliest, -4 earliest local,
    -5 latest tiered, v11: -6 earliest pending upload)."""
    from kcompat.protocol.messages.list_offsets import ListOffsetsRequest as L
    from kcompat.testing import wire
    req = L(replica_id=-1, isolation_level=0, timeout_ms=30000, topics=[L.ListOffsetsTopic(name=topic, partitions=[
        L.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=ts)])])
    part = wire.call(bootstrap, req, version).topics[0].partitions[0]
    assert part.error_code == 0
    return part.offset


def _wait_tiered(tiered):
    """Until the broker is done with the topic: every closed segment copied (the latest tiered
    offset ends just before the active segment) and local retention satisfied (dropping the
    oldest local segment would leave less than local.retention.bytes)."""
    broker, local_dir, remote = tiered
    limit = int(TIERED_TOPIC["local.retention.bytes"])

    def settled() -> bool:
        segs = local_segments(local_dir)
        return len(segs) >= 2 and _offset(broker.bootstrap, "tiered", -5) + 1 == segs[-1][0] \
            and sum(size for _b, size in segs[1:]) < limit
    wait_for(settled, timeout=90)
    assert min(int(f.name[:20]) for f in local_dir.glob("*.log")) > 0   # offset 0 is remote only


def test_confluent_kafka_reads_every_record_from_offset_0(tiered):
    _wait_tiered(tiered)
    assert consume_from_zero(tiered[0].bootstrap, "tiered", RECORDS, _expected) == (0, RECORDS)


def test_kafka_python_reads_every_record_from_offset_0(tiered):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP
    _wait_tiered(tiered)
    c = KafkaConsumer(bootstrap_servers=tiered[0].bootstrap, enable_auto_commit=False, consumer_timeout_ms=30000)
    try:
        tp = KTP("tiered", 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        offsets = []
        for m in c:
            assert m.value == _expected(m.offset)
            offsets.append(m.offset)
            if len(offsets) == RECORDS:
                break
        assert offsets == list(range(RECORDS))
    finally:
        c.close()


def test_list_offsets_earliest_local_and_latest_tiered(tiered):
    _wait_tiered(tiered)
    broker, local_dir, remote = tiered
    files = sorted(local_dir.glob("*.log"))
    local_start = int(files[0].name[:20])
    assert _offset(broker.bootstrap, "tiered", -2) == 0
    assert _offset(broker.bootstrap, "tiered", -4) == local_start
    assert _offset(broker.bootstrap, "tiered", -5) == int(files[-1].name[:20]) - 1   # all closed segments
    # KIP-1023: the first offset not yet uploaded, the active segment's base (Kafka 4.3.1)
    assert _offset(broker.bootstrap, "tiered", -6, 11) == int(files[-1].name[:20])
    # a timestamp lookup that starts in the remote segments (offset 0 is remote only), v9 and v10
    # (TimeoutMs, KIP-1075, bounds the remote lookup)
    assert _offset(broker.bootstrap, "tiered", 0) == _offset(broker.bootstrap, "tiered", 0, 10) == 0
    assert _offset(broker.bootstrap, "tiered", -1) == RECORDS
    # /metrics: the local log is the tail, the remote size counts every copied segment
    m = scrape(broker.metrics_url)
    assert value(m, "kafka_log_log_locallogstartoffset", topic="tiered", partition="0") == local_start
    assert value(m, "kafka_log_log_size", topic="tiered", partition="0") == local_log_bytes(local_dir)
    remote_bytes = sum(p.stat().st_size for p in remote_objects(remote, "log") if p.parent.parent.name.startswith("tiered-"))
    assert value(m, "kafka_server_brokertopicmetrics_remotelogsizebytes", topic="tiered") == remote_bytes


@pytest.mark.timeout(1200)  # the first run on a machine resolves Kafka 4.3.1's jars from Maven Central
def test_java_consumer_reads_every_record_from_offset_0(tiered, tmp_path):
    from conformance import maven
    from conformance.reference import java_command
    _wait_tiered(tiered)
    cmd = java_command(maven.resolve_kafka("4.3.1"), "org.apache.kafka.tools.consumer.ConsoleConsumer", [
        "--bootstrap-server", tiered[0].bootstrap, "--topic", "tiered", "--partition", "0", "--offset", "0",
        "--max-messages", str(RECORDS), "--timeout-ms", "60000",
        "--formatter-property", "print.offset=true", "--formatter-property", "print.value=false",
        "--formatter-property", "print.key=true"])
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [line for line in out.stdout.split("\n") if line.startswith("Offset:")]
    assert lines == [f"Offset:{i}\t{i}" for i in range(RECORDS)]


def test_total_retention_deletes_remote_segments_and_topic_deletion_deletes_them_all(tiered):
    from kcompat.protocol.messages.list_offsets import ListOffsetsRequest as L
    from kcompat.testing import wire
    broker, _local_dir, remote = tiered
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    config = {**TIERED_TOPIC, "retention.bytes": str(4 * 1024 * 1024), "local.retention.bytes": str(1024 * 1024)}
    admin.create_topics([NewTopic("tret", 1, 1, config=config)])["tret"].result(30)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(12_000):                                   # ~12 MB
        p.produce("tret", value=_expected(i))
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(60) == 0

    def objects() -> list:
        return [o for d in remote.glob("tret-*") for o in remote_objects(d, "log")]

    def log_start() -> int:
        req = L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(name="tret", partitions=[
            L.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-2)])])
        return wire.call(broker.bootstrap, req, 9).topics[0].partitions[0].offset
    # remote bytes stay within retention.bytes, plus at most the one segment that would cross it
    wait_for(lambda: log_start() > 0 and 0 < sum(o.stat().st_size for o in objects()) <= 6 * 1024 * 1024,
             timeout=90)
    start = log_start()
    assert min(int(o.name.split("-")[0]) for o in objects()) == start   # the oldest remote segment starts it
    assert first_earliest_record(broker.bootstrap, "tret", start) == _expected(start)
    admin.delete_topics(["tret"])["tret"].result(30)
    wait_for(lambda: not objects(), timeout=60)


def first_earliest_record(bootstrap: str, topic: str, expected_first: int) -> bytes:
    """The first record a consumer starting at the earliest offset gets (its offset checked)."""
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "tret", "auto.offset.reset": "earliest"})
    try:
        c.subscribe([topic])
        while True:
            m = c.poll(30)
            assert m is not None
            if m.error() is None:
                assert m.offset() == expected_first
                return m.value()
    finally:
        c.close()
