"""Log.append / Log.read: rolling, index lookups, read limits, out-of-range."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcompat.log import Log, LogConfig, OffsetOutOfRangeError
from kcompat.protocol.records import iter_batches

from .helpers import NOW, append, headers, make_batch, offsets


def open_log(path, **cfg) -> Log:
    return Log.open(path, LogConfig(**cfg), clean_shutdown=True, now_ms=NOW)


def test_empty_dir_creates_segment_at_log_start(tmp_path):
    log = Log.open(tmp_path / "t-0", LogConfig(), log_start_offset=42, clean_shutdown=True, now_ms=NOW)
    assert [s.base_offset for s in log.segments] == [42]
    assert log.log_start_offset == log.log_end_offset == 42
    assert (tmp_path / "t-0" / "00000000000000000042.log").exists()
    assert (tmp_path / "t-0" / "00000000000000000042.index").exists()
    assert (tmp_path / "t-0" / "00000000000000000042.timeindex").exists()
    assert log.read(42, 1000) == b""
    assert log.size_in_bytes == 0


def test_append_and_read_back(tmp_path):
    log = open_log(tmp_path / "t-0")
    b1 = append(log, 3)
    b2 = append(log, 2)
    assert log.log_end_offset == 5
    assert log.size_in_bytes == len(b1) + len(b2)
    assert log.read(0, 10**6) == b1 + b2
    assert log.read(1, 10**6) == b1 + b2       # batch containing offset 1 starts at 0
    assert log.read(3, 10**6) == b2
    assert log.read(4, 10**6) == b2
    assert log.read(5, 10**6) == b""
    assert (tmp_path / "t-0" / "00000000000000000000.log").read_bytes() == b1 + b2


def test_append_rejects_wrong_offsets_and_framing(tmp_path):
    log = open_log(tmp_path / "t-0")
    append(log, 2)
    with pytest.raises(ValueError):
        log.append(make_batch(5), last_offset=5, max_timestamp=NOW, offset_of_max_timestamp=5,
                   now_ms=NOW)
    b = make_batch(2, 2)
    with pytest.raises(ValueError):
        log.append(b[:-1], last_offset=3, max_timestamp=NOW, offset_of_max_timestamp=2, now_ms=NOW)
    with pytest.raises(ValueError):
        log.append(b, last_offset=7, max_timestamp=NOW, offset_of_max_timestamp=2, now_ms=NOW)
    with pytest.raises(ValueError):
        log.append(b + b[:30], last_offset=3, max_timestamp=NOW, offset_of_max_timestamp=2, now_ms=NOW)
    assert log.log_end_offset == 2


def test_multi_batch_append(tmp_path):
    log = open_log(tmp_path / "t-0", index_interval_bytes=1)
    data = make_batch(0, 2) + make_batch(2, 3, ts=NOW + 5) + make_batch(5, 1, ts=NOW + 1)
    log.append(data, last_offset=5, max_timestamp=NOW + 5, offset_of_max_timestamp=2, now_ms=NOW)
    assert log.log_end_offset == 6
    assert offsets(log.read(0, 10**6)) == list(range(6))
    assert headers(log.read(5, 10**6))[0].base_offset == 5
    assert log.max_timestamp_and_offset() == (NOW + 5, 2)
    # the index got entries for the 2nd and 3rd batch (interval 1 byte)
    assert log.active_segment.offset_index.entries == 2


def test_roll_by_size(tmp_path):
    b = make_batch(0, 1, value_size=100)
    log = open_log(tmp_path / "t-0", segment_bytes=3 * len(b))
    for _ in range(7):
        append(log, 1, value_size=100)
    assert [s.base_offset for s in log.segments] == [0, 3, 6]
    assert [s.size for s in log.segments] == [3 * len(b), 3 * len(b), len(b)]
    assert sorted(p.name for p in (tmp_path / "t-0").glob("*.log")) == [
        "00000000000000000000.log", "00000000000000000003.log", "00000000000000000006.log"]
    assert offsets(log.read(0, 10**6)) == [0, 1, 2]       # one segment per read, as Kafka
    assert offsets(log.read(4, 10**6)) == [4, 5]


def test_batch_larger_than_segment_goes_into_its_own_segment(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=200)
    append(log, 1)
    append(log, 1, value_size=500)
    append(log, 1)
    assert [s.base_offset for s in log.segments] == [0, 1, 2]


def test_roll_by_time_uses_record_timestamps(tmp_path):
    log = open_log(tmp_path / "t-0", segment_ms=1000)
    append(log, 1, ts=NOW)
    append(log, 1, ts=NOW + 1000)            # not > segment.ms
    assert len(log.segments) == 1
    append(log, 1, ts=NOW + 1001)
    assert [s.base_offset for s in log.segments] == [0, 2]
    # old producer timestamps do not roll every batch (Kafka compares record timestamps)
    append(log, 1, ts=NOW - 10**9, now_ms=NOW + 10**6)
    assert len(log.segments) == 2


def test_roll_by_time_without_timestamps_uses_creation_time(tmp_path):
    log = open_log(tmp_path / "t-0", segment_ms=1000)
    append(log, 1, ts=-1, now_ms=NOW + 10)
    append(log, 1, ts=-1, now_ms=NOW + 1000)
    assert len(log.segments) == 1
    append(log, 1, ts=-1, now_ms=NOW + 1001)
    assert len(log.segments) == 2


def test_roll_when_index_full(tmp_path):
    # 24-byte indexes: 3 offset entries (2 time entries), index entry for nearly every batch
    log = open_log(tmp_path / "t-0", segment_index_bytes=24, index_interval_bytes=1)
    for i in range(10):
        append(log, 1, ts=NOW + i)
    for seg in log.segments[:-1]:
        assert seg.time_index.entries >= 2 or seg.offset_index.entries >= 3
    assert len(log.segments) > 2
    assert offsets(b"".join(log.read(o, 10**6) for o in
                            [s.base_offset for s in log.segments])) == list(range(10))


def test_on_roll_callback(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=100)
    seen = []
    log.on_roll = seen.append
    for _ in range(3):
        append(log, 1, value_size=60)
    assert seen == [1, 2]


def test_read_inside_batches_across_segments_with_sparse_index(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=5000, index_interval_bytes=300)
    batches = [append(log, 5, value_size=20) for _ in range(60)]
    assert len(log.segments) >= 3
    assert any(s.offset_index.entries > 0 for s in log.segments)
    for offset in range(0, 300, 7):
        data = log.read(offset, 1)           # max_bytes 1: exactly one whole batch
        hs = headers(data)
        assert len(hs) == 1
        assert hs[0].base_offset <= offset <= hs[0].last_offset
        assert data == batches[offset // 5]


def test_max_bytes_and_min_one_batch(tmp_path):
    log = open_log(tmp_path / "t-0")
    bs = [append(log, 2, value_size=50) for _ in range(10)]
    size = len(bs[0])
    assert log.read(0, size * 3) == b"".join(bs[:3])
    assert log.read(0, size * 3 + size - 1) == b"".join(bs[:3])
    assert log.read(2, size - 1) == bs[1]                       # KIP-74: one batch anyway
    assert log.read(2, size - 1, min_one_batch=False) == b""
    assert log.read(2, 0) == bs[1]
    assert log.read(0, 10**6) == b"".join(bs)


def test_max_offset(tmp_path):
    log = open_log(tmp_path / "t-0", index_interval_bytes=100)
    bs = [append(log, 2) for _ in range(10)]                   # offsets 0..19
    assert log.read(0, 10**6, max_offset=6) == b"".join(bs[:3])
    assert log.read(0, 10**6, max_offset=7) == b"".join(bs[:4])  # batch 6-7 starts below 7
    assert log.read(6, 10**6, max_offset=6) == b""
    assert log.read(0, len(bs[0]), max_offset=6) == bs[0]
    assert log.read(0, 10**6, max_offset=0) == b""
    assert log.read(20, 10**6, max_offset=6) == b""


def test_out_of_range(tmp_path):
    log = open_log(tmp_path / "t-0")
    append(log, 3)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(4, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)
    log.delete_records_before(2)
    with pytest.raises(OffsetOutOfRangeError) as ei:
        log.read(1, 100)
    assert ei.value.log_start_offset == 2 and ei.value.log_end_offset == 3
    assert offsets(log.read(2, 1000)) == [0, 1, 2]             # whole batch, consumer skips


def test_read_continues_after_gap_at_segment_end(tmp_path):
    log = open_log(tmp_path / "t-0")
    append(log, 2)                                  # 0-1
    # a compacted-style batch 2..9 whose records are only 2 and 9 (offset deltas 0 and 7)
    from kcompat.protocol.records import build_batch
    b = build_batch([(NOW, b"a", b"x", ()), (NOW, b"b", b"y", ())], base_offset=2,
                    offset_deltas=[0, 7])
    log.append(b, last_offset=9, max_timestamp=NOW, offset_of_max_timestamp=2, now_ms=NOW)
    log.roll()
    append(log, 1)                                  # 10
    assert offsets(log.read(5, 10**6)) == [2, 9]
    # a gap at the very end of a segment: truncate makes LEO fall in it
    log2 = open_log(tmp_path / "u-0")
    append(log2, 2)
    log2.truncate_to(2)
    assert log2.read(2, 100) == b""


def test_sequential_reads_use_cache_and_stay_correct(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=3000, index_interval_bytes=200)
    bs = [append(log, 3, value_size=30) for _ in range(50)]
    out = []
    offset = 0
    while offset < log.log_end_offset:
        data = log.read(offset, 700)
        hs = headers(data)
        assert hs and hs[0].base_offset <= offset <= hs[0].last_offset
        out.append(data)
        offset = hs[-1].next_offset
    assert b"".join(out) == b"".join(bs)
    assert len(log._read_cache) > 0
    # appends after a cached end-of-log read are found
    cached_leo = log.log_end_offset
    b = append(log, 1)
    assert log.read(cached_leo, 10**6) == b


def test_read_many_old_segments_keeps_few_fds_open(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=200)
    for _ in range(40):
        append(log, 1, value_size=100)
    for seg in log.segments:
        log.read(seg.base_offset, 10**6)
    assert sum(1 for s in log.segments if s.is_open) <= 9


def test_iter_batch_headers(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=400)
    for _ in range(12):
        append(log, 3, value_size=40)
    hs = list(log.iter_batch_headers(10))
    assert hs[0].base_offset == 9 and hs[-1].last_offset == 35
    assert [h.base_offset for h in hs] == list(range(9, 36, 3))
    assert [h.base_offset for h in log.iter_batch_headers(0)] == list(range(0, 36, 3))
    assert list(log.iter_batch_headers(36)) == []


def test_flush_messages_advances_recovery_point(tmp_path):
    log = open_log(tmp_path / "t-0", flush_messages=5)
    append(log, 3)
    assert log.recovery_point == 0
    append(log, 3)
    assert log.recovery_point == 6
    log2 = open_log(tmp_path / "u-0", flush_ms=1000)
    append(log2, 1)
    log2.maybe_flush(NOW + 500)
    assert log2.recovery_point == 0
    log2.maybe_flush(NOW + 1000)
    assert log2.recovery_point == 1


def test_roll_then_maybe_flush_flushes_rolled_segments(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=200)
    for _ in range(3):
        append(log, 1, value_size=100)
    assert log.pending_roll_flush
    log.maybe_flush(NOW)
    assert log.recovery_point == log.active_segment.base_offset
    assert not log.pending_roll_flush


def test_update_config(tmp_path):
    log = open_log(tmp_path / "t-0")
    append(log, 1, value_size=100)
    log.update_config(LogConfig(segment_bytes=100))
    append(log, 1)
    assert len(log.segments) == 2 and log.config.segment_bytes == 100


def test_closed_log_raises(tmp_path):
    from kcompat.log import LogClosedError
    log = open_log(tmp_path / "t-0")
    log.close()
    log.close()
    with pytest.raises(LogClosedError):
        append(log, 1)


def test_kafka_layout_of_files(tmp_path):
    """Index entries as Kafka writes them: big-endian relative offset / position pairs."""
    import struct
    log = open_log(tmp_path / "t-0", index_interval_bytes=1)
    append(log, 2, ts=NOW)
    append(log, 2, ts=NOW + 7)
    log.close()
    idx = (tmp_path / "t-0" / "00000000000000000000.index").read_bytes()
    first_size = len(make_batch(0, 2))
    assert struct.unpack(">ii", idx) == (3, first_size)
    tidx = (tmp_path / "t-0" / "00000000000000000000.timeindex").read_bytes()
    assert struct.unpack(">qi", tidx) == (NOW + 7, 3)


def test_compressed_batches_are_opaque(tmp_path):
    from kcompat.protocol import compression
    log = open_log(tmp_path / "t-0")
    b = append(log, 50, codec=compression.ZSTD, value_size=200, ts_step=1)
    assert log.read(10, 100) == b
    assert log.offset_for_timestamp(NOW + 10) == (10, NOW + 10)
    assert [h.records_count for _p, h in iter_batches(b)] == [50]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(0, 400), min_size=1, max_size=25), interval=st.integers(0, 1500),
       max_bytes=st.integers(0, 3000), min_one=st.booleans())
def test_a_read_takes_every_whole_batch_that_fits(tmp_path_factory, sizes, interval, max_bytes, min_one):
    """A read from each batch's start returns the longest run of whole batches within
    ``max_bytes`` (at least the first with ``min_one_batch``), and a consumer's run of reads, each
    from where the last ended, returns the log exactly: whatever the index interval, and whether
    the position and the header of the next batch come from the read cache or not."""
    log = open_log(tmp_path_factory.mktemp("fits") / "t-0", index_interval_bytes=interval)
    batches = [append(log, 1 + i % 3, value_size=size) for i, size in enumerate(sizes)]
    bases = [0]
    for i in range(len(sizes) - 1):
        bases.append(bases[-1] + 1 + i % 3)

    def expected(i: int) -> bytes:
        taken, total = [], 0
        for b in batches[i:]:
            if total + len(b) > max_bytes and (taken or not min_one):
                break
            taken.append(b)
            total += len(b)
        return b"".join(taken)

    for i in reversed(range(len(batches))):   # backwards: no read cache entry from the read before
        assert log.read(bases[i], max_bytes, min_one_batch=min_one) == expected(i)
    if min_one:
        got, offset = [], 0
        while offset < log.log_end_offset:
            data = log.read(offset, max_bytes)
            i = bases.index(offset)
            assert data == expected(i)
            got.append(data)
            offset = bases[i + len(list(iter_batches(data)))] if i + len(list(iter_batches(data))) < len(bases) \
                else log.log_end_offset
        assert b"".join(got) == b"".join(batches)
