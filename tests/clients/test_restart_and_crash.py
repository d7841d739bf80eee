"""Durability with real clients: a clean restart (SIGTERM + start) serves identical data, and a
``kill -9`` while kafka-python and confluent-kafka producers (acks=1 and acks=all, idempotent and
not) write in a loop loses no acknowledged record and, for idempotent producers, duplicates none.
"""

from __future__ import annotations

import threading
import time

import confluent_kafka as ck
from confluent_kafka.admin import (
    AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewTopic, OffsetSpec, ResourceType,
)
from kafka import KafkaProducer

from tests.clients.common import (
    Rec, assert_same_reads, assert_same_records, ck_admin, ck_consume, ck_produce, ck_producer,
    close_ck_producer, kp_consume, kp_produce, make_records, now_ms, topic_name, wait_until,
)


def _offsets_snapshot(admin, topic: str, partitions: int, timestamps: list[int]):
    """Everything ListOffsets says about a topic: earliest, latest, max timestamp, by time."""
    out = {}
    for p in range(partitions):
        tp = ck.TopicPartition(topic, p)
        specs = {"earliest": OffsetSpec.earliest(), "latest": OffsetSpec.latest(),
                 "max": OffsetSpec.max_timestamp()}
        specs.update({f"ts{t}": OffsetSpec.for_timestamp(t) for t in timestamps})
        for name, spec in specs.items():
            info = admin.list_offsets({tp: spec}, request_timeout=15)[tp].result(timeout=20)
            out[(p, name)] = (info.offset, info.timestamp)
    return out


def test_clean_restart_serves_identical_data(fresh_broker, request):
    b = fresh_broker
    admin = ck_admin(b.bootstrap)
    t = topic_name(request)
    lat = topic_name(request, "lat")
    for name, parts, cfg in [(t, 3, {}), (lat, 1, {"message.timestamp.type": "LogAppendTime"})]:
        admin.create_topics([NewTopic(name, num_partitions=parts, config=cfg)])[name].result(timeout=20)
    base = now_ms() - 600_000
    stamps = [base + 100 * i for i in range(60)]
    sent = {
        0: kp_produce(b.bootstrap, t, make_records(60, "p0", timestamps=stamps), partition=0,
                      compression_type="gzip", linger_ms=20),
        1: ck_produce(b.bootstrap, t, make_records(60, "p1"), partition=1,
                      **{"compression.type": "zstd", "enable.idempotence": True, "linger.ms": 20}),
    }
    sent[2] = kp_produce(b.bootstrap, t, make_records(30, "p2a"), partition=2, acks=1, compression_type="lz4")
    sent[2] += ck_produce(b.bootstrap, t, make_records(30, "p2b"), partition=2, **{"compression.type": "snappy"})
    assert [s.offset for s in sent[2]] == list(range(60))
    sent_lat = ck_produce(b.bootstrap, lat, make_records(20, "lat"))
    # state that must survive too: a moved log start offset and a topic config override
    ck_tp = ck.TopicPartition(t, 2, 10)
    assert admin.delete_records([ck_tp])[ck_tp].result(timeout=20).low_watermark == 10
    res = ConfigResource(ResourceType.TOPIC, t, incremental_configs=[
        ConfigEntry("retention.ms", "123456789", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(timeout=20)

    def read_everything():
        reads = {}
        for p in range(3):
            reads[("ck", p)] = ck_consume(b.bootstrap, t, p)
            reads[("kp", p)] = kp_consume(b.bootstrap, t, p)
        reads[("ck", "lat")] = ck_consume(b.bootstrap, lat, 0)
        reads[("kp", "lat")] = kp_consume(b.bootstrap, lat, 0)
        return reads

    # an idempotent producer that lives through the restart (its producer state must be restored)
    survivor = KafkaProducer(bootstrap_servers=b.bootstrap, linger_ms=5)
    survivor_t = topic_name(request, "survivor")
    admin.create_topics([NewTopic(survivor_t, num_partitions=1)])[survivor_t].result(timeout=20)
    survivor_sent = kp_produce(b.bootstrap, survivor_t, make_records(20, "s1"), producer=survivor)

    before = read_everything()
    assert_same_records(sent[0], before[("kp", 0)])
    assert_same_records(sent[1], before[("ck", 1)])
    assert_same_records(sent[2][10:], before[("ck", 2)])
    assert_same_records(sent_lat, before[("ck", "lat")])
    for p in (0, 1, 2, "lat"):
        assert_same_reads(before[("ck", p)], before[("kp", p)])
    offsets_before = _offsets_snapshot(admin, t, 3, [base - 1, stamps[17], stamps[17] + 1, stamps[-1] + 1])
    assert offsets_before[(0, "ts" + str(stamps[17]))] == (17, stamps[17])
    assert offsets_before[(2, "earliest")] == (10, -1)

    assert b.stop() == 0, "the broker did not exit cleanly on SIGTERM"
    b.start()

    after = read_everything()
    for key in before:
        assert_same_reads(before[key], after[key])
    admin = ck_admin(b.bootstrap)
    assert _offsets_snapshot(admin, t, 3, [base - 1, stamps[17], stamps[17] + 1, stamps[-1] + 1]) == offsets_before
    entry = admin.describe_configs([ConfigResource(ResourceType.TOPIC, t)])[
        ConfigResource(ResourceType.TOPIC, t)].result(timeout=20)["retention.ms"]
    assert (entry.value, entry.source) == ("123456789", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)

    survivor_sent += kp_produce(b.bootstrap, survivor_t, make_records(20, "s2"), producer=survivor)
    survivor.close(timeout=10)
    assert [s.offset for s in survivor_sent] == list(range(40))
    assert_same_records(survivor_sent, kp_consume(b.bootstrap, survivor_t, 0))

    # producing continues at the old log end offsets
    more = kp_produce(b.bootstrap, t, make_records(5, "more"), partition=0)
    assert [s.offset for s in more] == [60, 61, 62, 63, 64]
    more1 = ck_produce(b.bootstrap, t, make_records(5, "more1"), partition=1, **{"enable.idempotence": True})
    assert [s.offset for s in more1] == [60, 61, 62, 63, 64]
    assert_same_records(sent[0] + more, kp_consume(b.bootstrap, t, 0))
    assert_same_records(sent[1] + more1, ck_consume(b.bootstrap, t, 1))


# -- kill -9 under load ----------------------------------------------------------------------------------


class _Loop(threading.Thread):
    """Produce records ``<name>-<i>`` in a loop until stopped; remember every acknowledgement."""

    def __init__(self, name: str, topic: str, bootstrap: str, client: str, config: dict):
        super().__init__(name=f"producer-{name}", daemon=True)
        self.tag, self.topic, self.bootstrap, self.client, self.config = name, topic, bootstrap, client, config
        self.stop_flag = threading.Event()
        self.acked: dict[int, tuple[int, int, int]] = {}  # i -> (partition, offset, timestamp)
        self.failed: dict[int, str] = {}
        self.sent = 0
        self.error: BaseException | None = None
        self.lock = threading.Lock()

    def record(self, i: int) -> Rec:
        return Rec(f"{self.tag}-{i}".encode(), f"{self.tag}-{i}-".encode() + bytes([i % 251]) * (i % 200),
                   (("seq", str(i).encode()), ("producer", self.tag.encode())))

    def _ok(self, i, partition, offset, ts):
        with self.lock:
            self.acked[i] = (partition, offset, ts)

    def _fail(self, i, err):
        with self.lock:
            self.failed[i] = str(err)

    def run(self):
        try:
            if self.client == "kp":
                self._run_kp()
            else:
                self._run_ck()
        except BaseException as e:  # reported by the test
            self.error = e

    def _run_kp(self):
        p = KafkaProducer(bootstrap_servers=self.bootstrap, **self.config)
        try:
            i = 0
            while not self.stop_flag.is_set():
                r = self.record(i)
                f = p.send(self.topic, key=r.key, value=r.value, headers=list(r.headers), partition=0)
                f.add_callback(lambda md, i=i: self._ok(i, md.partition, md.offset, md.timestamp))
                f.add_errback(lambda e, i=i: self._fail(i, e))
                i += 1
                self.sent = i
                if i % 50 == 0:
                    time.sleep(0.01)
            p.flush(timeout=60)
        finally:
            p.close(timeout=10)

    def _run_ck(self):
        p = ck_producer(self.bootstrap, **self.config)

        def cb(i):
            def done(err, msg):
                if err is None:
                    self._ok(i, msg.partition(), msg.offset(), msg.timestamp()[1])
                else:
                    self._fail(i, err)
            return done

        try:
            i = 0
            while not self.stop_flag.is_set():
                r = self.record(i)
                try:
                    p.produce(self.topic, key=r.key, value=r.value, headers=list(r.headers), partition=0,
                              on_delivery=cb(i))
                except BufferError:
                    p.poll(0.1)
                    continue
                i += 1
                self.sent = i
                p.poll(0)
                if i % 50 == 0:
                    time.sleep(0.01)
            remaining = p.flush(60)
            assert remaining == 0, f"{remaining} messages still undelivered"
        finally:
            close_ck_producer(p)

    def n_acked(self) -> int:
        with self.lock:
            return len(self.acked)


PRODUCERS = [
    # name, client, config, idempotent
    ("kp-acks1", "kp", {"acks": 1}, False),
    ("kp-acksall", "kp", {}, True),  # kafka-python's defaults: acks=all, idempotent
    ("ck-acks1", "ck", {"acks": "1"}, False),
    ("ck-acksall", "ck", {}, False),  # librdkafka's defaults: acks=all, not idempotent
    ("ck-idempotent", "ck", {"enable.idempotence": True}, True),
]


def test_kill9_while_producing_loses_no_acknowledged_record(fresh_broker, request):
    b = fresh_broker
    admin = ck_admin(b.bootstrap)
    loops = []
    for name, client, config, idempotent in PRODUCERS:
        topic = topic_name(request, name)
        admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(timeout=20)
        loops.append((_Loop(name, topic, b.bootstrap, client, config), idempotent))
    try:
        for loop, _ in loops:
            loop.start()
        for loop, _ in loops:
            wait_until(lambda: loop.n_acked() >= 150 or loop.error, timeout=30, what=f"{loop.tag} acks before the kill")
        b.kill9()
        acked_at_kill = {loop.tag: loop.n_acked() for loop, _ in loops}
        sent_at_kill = {loop.tag: loop.sent for loop, _ in loops}
        time.sleep(0.5)
        b.start()
        for loop, _ in loops:
            wait_until(lambda: loop.n_acked() >= acked_at_kill[loop.tag] + 150 or loop.error, timeout=60,
                       what=f"{loop.tag} acks after the restart")
    finally:
        for loop, _ in loops:
            loop.stop_flag.set()
        for loop, _ in loops:
            loop.join(90)
    for loop, _ in loops:
        print(f"{loop.tag}: sent {loop.sent}, acked {len(loop.acked)} ({acked_at_kill[loop.tag]} before the kill), "
              f"failed {len(loop.failed)}, sent at kill {sent_at_kill[loop.tag]}")
    for loop, _ in loops:
        assert not loop.is_alive(), f"{loop.tag} did not finish"
        assert loop.error is None, f"{loop.tag}: {loop.error!r}"

    for loop, idempotent in loops:
        got = ck_consume(b.bootstrap, loop.topic, 0, timeout=60)
        assert got, loop.tag
        # every record in the log is one this producer sent, with intact content
        by_offset = {}
        for g in got:
            i = int(g.key.decode().rsplit("-", 1)[1])
            r = loop.record(i)
            assert (g.key, g.value, g.headers) == (r.key, r.value, r.headers), f"{loop.tag} offset {g.offset}"
            by_offset[g.offset] = (i, g)
        assert [g.offset for g in got] == list(range(got[0].offset, got[0].offset + len(got))), "offset gap"
        assert got[0].offset == 0
        # every acknowledged record is at the offset its acknowledgement named, with its timestamp
        missing = []
        for i, (partition, offset, ts) in sorted(loop.acked.items()):
            found = by_offset.get(offset)
            if found is None or found[0] != i or found[1].timestamp != ts or partition != 0:
                missing.append((i, offset, found and found[0]))
        assert not missing, f"{loop.tag}: {len(missing)} acknowledged records not where acknowledged: {missing[:10]}"
        seqs = [i for i, _ in (by_offset[o] for o in sorted(by_offset))]
        print(loop.tag, "log has", len(seqs), "records,", len(set(seqs)), "distinct")
        if idempotent:
            dups = len(seqs) - len(set(seqs))
            assert dups == 0, f"{loop.tag}: {dups} duplicates with an idempotent producer"
            assert seqs == sorted(seqs), f"{loop.tag}: idempotent producer's records out of order"
        assert len(loop.acked) >= acked_at_kill[loop.tag] + 150
        assert len(loop.acked) + len(loop.failed) == loop.sent, (
            f"{loop.tag}: {loop.sent} sent, {len(loop.acked)} acked, {len(loop.failed)} failed")
    # kafka-python checks every batch CRC of the recovered logs
    for loop, _ in loops[:2]:
        assert_same_reads(ck_consume(b.bootstrap, loop.topic, 0), kp_consume(b.bootstrap, loop.topic, 0, timeout=60))
