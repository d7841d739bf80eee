"""Zero-copy fetch (issue 20): on a PLAINTEXT listener record bytes go from segment files to the
socket with sendfile (kcompat.broker.sendfile_writer), counted by the ``kcompat_zero_copy_*``
metrics; on a TLS listener the same fetches are served from memory. Real clients read exactly
what was produced, also while the log is appended to, deleted by retention and rewritten by the
cleaner under the ranges being sent, and clients that close in the middle of a large response
leave no file descriptor behind."""

from __future__ import annotations

import os
import socket
import struct
import threading
import urllib.request
import uuid

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from prometheus_client.parser import text_string_to_metric_families

from conformance import maven
from conformance.clients.java import JavaTools
from kcompat.protocol.messages.fetch import FetchRequest
from kcompat.testing import wire
from kcompat.testing.ports import free_ports
from kcompat.testing.process import wait_for
from tests.security.certs import TestCA
from tests.support.broker_process import BrokerProcess

RECORDS = 3000
VALUE = 1000


def value(i: int) -> bytes:
    """A 1000-byte value that names its sequence number in every 10 bytes (self-checking)."""
    return (b"%09d|" % i) * (VALUE // 10)


def seq(v: bytes) -> int:
    assert len(v) == VALUE and v == v[:10] * (VALUE // 10), "a value came back damaged"
    return int(v[:9])


class Setup:
    def __init__(self, root) -> None:
        self.ca = TestCA(root / "ca")
        server = self.ca.issue("broker")
        plain, tls, http = free_ports(3)
        self.plain = f"127.0.0.1:{plain}"
        self.tls = f"127.0.0.1:{tls}"
        self.metrics_url = f"http://127.0.0.1:{http}/metrics"
        self.broker = BrokerProcess(root / "data", {
            "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT",
            **self.ca.broker_ssl_props(server),
            "http.listeners": f"HTTP://127.0.0.1:{http}",
            "log.retention.check.interval.ms": "200", "log.cleaner.backoff.ms": "200",
            "num.partitions": "1", "offsets.topic.num.partitions": "1",
        }, port=plain)

    def zero_copy_bytes(self) -> float:
        with urllib.request.urlopen(self.metrics_url, timeout=10) as r:
            text = r.read().decode()
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name == "kcompat_zero_copy_bytes_total":
                    return s.value
        raise AssertionError("no kcompat_zero_copy_bytes metric")

    def open_fds(self) -> int:
        return len(os.listdir(f"/proc/{self.broker.proc.pid}/fd"))


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    s = Setup(tmp_path_factory.mktemp("zero-copy"))
    s.broker.start()
    yield s
    s.broker.stop()


def create(bootstrap: str, topic: str, config: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=config or {})])[topic].result(30)


def produce(bootstrap: str, topic: str, seqs, key=lambda i: None) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    for i in seqs:
        p.produce(topic, value(i), key=key(i))
        p.poll(0)
    assert p.flush(60) == 0


def confluent_read(conf: dict, topic: str, n: int) -> list[bytes]:
    c = ck.Consumer({**conf, "group.id": "g-" + uuid.uuid4().hex[:6], "auto.offset.reset": "earliest",
                     "check.crcs": True, "enable.auto.commit": False})
    c.subscribe([topic])
    got: list[bytes] = []

    def poll():
        for m in c.consume(500, 1.0):
            assert m.error() is None, m.error()
            got.append(m.value())
        return len(got) >= n
    wait_for(poll, 120, what=f"{n} records of {topic}")
    c.close()
    return got


@pytest.fixture(scope="module")
def loaded(setup):
    topic = "big-" + uuid.uuid4().hex[:6]
    create(setup.plain, topic)
    produce(setup.plain, topic, range(RECORDS))
    return topic


def test_plaintext_fetches_use_sendfile_for_every_client(setup, loaded, tmp_path):
    expected = [value(i) for i in range(RECORDS)]
    before = setup.zero_copy_bytes()
    assert confluent_read({"bootstrap.servers": setup.plain}, loaded, RECORDS) == expected
    after_confluent = setup.zero_copy_bytes()
    assert after_confluent - before >= RECORDS * VALUE   # the record bytes went by sendfile

    kp = KafkaConsumer(loaded, bootstrap_servers=setup.plain, auto_offset_reset="earliest", check_crcs=True,
                       enable_auto_commit=False, consumer_timeout_ms=60_000)
    assert [next(kp).value for _ in range(RECORDS)] == expected
    kp.close()
    after_kafka_python = setup.zero_copy_bytes()
    assert after_kafka_python - after_confluent >= RECORDS * VALUE

    tools = JavaTools(str(maven.resolve_kafka("4.3.1")), tmp_path)
    res = tools.run("org.apache.kafka.tools.consumer.ConsoleConsumer",
                    ["--bootstrap-server", setup.plain, "--topic", loaded, "--from-beginning",
                     "--max-messages", str(RECORDS), "--timeout-ms", "60000"], timeout=180)
    assert res.stdout.encode().split(b"\n")[:RECORDS] == expected
    assert setup.zero_copy_bytes() - after_kafka_python >= RECORDS * VALUE


def test_tls_fetches_are_served_from_memory(setup, loaded):
    before = setup.zero_copy_bytes()
    conf = {"bootstrap.servers": setup.tls, "security.protocol": "SSL", "ssl.ca.location": str(setup.ca.ca_path)}
    assert confluent_read(conf, loaded, RECORDS) == [value(i) for i in range(RECORDS)]
    assert setup.zero_copy_bytes() == before


def test_reads_stay_exact_under_appends_retention_and_cleaning(setup):
    """Large delayed fetches (fetch.min.bytes) read ranges of small segments while a producer
    appends, retention deletes the oldest segments and the cleaner replaces those of a
    compacted topic: every record read is whole and in order."""
    churn, compacted = "churn-" + uuid.uuid4().hex[:6], "compact-" + uuid.uuid4().hex[:6]
    create(setup.plain, churn, {"internal.segment.bytes": "60000", "retention.bytes": "200000"})
    create(setup.plain, compacted, {"internal.segment.bytes": "60000", "cleanup.policy": "compact",
                                    "min.cleanable.dirty.ratio": "0.01", "segment.ms": "100"})
    keys = 40
    stop = threading.Event()
    produced = {"n": 0}

    def producer():
        # idempotent: a retried produce (a request timed out on a loaded machine) must not
        # duplicate or reorder records, since offsets are checked against the sequence below
        p = ck.Producer({"bootstrap.servers": setup.plain, "linger.ms": 2, "enable.idempotence": True})
        i = 0
        while not stop.is_set():
            p.produce(churn, value(i))
            p.produce(compacted, value(i), key=b"%d" % (i % keys))
            i += 1
            if i % 200 == 0:
                p.flush(30)
                produced["n"] = i
        p.flush(30)
        produced["n"] = i

    seen: dict[str, list[tuple[int, int]]] = {churn: [], compacted: []}
    errors: list = []

    def consumer(topic):
        c = ck.Consumer({"bootstrap.servers": setup.plain, "group.id": "g-" + topic, "auto.offset.reset": "earliest",
                         "check.crcs": True, "fetch.min.bytes": 100_000, "fetch.wait.max.ms": 300})
        c.subscribe([topic])
        try:
            while not stop.is_set() or len(seen[topic]) == 0:
                for m in c.consume(500, 0.5):
                    if m.error() is not None:
                        if m.error().code() != ck.KafkaError._PARTITION_EOF:
                            errors.append(m.error())
                        continue
                    s = seq(m.value())
                    if topic == compacted:
                        assert m.key() == b"%d" % (s % keys)
                    seen[topic].append((m.offset(), s))
        except AssertionError as e:
            errors.append(e)
        finally:
            c.close()

    threads = [threading.Thread(target=producer)] + [threading.Thread(target=consumer, args=(t,))
                                                     for t in (churn, compacted)]
    for t in threads:
        t.start()
    try:
        # run until retention moved the churn log's start twice over its size and the cleaner ran
        wait_for(lambda: _earliest(setup.plain, churn) > 800 and produced["n"] > 1500, 120,
                 what="retention to delete segments under the readers")
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert not errors
    for topic in (churn, compacted):
        pairs = seen[topic]
        assert len(pairs) > 100
        assert all(a[0] < b[0] and a[1] < b[1] for a, b in zip(pairs, pairs[1:])), f"{topic} went backwards"
        if topic == churn:
            assert all(o == s for o, s in pairs)   # offsets are the producer's sequence numbers
    # the cleaner did rewrite the compacted topic: fewer records remain than were written
    wait_for(lambda: len(confluent_read({"bootstrap.servers": setup.plain}, compacted, keys)) < produced["n"],
             60, what="the cleaner to compact")


def _earliest(bootstrap: str, topic: str) -> int:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "x"})
    try:
        low, _high = c.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=10)
        return low
    finally:
        c.close()


def test_clients_closing_mid_response_leave_nothing_behind(setup, loaded):
    baseline = setup.open_fds()
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=50 << 20, topics=[
        FetchRequest.FetchTopic(topic=loaded, partitions=[
            FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=50 << 20)])])
    for i in range(30):
        sock = wire.connect(setup.plain)
        for _ in range(3):   # pipelined: responses queue behind the one being sent
            wire.send_request(sock, request, 12, correlation_id=i)
        if i % 2:
            wire.recv_exact(sock, 1000)   # part of the first response, then go
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))   # reset, not FIN
        sock.close()
    # every range and duplicate socket fd is closed once the broker has seen the resets
    wait_for(lambda: setup.open_fds() <= baseline, 30, what="the broker to close what the clients left")
    assert confluent_read({"bootstrap.servers": setup.plain}, loaded, RECORDS)[-1] == value(RECORDS - 1)
