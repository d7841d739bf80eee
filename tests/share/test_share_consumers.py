"""Share groups (KIP-932) with Kafka 4.3.1's ``KafkaShareConsumer`` against kcompat processes:
records split between consumers with none processed twice, redelivery after a consumer is
killed (lock expiry), RELEASE, REJECT, the delivery count limit, and a broker restart or kill -9
in the middle, after which no acknowledged record comes back and none is lost.

The consumer is ``tests/share/java/ShareClient.java``, compiled once against and run with the
Kafka 4.3.1 jars the conformance suite resolves from Maven Central."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from pathlib import Path

import confluent_kafka as ck
import pytest

from conformance import maven, procs
from conformance.clients.tool_server import source_command
from kcompat.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest as IAC
from kcompat.protocol.messages.share_group_describe import ShareGroupDescribeRequest
from kcompat.testing import Broker
from kcompat.testing.process import wait_for
from kcompat.testing.wire import call

CLIENT = Path(__file__).parent / "java" / "ShareClient.java"
GROUP_RESOURCE = 32   # ConfigResource.Type.GROUP
BROKER_CONFIGS = {"group.share.heartbeat.interval.ms": "500", "group.share.min.heartbeat.interval.ms": "500",
                  "group.share.session.timeout.ms": "6000", "group.share.min.session.timeout.ms": "6000",
                  "group.share.record.lock.duration.ms": "4000", "group.share.min.record.lock.duration.ms": "1000",
                  "group.share.delivery.count.limit": "3"}


@pytest.fixture(scope="module")
def lib():
    return maven.resolve_kafka("4.3.1")


@pytest.fixture(scope="module")
def broker():
    with Broker(BROKER_CONFIGS) as b:
        yield b


def set_group_configs(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    """IncrementalAlterConfigs SET on the GROUP resource (``kafka-configs --entity-type groups``)."""
    res = IAC.AlterConfigsResource(resource_type=GROUP_RESOURCE, resource_name=group, configs=[
        IAC.AlterableConfig(name=k, config_operation=0, value=v) for k, v in configs.items()])
    resp = call(bootstrap, IAC(resources=[res], validate_only=False), 1)
    assert [r.error_code for r in resp.responses] == [0], resp


def new_topic(b, partitions: int = 3) -> str:
    name = f"share-{uuid.uuid4().hex[:8]}"
    b.create_topic(name, partitions)
    return name


def produce(bootstrap: str, topic: str, n: int, start: int = 0, partitions: int | None = None) -> None:
    """``n`` records valued ``start``, ``start + 1``, ...; with ``partitions``, record i goes to
    partition i % partitions (else librdkafka's partitioner picks)."""
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    for i in range(start, start + n):
        if partitions:
            p.produce(topic, value=str(i).encode(), partition=i % partitions)
        else:
            p.produce(topic, value=str(i).encode())
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(60) == 0


def _assigned_members(bootstrap: str, group: str) -> int:
    """How many members of share group ``group`` hold a non-empty assignment (ShareGroupDescribe v1)."""
    resp = call(bootstrap, ShareGroupDescribeRequest(group_ids=[group]), 1)
    (described,) = resp.groups
    if described.error_code:
        return 0
    return sum(1 for m in described.members if any(t.partitions for t in m.assignment.topic_partitions))


class ShareConsumer:
    """One ShareClient process; ``records`` are (partition, offset, delivery count, value)."""

    def __init__(self, lib: Path, bootstrap: str, group: str, topic: str, mode: str, *, max_records: int = 10**9,
                 idle_ms: int = 60_000, first_idle_ms: int | None = None, workdir: Path, name: str) -> None:
        self.records: list[tuple[int, int, int, str]] = []
        self.commits: list[str] = []
        self.done = threading.Event()
        self.holding = threading.Event()
        self._lock = threading.Lock()
        cmd = source_command(lib, CLIENT, [bootstrap, group, topic, mode, str(max_records), str(idle_ms),
                                           str(first_idle_ms or idle_ms)], heap="256m")
        self.proc = procs.Background(cmd, on_line=self._line, stderr_path=workdir / f"{name}.stderr")

    def _line(self, line: str) -> None:
        if line.startswith("R "):
            _r, p, o, dc, value = line.split(" ", 4)
            with self._lock:
                self.records.append((int(p), int(o), int(dc), value))
        elif line.startswith("C "):
            self.commits.append(line[2:])
        elif line == "HOLDING":
            self.holding.set()
        elif line.startswith("DONE"):
            self.done.set()

    def offsets(self) -> list[tuple[int, int]]:
        with self._lock:
            return [(p, o) for p, o, _dc, _v in self.records]

    def kill(self) -> None:
        self.proc.proc.kill()
        self.proc.stop()

    def wait_done(self, timeout: float = 120.0) -> None:
        assert self.done.wait(timeout), f"share consumer did not finish: {self.proc.lines[-5:]}"
        self.proc.stop()


def _twice(consumers: list[ShareConsumer], seen: Counter) -> str:
    """What a failure needs: the consumers that got each partition's records more than once,
    with their delivery counts and commit results."""
    lines = [f"{len(seen)} distinct of {sum(seen.values())} records"]
    for i, c in enumerate(consumers):
        dup = [(p, o, dc) for p, o, dc, _v in c.records if seen[(p, o)] > 1]
        lines.append(f"c{i}: {len(c.records)} records, {len(dup)} seen twice, by partition "
                     f"{dict(Counter(p for p, _o, _dc in dup))}, delivery counts {dict(Counter(dc for *_x, dc in dup))}, "
                     f"commits {dict(Counter(c.commits))}")
    return "\n".join(lines)


def test_three_consumers_split_the_records_with_none_twice(broker, lib, tmp_path):
    topic = new_topic(broker)
    group = f"g-{uuid.uuid4().hex[:6]}"
    # Kafka's 30 s lock (the module's brokers use 4 s): a consumer stalled longer than its lock on
    # a loaded machine would rightly see its records go to another -- not what this test is about
    set_group_configs(broker.bootstrap_servers, group, {"share.auto.offset.reset": "earliest",
                                                        "share.record.lock.duration.ms": "30000"})
    # explicit acknowledgement (ACCEPT each record, commitSync) and implicit (the next poll accepts)
    consumers = [ShareConsumer(lib, broker.bootstrap_servers, group, topic, mode, idle_ms=15_000,
                               first_idle_ms=180_000, workdir=tmp_path, name=f"c{i}")
                 for i, mode in enumerate(("accept", "implicit", "accept"))]
    # The records are produced once all three hold a partition each: produced before, the first JVM
    # to start could drain all 30,000 before the others joined (as a loaded run once did)
    wait_for(lambda: _assigned_members(broker.bootstrap_servers, group) == 3, 120,
             what="three members with a partition each")
    produce(broker.bootstrap_servers, topic, 30_000, partitions=3)
    for c in consumers:
        c.wait_done(240)
    seen = Counter(o for c in consumers for o in c.offsets())
    assert sum(seen.values()) == 30_000 and len(seen) == 30_000, _twice(consumers, seen)
    assert all(set(c.commits) == {"ok"} for c in consumers if c.records)
    assert sum(1 for c in consumers if c.records) >= 2   # the work was shared


def test_killed_consumer_records_come_back_to_the_others(broker, lib, tmp_path):
    topic = new_topic(broker, partitions=1)
    group = f"g-{uuid.uuid4().hex[:6]}"
    set_group_configs(broker.bootstrap_servers, group, {"share.auto.offset.reset": "earliest"})
    produce(broker.bootstrap_servers, topic, 200)
    holder = ShareConsumer(lib, broker.bootstrap_servers, group, topic, "hold", workdir=tmp_path, name="holder")
    assert holder.holding.wait(60), holder.proc.lines[-5:]
    held = set(holder.offsets())
    holder.kill()
    other = ShareConsumer(lib, broker.bootstrap_servers, group, topic, "accept", idle_ms=12_000,
                          workdir=tmp_path, name="other")
    other.wait_done(120)
    got = Counter(other.offsets())
    assert set(got) == set((0, o) for o in range(200))
    assert all(n == 1 for n in got.values())
    redelivered = {(p, o): dc for p, o, dc, _v in other.records if (p, o) in held}
    assert held and set(redelivered) == held and set(redelivered.values()) == {2}   # second delivery


def test_release_reject_and_the_delivery_count_limit(broker, lib, tmp_path):
    bootstrap = broker.bootstrap_servers
    topic = new_topic(broker, partitions=1)
    for mode, n in (("release-once", 50), ("reject", 50), ("release", 20)):
        group = f"g-{mode}-{uuid.uuid4().hex[:6]}"
        set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})
        if mode == "release-once":
            produce(bootstrap, topic, 50)
        c = ShareConsumer(lib, bootstrap, group, topic, mode, idle_ms=6_000, first_idle_ms=100_000,
                          workdir=tmp_path, name=mode)   # records are there: a slow start is no end
        c.wait_done(120)
        counts = Counter(c.offsets())
        if mode == "release-once":      # released at once, delivered again (count 2), accepted
            assert set(counts) == {(0, o) for o in range(50)} and set(counts.values()) == {2}
            assert {dc for _p, _o, dc, _v in c.records} == {1, 2}
        elif mode == "reject":           # archived: delivered once only
            assert set(counts) == {(0, o) for o in range(50)} and set(counts.values()) == {1}
        else:                            # released every time: archived at the limit (3)
            assert set(counts.values()) == {3}
            assert {dc for _p, _o, dc, _v in c.records} == {1, 2, 3}


@pytest.mark.parametrize("how", ["restart", "kill9"])
def test_broker_restart_mid_run_loses_nothing_and_redelivers_nothing_acknowledged(lib, tmp_path, how):
    with Broker(BROKER_CONFIGS) as b:
        topic = new_topic(b)
        group = f"g-{uuid.uuid4().hex[:6]}"
        set_group_configs(b.bootstrap_servers, group, {"share.auto.offset.reset": "earliest"})
        produce(b.bootstrap_servers, topic, 6000)
        first = ShareConsumer(lib, b.bootstrap_servers, group, topic, "accept", workdir=tmp_path, name="first")
        wait_for(lambda: len(first.records) >= 2000, 120, what="records before the restart")
        first.kill()
        committed = _committed_offsets(first)
        if how == "restart":
            b.restart()
        else:
            b.kill()
            b.heal()
        second = ShareConsumer(lib, b.bootstrap_servers, group, topic, "accept", idle_ms=15_000,
                               workdir=tmp_path, name="second")
        second.wait_done(240)
        again = committed & set(second.offsets())
        assert not again, sorted(again)[:5]
        everything = {(p, o) for p in range(3) for o in _ends(b, topic, p)}
        assert len(everything) == 6000
        assert set(first.offsets()) | set(second.offsets()) == everything


def _committed_offsets(c: ShareConsumer) -> set[tuple[int, int]]:
    """Records whose commitSync reported ok: every record printed before the last "C ok" line."""
    lines = c.proc.lines
    last_ok = max((i for i, line in enumerate(lines) if line == "C ok"), default=-1)
    out = set()
    for line in lines[:last_ok + 1]:
        if line.startswith("R "):
            _r, p, o, _dc, _v = line.split(" ", 4)
            out.add((int(p), int(o)))
    return out


def _ends(b, topic: str, partition: int) -> range:
    c = ck.Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "ends"})
    try:
        lo, hi = c.get_watermark_offsets(ck.TopicPartition(topic, partition), timeout=30)
    finally:
        c.close()
    return range(lo, hi)
