"""Tiered storage across a leader failover (KIP-405) on 3 kcompat processes sharing one local
filesystem store: the leader's copy of a segment is interrupted after COPY_SEGMENT_STARTED (its
store directory is replaced by a file, so the upload fails) and the leader is then killed with
SIGKILL; the new leader reads ``__remote_log_metadata``, deletes the half-copied segment and
carries on, so the store ends up covering every offset once (no gap, no segment copied twice,
nothing half copied), every record stays readable from offset 0, and the killed broker rejoins
as a follower behind the new leader's local log start (OFFSET_MOVED_TO_TIERED_STORAGE)."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kcompat.protocol.records import iter_batches
from kcompat.testing.cluster import Cluster, wait_until
from tests.tiered.helpers import (
    TIERED_BROKER, TIERED_TOPIC, complete_segments_have_companions, consume_from_zero, local_segments,
    remote_objects,
)

VALUE = 1000
BATCH = 4000     # records per produce round, ~4 MB


def _value(i: int) -> bytes:
    return (b"%08d" % i) * (VALUE // 8)


def _produce(bootstrap: str, first: int, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "enable.idempotence": True})
    for i in range(first, first + n):
        p.produce("tc", value=_value(i))
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(90) == 0


def _segments(store: Path) -> list[tuple[int, int]]:
    """(start, end offset) of each segment in the store, read from its .log object."""
    out = []
    for path in remote_objects(store, "log"):
        data = path.read_bytes()
        last = [h for _pos, h in iter_batches(data)][-1]
        out.append((int(path.name.split("-")[0]), last.last_offset))
    return sorted(out)


def _log_end_offset(partition_dir: Path) -> int:
    """The log end offset of a stopped replica's local log: one past the last batch of its last
    non-empty segment."""
    for base, size in reversed(local_segments(partition_dir)):
        if size:
            data = (partition_dir / f"{base:020d}.log").read_bytes()
            return [h for _pos, h in iter_batches(data)][-1].last_offset + 1
    return 0


def _leader(admin: AdminClient) -> tuple[int, list[int]]:
    t = admin.list_topics("tc", timeout=10).topics["tc"].partitions[0]
    return t.leader, list(t.isrs)


@pytest.mark.timeout(600)
def test_leader_killed_mid_copy_new_leader_continues(tmp_path):
    store = tmp_path / "remote"
    overrides = {**TIERED_BROKER, "rsm.config.dir": str(store), "min.insync.replicas": "2",
                 "rlmm.config.remote.log.metadata.topic.replication.factor": "3",
                 "remote.log.manager.task.interval.ms": "100",
                 # a failed upload is retried after 1.6-2.4 s, not ~0.1 s: the kill below must find
                 # the first attempt's COPY_SEGMENT_STARTED still open, not a retry that has just
                 # deleted it and not yet started again
                 "remote.log.manager.task.retry.backoff.ms": "2000"}
    (tmp_path / "c").mkdir()
    with Cluster(tmp_path / "c", 3, overrides) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("tc", 1, 3, config=TIERED_TOPIC)])["tc"].result(30)
        _produce(cluster.bootstrap, 0, BATCH)
        old, _ = _leader(admin)
        wait_until(lambda: len(remote_objects(store, "log")) >= 3, 60, "the first segments copied")
        part_dir = next(store.glob("tc-*/0"))
        aside = part_dir.with_name("0.aside")
        # failures logged from here on (one at start-up, before __remote_log_metadata existed,
        # must not count as the upload's)
        mark = len(cluster.node(old).log_text())
        part_dir.rename(aside)
        part_dir.write_bytes(b"")                            # uploads of this partition now fail
        _produce(cluster.bootstrap, BATCH, BATCH)
        wait_until(lambda: "remote log task failed" in cluster.node(old).log_text()[mark:], 60, "a failed upload")
        cluster.kill(old)                                    # its COPY_SEGMENT_STARTED stays behind
        part_dir.unlink()
        aside.rename(part_dir)
        wait_until(lambda: _leader(admin)[0] not in (old, -1), 30, "a new leader")
        new, _ = _leader(admin)
        # the interrupted copy (half copied, or half deleted by the old leader before it died) goes
        wait_until(lambda: "left half" in cluster.node(new).log_text(), 60, "the leftover deleted")
        _produce(cluster.bootstrap, 2 * BATCH, BATCH)
        total = 3 * BATCH
        # the new leader copies everything closed below its HW: the store reaches the last
        # closed segment, and what it holds covers [0, that end] exactly once
        def covered() -> bool:
            segs = _segments(store)
            return bool(segs) and segs[-1][1] >= total - 4 * 1024
        wait_until(covered, 90, "the new leader's copies")
        segs = _segments(store)
        assert segs[0][0] == 0
        for (s1, e1), (s2, e2) in zip(segs, segs[1:]):
            assert s2 <= e1 + 1, f"gap between {e1} and {s2}"
            assert s2 > s1 and e2 > e1, f"segment {s2}-{e2} copied twice or inside {s1}-{e1}"
        assert complete_segments_have_companions([str(p) for p in store.rglob("*") if p.is_file()])
        assert consume_from_zero(cluster.bootstrap, "tc", total, _value)[1] == total
        # the old leader comes back behind the new leader's local log start and catches up. The
        # store reaching the last closed segment does not mean the new leader's local retention has
        # already deleted its copies past the old leader's log end: wait for that, or the old
        # leader would find its next offset still local and simply fetch it
        old_leo = _log_end_offset(tmp_path / "c" / f"node{old}" / "tc-0")
        new_dir = tmp_path / "c" / f"node{new}" / "tc-0"
        wait_until(lambda: (local_segments(new_dir) or [(0, 0)])[0][0] > old_leo, 60,
                   f"the new leader's local log start past the old leader's log end {old_leo}")
        cluster.restart(old)
        wait_until(lambda: sorted(_leader(admin)[1]) == [1, 2, 3], 120, "the old leader back in the ISR")
        assert _leader(admin)[0] == new
        # it restarted its log at the new leader's local log start with what the remote segment
        # ending there carries: the producer snapshot at that offset and the epochs from offset 0
        rejoined = tmp_path / "c" / f"node{old}" / "tc-0"
        assert "restarting the log empty at the leader's local log start" in cluster.node(old).log_text()
        restart_at = int(cluster.node(old).log_text().split("restarting the log empty at the leader's local "
                                                            "log start offset ")[-1].split()[0])
        assert (rejoined / f"{restart_at:020d}.snapshot").exists()
        epochs = (rejoined / "leader-epoch-checkpoint").read_text().split("\n")
        assert epochs[2].split()[1] == "0"     # the first epoch starts at offset 0, not at restart_at
