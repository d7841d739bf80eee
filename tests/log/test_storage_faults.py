"""Disk full (ENOSPC) at every write of the storage layer, on a real tmpfs the test mounts and
fills (tests/support/small_disk.py): each failed write leaves what is stored as it was, raises
LogStorageError (the broker's KAFKA_STORAGE_ERROR) or is retried later, and the same call works
once space is freed. tmpfs allocates whole pages, so a test can leave room in the last page of one
file (the .log) while the first page of another (an index, a checkpoint) cannot be allocated.

The broker-level counterpart, with real clients, is tests/log/test_storage_faults_broker.py.
"""

from __future__ import annotations

import errno
import os
import time
import uuid

import pytest

from kcompat.kraft.disk_log import DiskRaftLog
from kcompat.kraft.raft.store import ElectionState, FileQuorumStateStore
from kcompat.kraft.raft.types import SnapshotId
from kcompat.log import (
    LEADER_EPOCH_CHECKPOINT, Log, LogCleaner, LogConfig, LogManager, LogStorageError,
    read_offset_checkpoint,
)
from kcompat.protocol.records import build_batch
from tests.support.small_disk import SmallDisk

from .cleaner_helpers import append_random, compact_config, latest
from .helpers import NOW, headers

PAGE = os.sysconf("SC_PAGE_SIZE")


@pytest.fixture
def disk(tmp_path):
    with SmallDisk(tmp_path, 4 << 20) as d:
        yield d


def room_in_last_page(path) -> int:
    size = os.path.getsize(path)
    return PAGE - size % PAGE if size % PAGE else 0


def batch(base: int, value_size: int, *, epoch: int = 0, n: int = 1) -> bytes:
    return build_batch([(NOW + base + i, b"k%d" % (base + i), b"v" * value_size, ()) for i in range(n)],
                       base_offset=base, partition_leader_epoch=epoch)


def append(log: Log, value_size: int, *, epoch: int = 0, n: int = 1) -> bytes:
    b = batch(log.log_end_offset, value_size, epoch=epoch, n=n)
    log.append(b, last_offset=log.log_end_offset + n - 1, max_timestamp=NOW + log.log_end_offset + n - 1,
               offset_of_max_timestamp=-1, now_ms=NOW)
    return b


def read_all(log: Log) -> bytes:
    out, o = [], log.log_start_offset
    while o < log.log_end_offset:
        data = log.read(o, 1 << 20)
        out.append(data)
        o = headers(data)[-1].next_offset
    return b"".join(out)


def append_sized(log: Log, size: int, *, epoch: int = 0) -> bytes:
    """Append a one-record batch of exactly ``size`` bytes."""
    v = size - 70
    while len(batch(log.log_end_offset, v)) > size:
        v -= 1
    while len(batch(log.log_end_offset, v + 1)) <= size:
        v += 1
    b = append(log, v, epoch=epoch)
    assert len(b) == size
    return b


def leave_room(log: Log, room: int) -> bytes:
    """Append a batch after which exactly ``room`` bytes are left in the .log's last page."""
    have = room_in_last_page(log.active_segment.log_path) or PAGE
    if have < room + 100:
        have += PAGE
    return append_sized(log, have - room)


def fitting_value(log: Log) -> int:
    """A value size whose one-record batch fits in the room left in the active .log's last page."""
    room = room_in_last_page(log.active_segment.log_path)
    assert room > 120, f"only {room} bytes left in the last page"
    return room - 100 - len(b"k%d" % log.log_end_offset)


def no_temp_files(path) -> bool:
    return not [p for p in path.rglob("*") if p.name.endswith(".tmp")]


def test_a_failed_index_write_undoes_the_whole_append(disk):
    """The batch fits in the .log's last page, its index entry needs a new page: before the
    fix the batch stayed in the .log while the log end offset did not count it, and the next
    append wrote the same offsets again."""
    d = disk.path / "t-0"
    cfg = LogConfig(index_interval_bytes=2200, segment_bytes=1 << 20)
    log = Log.open(d, cfg, clean_shutdown=True, now_ms=NOW)
    stored = [append(log, 1000) for _ in range(2)]
    stored.append(leave_room(log, 1500))                   # 2200+ bytes, no index entry yet
    assert log.active_segment.offset_index.entries == 0
    size, leo = log.active_segment.size, log.log_end_offset
    disk.fill()
    with pytest.raises(LogStorageError) as e:
        append(log, fitting_value(log))                    # data fits; the first index page does not
    assert e.value.errno == errno.ENOSPC and e.value.disk_full
    assert (log.active_segment.size, log.log_end_offset) == (size, leo)
    assert os.path.getsize(log.active_segment.log_path) == size
    assert os.path.getsize(log.active_segment.offset_index.path) == 0
    assert read_all(log) == b"".join(stored)
    disk.free()
    stored.append(append(log, 500))
    assert log.active_segment.offset_index.entries == 1
    assert read_all(log) == b"".join(stored)
    log.close()
    log = Log.open(d, cfg, clean_shutdown=True, now_ms=NOW)
    assert read_all(log) == b"".join(stored) and log.log_end_offset == len(stored)


def test_a_roll_that_cannot_write_the_final_time_index_entry_is_undone(disk):
    d = disk.path / "t-0"
    cfg = LogConfig(segment_bytes=6000, index_interval_bytes=1 << 20)
    log = Log.open(d, cfg, clean_shutdown=True, now_ms=NOW)
    stored = [append(log, 1000) for _ in range(5)]        # no time-index entry yet (huge interval)
    seg = log.active_segment
    assert seg.time_index.entries == 0
    disk.fill()
    with pytest.raises(LogStorageError):
        append(log, 1500)                                  # rolls: the final time-index entry fails
    assert log.segments == [seg] and seg.active
    assert sorted(p.name for p in d.iterdir() if p.name.endswith(".log")) == [seg.log_path.name]
    disk.free()
    stored.append(append(log, 1500))
    assert len(log.segments) == 2 and not seg.active
    assert seg.time_index.entries == 1
    assert read_all(log) == b"".join(stored)


def test_a_producer_snapshot_that_cannot_be_written_fails_the_append_after_the_roll(disk):
    d = disk.path / "t-0"
    # index entries from the first batches on: the final time-index entry fits in their page
    log = Log.open(d, LogConfig(segment_bytes=4000, index_interval_bytes=100), clean_shutdown=True, now_ms=NOW)
    log.on_roll = lambda base: log.write_snapshot(base, b"s" * 100)
    stored = [append(log, 1000) for _ in range(3)]
    disk.fill()
    with pytest.raises(LogStorageError, match="producer snapshot"):
        append(log, 1500)
    assert len(log.segments) == 2 and log.active_segment.size == 0   # the roll itself is done
    assert log.snapshot_offsets == [] and no_temp_files(d)
    assert read_all(log) == b"".join(stored)
    disk.free()
    stored.append(append(log, 1500))
    assert read_all(log) == b"".join(stored)


def test_leader_epoch_checkpoint_on_a_full_disk_keeps_the_append_and_holds_the_recovery_point(disk):
    d = disk.path / "t-0"
    log = Log.open(d, LogConfig(), clean_shutdown=True, now_ms=NOW)
    stored = [append(log, 1000, epoch=0)]
    stored.append(leave_room(log, 1500))
    log.flush()
    assert log.recovery_point == 2
    before = (d / LEADER_EPOCH_CHECKPOINT).read_text()
    disk.fill()
    stored.append(append(log, fitting_value(log), epoch=3))    # data fits, the new file does not
    assert log.log_end_offset == 3 and log.latest_epoch == 3     # appended: the producer is told so
    assert (d / LEADER_EPOCH_CHECKPOINT).read_text() == before and no_temp_files(d)
    log.flush()
    assert log.recovery_point == 2        # a crash now recovers epoch 3 from the batches
    disk.free()
    log.flush()
    assert log.recovery_point == 3
    assert (d / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n2\n0 0\n3 2\n"
    assert read_all(log) == b"".join(stored)


def test_log_manager_checkpoints_and_shutdown_on_a_full_disk(disk):
    d = disk.path / "data"
    m = LogManager([d], lambda t: LogConfig())
    m.startup(NOW, "cluster", 1)
    log = m.create("t", 0, LogConfig(), uuid.uuid4(), NOW)
    stored = [append(log, 1000) for _ in range(3)]
    m.checkpoint()
    rp = d / "recovery-point-offset-checkpoint"
    assert read_offset_checkpoint(rp) == {("t", 0): 0}
    log.flush()
    disk.fill()
    assert m.checkpoint() is False                              # logged, retried later
    assert read_offset_checkpoint(rp) == {("t", 0): 0} and no_temp_files(d)
    with pytest.raises(OSError):
        m.write_high_watermarks({("t", 0): 3})
    m.shutdown()                                                # no marker: next start recovers
    assert not (d / ".kafka_cleanshutdown").exists()
    disk.free()
    m2 = LogManager([d], lambda t: LogConfig())
    m2.startup(NOW, "cluster", 1)
    assert m2.had_clean_shutdown[d] is False
    assert read_all(m2.get("t", 0)) == b"".join(stored)
    m2.get("t", 0).flush()
    assert m2.checkpoint() is True and no_temp_files(d)
    assert read_offset_checkpoint(rp) == {("t", 0): 3}


def test_cleaning_on_a_full_disk_is_retried_not_given_up(disk):
    d = disk.path / "t-0"
    log = Log.open(d, compact_config(segment_bytes=3000), clean_shutdown=True, now_ms=NOW)
    expected = append_random(log, 60, keys=20, seed=3)
    assert len(log.segments) > 4
    before = read_all(log)
    clock = [0]
    cleaner = LogCleaner(threads=1, backoff_ms=15000, monotonic_ms=lambda: clock[0])
    disk.fill()
    out = cleaner.clean_now({("t", 0): log}, NOW)
    assert out is not None and not out.installed and out.storage_error
    assert ("t", 0) not in cleaner.uncleanable               # Kafka's non-I/O failures would be
    assert not [p for p in d.iterdir() if p.name.endswith((".cleaned", ".swap"))]
    assert read_all(log) == before
    disk.free()
    assert cleaner.clean_now({("t", 0): log}, NOW) is None     # waits out log.cleaner.backoff.ms
    clock[0] += 15000
    out = cleaner.clean_now({("t", 0): log}, NOW)
    assert out is not None and out.installed
    assert latest(log) == expected


def test_metadata_log_and_quorum_state_on_a_full_disk(disk):
    d = disk.path / "__cluster_metadata-0"
    raft = DiskRaftLog(d, NOW)
    raft.append_as_leader(batch(0, 1000, n=2), 1)
    raft.flush()
    store = FileQuorumStateStore(d / "quorum-state")
    store.write(ElectionState(epoch=1, leader_id=1, voters=frozenset({1})))
    good = (d / "quorum-state").read_bytes()
    disk.fill()
    with pytest.raises(LogStorageError):
        raft.append_as_leader(batch(0, 3000, n=2), 2)       # does not fit the last page
    assert raft.end_offset == 2 and raft.last_fetched_epoch == 1   # the epoch cache did not move
    with pytest.raises(OSError):
        store.write(ElectionState(epoch=2, leader_id=1, voters=frozenset({1})))
    assert (d / "quorum-state").read_bytes() == good and store.read().epoch == 1
    with pytest.raises(OSError):
        raft.create_snapshot(SnapshotId(2, 1), b"x" * 5000)
    assert raft.latest_snapshot_id() is None and no_temp_files(d)
    disk.free()
    assert raft.append_as_leader(batch(0, 3000, n=2), 2) == (2, 3)
    raft.flush()
    raft.close()
    raft = DiskRaftLog(d, NOW)
    assert raft.end_offset == 4 and raft.epoch_for_offset(1) == 1 and raft.epoch_for_offset(2) == 2


def test_cleaning_in_a_worker_process_on_a_full_disk_is_retried(disk):
    """The same through the worker pool the broker uses: the worker's OSError comes back pickled."""
    d = disk.path / "t-0"
    log = Log.open(d, compact_config(segment_bytes=3000), clean_shutdown=True, now_ms=NOW)
    expected = append_random(log, 60, keys=20, seed=5)
    clock = [0]
    cleaner = LogCleaner(threads=1, backoff_ms=15000, monotonic_ms=lambda: clock[0])
    logs = {("t", 0): log}
    try:
        disk.fill()
        outcomes = []
        deadline = time.monotonic() + 60
        while not outcomes and time.monotonic() < deadline:
            outcomes = cleaner.tick(logs, NOW)
            time.sleep(0.02)
        assert len(outcomes) == 1 and outcomes[0].storage_error and not outcomes[0].installed, outcomes
        assert ("t", 0) not in cleaner.uncleanable and not cleaner.in_progress
        disk.free()
        clock[0] += 15000
        installed = []
        deadline = time.monotonic() + 60
        while not installed and time.monotonic() < deadline:
            installed = [o for o in cleaner.tick(logs, NOW) if o.installed]
            time.sleep(0.02)
        assert installed and latest(log) == expected
    finally:
        cleaner.shutdown()


def test_one_full_log_dir_of_two_leaves_the_other_serving(tmp_path):
    """Kafka takes a failed log dir offline and keeps serving the others; kcompat keeps both online:
    the full one answers storage errors until space returns, the other is unaffected."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with SmallDisk(tmp_path / "a", 4 << 20) as full, SmallDisk(tmp_path / "b", 4 << 20) as fine:
        dirs = [full.path / "data", fine.path / "data"]
        m = LogManager(dirs, lambda t: LogConfig())
        m.startup(NOW, "cluster", 1)
        logs = [m.create("t", p, LogConfig(), uuid.uuid4(), NOW) for p in range(2)]
        assert {m.log_dir_of("t", p) for p in range(2)} == set(dirs)
        on_full = next(lg for lg in logs if lg.directory.parent == dirs[0])
        on_fine = next(lg for lg in logs if lg.directory.parent == dirs[1])
        stored = {id(lg): [append(lg, 1000)] for lg in logs}
        full.fill()
        with pytest.raises(LogStorageError):
            for _ in range(8):         # what still fits in the last page is appended (and kept)
                stored[id(on_full)].append(append(on_full, 1000))
        for _ in range(8):
            stored[id(on_fine)].append(append(on_fine, 1000))
        assert read_all(on_full) == b"".join(stored[id(on_full)])
        on_fine.flush()
        assert m.checkpoint() is False                              # only the full dir's files failed
        assert read_offset_checkpoint(dirs[1] / "recovery-point-offset-checkpoint")[on_fine_tp(m, on_fine)] == 9
        m.shutdown()
        assert (dirs[1] / ".kafka_cleanshutdown").exists() and not (dirs[0] / ".kafka_cleanshutdown").exists()
        full.free()
        m2 = LogManager(dirs, lambda t: LogConfig())
        m2.startup(NOW, "cluster", 1)
        assert m2.had_clean_shutdown == {dirs[0]: False, dirs[1]: True}
        for lg in logs:
            tp = on_fine_tp(m2, lg)
            assert read_all(m2.get(*tp)) == b"".join(stored[id(lg)])
        for lg in m2.logs.values():
            lg.close_without_flush()


def on_fine_tp(m: LogManager, log: Log) -> tuple[str, int]:
    return ("t", int(log.directory.name.rsplit("-", 1)[1]))


def test_an_aborted_transaction_entry_that_cannot_be_written_is_kept_and_rebuilt(disk):
    """The ABORT marker fits in the .log's last page, the first page of the .txnindex does not:
    before the fix the entry was lost while the marker stayed (and an exception reached the
    coordinator after the marker was written); a snapshot taken after it would then have kept a
    restart from rebuilding it, and read_committed consumers would get aborted records."""
    from kcompat.isr.partition import Partition
    d = disk.path / "t-0"
    log = Log.open(d, LogConfig(), clean_shutdown=True, now_ms=NOW)
    p = Partition("t", 0, uuid.uuid4(), log)
    p.txn_verifier = lambda *_a: 0
    txn = build_batch([(NOW, b"k", b"v" * 200, ())] * 3, producer_id=7, producer_epoch=0, base_sequence=0,
                      transactional=True)
    p.append(memoryview(bytearray(txn)), NOW, "txn")
    leave_room(log, 600)
    disk.fill()
    marker = p.append_marker(7, 0, 0, False, NOW)                # appended: the data fits
    assert p.aborted_transactions(0, log.log_end_offset) == [(7, 0)]
    assert not log.active_segment.txn_index.path.exists() or log.active_segment.txn_index.path.stat().st_size == 0
    p.write_snapshot()                                          # skipped, or a restart could not rebuild it
    assert log.snapshot_offsets == []
    log.close_without_flush()                                   # a crash before space came back
    disk.free()
    log = Log.open(d, LogConfig(), clean_shutdown=False, now_ms=NOW)
    p = Partition("t", 0, uuid.uuid4(), log)
    assert p.aborted_transactions(0, log.log_end_offset) == [(7, 0)] and marker == log.log_end_offset - 1
    assert log.active_segment.txn_index.path.stat().st_size == 34


def test_creating_a_partition_on_a_full_disk_leaves_nothing_behind(disk):
    d = disk.path / "data"
    m = LogManager([d], lambda t: LogConfig())
    m.startup(NOW, "cluster", 1)
    disk.fill()
    with pytest.raises(LogStorageError):
        m.create("t", 0, LogConfig(), uuid.uuid4(), NOW)
    assert m.get("t", 0) is None and not (d / "t-0").exists()
    disk.free()
    log = m.create("t", 0, LogConfig(), uuid.uuid4(), NOW)
    append(log, 100)
    assert log.log_end_offset == 1
