"""Bad input never crashes the broker and never touches stored data (DESIGN.md section 8).

A normal client writes known data first. Then thousands of malformed frames arrive on raw
connections: random bytes, truncated frames, bogus frame lengths (negative, above
``socket.request.max.bytes``, longer than what follows), valid request headers with garbage or
mutated bodies for every advertised API key and version, unknown API keys, and valid requests
with huge array counts. Afterwards the broker process is alive, a normal client still produces
and consumes, the known data is byte-for-byte what it was (the batches served by Fetch and the
segment files on disk), and the broker log says why it closed connections.

The generator is seeded (``random.Random(SEED)``), so a failure replays.
"""

from __future__ import annotations

import random
import socket
import struct
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kcompat.broker import apis
from kcompat.protocol.messages import api_classes
from kcompat.protocol.messages.api_versions import ApiVersionsRequest
from kcompat.protocol.messages.create_partitions import CreatePartitionsRequest
from kcompat.protocol.messages.create_topics import CreateTopicsRequest
from kcompat.protocol.messages.delete_records import DeleteRecordsRequest
from kcompat.protocol.messages.describe_configs import DescribeConfigsRequest
from kcompat.protocol.messages.headers import RequestHeader
from kcompat.protocol.messages.list_offsets import ListOffsetsRequest
from kcompat.protocol.messages.metadata import MetadataRequest
from kcompat.protocol.records import iter_records
from tests.robustness.util import batch, create_topic, fetch_request, produce_request, read_batches
from tests.support.broker_process import BrokerProcess, wait_for

SEED = 0x6B636F6D
KNOWN = "known-data"
KNOWN_PARTITIONS = 3
TARGET = "fuzz-target"  # requests built from templates name this topic, never KNOWN
MAX_REQUEST = 104857600
FRAMES_PER_API_VERSION = 48
IO_TIMEOUT = 3.0


# -- frame building ----------------------------------------------------------------------------------

def header_bytes(api_key: int, version: int, correlation_id: int, client_id: str | None = "fuzz") -> bytes:
    try:
        req_cls, _ = api_classes(api_key)
        flexible = req_cls.FLEXIBLE_MIN is not None and version >= req_cls.FLEXIBLE_MIN
    except KeyError:
        flexible = False
    out = bytearray()
    RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=correlation_id,
                  client_id=client_id).write(out, 2 if flexible else 1)
    return bytes(out)


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


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


def mutate(rng: random.Random, body: bytes) -> bytes:
    b = bytearray(body)
    kind = rng.randrange(5)
    if kind == 0 and b:                       # flip a few bytes
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
    elif kind == 1 and b:                     # truncate
        del b[rng.randrange(len(b)):]
    elif kind == 2:                           # insert garbage
        pos = rng.randint(0, len(b))
        b[pos:pos] = rng.randbytes(rng.randint(1, 16))
    elif kind == 3 and len(b) >= 4:           # a huge / negative int32 somewhere (counts, lengths)
        pos = rng.randrange(len(b) - 3)
        b[pos:pos + 4] = struct.pack(">i", rng.choice([0x7FFFFFFF, -2, -0x80000000, 0x10000000, 65535]))
    elif len(b) >= 1:                         # a long varint somewhere (compact counts)
        pos = rng.randrange(len(b))
        b[pos:pos + 1] = bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x0F])
    return bytes(b)


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
                out.append((f"api {key} v{v} #{i}", frame(header_bytes(key, v, corr) + body), True))
    return out


def raw_frames(rng: random.Random) -> list[tuple[str, bytes, bool]]:
    """Random bytes, bad lengths, truncated frames, unknown APIs, huge array counts."""
    good = frame(header_bytes(3, 12, 7) + _encode(MetadataRequest(topics=None), 12))
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


def _encode(req, version: int) -> bytes:
    out = bytearray()
    req.write(out, version)
    return bytes(out)


PROBE_CORRELATION_ID = 0x7EADBEEF
PROBE = frame(header_bytes(18, 0, PROBE_CORRELATION_ID) + b"")  # ApiVersions v0, empty body


def send_and_drain(item: tuple[str, bytes, bool], address: tuple[str, int]) -> str:
    """Send the bytes; with ``probe`` also an ApiVersions request behind them, then read until the
    broker closes the connection ("closed"), answers the probe ("answered"), or IO_TIMEOUT passes
    ("open"). Without ``probe`` the client closes right after sending (a truncated frame)."""
    _label, data, probe = item
    try:
        with socket.create_connection(address, timeout=5) as sock:
            sock.settimeout(IO_TIMEOUT)
            try:
                sock.sendall(data + (PROBE if probe else b""))
            except (BrokenPipeError, ConnectionResetError):
                return "closed"
            if not probe:
                return "sent"
            buf = bytearray()
            deadline = time.monotonic() + IO_TIMEOUT
            while time.monotonic() < deadline:
                try:
                    chunk = sock.recv(65536)
                except socket.timeout:
                    return "open"
                except ConnectionResetError:
                    return "closed"
                if not chunk:
                    return "closed"
                buf += chunk
                while len(buf) >= 8:
                    size, corr = struct.unpack_from(">ii", buf, 0)
                    if len(buf) < 4 + size:
                        break
                    if corr == PROBE_CORRELATION_ID:
                        return "answered"
                    del buf[:4 + size]
            return "open"
    except ConnectionRefusedError:
        return "refused"


# -- the test ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory):
    data = tmp_path_factory.mktemp("badinput") / "data"
    with BrokerProcess(data) as b:
        yield b


def snapshot_known(b: BrokerProcess) -> tuple[dict[int, list[bytes]], dict[str, bytes]]:
    fetched = {p: read_batches(b.bootstrap, KNOWN, p) for p in range(KNOWN_PARTITIONS)}
    files = {}
    for p in range(KNOWN_PARTITIONS):
        for f in sorted(Path(b.data_dir, f"{KNOWN}-{p}").glob("*.log")):
            files[f"{p}/{f.name}"] = f.read_bytes()
    return fetched, files


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
    items = raw_frames(rng) + garbage_frames(rng)
    assert len(items) > 3000
    host, port = b.bootstrap.rsplit(":", 1)
    address = (host, int(port))
    with ThreadPoolExecutor(max_workers=24) as pool:
        outcomes = list(pool.map(lambda it: send_and_drain(it, address), items, chunksize=8))
    assert b.proc.poll() is None, "the broker process died"
    assert "refused" not in outcomes, "the broker stopped accepting connections"
    # every connection was closed or answered the probe, except that a mutated Fetch may
    # legitimately long-poll (max_wait_ms) and hold the probe back
    stuck = [it[0] for it, o in zip(items, outcomes) if o == "open" and not it[0].startswith("api 1 ")]
    assert not stuck, f"{len(stuck)} connections neither answered nor closed within {IO_TIMEOUT}s: {stuck[:20]}"
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
