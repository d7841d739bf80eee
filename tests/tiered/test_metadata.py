"""Remote log metadata records (kafka-specs/storage), their framing and partitioner, the
per-partition state replaying them, and the local filesystem backend."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from kcompat.tiered.metadata import (
    PartitionDeleteState, RemotePartitionState, RemoteSegment, SegmentState, decode, encode, metadata_partition,
    partition_delete_record, record_partition,
)
from kcompat.tiered.storage import (
    IndexType, LocalFileSystemStorage, RemoteResourceNotFoundError, SegmentData, SegmentKey,
)

TOPIC_ID = uuid.UUID("7f2b1c3e-9a4d-4e5f-8a6b-1c2d3e4f5a6b")


def _segment(start: int, end: int, sid: uuid.UUID | None = None) -> RemoteSegment:
    key = SegmentKey("t", TOPIC_ID, 0, start, sid or uuid.uuid4())
    return RemoteSegment(key, end, broker_id=1, max_timestamp_ms=1000 + end, event_timestamp_ms=5,
                         leader_epochs={0: start, 2: start + 1}, size=100)


def test_records_round_trip_through_the_serde():
    seg = _segment(10, 19)
    for record in (seg.to_record(), seg.update_record(SegmentState.COPY_SEGMENT_FINISHED, 2, 9),
                   partition_delete_record("t", TOPIC_ID, 0, PartitionDeleteState.DELETE_PARTITION_MARKED, 1, 9)):
        value = encode(record)
        assert value[0] == 1   # frame version, then the record type (the spec's apiKey)
        assert value[1] == type(record).API_KEY
        again = decode(value)
        assert type(again) is type(record)
        assert encode(again) == value
        assert record_partition(again) == (TOPIC_ID, 0)


def test_partitioner_is_kafkas():
    # Kafka RemoteLogMetadataTopicPartitioner: murmur2 of Objects.hash(lsb, msb, partition) as 4 bytes
    zero = uuid.UUID(int=0)
    # Objects.hash(0L, 0L, 0) = 29791 = 0x745f; murmur2 of its 4 big-endian bytes, made positive
    from kcompat.protocol.murmur2 import murmur2
    assert metadata_partition(zero, 0, 50) == (murmur2(bytes([0, 0, 0x74, 0x5F])) & 0x7FFFFFFF) % 50
    spread = {metadata_partition(TOPIC_ID, p, 50) for p in range(200)}
    assert len(spread) > 25 and spread <= set(range(50))


def test_state_replays_transitions_and_ignores_invalid_ones():
    state = RemotePartitionState()
    a, b = _segment(0, 9), _segment(10, 19)
    for rec in (a.to_record(), a.update_record(SegmentState.COPY_SEGMENT_FINISHED, 1, 6), b.to_record()):
        state.apply(decode(encode(rec)))
    assert [s.start_offset for s in state.copied()] == [0]
    assert state.highest_copied_offset() == 9
    assert state.segment_for(5).key == a.key and state.segment_for(12) is None
    # STARTED -> DELETE_SEGMENT_FINISHED is not a valid transition
    state.apply(b.update_record(SegmentState.DELETE_SEGMENT_FINISHED, 1, 7))
    assert b.key.segment_id in state.segments
    for st in (SegmentState.DELETE_SEGMENT_STARTED, SegmentState.DELETE_SEGMENT_FINISHED):
        state.apply(b.update_record(st, 1, 8))
    assert b.key.segment_id not in state.segments
    state.apply(a.to_record())   # replayed twice: unchanged
    assert state.copied()[0].state == SegmentState.COPY_SEGMENT_FINISHED


def test_local_filesystem_backend(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name, data in (("log", b"0123456789"), ("index", b"i"), ("timeindex", b"t")):
        (src / f"x.{name}").write_bytes(data)
    store = LocalFileSystemStorage(tmp_path / "remote")
    key = _segment(0, 9).key
    data = SegmentData(src / "x.log", src / "x.index", src / "x.timeindex", None, None, b"0\n1\n0 0\n")

    async def run():
        await store.copy_log_segment_data(key, data)
        assert await store.fetch_log_segment(key, 2, 5) == b"234"
        assert await store.fetch_log_segment(key, 8) == b"89"
        assert await store.fetch_index(key, IndexType.LEADER_EPOCH) == b"0\n1\n0 0\n"
        with pytest.raises(RemoteResourceNotFoundError):
            await store.fetch_index(key, IndexType.TRANSACTION)
        await store.delete_log_segment_data(key)
        await store.delete_log_segment_data(key)   # already gone: no error
        with pytest.raises(RemoteResourceNotFoundError):
            await store.fetch_log_segment(key, 0)
    asyncio.run(run())
    assert not any(p.is_file() for p in (tmp_path / "remote").rglob("*"))
