"""Checkpoint files and the LogManager."""

from __future__ import annotations

import json
import uuid

import pytest

from kcompat.log import (
    CheckpointError, LogConfig, LogDirError, LogManager, parse_topic_partition,
    read_meta_properties, read_offset_checkpoint, read_partition_metadata, topic_id_from_str,
    topic_id_to_str, write_meta_properties, write_offset_checkpoint, write_partition_metadata,
)

from .helpers import NOW, append, offsets


def test_offset_checkpoint_round_trip(tmp_path):
    p = tmp_path / "recovery-point-offset-checkpoint"
    data = {("a", 0): 5, ("my-topic", 12): 0, ("x.y_z", 3): 2**40}
    write_offset_checkpoint(p, data)
    assert p.read_text().splitlines()[:2] == ["0", "3"]
    assert "my-topic 12 0" in p.read_text().splitlines()
    assert read_offset_checkpoint(p) == data
    assert read_offset_checkpoint(tmp_path / "missing") == {}
    write_offset_checkpoint(p, {})
    assert p.read_text() == "0\n0\n"
    assert read_offset_checkpoint(p) == {}
    assert not list(tmp_path.glob("*.tmp"))


# as Kafka's CheckpointReadBuffer: Integer.parseInt takes no spaces, every line after the count
# is an entry (a blank line is a malformed one), fields split on \s+ keep a leading empty field
@pytest.mark.parametrize("text", ["1\n0\n", "0\n2\na 0 1\n", "0\n1\na 0\n", "0\nx\n",
                                  "0\n1\na b 1\n", "0\n2\n", "0\n-1\n", "1\n", " 0\n0\n",
                                  "0\n1\na 0 5\n\n", "0\n1\n a 0 5\n", "0\n1\na 0 1_0\n",
                                  "0\n1\na 0 9223372036854775808\n", "\xff\n"])
def test_offset_checkpoint_malformed(tmp_path, text):
    p = tmp_path / "cp"
    p.write_text(text)
    with pytest.raises(CheckpointError):
        read_offset_checkpoint(p)


@pytest.mark.parametrize("text", ["", "0", "0\n", "0\n0\n"])
def test_offset_checkpoint_empty_or_cut_after_the_version(tmp_path, text):
    # Kafka's CheckpointReadBuffer reads these as no entries (a missing file too)
    p = tmp_path / "cp"
    p.write_text(text)
    assert read_offset_checkpoint(p) == {}


def test_kafka_written_checkpoint(tmp_path):
    p = tmp_path / "cp"
    p.write_text("0\n2\n__consumer_offsets 7 1234\nfoo 0 0\n")
    assert read_offset_checkpoint(p) == {("__consumer_offsets", 7): 1234, ("foo", 0): 0}


def test_partition_metadata(tmp_path):
    tid = uuid.UUID("0b7f1d3a-0000-4000-8000-00000000abcd")
    s = topic_id_to_str(tid)
    assert len(s) == 22 and "=" not in s
    assert topic_id_from_str(s) == tid
    p = tmp_path / "partition.metadata"
    write_partition_metadata(p, tid)
    assert p.read_text() == f"version: 0\ntopic_id: {s}\n"
    assert read_partition_metadata(p) == tid
    assert read_partition_metadata(tmp_path / "none") is None
    p.write_text("version: 1\ntopic_id: x\n")
    with pytest.raises(CheckpointError):
        read_partition_metadata(p)


def test_kafka_uuid_string():
    # Kafka prints Uuid(0x0102..., ...) as url-safe base64 without padding
    tid = uuid.UUID(bytes=bytes(range(16)))
    assert topic_id_to_str(tid) == "AAECAwQFBgcICQoLDA0ODw"


def test_meta_properties(tmp_path):
    p = tmp_path / "meta.properties"
    write_meta_properties(p, {"version": "1", "cluster.id": "abc-DEF_123", "node.id": "1",
                              "directory.id": "AAECAwQFBgcICQoLDA0ODw"})
    assert read_meta_properties(p) == {"version": "1", "cluster.id": "abc-DEF_123",
                                       "node.id": "1", "directory.id": "AAECAwQFBgcICQoLDA0ODw"}
    # as Kafka writes it
    p.write_text("#\n#Tue Jan 02 10:00:00 UTC 2024\nnode.id=3\nversion=1\n"
                 "cluster.id=MkU3OEVBNTcwNTJENDM2Qk\ndirectory.id=AAECAwQFBgcICQoLDA0ODw\n")
    assert read_meta_properties(p)["cluster.id"] == "MkU3OEVBNTcwNTJENDM2Qk"
    assert read_meta_properties(tmp_path / "nope") is None


@pytest.mark.parametrize("name,expect", [
    ("foo-0", ("foo", 0)), ("my-topic-12", ("my-topic", 12)), ("a-b-c-3", ("a-b-c", 3)),
    ("__consumer_offsets-49", ("__consumer_offsets", 49)), ("foo", None), ("foo-", None),
    ("foo-x", None), ("-1", None), ("lost+found", None),
])
def test_parse_topic_partition(name, expect):
    assert parse_topic_partition(name) == expect


def cfg_for(topic: str) -> LogConfig:
    return LogConfig(segment_bytes=500)


def test_manager_lifecycle(tmp_path):
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    m = LogManager(dirs, cfg_for)
    m.startup(NOW, "cluster-A", 1)
    assert read_meta_properties(dirs[0] / "meta.properties")["cluster.id"] == "cluster-A"
    assert read_meta_properties(dirs[0] / "meta.properties")["node.id"] == "1"
    assert read_meta_properties(dirs[0] / "meta.properties")["version"] == "1"
    tids = {}
    for t, p in [("orders", 0), ("orders", 1), ("my-dashed-topic", 0), ("my-dashed-topic", 10)]:
        tids[(t, p)] = uuid.uuid4()
        log = m.create(t, p, cfg_for(t), tids[(t, p)], NOW)
        for _ in range(5):
            append(log, 2, value_size=60)
    assert {m.log_dir_of(*tp) for tp in tids} == set(dirs)      # spread over both dirs
    assert sum(1 for tp in tids if m.log_dir_of(*tp) == dirs[0]) == 2
    assert m.create("orders", 0, cfg_for("orders"), tids[("orders", 0)], NOW) is m.get("orders", 0)
    with pytest.raises(LogDirError):
        m.create("orders", 0, cfg_for("orders"), uuid.uuid4(), NOW)
    with pytest.raises(ValueError):
        m.create("bad topic", 0, cfg_for("x"), uuid.uuid4(), NOW)
    m.shutdown()
    for d in dirs:
        assert json.loads((d / ".kafka_cleanshutdown").read_text())["version"] == 0
        rp = read_offset_checkpoint(d / "recovery-point-offset-checkpoint")
        assert all(v == 10 for v in rp.values()) and len(rp) == 2
        assert len(read_offset_checkpoint(d / "log-start-offset-checkpoint")) == 2

    m2 = LogManager(dirs, cfg_for)
    m2.startup(NOW, "cluster-A", 1)
    assert all(m2.had_clean_shutdown.values())
    assert not any((d / ".kafka_cleanshutdown").exists() for d in dirs)
    assert set(m2.logs) == set(tids)
    for tp, tid in tids.items():
        assert m2.topic_id_of(*tp) == tid
        assert m2.get(*tp).log_end_offset == 10
        assert m2.get(*tp).recovery_point == 10
    assert offsets(m2.get("my-dashed-topic", 10).read(0, 10**6))[:2] == [0, 1]
    m2.shutdown()


def test_manager_unclean_start_uses_checkpoints(tmp_path):
    dirs = [tmp_path / "d"]
    m = LogManager(dirs, cfg_for)
    m.startup(NOW, "c", 1)
    log = m.create("t", 0, cfg_for("t"), uuid.uuid4(), NOW)
    for _ in range(20):
        append(log, 1, value_size=100)
    m.run_periodic(NOW + 10, retention_check_interval_ms=10**9, flush_check_ms=10**9,
                   checkpoint_interval_ms=0)   # roll flush + checkpoint
    rp = read_offset_checkpoint(dirs[0] / "recovery-point-offset-checkpoint")[("t", 0)]
    assert rp == log.active_segment.base_offset > 0
    # crash: no shutdown, no marker
    m2 = LogManager(dirs, cfg_for)
    m2.startup(NOW, "c", 1)
    assert m2.had_clean_shutdown[dirs[0]] is False
    assert m2.get("t", 0).log_end_offset == 20
    assert m2.get("t", 0).recovery_point == rp


def test_manager_meta_mismatch(tmp_path):
    m = LogManager([tmp_path / "d"], cfg_for)
    m.startup(NOW, "c1", 1)
    m.shutdown()
    with pytest.raises(LogDirError):
        LogManager([tmp_path / "d"], cfg_for).startup(NOW, "c2", 1)
    with pytest.raises(LogDirError):
        LogManager([tmp_path / "d"], cfg_for).startup(NOW, "c1", 2)
    LogManager([tmp_path / "d"], cfg_for).startup(NOW, "c1", 1)


def test_manager_delete_and_delete_dirs(tmp_path):
    d = tmp_path / "d"
    m = LogManager([d], lambda t: LogConfig(file_delete_delay_ms=1000))
    m.startup(NOW, "c", 1)
    log = m.create("a-b", 3, LogConfig(file_delete_delay_ms=1000), uuid.uuid4(), NOW)
    append(log, 1)
    m.delete("a-b", 3, now_ms=NOW)
    assert m.get("a-b", 3) is None
    pending = [p for p in d.iterdir() if p.name.endswith("-delete")]
    assert len(pending) == 1 and pending[0].name.startswith("a-b-3.")
    assert len(pending[0].name) == len("a-b-3.") + 32 + len("-delete")
    assert ("a-b", 3) not in read_offset_checkpoint(d / "recovery-point-offset-checkpoint")
    kw = dict(retention_check_interval_ms=10**9, flush_check_ms=10**9, checkpoint_interval_ms=10**9)
    m.run_periodic(NOW + 999, **kw)
    assert pending[0].exists()
    m.run_periodic(NOW + 1000, **kw)
    assert not pending[0].exists()
    # a -delete dir left by a crash is removed at start-up
    log = m.create("x", 0, LogConfig(), uuid.uuid4(), NOW)
    m.delete("x", 0)
    m.shutdown()
    assert [p for p in d.iterdir() if p.name.endswith("-delete")]
    m2 = LogManager([d], cfg_for)
    m2.startup(NOW, "c", 1)
    assert not [p for p in d.iterdir() if p.name.endswith("-delete")]
    assert m2.logs == {}


def test_manager_retention_and_flush(tmp_path):
    d = tmp_path / "d"
    conf = LogConfig(segment_bytes=300, retention_ms=1000, flush_ms=50)
    m = LogManager([d], lambda t: conf)
    m.startup(NOW, "c", 1)
    log = m.create("t", 0, conf, uuid.uuid4(), NOW)
    for _ in range(9):
        append(log, 1, value_size=100, ts=NOW)
    kw = dict(retention_check_interval_ms=100, flush_check_ms=10, checkpoint_interval_ms=100)
    assert m.run_periodic(NOW + 50, **kw) == 0
    assert log.recovery_point == log.log_end_offset          # flush.ms elapsed
    m.high_watermark_of = lambda t, p: 3
    deleted = m.run_periodic(NOW + 5000, **kw)
    assert deleted >= 1 and log.log_start_offset <= 3
    m.high_watermark_of = None
    m.run_periodic(NOW + 10000, **kw)
    assert log.log_start_offset == log.log_end_offset
    assert read_offset_checkpoint(d / "log-start-offset-checkpoint")[("t", 0)] == log.log_start_offset


def test_manager_skips_metadata_log_and_junk(tmp_path):
    d = tmp_path / "d"
    (d / "__cluster_metadata-0").mkdir(parents=True)
    (d / "lost+found").mkdir()
    (d / "some-file-0").write_text("x")
    m = LogManager([d], cfg_for)
    m.startup(NOW, "c", 1)
    assert m.logs == {}


def test_manager_duplicate_partition(tmp_path):
    for name in ("d1", "d2"):
        (tmp_path / name / "t-0").mkdir(parents=True)
    with pytest.raises(LogDirError):
        LogManager([tmp_path / "d1", tmp_path / "d2"], cfg_for).startup(NOW, "c", 1)


@pytest.mark.parametrize("name", ["recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                                  "replication-offset-checkpoint", "cleaner-offset-checkpoint"])
def test_manager_refuses_a_malformed_checkpoint_and_changes_nothing(tmp_path, name):
    # Kafka's CheckpointFileWithFailureHandler.read marks the log dir offline (the broker halts
    # when it holds the metadata log); removing the file is the way out
    d = tmp_path / "d"
    m = LogManager([d], cfg_for)
    m.startup(NOW, "c", 1)
    log = m.create("t", 0, cfg_for("t"), uuid.uuid4(), NOW)
    append(log, 3)
    seg = log.active_segment.log_path
    m.shutdown()
    (d / name).write_text("garbage")
    (d / ".kafka_cleanshutdown").unlink()
    with open(seg, "ab") as f:     # a torn tail that a recovery would cut
        f.write(b"\x00" * 10)
    before = seg.read_bytes()
    with pytest.raises(LogDirError, match=name):
        LogManager([d], cfg_for).startup(NOW, "c", 1)
    assert seg.read_bytes() == before                     # nothing recovered or truncated
    (d / name).unlink()
    m2 = LogManager([d], cfg_for)
    m2.startup(NOW, "c", 1)
    assert m2.get("t", 0).log_end_offset == 3


def test_manager_refuses_a_malformed_partition_metadata(tmp_path):
    d = tmp_path / "d"
    m = LogManager([d], cfg_for)
    m.startup(NOW, "c", 1)
    tid = uuid.uuid4()
    append(m.create("t", 0, cfg_for("t"), tid, NOW), 3)
    m.shutdown()
    pm = d / "t-0" / "partition.metadata"
    good = pm.read_text()
    for bad in ("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n", "version: -1\n" + good.split("\n", 1)[1],
                good[:-5] + "\n", "garbage", "", "version: 0\n", good.replace("topic_id: ", "topic_id: !")):
        pm.write_text(bad)
        with pytest.raises(LogDirError, match="partition.metadata"):
            LogManager([d], cfg_for).startup(NOW, "c", 1)
    pm.write_text(good)
    m2 = LogManager([d], cfg_for)
    m2.startup(NOW, "c", 1)
    assert m2.topic_id_of("t", 0) == tid


def test_high_watermark_checkpoint(tmp_path):
    d = tmp_path / "d"
    m = LogManager([d], cfg_for)
    m.startup(NOW, "c", 1)
    m.create("t", 0, cfg_for("t"), uuid.uuid4(), NOW)
    m.write_high_watermarks({("t", 0): 7})
    m.shutdown()
    m2 = LogManager([d], cfg_for)
    m2.startup(NOW, "c", 1)
    assert m2.high_watermarks == {("t", 0): 7}


def test_periodic_duties_go_on_after_the_wall_clock_steps_back(tmp_path):
    """Intervals between retention checks, checkpoints and flush checks are measured on the wall
    clock (record time); one stepped back (NTP, a resumed VM) must not stop them until it catches
    up: a negative elapsed time counts as elapsed."""
    dirs = [tmp_path / "d"]
    m = LogManager(dirs, lambda t: LogConfig(segment_bytes=300, retention_bytes=600))
    m.startup(NOW, "c", 1)
    log = m.create("t", 0, m.config_for("t"), uuid.uuid4(), NOW)
    hour = 3_600_000
    kw = dict(retention_check_interval_ms=300_000, flush_check_ms=300_000, checkpoint_interval_ms=60_000)
    m.run_periodic(NOW, **kw)                         # the last checks happened at NOW
    for _ in range(30):
        append(log, 1, value_size=100)
    assert len(log.segments) > 3
    assert m.run_periodic(NOW - hour, **kw) > 0       # the clock stepped back an hour: retention ran
    assert log.size_in_bytes <= 600 + 300
    assert read_offset_checkpoint(dirs[0] / "recovery-point-offset-checkpoint")[("t", 0)] > 0
    m.shutdown()
