"""Raw-protocol helpers shared by the robustness tests (built on tests/support/wire.py)."""

from __future__ import annotations

import time

from kcompat.protocol.messages.create_topics import CreateTopicsRequest
from kcompat.protocol.messages.fetch import FetchRequest
from kcompat.protocol.messages.init_producer_id import InitProducerIdRequest
from kcompat.protocol.messages.produce import ProduceRequest
from kcompat.protocol.records import build_batch, iter_batches, iter_records
from tests.support import wire

FETCH_V = 12        # flexible, topics by name
PRODUCE_V = 9
NOW_MS = lambda: int(time.time() * 1000)  # noqa: E731


def create_topic(bootstrap: str, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
    C = CreateTopicsRequest
    req = C(topics=[C.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1,
        configs=[C.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])],
        timeout_ms=10000)
    resp = wire.call(bootstrap, req, 7)
    assert resp.topics[0].error_code == 0, resp


def init_producer_id(bootstrap: str, version: int = 4) -> tuple[int, int]:
    resp = wire.call(bootstrap, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), version)
    assert resp.error_code == 0, resp
    return resp.producer_id, resp.producer_epoch


def produce_request(topic: str, partition: int, records, acks: int = -1) -> ProduceRequest:
    P = ProduceRequest
    return P(transactional_id=None, acks=acks, timeout_ms=10000, topic_data=[
        P.TopicProduceData(name=topic, partition_data=[P.PartitionProduceData(index=partition, records=records)])])


def produce(bootstrap_or_sock, topic: str, partition: int, records, *, acks: int = -1,
            version: int = PRODUCE_V, correlation_id: int = 1):
    """Produce raw record bytes; returns the PartitionProduceResponse."""
    req = produce_request(topic, partition, records, acks)
    if isinstance(bootstrap_or_sock, str):
        resp = wire.call(bootstrap_or_sock, req, version)
    else:
        wire.send_request(bootstrap_or_sock, req, version, correlation_id)
        _corr, resp = wire.read_response(bootstrap_or_sock, 0, version)
    return resp.responses[0].partition_responses[0]


def batch(values, *, producer_id: int = -1, epoch: int = -1, seq: int = -1, ts: int | None = None,
          key: bytes | None = None, codec: int = 0) -> bytes:
    ts = NOW_MS() if ts is None else ts
    return build_batch([(ts, key, v, ()) for v in values], producer_id=producer_id, producer_epoch=epoch,
                       base_sequence=seq, codec=codec)


def fetch_request(topic: str, partition: int, offset: int, *, max_wait_ms: int = 0, min_bytes: int = 0,
                  max_bytes: int = 1 << 20) -> FetchRequest:
    F = FetchRequest
    return F(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes, isolation_level=0,
             session_id=0, session_epoch=-1, topics=[F.FetchTopic(topic=topic, partitions=[
                 F.FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=max_bytes)])])


def fetch(bootstrap: str, topic: str, partition: int, offset: int, **kw):
    """One Fetch; returns the PartitionData (error_code, high_watermark, records, ...)."""
    resp = wire.call(bootstrap, fetch_request(topic, partition, offset, **kw), FETCH_V)
    assert resp.error_code == 0, resp
    return resp.responses[0].partitions[0]


def read_batches(bootstrap: str, topic: str, partition: int, start: int = 0) -> list[bytes]:
    """Every stored batch of a partition from ``start`` up to the high watermark, as raw bytes,
    read with plain Fetch requests straight from the broker."""
    out: list[bytes] = []
    offset = start
    with wire.connect(bootstrap) as sock:
        corr = 0
        while True:
            corr += 1
            wire.send_request(sock, fetch_request(topic, partition, offset), FETCH_V, corr)
            _c, resp = wire.read_response(sock, 1, FETCH_V)
            pd = resp.responses[0].partitions[0]
            assert pd.error_code == 0, pd
            data = bytes(pd.records or b"")
            if offset >= pd.high_watermark or not data:
                assert offset >= pd.high_watermark, f"no data below the high watermark at {offset}"
                return out
            before = offset
            for pos, h in iter_batches(data):
                if h.next_offset <= offset:
                    continue
                out.append(data[pos:pos + h.size])
                offset = h.next_offset
            assert offset > before, f"fetch at {before} made no progress"


def read_records(bootstrap: str, topic: str, partition: int, start: int = 0):
    """(offset, key, value) of every record at or after ``start``."""
    recs = []
    for b in read_batches(bootstrap, topic, partition, start):
        recs += [(r.offset, r.key, r.value) for r in iter_records(b) if r.offset >= start]
    return recs
