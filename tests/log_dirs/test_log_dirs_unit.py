"""The log and replica layers of JBOD without a broker: placement over the online dirs, a future
log filled from the current one (also across a truncation of the current log and a restart in
the middle of a move) and swapped in, a failed dir taken offline (its logs closed, nothing written
to it again, DescribeLogDirs' error), the fault-injection hook, AlterReplicaLogDirs' error codes."""

from __future__ import annotations

import errno
import uuid

import pytest

from kcompat.isr.future_replica import FutureReplica
from kcompat.isr.partition import Partition
from kcompat.isr.replica_manager import ReplicaManager
from kcompat.isr.partition import AppendPolicy
from kcompat.log import LogConfig, LogManager, LogStorageError, read_offset_checkpoint
from kcompat.log.log_dirs import IO_FAULT_MARKER
from kcompat.protocol.errors import ErrorCode, KafkaError
from tests.log.helpers import NOW, append, offsets


def cfg_for(topic: str) -> LogConfig:
    return LogConfig(segment_bytes=2000)


@pytest.fixture
def dirs(tmp_path):
    return [tmp_path / "d1", tmp_path / "d2"]


def manager(dirs) -> LogManager:
    m = LogManager(dirs, cfg_for)
    m.startup(NOW, "c", 1)
    return m


def replicas(m: LogManager) -> ReplicaManager:
    return ReplicaManager(m, 1, log_config_for=cfg_for, policy_for=lambda t: AppendPolicy(), now_ms=lambda: NOW)


def all_offsets(log) -> list[int]:
    """Every record offset of ``log`` (a read stops at a segment's end: read on from there)."""
    out: list[int] = []
    while (out[-1] + 1 if out else log.log_start_offset) < log.log_end_offset:
        out += offsets(log.read(out[-1] + 1 if out else log.log_start_offset, 10**6))
    return out


def copy_until_caught_up(move: FutureReplica) -> int:
    steps = 1
    while not move.copy_step(NOW, max_bytes=700):
        steps += 1
    return steps


def test_placement_takes_the_online_dir_with_fewest_partitions_or_the_preferred_one(dirs):
    m = manager(dirs)
    m.create("t", 0, cfg_for("t"), uuid.uuid4(), NOW)
    assert m.log_dir_of("t", 0) == dirs[0]
    m.create("t", 1, cfg_for("t"), uuid.uuid4(), NOW)
    assert m.log_dir_of("t", 1) == dirs[1]
    m.preferred_dirs[("t", 2)] = dirs[1]
    m.create("t", 2, cfg_for("t"), uuid.uuid4(), NOW)
    assert m.log_dir_of("t", 2) == dirs[1]
    assert m.fail_dir(dirs[1], "test") == [("t", 1), ("t", 2)]
    m.create("t", 3, cfg_for("t"), uuid.uuid4(), NOW)
    m.create("t", 4, cfg_for("t"), uuid.uuid4(), NOW)
    assert {m.log_dir_of("t", i) for i in (3, 4)} == {dirs[0]}
    m.fail_dir(dirs[0], "test")
    with pytest.raises(LogStorageError):
        m.create("t", 5, cfg_for("t"), uuid.uuid4(), NOW)


def test_a_future_log_copies_the_current_one_and_swaps_in(dirs):
    m = manager(dirs)
    rm = replicas(m)
    p = rm.ensure_partition("t", 0, uuid.uuid4(), 0)
    for _ in range(30):
        append(p.log, 3, value_size=50)
    code = rm.log_dirs.alter_replica_log_dir("t", 0, str(dirs[1]), in_metadata=True, now_ms=NOW)
    assert code == ErrorCode.NONE and m.future_dir_of("t", 0) == dirs[1]
    move = rm.log_dirs.moves[("t", 0)]
    assert not move.copy_step(NOW, max_bytes=700) and 0 < move.log.log_end_offset < 90 and move.lag > 0
    append(p.log, 3, value_size=50)   # the current log keeps growing during the move
    assert copy_until_caught_up(move) > 1
    old_dir = p.log.directory
    assert rm.log_dirs.step(NOW)[0] is False    # caught up: swapped
    assert m.log_dir_of("t", 0) == dirs[1] and p.log.directory == dirs[1] / "t-0" and not old_dir.exists()
    assert all_offsets(p.log) == list(range(93))
    assert [e.epoch for e in p.log.leader_epoch_cache.entries] == [e.epoch for e in move.log.leader_epoch_cache.entries]
    assert m.future_log("t", 0) is None and not rm.log_dirs.moves
    assert ("t", 0) in read_offset_checkpoint(dirs[1] / "recovery-point-offset-checkpoint")


def test_a_truncated_current_log_is_copied_again_and_a_move_resumes_after_a_restart(dirs):
    m = manager(dirs)
    rm = replicas(m)
    p = rm.ensure_partition("t", 0, uuid.uuid4(), 0)
    for _ in range(20):
        append(p.log, 2, value_size=50)
    rm.log_dirs.alter_replica_log_dir("t", 0, str(dirs[1]), in_metadata=True, now_ms=NOW)
    move = rm.log_dirs.moves[("t", 0)]
    copy_until_caught_up(move)
    p.truncate_to(10, NOW)   # a follower's divergence: the copied tail no longer exists
    for _ in range(3):
        append(p.log, 1, value_size=50)
    assert copy_until_caught_up(move) and move.log.log_end_offset == p.log.log_end_offset == 13
    assert all_offsets(move.log) == list(range(13))
    m.shutdown()   # stopped in the middle of the move: the future log is loaded again

    m2 = manager(dirs)
    assert m2.future_dir_of("t", 0) == dirs[1] and m2.log_dir_of("t", 0) == dirs[0]
    rm2 = replicas(m2)
    p2 = rm2.ensure_partition("t", 0, uuid.uuid4(), 0)
    assert ("t", 0) in rm2.log_dirs.moves
    while rm2.log_dirs.step(NOW)[0]:
        pass
    assert m2.log_dir_of("t", 0) == dirs[1] and all_offsets(p2.log) == list(range(13))


def test_alter_replica_log_dir_errors(dirs):
    m = manager(dirs)
    rm = replicas(m)
    rm.ensure_partition("t", 0, uuid.uuid4(), 0)
    jbod = rm.log_dirs
    assert jbod.alter_replica_log_dir("t", 0, "/nowhere", in_metadata=True, now_ms=NOW) == ErrorCode.LOG_DIR_NOT_FOUND
    assert jbod.alter_replica_log_dir("t", 0, str(dirs[0]), in_metadata=True, now_ms=NOW) == ErrorCode.NONE
    assert not jbod.moves   # already there
    assert jbod.alter_replica_log_dir("t", 9, str(dirs[1]), in_metadata=True,
                                      now_ms=NOW) == ErrorCode.REPLICA_NOT_AVAILABLE
    assert m.preferred_dirs[("t", 9)] == dirs[1]
    assert jbod.alter_replica_log_dir("u", 0, str(dirs[1]), in_metadata=False,
                                      now_ms=NOW) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    jbod.handle_log_dir_failure(dirs[1], "test")
    assert jbod.alter_replica_log_dir("t", 0, str(dirs[1]), in_metadata=True,
                                      now_ms=NOW) == ErrorCode.KAFKA_STORAGE_ERROR


def test_an_io_error_takes_only_its_dir_offline(dirs, monkeypatch):
    m = manager(dirs)
    rm = replicas(m)
    failed = []
    rm.log_dirs.dir_failure_listener = failed.append
    parts = [rm.ensure_partition("t", i, uuid.uuid4(), 0) for i in range(4)]
    m.checkpoint(force=True)
    bad = [p for p in parts if m.log_dir_of(p.topic, p.partition_id) == dirs[1]]
    good = [p for p in parts if p not in bad]
    monkeypatch.setenv("KCOMPAT_FAULT_INJECTION", "1")
    (dirs[1] / IO_FAULT_MARKER).touch()
    assert m.poll_injected_faults() == [dirs[1]]
    with pytest.raises(KafkaError) as e:
        bad[0].append(bytearray(_batch()), NOW)
    assert e.value.code == ErrorCode.KAFKA_STORAGE_ERROR and failed == [dirs[1]]
    assert all(p.offline for p in bad) and not any(p.offline for p in good)
    for p in bad:   # every operation of an offline partition answers KAFKA_STORAGE_ERROR
        with pytest.raises(KafkaError) as e:
            p.read(0, 100)
        assert e.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert good[0].append(bytearray(_batch()), NOW).base_offset == 0
    [d1, d2] = m.describe_dirs()
    assert d1.error is None and set(d1.logs) == {(p.topic, p.partition_id) for p in good}
    assert d2.error is not None and d2.logs == {}
    before = (dirs[1] / "recovery-point-offset-checkpoint").read_bytes()
    m.checkpoint(force=True)
    rm.shutdown()
    m.shutdown()
    assert (dirs[1] / "recovery-point-offset-checkpoint").read_bytes() == before   # never written again
    assert not (dirs[1] / ".kafka_cleanshutdown").exists() and (dirs[0] / ".kafka_cleanshutdown").exists()


def test_a_full_disk_does_not_take_the_dir_offline(dirs):
    m = manager(dirs)
    rm = replicas(m)
    p = rm.ensure_partition("t", 0, uuid.uuid4(), 0)
    p.log.inject_io_fault(OSError(errno.ENOSPC, "No space left on device"))
    with pytest.raises(KafkaError) as e:
        p.append(bytearray(_batch()), NOW)
    assert e.value.code == ErrorCode.KAFKA_STORAGE_ERROR and not p.offline and not m.offline_dirs


def _batch() -> bytes:
    from tests.log.helpers import make_batch
    return make_batch(0, 1)


@pytest.mark.parametrize("failing", ["future", "current"])
def test_an_io_error_during_a_move_fails_the_dir_it_came_from(dirs, failing):
    m = manager(dirs)
    rm = replicas(m)
    failed = []
    rm.log_dirs.dir_failure_listener = failed.append
    p = rm.ensure_partition("t", 0, uuid.uuid4(), 0)
    src = m.log_dir_of("t", 0)
    dst = next(d for d in dirs if d != src)
    for _ in range(10):
        append(p.log, 2, value_size=50)
    rm.log_dirs.alter_replica_log_dir("t", 0, str(dst), in_metadata=True, now_ms=NOW)
    move = rm.log_dirs.moves[("t", 0)]
    (move.log if failing == "future" else p.log).inject_io_fault(OSError(errno.EIO, "Input/output error"))
    assert rm.log_dirs.step(NOW, max_bytes=700) == (False, 0)
    if failing == "future":   # the move is dropped; the partition keeps serving from its dir
        assert failed == [dst] and not p.offline and m.log_dir_of("t", 0) == src
        assert all_offsets(p.log) == list(range(20))
    else:
        assert failed == [src] and p.offline and m.future_log("t", 0) is None
