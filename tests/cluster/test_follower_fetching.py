"""Fetch from the closest replica (KIP-392) with an unmodified librdkafka consumer (``client.rack``)
on a cluster whose brokers have racks: with ``replica.selector.class`` set, the records of the
consumer's partition come from the replica in its rack (the brokers' served-bytes counters, logged
at shutdown, say so), without it from the leader; what is read equals what was acknowledged while
a producer writes at the edge, and a kill -9 of the serving follower or a leader change loses or
duplicates nothing for a committing consumer."""

from __future__ import annotations

import subprocess
import threading
import time
import uuid

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from conformance import maven
from conformance.reference import java_command
from kcompat.protocol import records as rb
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.fetch import FetchRequest
from kcompat.protocol.messages.list_offsets import ListOffsetsRequest
from kcompat.testing import wire
from kcompat.testing.cluster import wait_until
from tests.support.racks import rack_cluster, rack_of, served

RACKS = {n: rack_of(n) for n in (1, 2, 3)}


class EdgeLoad:
    """An idempotent acks=all producer writing ``topic`` while a committing librdkafka consumer
    (``client.rack``) reads it at the edge; ``acked`` and ``read`` are the values in order."""

    def __init__(self, bootstrap: str, topic: str, client_rack: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.acked: list[bytes] = []
        self.read: list[bytes] = []
        self.errors: list = []
        self.stop = threading.Event()
        self.producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                     "linger.ms": 2, "message.timeout.ms": 120000})
        self.consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                                     "client.rack": client_rack, "auto.offset.reset": "earliest",
                                     "enable.auto.commit": False, "fetch.wait.max.ms": 100})
        self.consumer.subscribe([topic])
        self._threads = [threading.Thread(target=self._produce, daemon=True),
                         threading.Thread(target=self._consume, daemon=True)]

    def start(self) -> "EdgeLoad":
        for t in self._threads:
            t.start()
        return self

    def _produce(self) -> None:
        i = 0
        while not self.stop.is_set():
            self.producer.produce(self.topic, b"%06d" % i, on_delivery=self._acked)
            i += 1
            self.producer.poll(0.001)
            if i % 50 == 0:
                time.sleep(0.01)
        self.producer.flush(120)

    def _acked(self, err, msg) -> None:
        if err is None:
            self.acked.append(msg.value())
        else:
            self.errors.append(err)

    def _consume(self) -> None:
        while not self.stop.is_set() or len(self.read) < len(self.acked):
            m = self.consumer.poll(0.2)
            if m is None:
                if self.stop.is_set() and self._drained_at and time.monotonic() > self._drained_at:
                    break
                continue
            if m.error() is not None:
                continue
            self.read.append(m.value())
            self.consumer.commit(message=m, asynchronous=False)

    _drained_at: float | None = None

    def finish(self, timeout: float = 90) -> None:
        self.stop.set()
        self._threads[0].join(timeout)
        self._drained_at = time.monotonic() + timeout
        self._threads[1].join(timeout + 5)
        self.consumer.close()

    def wait_acked(self, n: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while len(self.acked) < n:
            assert time.monotonic() < deadline, f"only {len(self.acked)} records acknowledged"
            time.sleep(0.05)


def make_topic(bootstrap: str, topic: str) -> tuple[int, int]:
    """Create ``topic`` with 1 partition at RF 3 and wait for its full ISR: (leader, a follower).
    CreateTopics returns once the controller committed the topic; the broker librdkafka asks for
    metadata may not have applied it yet and answers UNKNOWN_TOPIC_OR_PART (as Kafka's would)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    deadline = time.monotonic() + 30
    while True:
        t = admin.list_topics(topic, timeout=10).topics[topic]
        p = t.partitions.get(0)
        if t.error is None and p is not None and p.leader >= 0 and sorted(p.isrs) == [1, 2, 3]:
            return p.leader, next(n for n in p.replicas if n != p.leader)
        assert time.monotonic() < deadline, (t.error, p)
        time.sleep(0.1)


def new_topic_name() -> str:
    return f"racks-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("selector", [True, False], ids=["selector", "leader-only"])
def test_consumer_reads_from_the_replica_in_its_rack(tmp_path, selector):
    cluster = rack_cluster(tmp_path, selector).start()
    topic = new_topic_name()
    try:
        leader, follower = make_topic(cluster.bootstrap, topic)
        load = EdgeLoad(cluster.bootstrap, topic, RACKS[follower]).start()
        load.wait_acked(3000)
        load.finish()
        assert not load.errors, load.errors[:3]
        assert load.read == load.acked                       # nothing lost, doubled or beyond the HW
    finally:
        counts = served(cluster, topic)
    if selector:
        assert counts[follower][1] > 0 and counts[leader][0] == 0, counts
    else:
        assert counts[leader][0] > 0 and all(f == 0 for _, f in counts.values()), counts


def test_kill9_of_the_serving_follower_and_a_leader_change_lose_nothing(tmp_path):
    cluster = rack_cluster(tmp_path, True).start()
    try:
        topic = new_topic_name()
        leader, follower = make_topic(cluster.bootstrap, topic)
        load = EdgeLoad(cluster.bootstrap, topic, RACKS[follower]).start()
        load.wait_acked(1000)
        cluster.kill(follower)                               # the replica serving the consumer
        load.wait_acked(len(load.acked) + 1000)
        cluster.restart(follower)
        load.wait_acked(len(load.acked) + 1000)
        cluster.node(leader).stop()                          # controlled shutdown: the leader moves
        load.wait_acked(len(load.acked) + 1000)
        cluster.restart(leader)
        load.wait_acked(len(load.acked) + 500)
        load.finish()
        assert not load.errors, load.errors[:3]
        assert load.read == load.acked
    finally:
        cluster.stop()


def fetch(address: str, topic: str, offset: int, version: int, rack: str = "", isolation: int = 0):
    """One consumer Fetch of ``topic``-0 (no waiting); the partition's response."""
    F = FetchRequest
    req = F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=isolation, session_id=0,
            session_epoch=-1, topics=[F.FetchTopic(topic=topic, partitions=[F.FetchPartition(
                partition=0, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
                partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id=rack)
    return wire.call(address, req, version).responses[0].partitions[0]


def offsets_of(records) -> list[int]:
    """Offsets of the records of a fetched record set."""
    return [r.offset for _pos, _h, batch in _batches(records) for r in rb.iter_records(batch)]


def _batches(records):
    data = memoryview(bytes(records or b""))
    for pos, h in rb.iter_batches(data):
        yield pos, h, data[pos:pos + h.size]


def test_wire_answers_of_leader_and_follower(tmp_path):
    """The leader names the client's rack's replica and sends no records; a follower serves v11+
    consumers below its high watermark, answers OFFSET_OUT_OF_RANGE above its log end and
    NOT_LEADER_OR_FOLLOWER to older fetches and to ListOffsets (which stays on the leader)."""
    cluster = rack_cluster(tmp_path, True).start()
    try:
        topic = new_topic_name()
        leader, follower = make_topic(cluster.bootstrap, topic)
        p = ck.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(10):
            p.produce(topic, b"%d" % i)
        assert p.flush(30) == 0
        at = {n: f"127.0.0.1:{cluster.client_ports[n - 1]}" for n in (1, 2, 3)}
        redirected = fetch(at[leader], topic, 0, 11, RACKS[follower])
        assert (redirected.error_code, redirected.preferred_read_replica, bytes(redirected.records or b"")) == \
            (0, follower, b"")
        assert redirected.high_watermark == 10
        own_rack = fetch(at[leader], topic, 0, 11, RACKS[leader])
        assert own_rack.preferred_read_replica == -1 and own_rack.records
        assert fetch(at[leader], topic, 0, 11).preferred_read_replica == -1           # no rack: the leader
        wait_until(lambda: fetch(at[follower], topic, 0, 11).high_watermark == 10, 10, "the follower's HW")
        served_by_follower = fetch(at[follower], topic, 0, 12, RACKS[follower])
        assert served_by_follower.error_code == 0 and served_by_follower.records
        assert served_by_follower.preferred_read_replica == -1
        assert fetch(at[follower], topic, 15, 11).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert fetch(at[follower], topic, 0, 10).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        # read_committed on the follower stops at its last stable offset: an open transaction
        txn = ck.Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": f"t-{topic}"})
        txn.init_transactions(30)
        txn.begin_transaction()
        txn.produce(topic, b"open")
        txn.flush(30)
        wait_until(lambda: fetch(at[follower], topic, 0, 11).high_watermark == 11, 10, "the open record replicated")
        committed_view = fetch(at[follower], topic, 0, 11, isolation=1)
        assert (committed_view.high_watermark, committed_view.last_stable_offset) == (11, 10)
        assert [o for o in offsets_of(committed_view.records)] == list(range(10))
        txn.commit_transaction(30)
        wait_until(lambda: fetch(at[follower], topic, 0, 11, isolation=1).last_stable_offset == 12, 10,
                   "the follower's LSO after the commit marker")
        L = ListOffsetsRequest
        listed = wire.call(at[follower], L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(
            name=topic, partitions=[L.ListOffsetsPartition(partition_index=0, timestamp=-1)])]), 7)
        assert listed.topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    finally:
        cluster.stop()


@pytest.mark.timeout(1200)  # the first run on a machine resolves Kafka 4.3.1's jars from Maven Central
def test_java_4_consumer_with_client_rack_reads_from_its_rack(tmp_path):
    """Kafka 4.3.1's console consumer (the Java client) with ``client.rack``: every record, and
    the bytes of its partition served by the follower of its rack, none by the leader."""
    lib = maven.resolve_kafka("4.3.1")
    cluster = rack_cluster(tmp_path, True).start()
    try:
        topic = new_topic_name()
        leader, follower = make_topic(cluster.bootstrap, topic)
        p = ck.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True})
        values = [b"%05d" % i for i in range(2000)]
        for v in values:
            p.produce(topic, v)
        assert p.flush(60) == 0
        cmd = java_command(lib, "org.apache.kafka.tools.consumer.ConsoleConsumer", [
            "--bootstrap-server", cluster.bootstrap, "--topic", topic, "--from-beginning",
            "--max-messages", str(len(values)), "--timeout-ms", "60000", "--group", "java-rack",
            "--command-property", f"client.rack={RACKS[follower]}"])
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
        assert out.returncode == 0, out.stderr[-3000:]
        assert out.stdout.split() == [v.decode() for v in values]
    finally:
        counts = served(cluster, topic)
    assert counts[follower][1] > 0 and counts[leader][0] == 0, counts
