"""Log.read(zero_copy=True): file ranges for sendfile (kcompat.log.file_records) hold the bytes
they name whatever happens to the log before they are sent: appends, segment deletion by
retention or DeleteRecords, truncation (the range detaches into memory first); data not yet
CRC-checked by this process is read and checked instead."""

from __future__ import annotations

import os

from kcompat.log import FileRecords, Log, LogConfig
from kcompat.log.file_records import ZERO_COPY_MIN_BYTES

from .helpers import NOW, append


def open_log(path, **cfg) -> Log:
    return Log.open(path, LogConfig(**cfg), clean_shutdown=True, now_ms=NOW)


def fill(log: Log, batches: int, value_size: int = 4000) -> list[bytes]:
    return [append(log, 4, value_size=value_size) for _ in range(batches)]


def range_bytes(r: FileRecords) -> bytes:
    """What sendfile would send: the file range as the fd sees it now (or the detached copy)."""
    if r.data is not None:
        return r.data
    return os.pread(r.fd, len(r), r.position)


def test_large_reads_are_file_ranges_with_the_same_bytes(tmp_path):
    log = open_log(tmp_path / "t-0")
    batches = fill(log, 10)
    r = log.read(0, 10**6, zero_copy=True)
    assert isinstance(r, FileRecords)
    assert len(r) == sum(map(len, batches))
    assert range_bytes(r) == b"".join(batches) == log.read(0, 10**6)
    r.close()
    assert r.fd == -1
    small = log.read(0, ZERO_COPY_MIN_BYTES - 1, zero_copy=True)   # KIP-74: the first batch, as bytes
    assert small == batches[0] and isinstance(small, bytes)


def test_a_range_survives_appends_and_the_deletion_of_its_segment(tmp_path):
    log = open_log(tmp_path / "t-0", segment_bytes=40_000)
    batches = fill(log, 6)
    assert len(log.segments) > 1
    r = log.read(0, 10**6, zero_copy=True)
    first_segment = r.read_bytes()
    fill(log, 6)   # appends after the range
    log.delete_records_before(log.segments[-1].base_offset)   # the range's segment is unlinked
    assert not (tmp_path / "t-0" / "00000000000000000000.log").exists()
    assert range_bytes(r) == first_segment == b"".join(batches)[:len(r)]


def test_truncation_detaches_the_ranges_it_would_cut(tmp_path):
    log = open_log(tmp_path / "t-0")
    batches = fill(log, 10)
    whole = log.read(0, 10**6, zero_copy=True)
    head = log.read(0, 5 * len(batches[0]), zero_copy=True)   # ends before the cut
    assert isinstance(whole, FileRecords) and isinstance(head, FileRecords)
    log.truncate_to(20)   # batches 5.. go
    assert whole.data == b"".join(batches) and whole.fd == -1
    assert head.data is None and 0 < len(head) <= 5 * len(batches[0])
    assert range_bytes(head) == b"".join(batches)[:len(head)]
    assert log.read(0, 10**6) == b"".join(batches[:5])


def test_unchecked_data_is_read_and_checked_before_it_is_served_by_range(tmp_path):
    log = open_log(tmp_path / "t-0")
    batches = fill(log, 10)
    log.close()
    log = Log.open(tmp_path / "t-0", LogConfig(), clean_shutdown=True, now_ms=NOW)   # CRCs unchecked now
    first = log.read(0, 10**6, zero_copy=True)
    assert isinstance(first, bytes) and first == b"".join(batches)
    again = log.read(0, 10**6, zero_copy=True)
    assert isinstance(again, FileRecords) and range_bytes(again) == first
