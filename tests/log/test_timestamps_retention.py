"""Timestamps (ListOffsets), retention, DeleteRecords, truncation, snapshots."""

from __future__ import annotations

import os

import pytest

from kcompat.log import Log, LogConfig
from kcompat.protocol.records import LOG_APPEND_TIME, build_batch

from .helpers import NOW, append, headers, offsets


def open_log(path, **cfg) -> Log:
    return Log.open(path, LogConfig(**cfg), clean_shutdown=True, now_ms=NOW)


def test_offset_for_timestamp(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=600, index_interval_bytes=100)
    # offsets 0..59, timestamps NOW + 10*offset except a dip
    for i in range(20):
        stamps = [NOW + 10 * (3 * i + j) for j in range(3)]
        if i == 7:
            stamps[1] = NOW - 5   # an out-of-order record in the middle
        append(log, timestamps=stamps)
    assert len(log.segments) > 2
    assert log.offset_for_timestamp(NOW - 100) == (0, NOW)
    assert log.offset_for_timestamp(NOW) == (0, NOW)
    assert log.offset_for_timestamp(NOW + 1) == (1, NOW + 10)
    assert log.offset_for_timestamp(NOW + 255) == (26, NOW + 260)
    assert log.offset_for_timestamp(NOW + 590) == (59, NOW + 590)
    assert log.offset_for_timestamp(NOW + 591) is None
    for target in range(NOW - 20, NOW + 600, 13):
        got = log.offset_for_timestamp(target)
        # brute force over the whole log
        from kcompat.protocol.records import iter_batches, iter_records
        expect = None
        for seg in log.segments:
            data = log.read(seg.base_offset, 10**9)
            for pos, h in iter_batches(data):
                for r in iter_records(data[pos:pos + h.size]):
                    if expect is None and r.timestamp >= target:
                        expect = (r.offset, r.timestamp)
        assert got == expect, target


def test_offset_for_timestamp_respects_log_start(tmp_path):
    log = open_log(tmp_path / "t-0")
    append(log, 5, ts=NOW, ts_step=1)
    log.delete_records_before(3)
    assert log.offset_for_timestamp(NOW) == (3, NOW + 3)


def test_offset_for_timestamp_empty_log(tmp_path):
    log = open_log(tmp_path / "t-0")
    assert log.offset_for_timestamp(0) is None
    assert log.max_timestamp_and_offset() == (-1, -1)


def test_max_timestamp_and_offset(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=400)
    append(log, timestamps=[NOW, NOW + 5, NOW + 1])
    append(log, timestamps=[NOW + 2, NOW + 50, NOW + 50, NOW + 3])   # max at offset 4
    append(log, timestamps=[NOW + 50])                               # tie: earlier wins
    for _ in range(5):
        append(log, timestamps=[NOW + 7] * 3)
    assert len(log.segments) > 1
    assert log.max_timestamp_and_offset() == (NOW + 50, 4)
    log.close()
    # after reopening, the exact record offset is found by decoding one batch
    log = open_log(tmp_path / "t-0", segment_bytes=400)
    assert log.max_timestamp_and_offset() == (NOW + 50, 4)
    append(log, timestamps=[NOW + 60, NOW + 61, NOW + 60])
    assert log.max_timestamp_and_offset() == (NOW + 61, log.log_end_offset - 2)


def test_max_timestamp_log_append_time(tmp_path):
    log = open_log(tmp_path / "t-0")
    b = build_batch([(NOW, None, b"a", ()), (NOW, None, b"b", ())], base_offset=0,
                    timestamp_type=LOG_APPEND_TIME)
    log.append(b, last_offset=1, max_timestamp=NOW, offset_of_max_timestamp=0, now_ms=NOW)
    log.close()
    log = open_log(tmp_path / "t-0")
    assert log.max_timestamp_and_offset() == (NOW, 0)


def test_retention_by_time(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=300, retention_ms=1000)
    for i in range(9):
        append(log, 1, value_size=100, ts=NOW + 100 * i)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 3
    assert log.apply_retention(NOW + 1000) == 0
    # segments whose max timestamp < now - retention go; active segment not old enough
    n = log.apply_retention(NOW + 1000 + 250)
    assert n >= 1
    assert log.log_start_offset == log.segments[0].base_offset
    for seg in log.segments[:-1]:
        assert NOW + 1250 - seg.largest_timestamp() <= 1000
    with pytest.raises(Exception):
        log.read(0, 100)
    # everything old: a new empty active segment is rolled, all data goes
    leo = log.log_end_offset
    log.apply_retention(NOW + 10**6)
    assert [s.base_offset for s in log.segments] == [leo]
    assert log.log_start_offset == leo == log.log_end_offset
    assert log.size_in_bytes == 0
    assert log.read(leo, 100) == b""
    append(log, 1)
    assert log.log_end_offset == leo + 1


def test_retention_respects_high_watermark(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=300, retention_ms=1000)
    for i in range(9):
        append(log, 1, value_size=100, ts=NOW)
    second = log.segments[1].base_offset
    assert log.apply_retention(NOW + 10**6, high_watermark=second) == 1
    assert log.log_start_offset == second


def test_retention_unlimited_and_compact(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=300, retention_ms=-1, retention_bytes=-1)
    for i in range(9):
        append(log, 1, value_size=100, ts=0)
    assert log.apply_retention(NOW) == 0
    log.update_config(LogConfig(segment_bytes=300, retention_ms=1, cleanup_policy="compact"))
    assert log.apply_retention(NOW) == 0


def test_retention_by_size(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=300, retention_ms=-1)
    for i in range(10):
        append(log, 1, value_size=100)
    sizes = [s.size for s in log.segments]
    total = log.size_in_bytes
    log.update_config(LogConfig(segment_bytes=300, retention_ms=-1, retention_bytes=total - sizes[0]))
    assert log.apply_retention(NOW) == 1
    assert log.size_in_bytes == total - sizes[0]
    log.update_config(LogConfig(segment_bytes=300, retention_ms=-1, retention_bytes=1))
    n = log.apply_retention(NOW)
    assert n == len(sizes) - 2                                 # active segment survives
    assert log.size_in_bytes == sizes[-1]
    assert log.log_start_offset == log.segments[0].base_offset
    log.update_config(LogConfig(segment_bytes=300, retention_ms=-1, retention_bytes=0))
    leo = log.log_end_offset
    assert log.apply_retention(NOW) == 1                        # rolls, deletes the old active
    assert log.log_start_offset == leo and log.size_in_bytes == 0


def test_delete_records_before(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=300)
    for i in range(10):
        append(log, 2, value_size=50)
    bases = [s.base_offset for s in log.segments]
    target = bases[2] + 1
    assert log.delete_records_before(target) == target
    assert log.log_start_offset == target
    assert [s.base_offset for s in log.segments] == bases[2:]
    assert headers(log.read(target, 100))[0].base_offset <= target
    assert log.delete_records_before(1) == target             # never goes back
    with pytest.raises(ValueError):
        log.delete_records_before(log.log_end_offset + 1)
    assert log.delete_records_before(log.log_end_offset) == log.log_end_offset
    assert len(log.segments) == 1                               # the active one stays


def test_truncate_to(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=400, index_interval_bytes=50)
    bs = [append(log, 2, value_size=40, ts=NOW + i) for i in range(15)]    # 0..29
    assert len(log.segments) > 2
    log.write_snapshot(10, b"s10")
    log.write_snapshot(20, b"s20")
    assert log.truncate_to(40) is False
    assert log.truncate_to(21) is True                           # mid-batch: batch 20-21 goes
    assert log.log_end_offset == 20
    assert log.snapshot_offsets == [10, 20]
    assert log.size_in_bytes == sum(len(b) for b in bs[:10])
    assert log.max_timestamp_and_offset() == (NOW + 9, 18)   # first record carrying it
    append(log, 1, ts=NOW + 100)
    assert log.log_end_offset == 21
    assert offsets(log.read(20, 100)) == [20]
    log.truncate_to(12)
    assert log.snapshot_offsets == [10]
    assert log.log_end_offset == 12
    log.close()
    log = open_log(tmp_path / "t-0", segment_bytes=400, index_interval_bytes=50)
    assert log.log_end_offset == 12
    seen = []
    o = 0
    while o < 12:
        hs = headers(log.read(o, 10**6))
        seen += [h.base_offset for h in hs]
        o = hs[-1].next_offset
    assert seen == list(range(0, 12, 2))


def test_truncate_into_old_segment_then_reopen_unclean(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=300)
    for i in range(10):
        append(log, 1, value_size=100, ts=NOW + i)
    first_end = log.segments[1].base_offset
    log.truncate_to(first_end - 1)
    assert len(log.segments) == 1 and log.active_segment.active
    append(log, 1, ts=NOW + 50)
    assert log.max_timestamp_and_offset() == (NOW + 50, first_end - 1)
    log.flush()
    del log   # crash without close
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=300), recovery_point=0,
                   clean_shutdown=False, now_ms=NOW)
    assert log.log_end_offset == first_end


def test_truncate_fully_and_start_at(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=300)
    for _ in range(5):
        append(log, 1, value_size=100)
    log.write_snapshot(3, b"x")
    log.truncate_fully_and_start_at(100)
    assert [s.base_offset for s in log.segments] == [100]
    assert log.log_start_offset == log.log_end_offset == log.recovery_point == 100
    assert log.snapshot_offsets == []
    assert sorted(p.name for p in (tmp_path / "t-0").glob("*.log")) == ["00000000000000000100.log"]
    log.truncate_to(50)   # below the first segment: start over at 50
    assert log.log_end_offset == 50 and log.log_start_offset == 50


def test_snapshots(tmp_path):
    log = open_log(tmp_path / "t-0")
    assert log.latest_snapshot(100) is None
    log.write_snapshot(5, b"five")
    log.write_snapshot(15, b"fifteen")
    log.write_snapshot(10, b"ten")
    assert (tmp_path / "t-0" / "00000000000000000010.snapshot").read_bytes() == b"ten"
    assert log.latest_snapshot(14) == (10, b"ten")
    assert log.latest_snapshot(15) == (15, b"fifteen")
    assert log.latest_snapshot(4) is None
    log.write_snapshot(10, b"TEN")
    assert log.latest_snapshot(10) == (10, b"TEN")
    assert log.delete_snapshots_after(10) == 1
    assert log.delete_snapshots_before(10) == 1
    assert log.snapshot_offsets == [10]
    assert not list((tmp_path / "t-0").glob("*.tmp"))
    log.close()
    # snapshots beyond the log end are dropped at open (the log is empty: LEO 0)
    log = open_log(tmp_path / "t-0")
    assert log.snapshot_offsets == []


def test_delete(tmp_path):
    log = open_log(tmp_path / "t-0")
    append(log, 1)
    log.delete()
    assert not (tmp_path / "t-0").exists()


def test_largest_timestamp_falls_back_to_mtime(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=200, retention_ms=1000)
    for _ in range(3):
        append(log, 1, value_size=100, ts=-1, now_ms=NOW)
    seg = log.segments[0]
    os.utime(seg.log_path, ns=(NOW * 10**6, NOW * 10**6))
    assert seg.largest_timestamp() == NOW
    assert log.apply_retention(NOW + 500) == 0
    assert log.apply_retention(NOW + 5000) >= 1
