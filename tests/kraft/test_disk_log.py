"""DiskRaftLog keeps the RaftLog contract: the same random operations applied to it and to the
in-memory log the Raft simulation validated give the same observable log, also across reopens."""

from __future__ import annotations

import random

import pytest

from kcompat.kraft.disk_log import DiskRaftLog
from kcompat.kraft.raft import MemoryRaftLog, SnapshotId
from kcompat.protocol import records as rb

NOW = 1_700_000_000_000


def _batch(i: int, n: int = 1) -> bytes:
    return rb.build_batch([(NOW + i, None, b"v%d-%d" % (i, j), ()) for j in range(n)])


def _observe(log) -> tuple:
    batches = []
    off = log.start_offset
    while off < log.end_offset:
        data = log.read(off, 1)
        (_, h), = list(rb.iter_batches(data))[:1]
        batches.append((h.base_offset, h.last_offset, h.partition_leader_epoch, bytes(data[61:h.size])))
        off = h.next_offset
    epochs = [log.end_offset_for_epoch(e) for e in range(0, 8)]
    return (log.start_offset, log.end_offset, log.last_fetched_epoch, batches, epochs,
            log.latest_snapshot_id(), log.earliest_snapshot_id())


@pytest.mark.parametrize("seed", range(25))
def test_same_behaviour_as_the_memory_log(tmp_path, seed):
    rng = random.Random(seed)
    mem = MemoryRaftLog()
    disk = DiskRaftLog(tmp_path / "__cluster_metadata-0", NOW, segment_bytes=600)
    epoch = 1
    for step in range(60):
        op = rng.random()
        if op < 0.5:
            if rng.random() < 0.2:
                epoch += 1
            data = b"".join(_batch(step * 10 + k, rng.randint(1, 3)) for k in range(rng.randint(1, 2)))
            assert mem.append_as_leader(data, epoch) == disk.append_as_leader(data, epoch)
        elif op < 0.65 and mem.end_offset > mem.start_offset:
            mem.update_high_watermark(mem.start_offset)
            disk.update_high_watermark(disk.start_offset)
            boundaries = [b for b, *_ in mem.batches()] + [mem.end_offset]
            target = rng.choice([b for b in boundaries if b >= mem.start_offset])
            mem.truncate_to(target)
            disk.truncate_to(target)
        elif op < 0.75 and mem.end_offset > mem.start_offset:
            boundaries = [b for b, *_ in mem.batches() if b > mem.start_offset] + [mem.end_offset]
            end = rng.choice(boundaries)
            sid = SnapshotId(end, mem.epoch_for_offset(end - 1))
            for log in (mem, disk):
                log.create_snapshot(sid, b"snapshot-%d" % end)
                assert log.delete_before_snapshot(sid)
        elif op < 0.85:
            mem.flush()
            disk.flush()
            disk.close()
            disk = DiskRaftLog(tmp_path / "__cluster_metadata-0", NOW, segment_bytes=600)
        assert _observe(mem) == _observe(disk), f"seed {seed} step {step}"
        for sid in filter(None, (mem.latest_snapshot_id(),)):
            assert mem.read_snapshot(sid) == disk.read_snapshot(sid)
    disk.close()


def test_full_truncation_to_a_snapshot_survives_reopen(tmp_path):
    disk = DiskRaftLog(tmp_path / "m", NOW)
    disk.append_as_leader(_batch(1) + _batch(2), 1)
    sid = SnapshotId(10, 3)
    disk.create_snapshot(sid, b"state")
    disk.truncate_fully_to_snapshot(sid)
    disk.flush()
    disk.close()
    again = DiskRaftLog(tmp_path / "m", NOW)
    assert (again.start_offset, again.end_offset, again.last_fetched_epoch) == (10, 10, 3)
    assert again.read_snapshot(sid) == b"state"
    assert again.append_as_leader(_batch(3), 4) == (10, 10)
    again.close()
