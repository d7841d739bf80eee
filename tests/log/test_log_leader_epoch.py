"""The leader-epoch cache inside kcompat.log.Log: assigned from appended batches, trimmed by
truncation, retention and DeleteRecords, loaded at open, rebuilt from the batches when the file is
missing or empty (a malformed one is refused, as Kafka), repaired after an unclean shutdown; and follower appends with offset gaps."""

from __future__ import annotations

import os

import pytest

from kcompat.log import LEADER_EPOCH_CHECKPOINT, Log, LogConfig, LogDirError
from kcompat.protocol.records import build_batch

from .helpers import NOW, offsets

CFG = LogConfig(segment_bytes=400, index_interval_bytes=50)


def open_log(path, *, clean: bool = True, config: LogConfig = CFG, recovery_point: int = 0, **kw) -> Log:
    return Log.open(path, config, recovery_point=recovery_point, clean_shutdown=clean, now_ms=NOW, **kw)


def batch(base: int, epoch: int, n: int = 2, value_size: int = 40) -> bytes:
    recs = [(NOW + i, b"k%d" % (base + i), b"v" * value_size, ()) for i in range(n)]
    return build_batch(recs, base_offset=base, partition_leader_epoch=epoch)


def append_epoch(log: Log, epoch: int, n: int = 2, value_size: int = 40) -> int:
    """Append one batch of ``n`` records stamped with ``epoch`` at the LEO; returns its base."""
    base = log.log_end_offset
    log.append(batch(base, epoch, n, value_size), last_offset=base + n - 1, max_timestamp=NOW + n - 1,
               offset_of_max_timestamp=base + n - 1, now_ms=NOW)
    return base


def checkpoint(path) -> str:
    return (path / LEADER_EPOCH_CHECKPOINT).read_text()


def crash(log: Log) -> None:
    """kill -9: close the fds without flushing, writing index entries or the checkpoint."""
    for seg in log._segments:
        if seg._fd is not None:
            os.close(seg._fd)
            seg._fd = None
        for idx in (seg.offset_index, seg.time_index):
            if idx._wfd is not None:
                os.close(idx._wfd)
                idx._wfd = None


def test_appends_start_epochs_and_write_the_checkpoint(tmp_path):
    d = tmp_path / "t-0"
    log = open_log(d)
    assert checkpoint(d) == "0\n0\n"          # a new partition gets an empty file at once
    append_epoch(log, 0)
    append_epoch(log, 0)
    append_epoch(log, 3)                      # offsets 4-5
    append_epoch(log, -1)                     # no epoch stamped: ignored
    append_epoch(log, 2)                      # lower than the latest: ignored (Kafka's append rule)
    append_epoch(log, 5)                      # offsets 10-11
    assert log.leader_epoch_cache.entries == [(0, 0), (3, 4), (5, 10)]
    assert log.latest_epoch == 5
    assert checkpoint(d) == "0\n3\n0 0\n3 4\n5 10\n"
    assert log.end_offset_for_epoch(5) == (5, 12)
    assert log.end_offset_for_epoch(4) == (3, 10)
    assert log.end_offset_for_epoch(0) == (0, 4)
    assert log.end_offset_for_epoch(9) == (-1, -1)
    log.close()


def test_multi_batch_append_assigns_each_new_epoch(tmp_path):
    log = open_log(tmp_path / "t-0")
    data = batch(0, 1) + batch(2, 1) + batch(4, 2) + batch(6, 7)
    log.append(data, last_offset=7, max_timestamp=NOW + 1, offset_of_max_timestamp=-1, now_ms=NOW)
    assert log.leader_epoch_cache.entries == [(1, 0), (2, 4), (7, 6)]
    log.close()


def test_reopen_loads_the_checkpoint_and_rebuilds_a_missing_or_bad_one(tmp_path):
    d = tmp_path / "t-0"
    log = open_log(d)
    for epoch in (0, 0, 2, 2, 2, 4):
        append_epoch(log, epoch)
    expected = [(0, 0), (2, 4), (4, 10)]
    assert log.leader_epoch_cache.entries == expected
    assert len(log.segments) > 1
    log.close()
    assert open_log(d).leader_epoch_cache.entries == expected
    (d / LEADER_EPOCH_CHECKPOINT).unlink()
    log = open_log(d)                          # rebuilt from the batches' partitionLeaderEpoch
    assert log.leader_epoch_cache.entries == expected
    assert checkpoint(d) == "0\n3\n0 0\n2 4\n4 10\n"
    log.close()
    (d / LEADER_EPOCH_CHECKPOINT).write_text("")                 # empty: rebuilt too
    log = open_log(d)
    assert log.leader_epoch_cache.entries == expected
    assert checkpoint(d) == "0\n3\n0 0\n2 4\n4 10\n"
    log.close()
    (d / LEADER_EPOCH_CHECKPOINT).write_text("0\n5\n1 1\n")   # malformed: Kafka fails the log dir
    with pytest.raises(LogDirError, match=LEADER_EPOCH_CHECKPOINT):
        open_log(d)
    assert checkpoint(d) == "0\n5\n1 1\n"


def test_the_file_is_trusted_after_a_clean_shutdown_and_trimmed_at_the_log_end(tmp_path):
    d = tmp_path / "t-0"
    log = open_log(d)
    append_epoch(log, 1)
    append_epoch(log, 3)
    log.leader_epoch_cache.assign(6, log.log_end_offset)   # makeLeader at the LEO: no batch yet
    assert log.end_offset_for_epoch(3) == (3, 4)
    log.close()
    (d / LEADER_EPOCH_CHECKPOINT).write_text("0\n3\n1 0\n2 2\n6 4\n")  # not what the batches say
    log = open_log(d)
    # the file is read as is (no scan after a clean shutdown); like Kafka's LogLoader, an entry at
    # or beyond the LEO is dropped (the new leader assigns its epoch again when it takes over)
    assert log.leader_epoch_cache.entries == [(1, 0), (2, 2)]
    log.close()


def test_truncate_to_trims_the_cache_and_the_file(tmp_path):
    d = tmp_path / "t-0"
    log = open_log(d)
    for epoch in (0, 0, 2, 2, 4, 4):          # epochs start at 0, 4, 8
        append_epoch(log, epoch)
    log.truncate_to(9)                        # mid-batch: the batch 8-9 goes, LEO 8
    assert log.log_end_offset == 8
    assert log.leader_epoch_cache.entries == [(0, 0), (2, 4)]
    assert checkpoint(d) == "0\n2\n0 0\n2 4\n"
    assert log.end_offset_for_epoch(2) == (2, 8)
    append_epoch(log, 5)
    assert log.leader_epoch_cache.entries == [(0, 0), (2, 4), (5, 8)]
    log.truncate_to(3)
    assert log.leader_epoch_cache.entries == [(0, 0)]
    log.truncate_fully_and_start_at(100)
    assert log.leader_epoch_cache.entries == [] and checkpoint(d) == "0\n0\n"
    log.close()


def test_delete_records_and_retention_truncate_from_start(tmp_path):
    d = tmp_path / "t-0"
    log = open_log(d, config=LogConfig(segment_bytes=300, index_interval_bytes=50, retention_bytes=500))
    for epoch in (0, 0, 1, 1, 3, 3, 3, 3):
        append_epoch(log, epoch, value_size=60)
    assert log.leader_epoch_cache.entries == [(0, 0), (1, 4), (3, 8)]
    log.delete_records_before(5)
    assert log.leader_epoch_cache.entries == [(1, 5), (3, 8)]
    assert checkpoint(d) == "0\n3\n0 0\n1 4\n3 8\n"     # deferred: stale entries below the start are harmless
    assert log.apply_retention(NOW) > 0
    start = log.log_start_offset
    assert start == 10
    assert log.leader_epoch_cache.entries == [(3, start)]
    log.close()                                        # close writes the deferred change
    assert checkpoint(d) == f"0\n1\n3 {start}\n"
    log = open_log(d, log_start_offset=start)
    assert log.leader_epoch_cache.entries == [(3, start)]
    log.close()


def test_stale_start_entries_are_trimmed_at_open(tmp_path):
    d = tmp_path / "t-0"
    log = open_log(d, config=LogConfig(segment_bytes=200))
    for epoch in (0, 0, 1, 1, 2, 2):
        append_epoch(log, epoch, value_size=60)
    log.delete_records_before(6)
    crash(log)                                         # the file still has (0, 0) and (1, 4)
    log = open_log(d, clean=False, log_start_offset=6)
    assert log.leader_epoch_cache.entries == [(1, 6), (2, 8)]
    log.close()


def test_unclean_open_adds_epochs_the_file_missed_and_drops_epochs_beyond_the_log(tmp_path):
    d = tmp_path / "t-0"
    log = open_log(d)
    append_epoch(log, 0)
    append_epoch(log, 0)
    log.flush()
    recovery_point = log.recovery_point
    append_epoch(log, 4)                               # offsets 4-5, not flushed
    crash(log)
    # as if the process died between the segment write and the checkpoint write, and the file held
    # an epoch at offset 9 from a log that was later truncated
    (d / LEADER_EPOCH_CHECKPOINT).write_text("0\n2\n0 0\n7 9\n")
    log = open_log(d, clean=False, recovery_point=recovery_point)
    assert log.log_end_offset == 6
    assert log.leader_epoch_cache.entries == [(0, 0), (4, 4)]
    assert checkpoint(d) == "0\n2\n0 0\n4 4\n"
    log.close()


def test_follower_append_keeps_offsets_and_allows_gaps(tmp_path):
    log = open_log(tmp_path / "t-0")
    append_epoch(log, 1)                               # 0-1
    gap = batch(10, 2)                                 # a compacted leader: offsets 2-9 are gone
    with pytest.raises(ValueError):
        log.append(gap, last_offset=11, max_timestamp=NOW + 1, offset_of_max_timestamp=-1, now_ms=NOW)
    with pytest.raises(ValueError):
        log.append(batch(1, 2), last_offset=2, max_timestamp=NOW + 1, offset_of_max_timestamp=-1, now_ms=NOW,
                   allow_gap=True)                     # below the LEO: never
    log.append(gap, last_offset=11, max_timestamp=NOW + 1, offset_of_max_timestamp=-1, now_ms=NOW, allow_gap=True)
    assert log.log_end_offset == 12
    assert log.leader_epoch_cache.entries == [(1, 0), (2, 10)]
    assert offsets(log.read(2, 10**6)) == [10, 11]     # reading inside the gap returns the next batch
    assert offsets(log.read(0, 10**6)) == [0, 1, 10, 11]
    log.close()
    log = open_log(tmp_path / "t-0", clean=False)
    assert log.log_end_offset == 12 and log.leader_epoch_cache.entries == [(1, 0), (2, 10)]
    log.close()
