"""Compacted topics need keys on every record; coordinators append without client validation."""

from __future__ import annotations

import uuid

import pytest

from kcompat.isr.partition import AppendPolicy, Partition
from kcompat.log import Log, LogConfig
from kcompat.protocol import compression, records as rb
from kcompat.protocol.errors import ErrorCode, KafkaError

NOW = 1_700_000_000_000


@pytest.fixture
def compacted(tmp_path):
    log = Log.open(tmp_path / "c-0", LogConfig(cleanup_policy="compact"), clean_shutdown=True, now_ms=NOW)
    p = Partition("c", 0, uuid.uuid4(), log, policy=AppendPolicy(compact=True))
    yield p
    p.log.close()


@pytest.mark.parametrize("codec", [compression.NONE, compression.GZIP, compression.LZ4])
def test_keyless_record_rejected_on_compacted_topic(compacted, codec):
    records = [(NOW, b"k1", b"v", ()), (NOW, None, b"no key", ()), (NOW, b"k3", b"v", ())]
    with pytest.raises(KafkaError) as e:
        compacted.append(memoryview(bytearray(rb.build_batch(records, codec=codec))), NOW)
    assert e.value.code == ErrorCode.INVALID_RECORD
    assert compacted.log_end_offset == 0


def test_keyed_records_accepted_on_compacted_topic_and_tombstones_too(compacted):
    records = [(NOW, b"k1", b"v", ()), (NOW, b"k2", None, ())]
    info = compacted.append(memoryview(bytearray(rb.build_batch(records, codec=compression.ZSTD))), NOW)
    assert info.base_offset == 0 and compacted.log_end_offset == 2


def test_append_internal_assigns_offsets_and_leader_epoch(tmp_path):
    log = Log.open(tmp_path / "i-0", LogConfig(), clean_shutdown=True, now_ms=NOW)
    p = Partition("i", 0, uuid.uuid4(), log, leader_epoch=7)
    first = p.append_internal(rb.build_batch([(NOW, b"a", b"1", ()), (NOW, b"b", b"2", ())]), NOW)
    second = p.append_internal(rb.build_control_batch(rb.CONTROL_COMMIT, 5, 0, 0, NOW), NOW)
    assert (first, second) == (0, 2)
    data = p.read(0, 1 << 20)
    headers = [h for _, h in rb.iter_batches(data)]
    assert [h.base_offset for h in headers] == [0, 2]
    assert {h.partition_leader_epoch for h in headers} == {7}
    assert headers[1].is_control
    assert all(rb.crc_valid(data, pos, h) for pos, h in rb.iter_batches(data))
    log.close()
