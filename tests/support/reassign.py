"""Kafka's ``kafka-reassign-partitions.sh`` (``org.apache.kafka.tools.reassign.ReassignPartitionsCommand``
of a Maven-resolved Kafka, run by :class:`conformance.clients.java.JavaTools`) and an acks=all
idempotent load whose acknowledged records a test reads back, for the reassignment tests and
``bench/reassignment.py``."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient

from conformance.clients.java import JavaTools
from kcompat.testing.cluster import wait_until

REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
LEADER_ELECTION = "org.apache.kafka.tools.LeaderElectionCommand"
CLUSTER_TOOL = "org.apache.kafka.tools.ClusterTool"
PROPOSED = "Proposed partition reassignment configuration"


class ReassignTool:
    """``kafka-reassign-partitions.sh`` against ``bootstrap``; plans are ``{(topic, partition): [broker, ...]}``."""

    def __init__(self, tools: JavaTools, bootstrap: str, workdir: Path) -> None:
        self.tools = tools
        self.bootstrap = bootstrap
        self.workdir = Path(workdir)

    def _run(self, *args, check: bool = True):
        res = self.tools.run(REASSIGN, ["--bootstrap-server", self.bootstrap, *args], check=False, timeout=180)
        if check:
            assert res.ok, res.summary(40)
        return res

    def _plan_file(self, plan: dict) -> Path:
        f = self.workdir / f"plan-{uuid.uuid4().hex[:6]}.json"
        f.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
            for (t, p), r in sorted(plan.items())]}))
        return f

    def generate(self, topics: list[str], brokers: list[int]) -> dict:
        """``--generate``: the tool's proposed plan for ``topics`` over ``brokers``."""
        f = self.workdir / f"topics-{uuid.uuid4().hex[:6]}.json"
        f.write_text(json.dumps({"version": 1, "topics": [{"topic": t} for t in topics]}))
        res = self._run("--generate", "--topics-to-move-json-file", str(f),
                        "--broker-list", ",".join(map(str, brokers)))
        plan = json.loads(res.stdout.split(PROPOSED, 1)[1].strip().splitlines()[0])
        return {(p["topic"], p["partition"]): p["replicas"] for p in plan["partitions"]}

    def execute(self, plan: dict, throttle: int | None = None, check: bool = True, extra: tuple[str, ...] = ()):
        """``--execute`` (with ``--throttle`` bytes/s when given, then the ``extra`` options)."""
        if throttle is not None:
            extra = ("--throttle", str(throttle), *extra)
        return self._run("--execute", "--reassignment-json-file", str(self._plan_file(plan)), *extra, check=check)

    def verify(self, plan: dict):
        """One ``--verify`` run (which also clears the throttles once every partition is done)."""
        return self._run("--verify", "--reassignment-json-file", str(self._plan_file(plan)))

    def verify_until_done(self, plan: dict, timeout: float = 120.0) -> str:
        """``--verify`` until no partition is still in progress; its last output. ``timeout``
        bounds a hang only."""
        deadline = time.monotonic() + timeout
        while True:
            out = self.verify(plan).stdout
            if "still in progress" not in out:
                return out
            assert time.monotonic() < deadline, f"reassignment not done after {timeout}s:\n{out}"
            time.sleep(0.5)

    def list(self) -> str:
        """``--list``: the tool's listing of the reassignments in progress."""
        return self._run("--list").stdout

    def cancel(self, plan: dict):
        """``--cancel`` of ``plan``."""
        return self._run("--cancel", "--reassignment-json-file", str(self._plan_file(plan)))


def replicas_of(admin, topic: str) -> dict[int, tuple[list[int], list[int], int]]:
    """partition -> (replicas, ISR, leader) from Metadata."""
    t = admin.list_topics(topic, timeout=30).topics[topic]
    return {p.id: (list(p.replicas), sorted(p.isrs), p.leader) for p in t.partitions.values()}


class AckedLoad:
    """A thread producing ``topic`` with an acks=all idempotent producer; ``acked`` holds every
    value the broker acknowledged, ``errors`` every delivery error."""

    def __init__(self, bootstrap: str, topic: str, value_size: int = 100) -> None:
        self.topic = topic
        self.acked: list[bytes] = []
        self.errors: list = []
        self._pad = b"x" * max(0, value_size - 8)
        self._stop = threading.Event()
        self._producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                      "linger.ms": 5, "message.timeout.ms": 120000})
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err, msg) -> None:
        if err is None:
            self.acked.append(msg.value()[:8])
        else:
            self.errors.append(err)

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            try:
                self._producer.produce(self.topic, b"%08d" % i + self._pad, on_delivery=self._on_delivery)
                i += 1
            except BufferError:
                self._producer.poll(0.05)
            self._producer.poll(0.002)

    def start(self) -> "AckedLoad":
        self._thread.start()
        return self

    def wait_for(self, n: int, timeout: float = 60.0) -> None:
        """Until at least ``n`` more records are acknowledged."""
        target = len(self.acked) + n
        wait_until(lambda: len(self.acked) >= target, timeout, f"{n} more acknowledged records")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert self._producer.flush(120) == 0


def read_all(bootstrap: str, topic: str, timeout: float = 90.0) -> Counter:
    """Every record of ``topic``, read from the start of each partition (assigned, no group) until
    the end of every partition: value prefix -> count. ``timeout`` bounds a hang only."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    n = len(admin.list_topics(topic, timeout=30).topics[topic].partitions)
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex[:6]}",
                            "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(n)])
    seen: Counter = Counter()
    eof: set[int] = set()
    try:
        def done():
            for m in consumer.consume(1000, 0.5):
                if m.error() is None:
                    seen[m.value()[:8]] += 1
                elif m.error().code() == ck.KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
            return len(eof) == n
        try:
            wait_until(done, timeout, f"the end of every partition of {topic}")
        except AssertionError as e:
            raise AssertionError(f"{e}; ends reached: {sorted(eof)}, partitions (replicas, ISR, leader): "
                                 f"{replicas_of(admin, topic)}") from None
    finally:
        consumer.close()
    return seen


def assert_exactly_once(load: AckedLoad, seen: Counter) -> None:
    """Every acknowledged value was read, and no value twice."""
    assert not load.errors, load.errors[:3]
    missing = set(load.acked) - set(seen)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:3]}"
    twice = [v for v, n in seen.items() if n > 1]
    assert not twice, f"{len(twice)} records read twice, e.g. {twice[:3]}"
