"""Bad input never crashes the broker and never touches stored data (DESIGN.md section 8).

A normal client writes known data first. Then thousands of malformed frames arrive on raw
connections: random bytes, truncated frames, bogus frame lengths (negative, above
``socket.request.max.bytes``, longer than what follows), valid request headers with garbage or
mutated bodies for every advertised API key and version, unknown API keys, valid requests
with huge array counts, and the requests kafka-python, confluent-kafka, kcat, the Java client and
a follower broker really sent (captured by tools/capture_client_frames.py) as sent, cut short and
mutated. Every connection is answered or closed within IO_TIMEOUT (CONTROLLER_IO_TIMEOUT behind a
controller operation; unless the request may rightly wait, e.g. a long-polling Fetch). A normal client produces all the while and loses nothing;
afterwards the broker process is alive, a normal client still produces and consumes, the known
data is byte-for-byte what it was (the batches served by Fetch and the segment files on disk),
and the broker log says why it closed connections.

The generator is seeded (``random.Random(SEED)``), so a failure replays.
"""

from __future__ import annotations

import random
import struct
from concurrent.futures import ThreadPoolExecutor

import pytest

from kcompat.broker import apis
from kcompat.protocol.messages import api_classes
from kcompat.protocol.messages.api_versions import ApiVersionsRequest
from kcompat.protocol.messages.create_partitions import CreatePartitionsRequest
from kcompat.protocol.messages.create_topics import CreateTopicsRequest
from kcompat.protocol.messages.delete_records import DeleteRecordsRequest
from kcompat.protocol.messages.describe_configs import DescribeConfigsRequest
from kcompat.protocol.messages.list_offsets import ListOffsetsRequest
from kcompat.protocol.messages.metadata import MetadataRequest
from kcompat.protocol.records import iter_records
from tests.robustness.util import (
    CAPTURES, CLIENT_CAPTURES, CONTROLLER_IO_TIMEOUT, IO_TIMEOUT, batch, captured_items, create_topic, encode,
    fetch_request, frame, header_bytes, may_wait, mutate, produce_request, read_frames, send_and_drain,
    snapshot,
)
from tests.support.broker_process import BrokerProcess, wait_for
from tests.support.replication_load import SequentialProducer, check_log, read_partitions

SEED = 0x6B636F6D
KNOWN = "known-data"
KNOWN_PARTITIONS = 3
TARGET = "fuzz-target"  # requests built from templates name this topic, never KNOWN
LIVE = "live-traffic"   # a normal client writes here while the bad input arrives
MAX_REQUEST = 104857600
FRAMES_PER_API_VERSION = 48


# -- frame building ----------------------------------------------------------------------------------

def templates() -> dict[int, object]:
    """Valid requests with content, per API key, naming only TARGET (mutations start from them)."""
    C = CreateTopicsRequest
    D = DeleteRecordsRequest
    L = ListOffsetsRequest
    DC = DescribeConfigsRequest
    CP = CreatePartitionsRequest
    return {
        0: produce_request(TARGET, 0, batch([b"fuzz-a", b"fuzz-b"], key=b"k", producer_id=7, epoch=0, seq=0)),
        1: fetch_request(TARGET, 0, 0, max_wait_ms=10),
        2: L(replica_id=-1, topics=[L.ListOffsetsTopic(name=TARGET, partitions=[
            L.ListOffsetsPartition(partition_index=0, timestamp=-2)])]),
        3: MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=TARGET)]),
        18: ApiVersionsRequest(client_software_name="fuzz", client_software_version="1"),
        19: C(topics=[C.CreatableTopic(name=TARGET + "-new", num_partitions=1, replication_factor=1),
                      C.CreatableTopic(name=TARGET + "-as", num_partitions=-1, replication_factor=-1,
                                       assignments=[C.CreatableReplicaAssignment(partition_index=0, broker_ids=[1])],
                                       configs=[C.CreatableTopicConfig(name="retention.ms", value="60000")])],
              timeout_ms=1000, validate_only=True),
        21: D(topics=[D.DeleteRecordsTopic(name=TARGET, partitions=[D.DeleteRecordsPartition(
            partition_index=0, offset=0)])], timeout_ms=1000),
        32: DC(resources=[DC.DescribeConfigsResource(resource_type=2, resource_name=TARGET)]),
        37: CP(topics=[CP.CreatePartitionsTopic(name=TARGET, count=2, assignments=[
            CP.CreatePartitionsAssignment(broker_ids=[1])])], timeout_ms=1000, validate_only=True),
    }


def garbage_frames(rng: random.Random) -> list[tuple[str, bytes, bool]]:
    """(label, bytes to send) for every advertised API key and version: garbage bodies and
    mutated valid bodies behind valid headers."""
    tmpl = templates()
    out = []
    corr = 1
    for key, lo, hi in apis.advertised():
        req_cls, _ = api_classes(key)
        for v in range(lo, hi + 1):
            base = bytearray()
            (tmpl.get(key) or req_cls()).write(base, v)
            for i in range(FRAMES_PER_API_VERSION):
                corr += 1
                if i % 3 == 0:
                    body = rng.randbytes(rng.choice([0, 1, 2, 5, 17, 64, 300]))
                else:
                    body = mutate(rng, bytes(base))
                payload = header_bytes(key, v, corr) + body
                out.append((f"api {key} v{v} #{i}", frame(payload), not may_wait(payload)))
    return out


def raw_frames(rng: random.Random) -> list[tuple[str, bytes, bool]]:
    """Random bytes, bad lengths, truncated frames, unknown APIs, huge array counts."""
    good = frame(header_bytes(3, 12, 7) + encode(MetadataRequest(topics=None), 12))
    out: list[tuple[str, bytes]] = []
    for i in range(150):
        out.append((f"random #{i}", rng.randbytes(rng.choice([1, 3, 4, 7, 8, 12, 100, 1000, 5000]))))
    for n in (-1, -2, -0x80000000, MAX_REQUEST + 1, 0x7FFFFFFF, 0x10000000):
        out.append((f"length {n}", struct.pack(">i", n) + rng.randbytes(32)))
    for n in (0, 1, 4, 7):  # shorter than a request header
        out.append((f"tiny frame {n}", struct.pack(">i", n) + rng.randbytes(n)))
    for i in range(60):  # announced length larger than what follows, then close
        cut = rng.randrange(4, len(good))
        out.append((f"truncated #{i}", good[:cut]))
        out.append((f"short body #{i}", struct.pack(">i", len(good) + rng.randint(1, 5000)) + good[4:]))
    for key in (4, 5, 6, 7, 8, 10, 11, 52, 57, 67, 74, 99, 1000, 32767, -1, -32768):
        for v in (0, 1, 3):
            out.append((f"unknown api {key} v{v}", frame(struct.pack(">hhi", key, v, 9) + b"\x00\x04fuzz"
                                                         + rng.randbytes(20))))
    for key, v in ((0, 99), (1, -1), (3, 13), (3, 32767), (2, -5)):  # versions outside the protocol
        out.append((f"bad version {key} v{v}", frame(struct.pack(">hhi", key, v, 9) + b"\x00\x04fuzz")))
    # valid headers, huge array counts
    out.append(("metadata v1 huge count", frame(header_bytes(3, 1, 11) + struct.pack(">i", 0x7FFFFFFF))))
    out.append(("metadata v4 huge count", frame(header_bytes(3, 4, 11) + struct.pack(">i", 0x7FFFFFFE) + b"\x01")))
    out.append(("metadata v12 huge compact count", frame(header_bytes(3, 12, 11) + b"\xff\xff\xff\xff\x0f")))
    out.append(("produce v9 huge topics", frame(header_bytes(0, 9, 12) + b"\x00\xff\xff\x00\x00\x27\x10"
                                                 + b"\xfe\xff\xff\xff\x0f")))
    out.append(("produce v3 huge partitions", frame(header_bytes(0, 3, 12) + b"\xff\xff\xff\xff\x00\x00\x27\x10"
                                                     + struct.pack(">i", 1) + b"\x00\x01t"
                                                     + struct.pack(">i", 0x7FFFFFFF))))
    out.append(("fetch v4 huge topics", frame(header_bytes(1, 4, 13) + struct.pack(">iiiib", -1, 0, 0, 0, 0)
                                               + struct.pack(">i", 0x7FFFFFFF))))
    out.append(("produce v9 huge records length", frame(
        header_bytes(0, 9, 14) + b"\x00\xff\xff\x00\x00\x27\x10" + b"\x02" + b"\x02t" + b"\x02"
        + struct.pack(">i", 0) + b"\xff\xff\xff\x7f")))
    out.append(("client id length huge", frame(struct.pack(">hhih", 3, 1, 15, 0x7FFF) + b"ab")))
    # truncated frames and random bytes (which may announce a frame longer than what follows) are
    # followed by the client closing; everything else by a probe request
    return [(label, data, not label.startswith(("truncated", "short body", "random"))) for label, data in out]


# -- the test ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory):
    data = tmp_path_factory.mktemp("badinput") / "data"
    with BrokerProcess(data) as b:
        yield b


def snapshot_known(b: BrokerProcess) -> tuple[dict[int, list[bytes]], dict[str, bytes]]:
    return snapshot(b.bootstrap, [b.data_dir], KNOWN, KNOWN_PARTITIONS)


def captured_frames(rng: random.Random) -> list[tuple[str, bytes, bool]]:
    """What kafka-python, confluent-kafka, kcat, the Java client and a follower broker really
    sent (tests/robustness/data/frames, tools/capture_client_frames.py), as sent and mutated."""
    return [item for name in (*CLIENT_CAPTURES, "replication")
            for item in captured_items(rng, read_frames(CAPTURES / f"{name}.frames"), name)]


def test_bad_input_never_crashes_and_never_touches_stored_data(fuzz_broker):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    b = fuzz_broker
    create_topic(b.bootstrap, KNOWN, partitions=KNOWN_PARTITIONS)
    create_topic(b.bootstrap, TARGET, partitions=1)
    producer = KafkaProducer(bootstrap_servers=b.bootstrap, client_id="known-writer")
    try:
        for i in range(300):
            producer.send(KNOWN, key=b"key-%d" % i, value=b"value-%d-" % i + bytes([i % 256]) * (i % 40),
                          headers=[("h", b"%d" % i)], partition=i % KNOWN_PARTITIONS)
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)
    fetched_before, files_before = snapshot_known(b)
    assert sum(len(v) for v in fetched_before.values()) > 0 and files_before
    records_before = {p: [(r.offset, r.key, r.value, r.headers) for bb in bl for r in iter_records(bb)]
                      for p, bl in fetched_before.items()}
    assert sum(len(v) for v in records_before.values()) == 300

    rng = random.Random(SEED)
    items = raw_frames(rng) + garbage_frames(rng) + captured_frames(rng)
    assert len(items) > 4000
    host, port = b.bootstrap.rsplit(":", 1)
    address = (host, int(port))
    # a normal client produces (acks=all, idempotent) all the while
    create_topic(b.bootstrap, LIVE, partitions=2)
    writer = SequentialProducer(b.bootstrap, LIVE, [0, 1], interval=0.02).start()
    try:
        writer.wait_progress(60, "the live producer's first acks")
        with ThreadPoolExecutor(max_workers=24) as pool:
            outcomes = list(pool.map(lambda it: send_and_drain(it, address), items, chunksize=8))
        writer.wait_progress(60, "the live producer after the bad input")
    finally:
        writer.stop(60)
    assert b.proc.poll() is None, "the broker process died"
    assert not writer.failed and writer.fatal is None, writer.summary()
    check_log(read_partitions(b.bootstrap, LIVE, [0, 1]), writer.acked)
    assert "refused" not in outcomes, "the broker stopped accepting connections"
    # every connection was closed or answered the probe (requests that may rightly wait, such as
    # a Fetch long-polling for max_wait_ms, were sent without one)
    stuck = [it[0] for it, o in zip(items, outcomes) if o == "open"]
    assert not stuck, (f"{len(stuck)} connections neither answered nor closed within {IO_TIMEOUT}s "
                       f"({CONTROLLER_IO_TIMEOUT}s for controller operations): {stuck[:20]}")
    assert outcomes.count("closed") > len(items) // 2, "malformed input should mostly close connections"

    # still alive and serving: a normal client produces and consumes
    producer = KafkaProducer(bootstrap_servers=b.bootstrap, client_id="after-fuzz")
    try:
        md = producer.send("after-fuzz", key=b"k", value=b"still alive").get(timeout=30)
    finally:
        producer.close(timeout=10)
    consumer = KafkaConsumer(bootstrap_servers=b.bootstrap, consumer_timeout_ms=10000, auto_offset_reset="earliest",
                             enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition("after-fuzz", md.partition)])
        got = []
        for m in consumer:  # stops after consumer_timeout_ms without records
            got.append(m.value)
            break
    finally:
        consumer.close()
    assert got == [b"still alive"]

    # stored data untouched, byte for byte
    fetched_after, files_after = snapshot_known(b)
    assert fetched_after == fetched_before
    assert files_after.keys() == files_before.keys()
    for name in files_before:
        assert files_after[name] == files_before[name], f"segment {name} changed"
    records_after = {p: [(r.offset, r.key, r.value, r.headers) for bb in bl for r in iter_records(bb)]
                     for p, bl in fetched_after.items()}
    assert records_after == records_before

    # the broker said why it closed connections, and no handler blew up on the input
    wait_for(lambda: "closing connection from" in b.log_text(), 10, what="a connection-close log line")
    log = b.log_text()
    assert "malformed" in log
    assert "exceeds socket.request.max.bytes" in log
    assert "unknown API key" in log
    unexpected = [line for line in log.splitlines() if "unexpected error" in line or "Traceback" in line]
    assert not unexpected, "handlers raised on fuzzed input:\n" + "\n".join(unexpected[:20])
