"""Real consumers over incremental fetch sessions (KIP-227): kafka-python 3.0.12 and the Java
consumer (Kafka 4.3.1's ConsoleConsumer) open a session when the broker offers one and then send
and receive only what changed. Each reads every record of a 12-partition topic, preloaded and
trickling into a few partitions while it reads, exactly once and in order per partition, and the
broker's ``kafka_server_fetchsessioncache_*`` metrics show the session while it runs.
librdkafka never asks for a session (session 0, epoch -1) and reads the same topic as before."""

from __future__ import annotations

import re
import threading
import time
import urllib.request
import uuid

import confluent_kafka as ck
import pytest
from kafka import KafkaConsumer
from prometheus_client.parser import text_string_to_metric_families

from conformance import maven
from conformance.clients.java import JavaTools
from kcompat.testing.ports import free_ports
from tests.support.broker_process import BrokerProcess

PARTITIONS = 12
PRELOAD = 40          # records per partition before the consumer starts
TRICKLE = (0, 5, 9)   # partitions that get more while it reads
TRICKLED = 60         # records per trickled partition, a few ms apart


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    http = free_ports(1)[0]
    b = BrokerProcess(tmp_path_factory.mktemp("fetch-sessions-clients") / "data",
                      {"http.listeners": f"HTTP://127.0.0.1:{http}", "num.partitions": str(PARTITIONS),
                       "offsets.topic.num.partitions": "1"})
    b.metrics_url = f"http://127.0.0.1:{http}/metrics"
    with b:
        yield b


def session_metrics(b) -> tuple[float, float]:
    """(NumIncrementalFetchSessions, NumIncrementalFetchPartitionsCached) now."""
    with urllib.request.urlopen(b.metrics_url, timeout=10) as r:
        text = r.read().decode()
    values = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}
    return (values["kafka_server_fetchsessioncache_numincrementalfetchsessions"],
            values["kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"])


def value(partition: int, i: int) -> bytes:
    return b"p%d-%d" % (partition, i)


class Scenario:
    """A fresh topic, preloaded; a thread adds records to :data:`TRICKLE` in a thread while a
    consumer reads; the session metrics are sampled meanwhile (their maxima)."""

    def __init__(self, b) -> None:
        self.b = b
        self.topic = "fsc-" + uuid.uuid4().hex[:8]
        self.producer = ck.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "enable.idempotence": True})
        for p in range(PARTITIONS):
            for i in range(PRELOAD):
                self.producer.produce(self.topic, value(p, i), partition=p)
        assert self.producer.flush(30) == 0
        # sessions of earlier tests stay cached (until evicted, as in Kafka): count from here
        self.baseline = session_metrics(b)[0]
        self.max_sessions = self.max_partitions = 0
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._trickle, daemon=True),
                         threading.Thread(target=self._sample, daemon=True)]

    def expected(self) -> dict[int, list[bytes]]:
        return {p: [value(p, i) for i in range(PRELOAD + (TRICKLED if p in TRICKLE else 0))]
                for p in range(PARTITIONS)}

    def total(self) -> int:
        return PARTITIONS * PRELOAD + len(TRICKLE) * TRICKLED

    def _trickle(self) -> None:
        time.sleep(0.5)
        for i in range(PRELOAD, PRELOAD + TRICKLED):
            for p in TRICKLE:
                self.producer.produce(self.topic, value(p, i), partition=p)
            self.producer.flush(30)
            time.sleep(0.02)

    def _sample(self) -> None:
        while not self._stop.wait(0.2):
            sessions, partitions = session_metrics(self.b)
            self.max_sessions = max(self.max_sessions, sessions)
            self.max_partitions = max(self.max_partitions, partitions)

    def __enter__(self):
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(60)
        assert self.producer.flush(30) == 0

    def check(self, read: list[tuple[int, int, bytes]]) -> None:
        """``read``: (partition, offset, value) in the order consumed: every record once, in order."""
        by_partition: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
        for p, offset, v in read:
            by_partition[p].append((offset, v))
        expected = self.expected()
        for p in range(PARTITIONS):
            assert [o for o, _ in by_partition[p]] == list(range(len(expected[p]))), p
            assert [v for _, v in by_partition[p]] == expected[p], p


def test_kafka_python_reads_every_record_once_over_a_session(broker):
    with Scenario(broker) as s:
        consumer = KafkaConsumer(s.topic, bootstrap_servers=broker.bootstrap, group_id="fsc-kp-" + s.topic,
                                 auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=60_000,
                                 fetch_max_wait_ms=200)
        read = []
        it = iter(consumer)
        for _ in range(s.total()):
            m = next(it)
            read.append((m.partition, m.offset, m.value))
        sessions_while_reading = session_metrics(broker)[0]
        consumer.close()
    s.check(read)
    assert sessions_while_reading > s.baseline and s.max_sessions > s.baseline and s.max_partitions >= PARTITIONS


_LINE = re.compile(r"Partition:(\d+)\tOffset:(\d+)\t(.*)$")


def test_the_java_consumer_reads_every_record_once_over_a_session(broker, tmp_path):
    tools = JavaTools(str(maven.resolve_kafka("4.3.1")), tmp_path)
    with Scenario(broker) as s:
        res = tools.run("org.apache.kafka.tools.consumer.ConsoleConsumer",
                        ["--bootstrap-server", broker.bootstrap, "--topic", s.topic, "--from-beginning",
                         "--group", "fsc-java-" + s.topic, "--max-messages", str(s.total()), "--timeout-ms", "60000",
                         "--property", "print.partition=true", "--property", "print.offset=true",
                         "--consumer-property", "fetch.max.wait.ms=200"], timeout=240)
    read = []
    for line in res.stdout.splitlines():
        m = _LINE.search(line)
        if m:
            read.append((int(m.group(1)), int(m.group(2)), m.group(3).encode()))
    assert len(read) == s.total(), res.stdout[-2000:]
    s.check(read)
    assert s.max_sessions > s.baseline and s.max_partitions >= PARTITIONS


def test_librdkafka_reads_without_a_session(broker):
    with Scenario(broker) as s:
        consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "fsc-rd-" + s.topic,
                                "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe([s.topic])
        read = []
        deadline = time.monotonic() + 60
        while len(read) < s.total() and time.monotonic() < deadline:
            m = consumer.poll(1.0)
            if m is not None and m.error() is None:
                read.append((m.partition(), m.offset(), m.value()))
        consumer.close()
    s.check(read)
    assert s.max_sessions <= s.baseline
