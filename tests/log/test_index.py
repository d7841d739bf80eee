"""OffsetIndex / TimeIndex: append, lookup, truncation, sanity checks, lazy loading."""

from __future__ import annotations

import struct

import pytest

from kcompat.log.index import CorruptIndexError, OffsetIndex, TimeIndex


def _offset_index(tmp_path, entries, base=100):
    p = tmp_path / "x.index"
    p.write_bytes(b"".join(struct.pack(">ii", o - base, pos) for o, pos in entries))
    return OffsetIndex(p, base)


def test_offset_index_lookup(tmp_path):
    idx = _offset_index(tmp_path, [(110, 0), (120, 4100), (135, 8300)])
    idx.load(segment_size=10000)
    assert idx.lookup(99) == (100, 0)
    assert idx.lookup(109) == (100, 0)
    assert idx.lookup(110) == (110, 0)
    assert idx.lookup(119) == (110, 0)
    assert idx.lookup(120) == (120, 4100)
    assert idx.lookup(10**9) == (135, 8300)
    assert idx.lookup_by_position(4099) == (110, 0)
    assert idx.lookup_by_position(4100) == (120, 4100)
    assert idx.lookup_by_position(-1) is None
    assert idx.last_entry() == (135, 8300)
    assert idx.entries == 3


def test_offset_index_last_entry_without_loading(tmp_path):
    idx = _offset_index(tmp_path, [(110, 0), (120, 4100)])
    assert idx.last_entry() == (120, 4100)
    assert not idx.loaded


@pytest.mark.parametrize("entries,size,raw_tail", [
    ([(110, 0), (110, 100)], 1000, b""),          # offsets not increasing
    ([(110, 200), (120, 100)], 1000, b""),        # positions decreasing
    ([(110, 0), (120, 5000)], 1000, b""),         # position beyond the segment
    ([(110, 0)], 1000, b"\x00\x01"),              # not a multiple of 8
])
def test_offset_index_sanity(tmp_path, entries, size, raw_tail):
    idx = _offset_index(tmp_path, entries)
    with open(idx.path, "ab") as f:
        f.write(raw_tail)
    with pytest.raises(CorruptIndexError):
        idx.load(segment_size=size)


def test_missing_index_is_corrupt(tmp_path):
    with pytest.raises(CorruptIndexError):
        OffsetIndex(tmp_path / "nope.index", 0).load(10)


def test_offset_index_append_truncate(tmp_path):
    idx = OffsetIndex(tmp_path / "a.index", 1000)
    idx.replace(b"")
    idx.open_for_append(segment_size=0)
    idx.append(1005, 0)
    idx.append(1010, 50)
    idx.append(1010, 60)   # not increasing: ignored
    idx.append(1020, 90)
    assert idx.entries == 3
    assert (tmp_path / "a.index").stat().st_size == 24
    assert idx.is_full(24) and idx.is_full(31) and not idx.is_full(32)
    idx.truncate_to_position(50)
    assert idx.entries == 1 and idx.last_entry() == (1005, 0)
    assert (tmp_path / "a.index").stat().st_size == 8
    idx.close_for_append()
    assert not idx.loaded
    assert idx.last_entry() == (1005, 0)


def test_time_index(tmp_path):
    idx = TimeIndex(tmp_path / "a.timeindex", 50)
    idx.replace(b"")
    idx.open_for_append(0)
    assert idx.lookup(5) == (-1, 50)
    idx.maybe_append(1000, 55)
    idx.maybe_append(1000, 57)   # same timestamp: ignored
    idx.maybe_append(900, 58)    # smaller: ignored
    idx.maybe_append(2000, 60)
    idx.maybe_append(3000, 60)
    assert idx.entries == 3
    assert idx.lookup(999) == (-1, 50)
    assert idx.lookup(1000) == (1000, 55)
    assert idx.lookup(2500) == (2000, 60)
    assert idx.last_entry() == (3000, 60)
    idx.truncate_to_offset(60)
    assert idx.entries == 1 and idx.last_entry() == (1000, 55)
    idx.close_for_append()
    idx.load(None)
    assert idx.lookup(10**15) == (1000, 55)


def test_time_index_sanity(tmp_path):
    p = tmp_path / "b.timeindex"
    p.write_bytes(struct.pack(">qi", 2000, 1) + struct.pack(">qi", 1000, 2))
    with pytest.raises(CorruptIndexError):
        TimeIndex(p, 0).load(None)
    p.write_bytes(struct.pack(">qi", 1000, 1) + b"\x00")
    with pytest.raises(CorruptIndexError):
        TimeIndex(p, 0).load(None)
