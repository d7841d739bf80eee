"""MemoryRaftLog and the leader-epoch cache: the RaftLog contract the core relies on (and that the
implementation over kcompat.log.Log must keep)."""

from __future__ import annotations

import pytest

from kcompat.kraft.raft import LeaderEpochCache, MemoryRaftLog, OffsetAndEpoch, RaftInvariantError, SnapshotId
from kcompat.protocol import records as rb
from tests.kraft.raft.harness import batch


def test_leader_append_stamps_offsets_and_epoch():
    log = MemoryRaftLog()
    assert log.append_as_leader(batch(b"a", b"b") + batch(b"c"), epoch=3) == (0, 2)
    assert log.end_offset == 3 and log.last_fetched_epoch == 3
    headers = [h for _, h in rb.iter_batches(log.read(0, 1 << 20))]
    assert [(h.base_offset, h.last_offset, h.partition_leader_epoch) for h in headers] == [(0, 1, 3), (2, 2, 3)]
    assert all(rb.crc_valid(log.read(h.base_offset, 1), 0, h) for h in headers)  # CRC untouched
    with pytest.raises(ValueError):
        log.append_as_leader(batch(b"x")[:-3], epoch=3)


def test_follower_append_must_continue_the_log_and_never_lower_the_epoch():
    leader = MemoryRaftLog()
    leader.append_as_leader(batch(b"a"), 1)
    leader.append_as_leader(batch(b"b"), 2)
    follower = MemoryRaftLog()
    assert follower.append_as_follower(leader.read(0, 1 << 20)) == (0, 1)
    assert list(follower.batches()) == list(leader.batches())
    with pytest.raises(RaftInvariantError):
        follower.append_as_follower(leader.read(1, 1 << 20))          # offset 1 again
    with pytest.raises(RaftInvariantError):                           # epoch 1 after epoch 2
        follower.append_as_follower(rb.build_batch([(0, None, b"c", ())], base_offset=2,
                                                   partition_leader_epoch=1))
    assert follower.append_as_follower(b"") is None


def test_read_returns_whole_batches_at_least_one():
    log = MemoryRaftLog()
    for v in (b"a" * 100, b"b", b"c"):
        log.append_as_leader(batch(v), 1)
    one = log.read(0, 10)
    assert [h.base_offset for _, h in rb.iter_batches(one)] == [0]
    assert [h.base_offset for _, h in rb.iter_batches(log.read(1, 1 << 20))] == [1, 2]
    assert log.read(3, 100) == b""
    with pytest.raises(RaftInvariantError):
        log.read(5, 100)


def test_epoch_cache_end_offsets():
    cache = LeaderEpochCache()
    for epoch, start in ((1, 0), (1, 4), (3, 5), (6, 9)):
        cache.assign(epoch, start)
    assert cache.epochs == [1, 3, 6] and cache.starts == [0, 5, 9]
    assert cache.end_offset_for(1, 12) == OffsetAndEpoch(5, 1)
    assert cache.end_offset_for(2, 12) == OffsetAndEpoch(5, 1)   # largest epoch <= 2 is 1
    assert cache.end_offset_for(5, 12) == OffsetAndEpoch(9, 3)
    assert cache.end_offset_for(6, 12) == OffsetAndEpoch(12, 6)
    assert cache.end_offset_for(0, 12) is None
    cache.truncate_from_end(9)
    assert cache.epochs == [1, 3]
    cache.truncate_from_start(7)
    assert cache.epochs == [3] and cache.starts == [7]
    with pytest.raises(RaftInvariantError):
        cache.assign(2, 8)


def test_truncation_is_at_batch_boundaries_and_never_below_the_high_watermark():
    log = MemoryRaftLog()
    log.append_as_leader(batch(b"a", b"b"), 1)     # 0-1
    log.append_as_leader(batch(b"c"), 2)           # 2
    log.append_as_leader(batch(b"d"), 2)           # 3
    with pytest.raises(RaftInvariantError):
        log.truncate_to(1)                          # inside the first batch
    log.update_high_watermark(3)
    with pytest.raises(RaftInvariantError):
        log.truncate_to(2)
    log.truncate_to(3)
    assert log.end_offset == 3 and log.end_offset_for_epoch(2) == OffsetAndEpoch(3, 2)
    log.update_high_watermark(2)
    log.truncate_to(2)
    assert log.last_fetched_epoch == 1 and log.end_offset_for_epoch(2) == OffsetAndEpoch(2, 1)


def test_crash_loses_only_what_was_not_flushed():
    log = MemoryRaftLog()
    log.append_as_leader(batch(b"a"), 1)
    log.flush()
    log.append_as_leader(batch(b"b"), 2)
    log.update_high_watermark(1)
    log.crash()
    assert log.end_offset == 1 and log.last_fetched_epoch == 1 and log.high_watermark == 0


def test_snapshot_moves_the_log_start_and_keeps_answering_epochs():
    log = MemoryRaftLog()
    for epoch in (1, 1, 2, 2, 4):
        log.append_as_leader(batch(b"x"), epoch)    # offsets 0..4
    log.update_high_watermark(4)
    sid = SnapshotId(3, log.epoch_for_offset(2))
    assert sid == SnapshotId(3, 2)
    log.create_snapshot(sid, b"state")
    assert log.delete_before_snapshot(sid)
    assert log.start_offset == 3 and log.earliest_snapshot_id() == sid
    assert [b[0] for b in log.batches()] == [3, 4]
    assert log.epoch_for_offset(2) == 2                     # the snapshot's epoch, at start - 1
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(4, 2)
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(4, 2)
    assert log.end_offset_for_epoch(1) == OffsetAndEpoch(-1, -1)   # hidden in the snapshot
    assert not log.delete_before_snapshot(SnapshotId(9, 4))


def test_full_truncation_to_a_downloaded_snapshot():
    log = MemoryRaftLog()
    log.append_as_leader(batch(b"x"), 1)
    sid = SnapshotId(10, 3)
    log.create_snapshot(sid, b"s")
    log.truncate_fully_to_snapshot(sid)
    assert (log.start_offset, log.end_offset, log.last_fetched_epoch) == (10, 10, 3)
    assert log.read(10, 100) == b"" and log.latest_snapshot_id() == sid
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(10, 3)
    assert log.end_offset_for_epoch(5) == OffsetAndEpoch(10, 3)
