"""Damage on disk under a real broker process, read with real clients (the table of every file
type x damage runs in-process: tests/log/test_corruption.py).

- a bit flipped in the middle of a segment that a clean shutdown flushed (start-up does not read
  it, as Kafka does not): the broker starts, serves everything before the damaged batch and after
  it, never the batch itself - consumers get CORRUPT_MESSAGE at its offset (Kafka would serve the
  bytes and leave the check to the consumer's check.crcs) and the broker log names the file;
- a malformed checkpoint (Kafka fails the log dir for it): the broker exits with status 1 and a
  line naming the file, changes nothing, and starts once the file is removed, serving everything;
- a malformed quorum-state: the same.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import time

import confluent_kafka as ck
from confluent_kafka.admin import NewTopic
from kafka import KafkaConsumer, TopicPartition

from kcompat.protocol import records as rb
from tests.clients.common import assert_same_records, ck_admin, ck_consume, ck_produce, make_records
from tests.support.broker_process import ROOT, BrokerProcess

TOPIC = "damaged"


def digest(data_dir) -> dict[str, str]:
    return {str(p.relative_to(data_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(data_dir.rglob("*")) if p.is_file()}


def run_to_exit(b: BrokerProcess, timeout: float = 60.0) -> tuple[int, str]:
    """Start a broker that is expected to refuse: its exit status and what it logged."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(b.args(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                          cwd=str(ROOT), timeout=timeout)
    return proc.returncode, proc.stderr


def ck_read_until_error(bootstrap: str, start: int, timeout: float = 30.0):
    """Records from ``start`` until the first error for the partition: (records, error)."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "damage-readers", "enable.auto.commit": False})
    try:
        c.assign([ck.TopicPartition(TOPIC, 0, start)])
        got, deadline = [], time.monotonic() + timeout
        while time.monotonic() < deadline:
            for m in c.consume(num_messages=100, timeout=0.5):
                if m.error() is not None:
                    if m.topic() == TOPIC:
                        return got, m.error()
                    continue
                got.append(m)
        return got, None
    finally:
        c.close()


def test_a_flipped_bit_in_a_flushed_segment_is_never_served(tmp_path):
    data = tmp_path / "data"
    b = BrokerProcess(data)
    b.start()
    try:
        admin = ck_admin(b.bootstrap)
        admin.create_topics([NewTopic(TOPIC, num_partitions=1)])[TOPIC].result(timeout=30)
        acked = []
        for i in range(6):   # six produce calls: at least six batches
            acked += ck_produce(b.bootstrap, TOPIC, make_records(40, f"b{i}", big_every=0), partition=0,
                                **{"linger.ms": 0})
        assert b.stop() == 0
        seg = sorted((data / f"{TOPIC}-0").glob("*.log"))[0]
        raw = bytearray(seg.read_bytes())
        layout = [(pos, h) for pos, h in rb.iter_batches(raw)]
        assert len(layout) >= 6
        pos, victim = layout[len(layout) // 2]
        raw[pos + victim.size // 2] ^= 0x10                     # inside the records: CRC-covered
        seg.write_bytes(bytes(raw))
        nxt = layout[len(layout) // 2 + 1][1]

        b.start()
        before = [s for s in acked if s.offset < victim.base_offset]
        after = [s for s in acked if s.offset >= nxt.base_offset]
        got, err = ck_read_until_error(b.bootstrap, 0)
        assert [m.offset() for m in got] == [s.offset for s in before]
        assert err is not None and err.code() == 2, err      # CORRUPT_MESSAGE (librdkafka: INVALID_MSG)
        assert_same_records(after, ck_consume(b.bootstrap, TOPIC, 0, start=nxt.base_offset))
        kp = KafkaConsumer(bootstrap_servers=b.bootstrap, enable_auto_commit=False, consumer_timeout_ms=5000)
        try:
            tp = TopicPartition(TOPIC, 0)
            kp.assign([tp])
            kp.seek(tp, victim.base_offset)
            try:
                served = kp.poll(timeout_ms=5000)
            except Exception as e:      # kafka-python raises the fetch error to the application
                assert "CorruptRecord" in type(e).__name__ or "Corrupt" in str(e), repr(e)
            else:
                assert not served, f"kafka-python was served the damaged batch: {served}"
        finally:
            kp.close()
        log = b.log_text()
        assert seg.name in log and "CRC mismatch" in log and "it is not served" in log
        assert seg.read_bytes() == bytes(raw)                    # refused, not repaired or cut
    finally:
        if b.proc is not None:
            b.stop()


def test_malformed_checkpoint_and_quorum_state_refuse_start_up_and_touch_nothing(tmp_path):
    data = tmp_path / "data"
    b = BrokerProcess(data)
    b.start()
    try:
        admin = ck_admin(b.bootstrap)
        admin.create_topics([NewTopic(TOPIC, num_partitions=1)])[TOPIC].result(timeout=30)
        acked = ck_produce(b.bootstrap, TOPIC, make_records(50, "ckpt"), partition=0)
    finally:
        b.stop()
    for path, bad in ((data / "replication-offset-checkpoint", "0\n3\ndamaged 0 50\n"),
                      (data / "__cluster_metadata-0" / "quorum-state", '{"leaderId":1,"leaderEp')):
        good = path.read_bytes()
        path.write_text(bad)
        before = digest(data)
        rc, text = run_to_exit(b)
        assert rc == 1, text[-2000:]
        assert f"cannot start: {path}" in text, text[-2000:]
        assert digest(data) == before                           # nothing recovered, nothing rewritten
        path.write_bytes(good)
    b.start()
    try:
        assert_same_records(acked, ck_consume(b.bootstrap, TOPIC, 0))
    finally:
        b.stop()
