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
import uuid

import confluent_kafka as ck
import pytest
from kafka import KafkaConsumer

from conformance import maven
from conformance.clients.java import JavaTools
from tests.support.wire_helpers import broker_with_metrics, scrape

PARTITIONS = 12
PRELOAD = 40          # records per partition before the consumer starts
TRICKLE = (0, 5, 9)   # partitions that get more while it reads
TRICKLED = 60         # records per trickled partition, a few ms apart


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with broker_with_metrics(tmp_path_factory.mktemp("fetch-sessions-clients") / "data",
                             {"num.partitions": str(PARTITIONS), "offsets.topic.num.partitions": "1"}) as b:
        yield b


def session_metrics(b) -> tuple[float, float]:
    """(NumIncrementalFetchSessions, NumIncrementalFetchPartitionsCached) now."""
    values = scrape(b, "kafka_server_fetchsessioncache_")
    return (values["kafka_server_fetchsessioncache_numincrementalfetchsessions"],
            values["kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"])


def value(partition: int, i: int) -> bytes:
    return b"p%d-%d" % (partition, i)


class Scenario:
    """A fresh topic, preloaded. Once the consumer reads (:meth:`reading`) a thread adds records to
    :data:`TRICKLE` and, halfway, samples the session metrics (``mid``): the consumer cannot be
    done then, so its session is in the cache."""

    def __init__(self, b) -> None:
        self.b = b
        self.topic = "fsc-" + uuid.uuid4().hex[:8]
        self.producer = ck.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "enable.idempotence": True})
        for p in range(PARTITIONS):
            for i in range(PRELOAD):
                self.producer.produce(self.topic, value(p, i), partition=p)
        assert self.producer.flush(30) == 0
        # sessions of earlier tests stay cached (until evicted, as in Kafka): count from here
        self.baseline = session_metrics(b)
        self.mid: tuple[float, float] | None = None
        self._trickle = threading.Thread(target=self._run, daemon=True)

    def expected(self) -> dict[int, list[bytes]]:
        return {p: [value(p, i) for i in range(PRELOAD + (TRICKLED if p in TRICKLE else 0))]
                for p in range(PARTITIONS)}

    def total(self) -> int:
        return PARTITIONS * PRELOAD + len(TRICKLE) * TRICKLED

    def reading(self) -> None:
        """The consumer read its first record: start the trickle (once)."""
        if self._trickle.ident is None:
            self._trickle.start()

    def _run(self) -> None:
        for i in range(PRELOAD, PRELOAD + TRICKLED):
            if i == PRELOAD + TRICKLED // 2:
                self.mid = session_metrics(self.b)
            for p in TRICKLE:
                self.producer.produce(self.topic, value(p, i), partition=p)
            self.producer.flush(30)
            time.sleep(0.02)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        if self._trickle.ident is not None:
            self._trickle.join(60)
        assert self.producer.flush(30) == 0

    def used_a_session(self) -> bool:
        """The consumer's session was cached while it read, with all the topic's partitions."""
        (sessions, partitions), (base_sessions, base_partitions) = self.mid, self.baseline
        return sessions > base_sessions and partitions >= base_partitions + PARTITIONS

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
            s.reading()
        consumer.close()
    s.check(read)
    assert s.used_a_session(), (s.baseline, s.mid)


_LINE = re.compile(r"Partition:(\d+)\tOffset:(\d+)\t(.*)$")


def test_the_java_consumer_reads_every_record_once_over_a_session(broker, tmp_path):
    tools = JavaTools(str(maven.resolve_kafka("4.3.1")), tmp_path)
    read = []

    def line(text: str) -> None:
        m = _LINE.search(text)
        if m:
            read.append((int(m.group(1)), int(m.group(2)), m.group(3).encode()))
            s.reading()

    with Scenario(broker) as s:
        consumer = tools.background(
            "org.apache.kafka.tools.consumer.ConsoleConsumer",
            ["--bootstrap-server", broker.bootstrap, "--topic", s.topic, "--from-beginning",
             "--group", "fsc-java-" + s.topic, "--max-messages", str(s.total()), "--timeout-ms", "60000",
             "--property", "print.partition=true", "--property", "print.offset=true",
             "--consumer-property", "fetch.max.wait.ms=200"], on_line=line, name="console-consumer")
        try:
            assert consumer.wait(240) == 0
        finally:
            consumer.stop()
    assert len(read) == s.total(), (tmp_path / "console-consumer.stderr").read_text()[-2000:]
    s.check(read)
    assert s.used_a_session(), (s.baseline, s.mid)


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
                s.reading()
        consumer.close()
    s.check(read)
    assert s.mid[0] <= s.baseline[0]
