"""Wire-level behaviour and error codes, checked with raw requests (kcompat/testing/wire.py).

Every expectation is Apache Kafka's: KIP-35/KIP-511 for ApiVersions, KIP-98 for idempotent
sequences, the Produce/Fetch validation of ``UnifiedLog``/``LogValidator``/``ReplicaManager``,
the SocketServer's framing rules, and KIP-896 (requests at a removed version get
UNSUPPORTED_VERSION).
"""

from __future__ import annotations

import socket
import struct
import time

import pytest

from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages import api_classes
from kcompat.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kcompat.protocol.messages.delete_records import DeleteRecordsRequest
from kcompat.protocol.messages.fetch import FetchResponse
from kcompat.protocol.messages.headers import RequestHeader, ResponseHeader
from kcompat.protocol.messages.init_producer_id import InitProducerIdRequest
from kcompat.protocol.messages.list_offsets import ListOffsetsRequest
from kcompat.protocol.messages.metadata import MetadataRequest
from kcompat.protocol.records import iter_batches, iter_records
from tests.robustness.util import (
    FETCH_V, batch, create_topic, fetch, fetch_request, init_producer_id, produce, produce_request,
    read_records,
)
from kcompat.testing import wire
from tests.support.broker_process import BrokerProcess, wait_for

API_VERSIONS_RANGE = (0, 4)
MAX_REQUEST = 104857600  # socket.request.max.bytes default


def recv_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", wire.recv_exact(sock, 4))
    return wire.recv_exact(sock, size)


def assert_closed(sock: socket.socket, timeout: float = 5.0) -> None:
    """The broker closed the connection: reads hit EOF (or a reset) without any response."""
    sock.settimeout(timeout)
    try:
        data = sock.recv(65536)
    except ConnectionResetError:
        return
    assert data == b"", f"expected the broker to close the connection, got {data[:50]!r}"


def metadata(bootstrap: str, names: list[str], version: int = 12, allow_create: bool = True):
    req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in names],
                          allow_auto_topic_creation=allow_create)
    return wire.call(bootstrap, req, version)


# -- ApiVersions -----------------------------------------------------------------------------------

@pytest.mark.parametrize("version", range(0, 5))
def test_api_versions_supported_versions_answered(broker, version):
    req = ApiVersionsRequest(client_software_name="kcompat-tests", client_software_version="1.0")
    resp = wire.call(broker.bootstrap, req, version)
    assert resp.error_code == 0
    keys = {a.api_key: (a.min_version, a.max_version) for a in resp.api_keys}
    assert keys[18] == API_VERSIONS_RANGE
    assert keys[0][1] >= 9 and keys[1][1] >= 12 and keys[3][1] >= 9


@pytest.mark.parametrize("version", [5, 99])
def test_api_versions_unknown_version_gets_kip511_reply(broker, version):
    """KIP-511: response header v0, a v0 body, UNSUPPORTED_VERSION, and our ApiVersions range."""
    body = bytearray()
    # newer clients send ApiVersions with request header v2 (flexible)
    RequestHeader(request_api_key=18, request_api_version=version, correlation_id=4242,
                  client_id="future-client").write(body, 2)
    ApiVersionsRequest(client_software_name="future", client_software_version="9.9").write(body, 3)
    with wire.connect(broker.bootstrap) as sock:
        sock.sendall(struct.pack(">i", len(body)) + bytes(body))
        frame = recv_frame(sock)
        # correlation id, then the v0 body right away: error_code, [api_key min max]
        (corr,) = struct.unpack_from(">i", frame, 0)
        assert corr == 4242
        resp, end = ApiVersionsResponse.read(memoryview(frame), 4, 0)
        assert end == len(frame), "KIP-511 reply must be exactly a v0 body after a v0 header"
        assert resp.error_code == ErrorCode.UNSUPPORTED_VERSION == 35
        assert [(a.api_key, a.min_version, a.max_version) for a in resp.api_keys] == [(18, *API_VERSIONS_RANGE)]
        # the connection stays usable: the client retries with a version we support
        wire.send_request(sock, ApiVersionsRequest(client_software_name="future", client_software_version="9.9"),
                          3, correlation_id=4243)
        corr, resp = wire.read_response(sock, 18, 3)
        assert corr == 4243 and resp.error_code == 0


def test_api_versions_v3_response_header_has_no_tagged_fields(broker):
    with wire.connect(broker.bootstrap) as sock:
        wire.send_request(sock, ApiVersionsRequest(client_software_name="kcompat-tests",
                                                   client_software_version="1"), 3, correlation_id=77)
        frame = recv_frame(sock)
    assert struct.unpack_from(">i", frame, 0)[0] == 77
    # header v0: the body (error_code int16 = 0) starts right after the correlation id
    assert frame[4:6] == b"\x00\x00"
    resp, end = ApiVersionsResponse.read(memoryview(frame), 4, 3)
    assert end == len(frame) and resp.error_code == 0
    assert any(a.api_key == 18 for a in resp.api_keys)


# -- Produce validation ------------------------------------------------------------------------------

def test_produce_corrupt_batch_is_corrupt_message(broker):
    create_topic(broker.bootstrap, "wire-corrupt")
    good = bytearray(batch([b"a", b"b", b"c"]))
    good[-1] ^= 0xFF  # inside the CRC-covered area
    r = produce(broker.bootstrap, "wire-corrupt", 0, bytes(good))
    assert r.error_code == ErrorCode.CORRUPT_MESSAGE == 2
    assert read_records(broker.bootstrap, "wire-corrupt", 0) == []


def test_produce_batch_over_max_message_bytes_is_message_too_large(broker):
    create_topic(broker.bootstrap, "wire-small", configs={"max.message.bytes": "1000"})
    r = produce(broker.bootstrap, "wire-small", 0, batch([b"x" * 2000]))
    assert r.error_code == ErrorCode.MESSAGE_TOO_LARGE == 10
    r = produce(broker.bootstrap, "wire-small", 0, batch([b"x" * 100]))
    assert r.error_code == 0 and r.base_offset == 0


def test_two_batches_in_one_partition_is_invalid_record(broker):
    create_topic(broker.bootstrap, "wire-two")
    two = batch([b"one"]) + batch([b"two"])
    r = produce(broker.bootstrap, "wire-two", 0, two)
    assert r.error_code == ErrorCode.INVALID_RECORD == 87
    assert read_records(broker.bootstrap, "wire-two", 0) == []


@pytest.mark.parametrize("name", ["bad name", "bad/name", "x" * 250, "..", "bad:name"])
def test_invalid_topic_name_produce_and_metadata(broker, name):
    """Metadata answers INVALID_TOPIC_EXCEPTION; Produce, like for any topic missing from the
    metadata cache, UNKNOWN_TOPIC_OR_PARTITION (Kafka's KafkaApis.handleProduceRequest)."""
    r = produce(broker.bootstrap, name, 0, batch([b"v"]))
    assert r.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION == 3
    for version in (1, 4, 9, 12):
        resp = metadata(broker.bootstrap, [name], version)
        assert [(t.name, t.error_code) for t in resp.topics] == [(name, 17)], version
    assert name not in [t.name for t in wire.call(broker.bootstrap, MetadataRequest(topics=None), 12).topics]


def test_unknown_topic_without_auto_create_is_unknown_topic_or_partition(tmp_path):
    with BrokerProcess(tmp_path / "d", overrides={"auto.create.topics.enable": "false"}) as b:
        r = produce(b.bootstrap, "nope", 0, batch([b"v"]))
        assert r.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION == 3
        resp = metadata(b.bootstrap, ["nope"], 12)
        assert [(t.name, t.error_code) for t in resp.topics] == [("nope", 3)]
        resp = metadata(b.bootstrap, ["nope"], 1)  # v1-v3 imply allow_auto_topic_creation
        assert [(t.name, t.error_code) for t in resp.topics] == [("nope", 3)]
        assert wire.call(b.bootstrap, MetadataRequest(topics=None), 12).topics == []
        # an existing topic's missing partition is UNKNOWN_TOPIC_OR_PARTITION too
        create_topic(b.bootstrap, "yes", partitions=1)
        assert produce(b.bootstrap, "yes", 5, batch([b"v"])).error_code == 3
        assert produce(b.bootstrap, "yes", 0, batch([b"v"])).error_code == 0


# -- Fetch -----------------------------------------------------------------------------------------

def test_fetch_out_of_range_above_high_watermark_and_below_log_start(broker):
    t = "wire-oor"
    create_topic(broker.bootstrap, t)
    for i in range(4):
        assert produce(broker.bootstrap, t, 0, batch([b"%d-a" % i, b"%d-b" % i])).error_code == 0
    pd = fetch(broker.bootstrap, t, 0, 8)  # == HW: empty, no error
    assert pd.error_code == 0 and pd.high_watermark == 8 and not pd.records
    pd = fetch(broker.bootstrap, t, 0, 9)
    assert pd.error_code == ErrorCode.OFFSET_OUT_OF_RANGE == 1
    # move the log start offset to 4 with DeleteRecords, then fetch below it
    D = DeleteRecordsRequest
    resp = wire.call(broker.bootstrap, D(topics=[D.DeleteRecordsTopic(name=t, partitions=[
        D.DeleteRecordsPartition(partition_index=0, offset=4)])], timeout_ms=5000), 2)
    part = resp.topics[0].partitions[0]
    assert part.error_code == 0 and part.low_watermark == 4
    pd = fetch(broker.bootstrap, t, 0, 3)
    assert pd.error_code == 1
    pd = fetch(broker.bootstrap, t, 0, 4)
    assert pd.error_code == 0 and pd.log_start_offset == 4
    assert [r.value for pos, h in iter_batches(pd.records) for r in iter_records(pd.records[pos:pos + h.size])][:2] \
        == [b"2-a", b"2-b"]


def test_fetch_inside_a_batch_returns_the_whole_batch(broker):
    t = "wire-inside"
    create_topic(broker.bootstrap, t)
    assert produce(broker.bootstrap, t, 0, batch([b"a", b"b"])).base_offset == 0
    assert produce(broker.bootstrap, t, 0, batch([b"c", b"d", b"e", b"f", b"g"])).base_offset == 2
    pd = fetch(broker.bootstrap, t, 0, 4)
    assert pd.error_code == 0
    data = bytes(pd.records)
    batches = list(iter_batches(data))
    assert batches and batches[0][1].base_offset == 2 and batches[0][1].last_offset == 6
    assert sum(h.size for _p, h in batches) == len(data), "fetch returned a partial batch"
    recs = [(r.offset, r.value) for r in iter_records(data[:batches[0][1].size])]
    assert recs == [(2, b"c"), (3, b"d"), (4, b"e"), (5, b"f"), (6, b"g")]


# -- idempotent producers ------------------------------------------------------------------------------

def test_idempotent_sequences_at_the_wire_level(broker):
    t = "wire-idem"
    create_topic(broker.bootstrap, t)
    pid, epoch = init_producer_id(broker.bootstrap)
    assert epoch == 0
    first = batch([b"s0", b"s1", b"s2"], producer_id=pid, epoch=0, seq=0)
    r = produce(broker.bootstrap, t, 0, first)
    assert r.error_code == 0 and r.base_offset == 0
    assert produce(broker.bootstrap, t, 0, batch([b"other"])).base_offset == 3  # non-idempotent write
    second = batch([b"s3", b"s4"], producer_id=pid, epoch=0, seq=3)
    assert produce(broker.bootstrap, t, 0, second).base_offset == 4
    # retries of both batches: success with the ORIGINAL base offsets, nothing written
    r = produce(broker.bootstrap, t, 0, first)
    assert (r.error_code, r.base_offset) == (0, 0)
    r = produce(broker.bootstrap, t, 0, second)
    assert (r.error_code, r.base_offset) == (0, 4)
    assert [v for _o, _k, v in read_records(broker.bootstrap, t, 0)] == [b"s0", b"s1", b"s2", b"other", b"s3", b"s4"]
    # a gap in the sequence
    r = produce(broker.bootstrap, t, 0, batch([b"gap"], producer_id=pid, epoch=0, seq=9))
    assert r.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER == 45
    # a bumped epoch starts at sequence 0; afterwards the old epoch is fenced
    r = produce(broker.bootstrap, t, 0, batch([b"e1"], producer_id=pid, epoch=1, seq=0))
    assert r.error_code == 0 and r.base_offset == 6
    r = produce(broker.bootstrap, t, 0, batch([b"old"], producer_id=pid, epoch=0, seq=5))
    assert r.error_code == ErrorCode.INVALID_PRODUCER_EPOCH == 47
    # a producer id this partition has never seen may start at any sequence (KIP-360 semantics)
    r = produce(broker.bootstrap, t, 0, batch([b"new"], producer_id=pid + 1_000_000, epoch=3, seq=42))
    assert r.error_code == 0 and r.base_offset == 7
    r = produce(broker.bootstrap, t, 0, batch([b"new2"], producer_id=pid + 1_000_000, epoch=3, seq=43))
    assert r.error_code == 0 and r.base_offset == 8
    values = [v for _o, _k, v in read_records(broker.bootstrap, t, 0)]
    assert values == [b"s0", b"s1", b"s2", b"other", b"s3", b"s4", b"e1", b"new", b"new2"]


def test_init_producer_id_never_reuses_ids_across_restart(fresh_broker):
    before = [init_producer_id(fresh_broker.bootstrap)[0] for _ in range(5)]
    assert before == sorted(before) and len(set(before)) == 5
    for v in range(0, 6):  # every version hands out a fresh id with epoch 0
        resp = wire.call(fresh_broker.bootstrap, InitProducerIdRequest(transactional_id=None,
                                                                       transaction_timeout_ms=1000), v)
        assert resp.error_code == 0 and resp.producer_epoch == 0
        before.append(resp.producer_id)
    assert len(set(before)) == len(before)
    fresh_broker.restart()
    after = [init_producer_id(fresh_broker.bootstrap)[0] for _ in range(5)]
    assert after == sorted(after)
    assert min(after) > max(before), f"ids reused after restart: before {before}, after {after}"
    fresh_broker.kill9()
    fresh_broker.start()
    again = [init_producer_id(fresh_broker.bootstrap)[0] for _ in range(3)]
    assert min(again) > max(after), f"ids reused after kill -9: before {after}, after {again}"


# -- connection behaviour ----------------------------------------------------------------------------

def test_acks_zero_produce_gets_no_response(broker):
    t = "wire-acks0"
    create_topic(broker.bootstrap, t)
    with wire.connect(broker.bootstrap) as sock:
        wire.send_request(sock, produce_request(t, 0, batch([b"fire"]), acks=0), 9, correlation_id=10)
        wire.send_request(sock, produce_request(t, 0, batch([b"and-forget"]), acks=0), 9, correlation_id=11)
        wire.send_request(sock, ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3,
                          correlation_id=12)
        corr, resp = wire.read_response(sock, 18, 3)
        assert corr == 12 and resp.error_code == 0
        wire.send_request(sock, produce_request(t, 0, batch([b"acked"]), acks=1), 9, correlation_id=13)
        corr, resp = wire.read_response(sock, 0, 9)
        assert corr == 13 and resp.responses[0].partition_responses[0].base_offset == 2
    assert [v for _o, _k, v in read_records(broker.bootstrap, t, 0)] == [b"fire", b"and-forget", b"acked"]


def test_pipelined_requests_answered_in_order_with_long_poll_fetch_first(broker):
    t = "wire-pipeline"
    create_topic(broker.bootstrap, t)
    L = ListOffsetsRequest
    requests = [
        (18, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1")),
        (0, 9, produce_request(t, 0, batch([b"p1"]))),
        (3, 12, MetadataRequest(topics=None)),
        (2, 7, L(replica_id=-1, topics=[L.ListOffsetsTopic(name=t, partitions=[
            L.ListOffsetsPartition(partition_index=0, timestamp=-1)])])),
        # waits max_wait_ms for data that never comes ...
        (1, FETCH_V, fetch_request(t, 0, 1, max_wait_ms=500, min_bytes=1)),
        # ... and holds back the responses behind it
        (3, 12, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=t)])),
        (18, 0, ApiVersionsRequest()),
        (1, FETCH_V, fetch_request(t, 0, 0)),
    ]
    with wire.connect(broker.bootstrap) as sock:
        start = time.monotonic()
        for i, (_key, version, req) in enumerate(requests):
            wire.send_request(sock, req, version, correlation_id=1000 + i)
        frames = []  # (correlation id, arrival time, frame), in arrival order
        for _ in requests:
            frame = recv_frame(sock)
            frames.append((struct.unpack_from(">i", frame, 0)[0], time.monotonic() - start, frame))
    assert [c for c, _t, _f in frames] == [1000 + i for i in range(len(requests))], "responses out of order"
    got = []
    for (key, version, _req), (corr, _t, frame) in zip(requests, frames):
        _req_cls, resp_cls = api_classes(key)
        flexible = resp_cls.FLEXIBLE_MIN is not None and version >= resp_cls.FLEXIBLE_MIN and key != 18
        header, off = ResponseHeader.read(memoryview(frame), 0, 1 if flexible else 0)
        resp, end = resp_cls.read(memoryview(frame), off, version)
        assert end == len(frame)
        got.append((corr, resp))
    times = [t for _c, t, _f in frames]
    fetch_resp: FetchResponse = got[4][1]
    pd = fetch_resp.responses[0].partitions[0]
    assert pd.error_code == 0 and not pd.records and pd.high_watermark == 1
    assert times[4] >= 0.45, f"long-poll fetch answered after {times[4]:.3f}s"
    assert times[3] < 0.4, "requests ahead of the long poll must not wait for it"
    assert got[5][1].topics[0].name == t and got[5][1].topics[0].error_code == 0
    assert got[1][1].responses[0].partition_responses[0].base_offset == 0
    assert got[3][1].topics[0].partitions[0].offset == 1
    assert bytes(got[7][1].responses[0].partitions[0].records)  # the record p1


def test_frame_larger_than_socket_request_max_bytes_closes_connection(broker):
    with wire.connect(broker.bootstrap) as sock:
        sock.sendall(struct.pack(">i", MAX_REQUEST + 1) + b"\x00\x12\x00\x00\x00\x00\x00\x01")
        assert_closed(sock)
    wait_for(lambda: "exceeds socket.request.max.bytes" in broker.log_text(), 10,
             what="a log line about the oversized frame")
    # the broker still answers others
    assert wire.api_versions(broker.bootstrap)


@pytest.mark.parametrize("api_key,version,request_factory", [
    (0, 2, lambda: produce_request("wire-unsupported", 0, batch([b"v"]))),
    (0, 0, lambda: produce_request("wire-unsupported", 0, batch([b"v"]))),
    (1, 3, lambda: fetch_request("wire-unsupported", 0, 0)),
])
def test_unsupported_version_of_known_api_gets_unsupported_version(broker, api_key, version, request_factory):
    with wire.connect(broker.bootstrap) as sock:
        wire.send_request(sock, request_factory(), version, correlation_id=55)
        corr, resp = wire.read_response(sock, api_key, version)
        assert corr == 55
        if api_key == 0:
            codes = [p.error_code for t in resp.responses for p in t.partition_responses]
        else:
            codes = [p.error_code for t in resp.responses for p in t.partitions]
        assert codes == [ErrorCode.UNSUPPORTED_VERSION] and ErrorCode.UNSUPPORTED_VERSION == 35
        # the connection stays open for supported requests
        wire.send_request(sock, ApiVersionsRequest(), 0, correlation_id=56)
        assert wire.read_response(sock, 18, 0)[0] == 56
    # nothing was written or auto-created for the rejected request
    all_topics = wire.call(broker.bootstrap, MetadataRequest(topics=None), 12).topics
    assert "wire-unsupported" not in [t.name for t in all_topics]


# -- found by the fuzzer / Kafka's validation order ----------------------------------------------------

def test_produce_bytes_without_one_whole_batch(broker):
    """Kafka's ByteBufferLogInputStream + ProduceRequest.validateRecords: no complete batch ->
    INVALID_RECORD; batchLength < 14 or a magic outside 0..2 -> CORRUPT_MESSAGE; magic 0/1 ->
    INVALID_RECORD."""
    t = "wire-unframed"
    create_topic(broker.bootstrap, t)
    good = bytearray(batch([b"a", b"b", b"c"]))
    cases = {
        "truncated batch": (bytes(good[:-5]), ErrorCode.INVALID_RECORD),
        "ten bytes": (bytes(good[:10]), ErrorCode.INVALID_RECORD),
        "sixteen bytes": (bytes(good[:16]), ErrorCode.INVALID_RECORD),
        "header only": (bytes(good[:61]), ErrorCode.INVALID_RECORD),
        "length below overhead": (bytes(good[:8]) + struct.pack(">i", 5) + bytes(good[12:]), ErrorCode.CORRUPT_MESSAGE),
        "magic 7": (bytes(good[:16]) + b"\x07" + bytes(good[17:]), ErrorCode.CORRUPT_MESSAGE),
        "magic -1": (bytes(good[:16]) + b"\xff" + bytes(good[17:]), ErrorCode.CORRUPT_MESSAGE),
        "magic 1": (bytes(good[:16]) + b"\x01" + bytes(good[17:]), ErrorCode.INVALID_RECORD),
        "empty": (b"", ErrorCode.INVALID_RECORD),
    }
    for name, (records, code) in cases.items():
        r = produce(broker.bootstrap, t, 0, records)
        assert r.error_code == code, f"{name}: got {r.error_code}, Kafka answers {code.name}"
        assert r.base_offset == -1
    assert read_records(broker.bootstrap, t, 0) == []
    assert produce(broker.bootstrap, t, 0, bytes(good)).base_offset == 0


def test_required_acks_must_be_minus_one_zero_or_one(broker):
    create_topic(broker.bootstrap, "wire-acks2")
    r = produce(broker.bootstrap, "wire-acks2", 0, batch([b"v"]), acks=2)
    assert r.error_code == ErrorCode.INVALID_REQUIRED_ACKS == 21


def test_failed_acks_zero_produce_closes_the_connection(broker):
    """acks=0 has no response to carry an error: Kafka closes the connection instead."""
    with wire.connect(broker.bootstrap) as sock:
        wire.send_request(sock, produce_request("bad name!", 0, batch([b"v"]), acks=0), 9, correlation_id=3)
        assert_closed(sock)


@pytest.mark.parametrize("version", [10, 11])
def test_metadata_before_v12_rejects_null_names_and_topic_ids(broker, version):
    """Kafka: "Topic name can not be null" / "Topic IDs are not supported" before v12 ->
    INVALID_REQUEST for every topic (a null name answered as "")."""
    import uuid

    M = MetadataRequest
    resp = wire.call(broker.bootstrap, M(topics=[M.MetadataRequestTopic(name=None, topic_id=uuid.uuid4())]),
                     version)
    assert [(t.name, t.error_code) for t in resp.topics] == [("", ErrorCode.INVALID_REQUEST)]
    resp = wire.call(broker.bootstrap, M(topics=[M.MetadataRequestTopic(name="wire-md", topic_id=uuid.uuid4())]),
                     version)
    assert [(t.name, t.error_code) for t in resp.topics] == [("wire-md", 42)]
    # v12 looks topics up by id
    resp = wire.call(broker.bootstrap, M(topics=[M.MetadataRequestTopic(name=None, topic_id=uuid.uuid4())]), 12)
    assert [t.error_code for t in resp.topics] == [ErrorCode.UNKNOWN_TOPIC_ID]


def test_create_topics_with_too_many_partitions_is_policy_violation(broker):
    """Kafka's MAX_PARTITIONS_PER_BATCH (10000): answered at once, nothing created."""
    from kcompat.protocol.messages.create_partitions import CreatePartitionsRequest
    from kcompat.protocol.messages.create_topics import CreateTopicsRequest

    C = CreateTopicsRequest
    start = time.monotonic()
    for count in (0x7FFFFFFF, 10001):
        resp = wire.call(broker.bootstrap, C(topics=[
            C.CreatableTopic(name="wire-huge", num_partitions=count, replication_factor=1),
            C.CreatableTopic(name="wire-small-too", num_partitions=1, replication_factor=1)], timeout_ms=5000), 7)
        assert [(t.name, t.error_code) for t in resp.topics] == [("wire-huge", 44), ("wire-small-too", 44)]
        assert resp.topics[0].error_message == "Excessively large number of partitions per request."
    resp = wire.call(broker.bootstrap, C(topics=[C.CreatableTopic(name="wire-huge", num_partitions=10000,
                                                                  replication_factor=1)], timeout_ms=5000,
                                         validate_only=True), 7)
    assert resp.topics[0].error_code == 0
    create_topic(broker.bootstrap, "wire-grow", partitions=1)
    CP = CreatePartitionsRequest
    resp = wire.call(broker.bootstrap, CP(topics=[CP.CreatePartitionsTopic(name="wire-grow", count=0x7FFFFFFF)],
                                          timeout_ms=5000), 3)
    assert resp.results[0].error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert time.monotonic() - start < 10
    names = [t.name for t in wire.call(broker.bootstrap, MetadataRequest(topics=None), 12).topics]
    assert "wire-huge" not in names and "wire-small-too" not in names
    grow = metadata(broker.bootstrap, ["wire-grow"]).topics[0]
    assert len(grow.partitions) == 1


def test_fetch_negative_partition_max_bytes_fails_only_that_partition(broker):
    """Kafka's LogSegment.read rejects a negative size: UNKNOWN_SERVER_ERROR for that partition."""
    from kcompat.protocol.messages.fetch import FetchRequest as F

    create_topic(broker.bootstrap, "wire-negmax", partitions=2)
    for p in (0, 1):
        assert produce(broker.bootstrap, "wire-negmax", p, batch([b"p%d" % p])).error_code == 0
    req = F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
            session_epoch=-1, topics=[F.FetchTopic(topic="wire-negmax", partitions=[
                F.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=-1),
                F.FetchPartition(partition=1, fetch_offset=0, partition_max_bytes=1 << 20)])])
    resp = wire.call(broker.bootstrap, req, FETCH_V)
    assert resp.error_code == 0
    p0, p1 = resp.responses[0].partitions
    assert p0.error_code == ErrorCode.UNKNOWN_SERVER_ERROR and not p0.records
    assert p1.error_code == 0 and [r.value for r in iter_records(bytes(p1.records))] == [b"p1"]


def test_invalid_utf8_in_strings_is_replaced_not_fatal(broker):
    """Kafka decodes strings with new String(bytes, UTF_8): malformed bytes become U+FFFD and the
    request is served (an invalid topic name then gets its usual error)."""
    with wire.connect(broker.bootstrap) as sock:
        # Metadata v1, client id b"cl\xffent", one topic named b"t\xfe\xff"
        body = struct.pack(">hhi", 3, 1, 21) + struct.pack(">h", 6) + b"cl\xffent"
        body += struct.pack(">i", 1) + struct.pack(">h", 3) + b"t\xfe\xff"
        sock.sendall(struct.pack(">i", len(body)) + body)
        corr, resp = wire.read_response(sock, 3, 1)
    assert corr == 21
    assert [(t.name, t.error_code) for t in resp.topics] == [("t\ufffd\ufffd", ErrorCode.INVALID_TOPIC_EXCEPTION)]
