"""A real broker whose only log dir (data and ``__cluster_metadata``) is a small tmpfs filled
until ENOSPC, with real clients (tests/support/small_disk.py).

What must hold, as the storage-faults part of issue 25 asks:

- produce answers KAFKA_STORAGE_ERROR (56) while the disk is full - also when the append must
  roll a segment first - and nothing acknowledged is damaged: consumers keep reading everything,
  checkpoint files stay whole;
- the broker heals by itself when space is freed: producers that kept retrying get their records
  acknowledged, checkpoints are written again (Kafka would have halted the broker: its only log
  dir, holding the metadata log, failed);
- a shutdown on a full disk loses nothing; a start on a full disk, and a metadata write on a full
  disk (creating a topic), end the process with exit status 1 and a line saying why, as Kafka
  halts when its metadata log dir fails - and the next start, with space, serves every
  acknowledged record byte for byte.
"""

from __future__ import annotations

import os
import threading
import time

import confluent_kafka as ck
from confluent_kafka.admin import NewTopic

from kcompat.log import read_offset_checkpoint
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.produce import ProduceRequest
from kcompat.protocol.records import build_batch
from tests.clients.common import (
    _CK_TS_TYPE, Sent, assert_same_reads, assert_same_records, ck_admin, ck_consume, ck_produce, kp_consume,
    make_records, now_ms, wait_until,
)
from kcompat.testing import wire
from tests.support.small_disk import SmallDisk, SmallDiskBroker

DISK = 24 << 20
DATA, RAW = "data", "raw"
RAW_SEGMENT = 16384


def raw_produce(bootstrap: str, value: bytes) -> tuple[int, str | None, int]:
    """One batch of one record to RAW-0 with acks=-1: (error code, error message, base offset)."""
    batch = build_batch([(now_ms(), b"raw", value, ())], base_offset=0)
    req = ProduceRequest(acks=-1, timeout_ms=10_000, topic_data=[ProduceRequest.TopicProduceData(
        name=RAW, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])])
    p = wire.call(bootstrap, req, 9).responses[0].partition_responses[0]
    return p.error_code, p.error_message, p.base_offset


def append_failures(broker, at_least: int) -> list[str]:
    """The broker's log lines about failed appends to RAW-0 once there are ``at_least``, else []."""
    lines = [line for line in broker.log_text().splitlines() if f"{RAW}-0: append failed" in line]
    return lines if len(lines) >= at_least else []


def raw_values(bootstrap: str) -> list[bytes]:
    """Every record value of RAW-0 (kafka-python checks each batch's CRC)."""
    return [g.value for g in kp_consume(bootstrap, RAW, 0)]


def active_size(disk: SmallDisk, partition_dir: str) -> int:
    logs = sorted((disk.path / "data" / partition_dir).glob("*.log"))
    return os.path.getsize(logs[-1])


class Background:
    """A confluent idempotent acks=all producer delivering ``recs`` to DATA while the test goes
    on; :meth:`finish` waits for every delivery report."""

    def __init__(self, bootstrap: str, recs) -> None:
        self.p = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                              "message.timeout.ms": 180_000, "linger.ms": 5})
        self.reports: dict[int, tuple] = {}
        self.recs = recs
        for i, r in enumerate(recs):
            self.p.produce(DATA, key=r.key, value=r.value, headers=list(r.headers) or None,
                           on_delivery=lambda err, msg, i=i: self.reports.__setitem__(
                               i, (err, msg.partition(), msg.offset(), msg.timestamp())))
        self._stop = False
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop:
            self.p.poll(0.1)

    def delivered(self) -> int:
        return len(self.reports)

    def finish(self, timeout: float = 120.0):
        wait_until(lambda: len(self.reports) == len(self.recs), timeout, what="background deliveries")
        self._stop = True
        self._thread.join(5)
        self.p.flush(10)
        out = []
        for i, r in enumerate(self.recs):
            err, part, off, (ts_type, ts) = self.reports[i]
            assert err is None, f"record {i}: {err}"
            out.append(Sent(DATA, part, off, r.key, r.value, tuple(r.headers), ts, _CK_TS_TYPE.get(ts_type, -1)))
        return out


def read_everything(bootstrap: str) -> dict:
    return {("ck", 0): ck_consume(bootstrap, DATA, 0), ("ck", 1): ck_consume(bootstrap, DATA, 1),
            ("kp", 0): kp_consume(bootstrap, DATA, 0), ("kp", 1): kp_consume(bootstrap, DATA, 1),
            "raw": raw_values(bootstrap)}


def check(reads: dict, acked: list, raw_acked: list[bytes]) -> None:
    for p in (0, 1):
        mine = sorted((s for s in acked if s.partition == p), key=lambda s: s.offset)
        assert_same_records(mine, reads[("ck", p)])
        assert_same_records(mine, reads[("kp", p)])
    assert reads["raw"] == raw_acked


def same(a: dict, b: dict) -> None:
    for key in a:
        if key == "raw":
            assert a[key] == b[key]
        else:
            assert_same_reads(a[key], b[key])


def no_temp_files(disk: SmallDisk) -> list[str]:
    return [str(p) for p in (disk.path / "data").rglob("*") if p.name.endswith((".tmp", ".cleaned", ".swap"))]


def test_disk_full_produce_answers_storage_error_heals_and_loses_nothing(tmp_path):
    with SmallDisk(tmp_path, DISK) as disk:
        b = SmallDiskBroker(disk, {"log.flush.offset.checkpoint.interval.ms": "300",
                                   "replica.high.watermark.checkpoint.interval.ms": "300"})
        b.start()
        try:
            admin = ck_admin(b.bootstrap)
            for name, parts, cfg in ((DATA, 2, {}), (RAW, 1, {"internal.segment.bytes": str(RAW_SEGMENT),
                                                                "index.interval.bytes": "100"})):
                admin.create_topics([NewTopic(name, num_partitions=parts, config=cfg)])[name].result(timeout=30)
            acked = ck_produce(b.bootstrap, DATA, make_records(150, "before"), **{"enable.idempotence": True})
            raw_acked = []
            while active_size(disk, f"{RAW}-0") + 2 * 1100 < RAW_SEGMENT:    # RAW's segment nearly full
                value = os.urandom(1000)
                code, _msg, _base = raw_produce(b.bootstrap, value)
                assert code == 0
                raw_acked.append(value)

            # consumers' FindCoordinator creates __consumer_offsets: a metadata write, done while
            # there is space (on a full disk it would halt the node, as it would halt Kafka)
            check(read_everything(b.bootstrap), acked, raw_acked)
            # the periodic checkpoint has recorded RAW before the disk fills (its old file must stay
            # whole afterwards); on a loaded machine the first write can take longer than 300 ms
            rp_path = disk.path / "data" / "recovery-point-offset-checkpoint"
            wait_until(lambda: rp_path.exists() and (RAW, 0) in read_offset_checkpoint(rp_path), 60,
                       what="a recovery-point checkpoint naming the raw topic")

            # -- the disk is full --------------------------------------------------------------------
            disk.fill()
            for _ in range(3):    # the first needs a roll (its producer snapshot or files fail), then appends
                code, msg, _base = raw_produce(b.bootstrap, os.urandom(3000))
                # no text on the wire, as Kafka (its KafkaStorageException has no custom message)
                assert (code, msg) == (ErrorCode.KAFKA_STORAGE_ERROR, None)
            # the broker's log says why, once per failed append
            errors = wait_until(lambda: append_failures(b, 3), 30, what="three logged append failures")
            assert len(errors) == 3, errors
            assert all("No space left on device" in m for m in errors), errors
            assert any("rolling" in m or "producer snapshot" in m for m in errors), errors
            bg = Background(b.bootstrap, make_records(100, "during"))
            time.sleep(1.0)
            assert bg.delivered() == 0 and b.proc.poll() is None
            reads_while_full = read_everything(b.bootstrap)           # reads are not affected
            check(reads_while_full, acked, raw_acked)
            wait_until(lambda: "cannot write" in b.log_text() and "recovery-point-offset-checkpoint" in b.log_text(),
                       30, what="a failed recovery-point checkpoint")
            rp = read_offset_checkpoint(disk.path / "data" / "recovery-point-offset-checkpoint")
            assert (RAW, 0) in rp                                     # the old file stays whole
            assert not no_temp_files(disk)

            # -- space again: everything heals by itself --------------------------------------------------
            disk.free()
            acked += bg.finish()
            value = os.urandom(3000)
            code, msg, base = raw_produce(b.bootstrap, value)
            assert code == 0, msg
            assert base == len(raw_acked)
            raw_acked.append(value)
            wait_until(lambda: "recovery-point-offset-checkpoint written again" in b.log_text(), 30,
                       what="the recovery-point checkpoint written again")
            before = read_everything(b.bootstrap)
            check(before, acked, raw_acked)
            assert not no_temp_files(disk)

            # -- a shutdown on a full disk, then a start on a full disk ---------------------------------
            disk.fill()
            assert b.stop() == 0
            rc, text = b.run_to_exit()
            assert rc == 1 and "No space left on device" in text, text[-3000:]
            disk.free()
            b.start()
            same(before, read_everything(b.bootstrap))

            # -- a metadata write on a full disk halts, as Kafka -----------------------------------------
            disk.fill()
            admin = ck_admin(b.bootstrap)
            pending = admin.create_topics([NewTopic("created-while-full", num_partitions=1)],
                                          request_timeout=15)["created-while-full"]
            assert b.wait_exit(60) == 1
            assert pending.exception(timeout=30) is not None
            assert "the metadata log dir" in b.log_text() and "Halting" in b.log_text()
            disk.free()
            b.start()
            same(before, read_everything(b.bootstrap))
            admin = ck_admin(b.bootstrap)
            admin.create_topics([NewTopic("created-after", num_partitions=1)])["created-after"].result(timeout=30)
            more = ck_produce(b.bootstrap, DATA, make_records(20, "after"), partition=0)
            assert more[0].offset == len(before[("ck", 0)])
            assert not no_temp_files(disk)
        finally:
            if b.proc is not None:
                b.kill9()

