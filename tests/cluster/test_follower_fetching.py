"""Fetch from the closest replica (KIP-392) with an unmodified librdkafka consumer (``client.rack``)
on a cluster whose brokers have racks: with ``replica.selector.class`` set, the records of the
consumer's partition come from the replica in its rack (the brokers' served-bytes counters, logged
at shutdown, say so), without it from the leader; what is read equals what was acknowledged while
a producer writes at the edge, and a kill -9 of the serving follower or a leader change loses or
duplicates nothing for a committing consumer. On the wire, as Kafka's ReplicaManager answers: a
follower serves nothing at or above its high watermark even while its log holds more, answers a
fetch it cannot serve yet as Kafka's follower does, and the leader stops naming a follower that
left the ISR."""

from __future__ import annotations

import subprocess
import threading
import time
import uuid

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from conformance import maven
from conformance.clients.java import JavaTools, json_events
from conformance.reference import java_command
from kcompat.protocol import records as rb
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.fetch import FetchRequest
from kcompat.protocol.messages.list_offsets import ListOffsetsRequest
from kcompat.protocol.messages.metadata import MetadataRequest
from kcompat.testing import wire
from kcompat.testing.cluster import wait_until
from tests.support.racks import rack_cluster, rack_of, served

RACKS = {n: rack_of(n) for n in (1, 2, 3)}


class EdgeLoad:
    """An idempotent acks=all producer writing ``topic`` while a committing librdkafka consumer
    (``client.rack``) reads it at the edge; ``acked`` and ``read`` are the values in order.
    ``consume=False``: the producer alone (another client reads)."""

    def __init__(self, bootstrap: str, topic: str, client_rack: str, consume: bool = True) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.acked: list[bytes] = []
        self.read: list[bytes] = []
        self.errors: list = []
        self.stop = threading.Event()
        self.producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                     "linger.ms": 2, "message.timeout.ms": 120000})
        self._threads = [threading.Thread(target=self._produce, daemon=True)]
        self.consumer = None
        if consume:
            self.consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                                         "client.rack": client_rack, "auto.offset.reset": "earliest",
                                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
            self.consumer.subscribe([topic])
            self._threads.append(threading.Thread(target=self._consume, daemon=True))

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
        if self.consumer is not None:
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


def kill9_and_leader_change(cluster, load: EdgeLoad, leader: int, follower: int) -> None:
    """While ``load`` runs: kill -9 of the follower serving the consumer, its restart, a
    controlled shutdown of the leader (the leader moves) and its restart."""
    load.wait_acked(1000)
    cluster.kill(follower)                               # the replica serving the consumer
    load.wait_acked(len(load.acked) + 1000)
    cluster.restart(follower)
    load.wait_acked(len(load.acked) + 1000)
    cluster.node(leader).stop()                          # controlled shutdown: the leader moves
    load.wait_acked(len(load.acked) + 1000)
    cluster.restart(leader)
    load.wait_acked(len(load.acked) + 500)


def test_kill9_of_the_serving_follower_and_a_leader_change_lose_nothing(tmp_path):
    cluster = rack_cluster(tmp_path, True).start()
    try:
        topic = new_topic_name()
        leader, follower = make_topic(cluster.bootstrap, topic)
        load = EdgeLoad(cluster.bootstrap, topic, RACKS[follower]).start()
        kill9_and_leader_change(cluster, load, leader, follower)
        load.finish()
        assert not load.errors, load.errors[:3]
        assert load.read == load.acked
    finally:
        cluster.stop()


@pytest.mark.timeout(1200)  # the first run on a machine resolves Kafka 4.3.1's jars from Maven Central
def test_java_4_committing_consumer_through_a_kill9_of_the_serving_follower_and_a_leader_change(tmp_path):
    """Kafka 4.3.1's VerifiableConsumer (``client.rack``, a commitSync after every batch) reading at
    the edge of an acks=all producer: the same faults, every acknowledged record read once, in order."""
    (tmp_path / "java").mkdir()
    tools = JavaTools(str(maven.resolve_kafka("4.3.1")), tmp_path / "java")
    cluster = rack_cluster(tmp_path, True).start()
    reader = None
    try:
        topic = new_topic_name()
        leader, follower = make_topic(cluster.bootstrap, topic)
        config = tools.properties("rack", {"client.rack": RACKS[follower], "fetch.max.wait.ms": "100"})
        read: list[bytes] = []

        def on_line(line: str) -> None:
            read.extend(str(e["value"]).encode() for e in json_events([line]) if e.get("name") == "record_data")
        reader = tools.background("org.apache.kafka.tools.VerifiableConsumer", [
            "--bootstrap-server", cluster.bootstrap, "--topic", topic, "--group-id", f"j-{topic}",
            "--reset-policy", "earliest", "--verbose", "--command-config", str(config)], on_line=on_line, name="reader")
        load = EdgeLoad(cluster.bootstrap, topic, RACKS[follower], consume=False).start()
        kill9_and_leader_change(cluster, load, leader, follower)
        load.finish()
        assert not load.errors, load.errors[:3]
        wait_until(lambda: len(read) >= len(load.acked), 90, "the Java consumer at the end of the log")
        reader.stop(grace=20)
        reader = None
        assert read == load.acked
    finally:
        if reader is not None:
            reader.stop(grace=5)
        cluster.stop()


def fetch(address: str, topic: str, offset: int, version: int, rack: str = "", isolation: int = 0,
          epoch: int = -1):
    """One consumer Fetch of ``topic``-0 (no waiting; ``epoch``: its current_leader_epoch, -1 =
    unchecked); the partition's response."""
    F = FetchRequest
    req = F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=isolation, session_id=0,
            session_epoch=-1, topics=[F.FetchTopic(topic=topic, partitions=[F.FetchPartition(
                partition=0, current_leader_epoch=epoch, fetch_offset=offset, log_start_offset=-1,
                partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id=rack)
    return wire.call(address, req, version).responses[0].partitions[0]


def partition_meta(address: str, topic: str):
    """``topic``-0 as ``address`` describes it in Metadata v12 (leader, leader epoch, ISR)."""
    resp = wire.call(address, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                              allow_auto_topic_creation=False), 12)
    return resp.topics[0].partitions[0]


def offsets_of(records) -> list[int]:
    """Offsets of the records of a fetched record set."""
    return [r.offset for _pos, _h, batch in _batches(records) for r in rb.iter_records(batch)]


def _batches(records):
    data = memoryview(bytes(records or b""))
    for pos, h in rb.iter_batches(data):
        yield pos, h, data[pos:pos + h.size]


# a paused broker stays registered and in the ISR: the high watermark stops where it is
HOLD_ISR = {"replica.lag.time.max.ms": "600000", "broker.session.timeout.ms": "600000"}


def test_wire_answers_of_leader_and_follower(tmp_path):
    """The leader names the client's rack's replica and sends no records; a follower serves v11+
    consumers below its high watermark, answers OFFSET_OUT_OF_RANGE above its log end and
    NOT_LEADER_OR_FOLLOWER to older fetches and to ListOffsets (which stays on the leader); with
    a third replica stalled (the HW held) the follower's log runs past its HW and still nothing at
    or above the HW is served."""
    cluster = rack_cluster(tmp_path, True, overrides=HOLD_ISR).start()
    try:
        topic = new_topic_name()
        leader, follower = make_topic(cluster.bootstrap, topic)
        third = ({1, 2, 3} - {leader, follower}).pop()
        p = ck.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(10):
            p.produce(topic, b"%d" % i)
        assert p.flush(30) == 0
        at = {n: f"127.0.0.1:{cluster.client_ports[n - 1]}" for n in (1, 2, 3)}
        redirected = fetch(at[leader], topic, 0, 11, RACKS[follower])
        assert (redirected.error_code, redirected.preferred_read_replica, bytes(redirected.records or b"")) == \
            (0, follower, b"")
        assert redirected.high_watermark == 10
        # no read, so no aborted-transactions list, even for read_committed (Kafka answers null)
        assert fetch(at[leader], topic, 0, 11, RACKS[follower], isolation=1).aborted_transactions is None
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
        # the follower checks the consumer's leader epoch against its own (KIP-320 on a follower)
        epoch = partition_meta(at[leader], topic).leader_epoch
        assert fetch(at[follower], topic, 0, 11, RACKS[follower], epoch=epoch).error_code == ErrorCode.NONE
        assert fetch(at[follower], topic, 0, 11, RACKS[follower], epoch=epoch + 1).error_code == \
            ErrorCode.UNKNOWN_LEADER_EPOCH

        # the third replica stalls: acks=1 records reach the follower's log, the HW stays at 12
        hw = fetch(at[follower], topic, 0, 11).high_watermark
        assert hw == 12
        cluster.pause(third)
        one = ck.Producer({"bootstrap.servers": at[leader], "acks": 1})
        for i in range(5):
            one.produce(topic, b"past the HW %d" % i)
        assert one.flush(30) == 0
        wait_until(lambda: fetch(at[follower], topic, hw + 5, 11).error_code == ErrorCode.NONE, 30,
                   "the follower's log end offset past the high watermark")
        for isolation in (0, 1):
            held = fetch(at[follower], topic, 0, 12, RACKS[follower], isolation=isolation)
            assert (held.error_code, held.high_watermark, held.last_stable_offset) == (0, hw, hw)
            assert max(offsets_of(held.records)) < hw                # nothing at or above the HW
        # between the follower's HW and its log end: an empty answer, no error (Kafka's LocalLog.read)
        between = fetch(at[follower], topic, hw + 2, 12, RACKS[follower])
        assert (between.error_code, bytes(between.records or b"")) == (0, b"")
        # above its log end: OFFSET_OUT_OF_RANGE, which sends a KIP-392 client back to the leader
        assert fetch(at[follower], topic, hw + 6, 12, RACKS[follower]).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        cluster.resume(third)
        wait_until(lambda: fetch(at[follower], topic, 0, 12).high_watermark == hw + 5, 30, "the HW after the stall")
    finally:
        cluster.stop()


def test_a_follower_out_of_the_isr_is_not_named_and_a_lost_partition_is_refused(tmp_path):
    """The leader names only in-sync followers (Kafka's findPreferredReadReplica): a follower that
    stalls past replica.lag.time.max.ms (still registered, so still in Metadata) leaves the ISR and
    its rack's consumers are served by the leader; back in the ISR it is named again. A follower
    whose partition is gone answers as Kafka's (UNKNOWN_TOPIC_OR_PARTITION once deleted)."""
    cluster = rack_cluster(tmp_path, True, overrides={"replica.lag.time.max.ms": "5000",
                                                      "broker.session.timeout.ms": "600000"}).start()
    try:
        topic = new_topic_name()
        leader, follower = make_topic(cluster.bootstrap, topic)
        at = {n: f"127.0.0.1:{cluster.client_ports[n - 1]}" for n in (1, 2, 3)}
        p = ck.Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(10):
            p.produce(topic, b"%d" % i)
        assert p.flush(30) == 0

        def named() -> int:
            return fetch(at[leader], topic, 0, 11, RACKS[follower]).preferred_read_replica
        wait_until(lambda: named() == follower, 30, "the rack's follower named")
        cluster.pause(follower)
        # a follower at the leader's log end stays in sync however long it is silent (Kafka's
        # Replica.isCaughtUp): one more record leaves it behind
        one = ck.Producer({"bootstrap.servers": at[leader], "acks": 1})
        one.produce(topic, b"10")
        assert one.flush(30) == 0
        wait_until(lambda: follower not in partition_meta(at[leader], topic).isr_nodes, 60,
                   "the stalled follower out of the ISR")
        assert follower in cluster.broker_ids(leader)           # registered, with its endpoint

        def served_by_leader():
            r = fetch(at[leader], topic, 0, 11, RACKS[follower])
            return r if r.preferred_read_replica == -1 else None
        back = wait_until(served_by_leader, 30, "the leader serving the follower's rack")
        assert back.high_watermark >= 10 and offsets_of(back.records) == list(range(back.high_watermark))
        cluster.resume(follower)
        wait_until(lambda: named() == follower, 60, "the follower named again once back in the ISR")
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.delete_topics([topic])[topic].result(30)
        wait_until(lambda: fetch(at[follower], topic, 0, 11, RACKS[follower]).error_code ==
                   ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 30, "the follower without the partition")
    finally:
        cluster.stop()


@pytest.mark.timeout(1200)  # the first run on a machine resolves Kafka 4.3.1's jars from Maven Central
@pytest.mark.parametrize("selector", [True, False], ids=["selector", "leader-only"])
def test_java_4_consumer_with_client_rack_reads_from_its_rack(tmp_path, selector):
    """Kafka 4.3.1's console consumer (the Java client) with ``client.rack``: every record; with
    the selector the bytes of its partition served by the follower of its rack, none by the
    leader; without it all by the leader."""
    lib = maven.resolve_kafka("4.3.1")
    cluster = rack_cluster(tmp_path, selector).start()
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
    if selector:
        assert counts[follower][1] > 0 and counts[leader][0] == 0, counts
    else:
        assert counts[leader][0] > 0 and all(f == 0 for _, f in counts.values()), counts
