"""Load and checks for replication fault tests and benchmarks.

- :class:`SequentialProducer`: a confluent-kafka producer (acks=all, idempotent) in a thread of its
  own, writing ``b"<partition>:<seq>"`` with ``seq`` 0, 1, 2, ... per partition; its delivery
  callback records every acknowledged (seq, offset).
- :func:`partition_states`: leader / replicas / ISR per partition, asked of one chosen node with a
  raw Metadata request (not a client that might pick a paused or cut-off broker).
- :func:`read_partitions`: every record of a topic up to the high watermark, by a fresh consumer.
- :func:`log_violations` / :func:`check_log`: no acknowledged record lost, no duplicates, offsets
  increasing, each partition in produce order.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from kcompat.protocol.messages.metadata import MetadataRequest
from kcompat.testing import wire

METADATA_VERSION = 12

PRODUCER_CONF = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 2,
    "message.timeout.ms": 90000,   # retried (same sequence numbers) until then
    "request.timeout.ms": 5000,    # a produce stuck on a cut-off leader is retried elsewhere soon
    "retry.backoff.ms": 50,
    "retry.backoff.max.ms": 500,
    "reconnect.backoff.ms": 50,
    "reconnect.backoff.max.ms": 500,
    "topic.metadata.refresh.interval.ms": 2000,
    "log_level": 3,  # librdkafka's connection chatter (info) off; errors still show
}


def encode(partition: int, seq: int) -> bytes:
    return b"%d:%d" % (partition, seq)


def decode(value: bytes) -> tuple[int, int]:
    p, s = value.split(b":")
    return int(p), int(s)


class SequentialProducer:
    """Writes sequential values to ``partitions`` of ``topic`` until :meth:`stop`.

    ``acked[p]``: [(seq, offset)], offset -1 when the acknowledgement carried none.

    ``interval``: sleep between rounds (one record per partition per round). Thread-safe views:
    :meth:`acked_count`, :meth:`wait_progress`. After :meth:`stop`: ``acked[p]`` = [(seq, offset)],
    ``failed`` = [(p, seq, error)], ``fatal`` = the fatal error if the producer had one.
    """

    def __init__(self, bootstrap: str, topic: str, partitions: list[int], *, interval: float = 0.005,
                 conf: dict | None = None) -> None:
        self.topic = topic
        self.partitions = list(partitions)
        self.interval = interval
        self.conf = {"bootstrap.servers": bootstrap, **PRODUCER_CONF, **(conf or {}),
                     "error_cb": self._on_error}
        self.acked: dict[int, list[tuple[int, int]]] = {p: [] for p in self.partitions}
        self.last_ack: dict[int, float] = {}  # partition -> monotonic time of the latest ack
        self.next_seq: dict[int, int] = {p: 0 for p in self.partitions}  # the next value produce() gets
        self._first_ack_from: dict[int, tuple[int, float | None]] = {}  # p -> (seq, time of its first ack)
        self.failed: list[tuple[int, int, KafkaError]] = []
        self.errors: list[KafkaError] = []
        self.fatal: KafkaError | None = None
        self.sent = 0
        self.unflushed = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _on_error(self, err: KafkaError) -> None:
        self.errors.append(err)
        if err.fatal():
            self.fatal = err

    def _on_delivery(self, err, msg) -> None:
        p, seq = decode(msg.value())
        with self._lock:
            if err is not None:
                self.failed.append((p, seq, err))
            else:
                now = time.monotonic()
                # confluent-kafka gives None for an ack without an offset (-1: librdkafka knows the
                # records were persisted, e.g. from a later answer, but not where)
                offset = msg.offset()
                self.acked[p].append((seq, -1 if offset is None else offset))
                self.last_ack[p] = now
                watch = self._first_ack_from.get(p)
                if watch is not None and watch[1] is None and seq >= watch[0]:
                    self._first_ack_from[p] = (watch[0], now)

    def start(self) -> "SequentialProducer":
        self._thread = threading.Thread(target=self._run, name="seq-producer", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        producer = Producer(self.conf)
        seq = self.next_seq
        try:
            while not self._stop.is_set() and self.fatal is None:
                for p in self.partitions:
                    while True:
                        try:
                            producer.produce(self.topic, encode(p, seq[p]), partition=p,
                                             on_delivery=self._on_delivery)
                            break
                        except BufferError:
                            producer.poll(0.05)
                    seq[p] += 1
                    self.sent += 1
                producer.poll(0)
                if self.interval:
                    time.sleep(self.interval)
        finally:
            producer.flush(self.flush_timeout)
            self.unflushed = len(producer)

    flush_timeout = 100.0

    def stop(self, flush_timeout: float = 100.0) -> None:
        """Stop producing and wait for every delivery report (up to ``flush_timeout``)."""
        self.flush_timeout = flush_timeout
        self._stop.set()
        if self._thread is not None:
            self._thread.join(flush_timeout + 10)

    def watch_first_ack(self, partitions: list[int]) -> None:
        """Start watching for the first acknowledgement, per partition, of a record produce()d from
        now on (acks of records already in flight do not count)."""
        with self._lock:
            for p in partitions:
                self._first_ack_from[p] = (self.next_seq[p], None)

    def first_ack_time(self, p: int) -> float | None:
        """Monotonic time of the first ack :meth:`watch_first_ack` waited for, or None yet."""
        with self._lock:
            watch = self._first_ack_from.get(p)
            return watch[1] if watch is not None else None

    def acked_count(self, p: int) -> int:
        with self._lock:
            return len(self.acked[p])

    def counts(self) -> dict[int, int]:
        with self._lock:
            return {p: len(v) for p, v in self.acked.items()}

    def wait_progress(self, timeout: float, what: str, partitions: list[int] | None = None,
                      records: int = 5) -> float:
        """Until each partition has ``records`` more acknowledgements than now; returns seconds."""
        t0 = time.monotonic()
        start = self.counts()
        parts = partitions if partitions is not None else self.partitions
        while True:
            now = self.counts()
            if all(now[p] >= start[p] + records for p in parts):
                return time.monotonic() - t0
            if self.fatal is not None:
                raise AssertionError(f"producer fatal error while waiting for {what}: {self.fatal}")
            if time.monotonic() - t0 > timeout:
                raise AssertionError(f"no acks=all progress within {timeout}s ({what}): acked per partition "
                                     f"{start} -> {now}; last errors {self.errors[-5:]}")
            time.sleep(0.02)

    def summary(self) -> str:
        return (f"sent {self.sent}, acked {sum(len(v) for v in self.acked.values())}, failed {len(self.failed)}, "
                f"unflushed {self.unflushed}, client errors {len(self.errors)}, fatal {self.fatal}")


# -- cluster state ---------------------------------------------------------------------------------


@dataclass
class PartitionState:
    partition: int
    error_code: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline: list[int] = field(default_factory=list)


def partition_states(address: str, topic: str, timeout: float = 3.0) -> dict[int, PartitionState]:
    """Metadata of ``topic`` as the node at ``address`` sees it; {} if it does not answer."""
    req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False)
    try:
        with wire.connect(address, timeout) as sock:
            wire.send_request(sock, req, METADATA_VERSION)
            resp = wire.read_response(sock, 3, METADATA_VERSION)[1]
    except OSError:
        return {}
    out = {}
    for t in resp.topics:
        if t.name == topic and t.error_code == 0:
            for p in t.partitions:
                out[p.partition_index] = PartitionState(p.partition_index, p.error_code, p.leader_id, p.leader_epoch,
                                                        list(p.replica_nodes), list(p.isr_nodes),
                                                        list(p.offline_replicas or []))
    return out


def in_sync(cluster, topic: str, partitions: list[int]) -> bool:
    """Every running node of ``cluster`` (a :class:`tests.support.cluster.Cluster`) shows each of
    ``partitions`` of ``topic`` with a leader and every replica in its ISR."""
    running = [i + 1 for i, n in enumerate(cluster.nodes) if n.proc is not None]
    for node in running:
        s = partition_states(f"127.0.0.1:{cluster.client_ports[node - 1]}", topic)
        if any(p not in s or s[p].leader < 0 or sorted(s[p].isr) != sorted(s[p].replicas) for p in partitions):
            return False
    return bool(running)


# -- reading back and checking ---------------------------------------------------------------------


def read_partitions(bootstrap: str, topic: str, partitions: list[int], timeout: float = 60.0,
                    conf: dict | None = None) -> dict[int, list[tuple[int, bytes]]]:
    """Every record (offset, value) of each partition from the log start to the high watermark
    at the time of the call (``conf`` ``{"isolation.level": "read_committed"}``: the committed
    records only)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "replication-check-reader",
                  "enable.auto.commit": False, "enable.partition.eof": False, "log_level": 3, **(conf or {})})
    try:
        high = {}
        for p in partitions:
            _lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=15)
            high[p] = hi
        out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in partitions}
        todo = {p for p in partitions if high[p] > 0}
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        deadline = time.monotonic() + timeout
        while todo:
            if time.monotonic() > deadline:
                raise AssertionError(f"reading {topic} timed out: have {{p: len}} "
                                     f"{ {p: len(v) for p, v in out.items()} }, high watermarks {high}")
            msgs = c.consume(1000, 0.5)
            if not msgs:  # read_committed: the log may end in a control record no message stands for
                for tp in c.position([TopicPartition(topic, p) for p in todo]):
                    if tp.offset >= high[tp.partition]:
                        todo.discard(tp.partition)
            for m in msgs:
                if m.error() is not None:
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise AssertionError(f"consumer error: {m.error()}")
                p = m.partition()
                if m.offset() < high[p]:
                    out[p].append((m.offset(), m.value()))
                if m.offset() >= high[p] - 1:
                    todo.discard(p)
        return out
    finally:
        c.close()


VIOLATION_KINDS = ("lost", "duplicated", "reordered")


def log_violations(log: dict[int, list[tuple[int, bytes]]],
                   acked: dict[int, list[tuple[int, int]]]) -> dict[str, list[str]]:
    """The log of a :class:`SequentialProducer` against its acknowledgements, per partition:

    - ``lost``: acknowledged (seq, offset) not in the log at that offset (an ack without an offset,
      -1, e.g. a retry the broker answered DUPLICATE_SEQUENCE_NUMBER, only says the value is in the
      log); one entry per acknowledged record;
    - ``duplicated``: a value stored more than once; one entry per extra copy;
    - ``reordered``: offsets not strictly increasing, a value of another partition, or values out of
      produce order (idempotence keeps order per partition; checked when there are no duplicates);
      one entry per place.

    Returns {kind: [description]} for every kind in :data:`VIOLATION_KINDS` (empty lists: none)."""
    out: dict[str, list[str]] = {k: [] for k in VIOLATION_KINDS}
    for p, records in log.items():
        offsets = [o for o, _ in records]
        out["reordered"] += [f"partition {p}: offset {b} after {a}" for a, b in zip(offsets, offsets[1:]) if b <= a]
        seqs = []
        for o, v in records:
            vp, s = decode(v)
            if vp != p:
                out["reordered"].append(f"partition {p} offset {o}: value of partition {vp}")
            seqs.append(s)
        counts: dict[int, int] = {}
        for s in seqs:
            counts[s] = counts.get(s, 0) + 1
        out["duplicated"] += [f"partition {p}: seq {s} stored {n} times"
                              for s, n in counts.items() for _ in range(n - 1)]
        if len(counts) == len(seqs):
            out["reordered"] += [f"partition {p}: seq {b} after {a}" for a, b in zip(seqs, seqs[1:]) if b <= a]
        at = dict(((o, decode(v)[1]) for o, v in records))
        out["lost"] += [f"partition {p}: seq {s} acknowledged at offset {o}, found there: {at.get(o)}"
                        for s, o in acked.get(p, []) if (at.get(o) != s if o >= 0 else s not in counts)]
    return out


def check_log(log: dict[int, list[tuple[int, bytes]]], acked: dict[int, list[tuple[int, int]]]) -> str:
    """Assert that :func:`log_violations` finds nothing (no acknowledged record lost, no duplicates,
    offsets increasing, each partition in produce order). Returns a one-line summary."""
    found = log_violations(log, acked)
    problems = [f"{len(v)} {kind}, e.g. {v[:5]}" for kind, v in found.items() if v]
    assert not problems, "; ".join(problems)
    return ", ".join(f"p{p}: {len(log[p])} records, {len(acked.get(p, []))} acked" for p in sorted(log))


def kill_leader_and_time_failover(cluster, writer: SequentialProducer, topic: str, victim: int,
                                  timeout: float = 60.0) -> dict[int, float]:
    """kill -9 node ``victim`` (a ``ProxiedCluster``/``Cluster`` node) while ``writer`` produces;
    returns, for each partition ``victim`` led, the seconds from the kill to the first successful
    acks=all produce of a record produce()d after the kill."""
    live = [i for i in range(1, len(cluster.nodes) + 1) if i != victim and cluster.node(i).proc is not None]
    states = partition_states(f"127.0.0.1:{cluster.client_ports[live[0] - 1]}", topic)
    led = [p for p, st in states.items() if st.leader == victim and p in writer.partitions]
    if not led:
        raise AssertionError(f"node {victim} leads no partition of {topic}: {states}")
    writer.watch_first_ack(led)
    t0 = time.monotonic()
    cluster.node(victim).kill9()
    deadline = t0 + timeout
    while any(writer.first_ack_time(p) is None for p in led):
        if writer.fatal is not None:
            raise AssertionError(f"producer fatal error after kill -9 of node {victim}: {writer.fatal}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no acks=all produce on partitions {led} within {timeout}s of kill -9 of node "
                                 f"{victim}; last client errors {writer.errors[-5:]}")
        time.sleep(0.005)
    return {p: writer.first_ack_time(p) - t0 for p in led}
