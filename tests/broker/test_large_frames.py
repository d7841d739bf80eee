"""Large request frames arriving in small pieces: a produce request of ~600 KB sent a few bytes at a
time and followed, in its last piece, by the start of the next request is assembled once complete
(kcompat.broker.connection: frames above 64 KiB are collected, then copied once) and both requests
are answered in order with the records stored intact."""

from __future__ import annotations

import struct
import time

from kcompat.protocol import records as rb
from kcompat.protocol.messages.fetch import FetchRequest
from kcompat.protocol.messages.headers import RequestHeader
from kcompat.protocol.messages.metadata import MetadataRequest
from kcompat.protocol.messages.produce import ProduceRequest
from kcompat.testing import admin, wire
from tests.support.broker_process import BrokerProcess


def framed(request, version: int, correlation_id: int) -> bytes:
    req_cls = type(request)
    flexible = req_cls.FLEXIBLE_MIN is not None and version >= req_cls.FLEXIBLE_MIN
    body = bytearray()
    RequestHeader(request_api_key=req_cls.API_KEY, request_api_version=version, correlation_id=correlation_id,
                  client_id="pieces").write(body, 2 if flexible else 1)
    request.write(body, version)
    return struct.pack(">i", len(body)) + bytes(body)


def test_a_large_frame_in_small_pieces_then_another_request(tmp_path):
    with BrokerProcess(tmp_path / "data") as b:
        admin.create_topic(b.bootstrap, "big", 1, 1)
        values = [bytes([i % 251]) * 1000 for i in range(600)]
        batch = rb.build_batch([(0, None, v, ()) for v in values])
        produce = framed(ProduceRequest(acks=1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
            name="big", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])]), 9, 1)
        metadata = framed(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="big")]), 12, 2)
        assert len(produce) > 64 * 1024
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
        F = FetchRequest
        fetched = wire.call(b.bootstrap, F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 22,
                                           isolation_level=0, session_id=0, session_epoch=-1,
                                           topics=[F.FetchTopic(topic="big", partitions=[F.FetchPartition(
                                               partition=0, current_leader_epoch=-1, fetch_offset=0,
                                               log_start_offset=-1, partition_max_bytes=1 << 22)])],
                                           forgotten_topics_data=[], rack_id=""), 12)
        data = memoryview(bytes(fetched.responses[0].partitions[0].records))
        got = [bytes(r.value) for pos, h in rb.iter_batches(data) for r in rb.iter_records(data[pos:pos + h.size])]
        assert got == values
