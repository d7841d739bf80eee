"""Request frames as the connection receives them (kcompat.broker.connection, an
``asyncio.BufferedProtocol`` over kcompat.broker.frame_buffer): a frame too large for the receive
buffer is read straight into a buffer of its own, allocated whole up to 2 MiB and grown as its
bytes come above that; smaller frames are framed from the receive buffer, which moves what is
left to its front and grows while whole frames wait for their turn.

- a produce request of ~600 KB sent a few bytes at a time and followed, in its last piece, by the
  start of the next request: both answered in order, the records stored intact;
- a produce request of ~3 MB (three partitions of ~1 MB, above the 2 MiB allocated up front) in
  uneven pieces: stored intact;
- produce requests each fitting the receive buffer but not twice, pipelined in one write:
  every one answered in order, the records stored intact;
- 3,000 small requests in one write, more than the receive buffer holds and than
  ``queued.max.requests`` lets run at once: every one answered, in order."""

from __future__ import annotations

import random
import struct
import threading
import time

from kcompat.broker.frame_buffer import FRAME_UPFRONT, RECEIVE_BUFFER
from kcompat.protocol import records as rb
from kcompat.protocol.messages.api_versions import ApiVersionsRequest
from kcompat.protocol.messages.headers import RequestHeader
from kcompat.protocol.messages.metadata import MetadataRequest
from kcompat.protocol.messages.produce import ProduceRequest
from kcompat.testing import admin, wire
from tests.robustness.util import read_records
from tests.support.broker_process import BrokerProcess


def framed(request, version: int, correlation_id: int) -> bytes:
    req_cls = type(request)
    flexible = req_cls.FLEXIBLE_MIN is not None and version >= req_cls.FLEXIBLE_MIN
    body = bytearray()
    RequestHeader(request_api_key=req_cls.API_KEY, request_api_version=version, correlation_id=correlation_id,
                  client_id="pieces").write(body, 2 if flexible else 1)
    request.write(body, version)
    return struct.pack(">i", len(body)) + bytes(body)


def produce_frame(topic: str, batches: list[bytes], correlation_id: int) -> bytes:
    """A Produce v9 request frame writing ``batches[i]`` to partition i of ``topic``."""
    return framed(ProduceRequest(acks=1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=i, records=b)
                                    for i, b in enumerate(batches)])]), 9, correlation_id)


def values(bootstrap: str, topic: str, partition: int) -> list[bytes]:
    """Every record value of ``topic``-``partition`` from offset 0."""
    return [bytes(v) for _offset, _key, v in read_records(bootstrap, topic, partition)]


def send_in_background(sock, data: bytes, pieces: list[int] | None = None) -> threading.Thread:
    """Write ``data`` (cut at ``pieces`` if given) from a thread, so that the test can read the
    answers meanwhile (the broker stops reading while its answers are not read)."""
    def send() -> None:
        cuts = [0, *(pieces or []), len(data)]
        for lo, hi in zip(cuts, cuts[1:]):
            sock.sendall(data[lo:hi])
    t = threading.Thread(target=send, daemon=True)
    t.start()
    return t


def test_a_large_frame_in_small_pieces_then_another_request(tmp_path):
    with BrokerProcess(tmp_path / "data") as b:
        admin.create_topic(b.bootstrap, "big", 1, 1)
        expected = [bytes([i % 251]) * 1000 for i in range(600)]
        batch = rb.build_batch([(0, None, v, ()) for v in expected])
        produce = framed(ProduceRequest(acks=1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
            name="big", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])]), 9, 1)
        metadata = framed(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="big")]), 12, 2)
        assert len(produce) > RECEIVE_BUFFER
        data = produce + metadata
        with wire.connect(b.bootstrap) as sock:
            sock.setsockopt(6, 1, 1)   # TCP_NODELAY: each piece its own segment
            cut = [0, 3, 7, 100, 5000, 70000, 300000, len(produce) - 1, len(produce) + 5, len(data)]
            for lo, hi in zip(cut, cut[1:]):
                sock.sendall(data[lo:hi])
                time.sleep(0.01)
            cid, resp = wire.read_response(sock, 0, 9)
            assert cid == 1 and resp.responses[0].partition_responses[0].error_code == 0
            cid, md = wire.read_response(sock, 3, 12)
            assert cid == 2 and md.topics[0].name == "big"
        assert values(b.bootstrap, "big", 0) == expected


def test_frames_above_the_upfront_allocation_and_around_the_receive_buffer(tmp_path):
    rng = random.Random(7)
    with BrokerProcess(tmp_path / "data") as b:
        admin.create_topic(b.bootstrap, "huge", 3, 1)
        admin.create_topic(b.bootstrap, "mid", 1, 1)
        # ~3 MB: three batches of ~1 MB (max.message.bytes is per batch)
        huge = [[bytes([(p * 7 + i) % 251]) * 1000 for i in range(980)] for p in range(3)]
        frame = produce_frame("huge", [rb.build_batch([(0, None, v, ()) for v in vals]) for vals in huge], 1)
        assert len(frame) > FRAME_UPFRONT
        with wire.connect(b.bootstrap, timeout=30) as sock:
            sock.setsockopt(6, 1, 1)
            pieces = sorted(rng.sample(range(1, len(frame)), 40))
            sender = send_in_background(sock, frame, pieces)
            cid, resp = wire.read_response(sock, 0, 9)
            sender.join(30)
            assert cid == 1
            assert [p.error_code for p in resp.responses[0].partition_responses] == [0, 0, 0]
        for p in range(3):
            assert values(b.bootstrap, "huge", p) == huge[p]
        # each fits the receive buffer, two do not
        per_frame = int(0.6 * RECEIVE_BUFFER) // 1000
        mids = [[bytes([(n + i) % 251]) * 1000 for i in range(per_frame)] for n in range(60)]
        frames = [produce_frame("mid", [rb.build_batch([(0, None, v, ()) for v in vals])], n)
                  for n, vals in enumerate(mids)]
        assert RECEIVE_BUFFER / 2 < len(frames[0]) < RECEIVE_BUFFER
        with wire.connect(b.bootstrap, timeout=30) as sock:
            data = b"".join(frames)
            sender = send_in_background(sock, data, sorted(rng.sample(range(1, len(data)), 25)))
            for n in range(len(frames)):
                cid, resp = wire.read_response(sock, 0, 9)
                assert cid == n and resp.responses[0].partition_responses[0].error_code == 0
            sender.join(30)
        assert values(b.bootstrap, "mid", 0) == [v for vals in mids for v in vals]


def test_thousands_of_small_requests_in_one_write_are_answered_in_order(tmp_path):
    n = 3000
    with BrokerProcess(tmp_path / "data") as b:
        data = b"".join(framed(ApiVersionsRequest(client_software_name="pipe", client_software_version="1"), 3, i)
                        for i in range(n))
        assert len(data) > 4 * RECEIVE_BUFFER
        with wire.connect(b.bootstrap, timeout=30) as sock:
            sender = send_in_background(sock, data)
            for i in range(n):
                cid, resp = wire.read_response(sock, 18, 3)
                assert cid == i and resp.error_code == 0
            sender.join(30)
