"""Several ``log.dirs`` on one real broker (JBOD): partitions spread over the dirs, each dir with
its own ``meta.properties`` and checkpoints, found again after a restart; AlterReplicaLogDirs
moving a replica to the other dir while a producer writes to it (every acknowledged record
readable after, also after a restart), its error codes, and Kafka 4.3.1's ``kafka-log-dirs.sh
--describe`` showing the result."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from conformance import maven
from conformance.clients.java import JavaTools
from conformance.reference import java_command
from kcompat.log import read_meta_properties, read_offset_checkpoint
from kcompat.protocol.errors import ErrorCode as E
from kcompat.protocol.messages.alter_replica_log_dirs import AlterReplicaLogDirsRequest as AQ
from kcompat.protocol.messages.describe_log_dirs import DescribeLogDirsRequest as DQ
from kcompat.testing import Broker
from kcompat.testing.cluster import wait_until
from kcompat.testing.wire import call

LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand"
REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
TOPIC = "jbod"


def describe(b, version: int = 4) -> dict:
    """{log dir: {(topic, partition, is future): size}} from DescribeLogDirs (v4 unless told)."""
    resp = call(b.bootstrap_servers, DQ(topics=None), version)
    assert all(r.error_code == 0 for r in resp.results), resp
    return {r.log_dir: {(t.name, p.partition_index, p.is_future_key): p.partition_size
                        for t in r.topics for p in t.partitions} for r in resp.results}


def alter(b, moves: dict[str, list[tuple[str, int]]], version: int = 2) -> dict[tuple[str, int], int]:
    """AlterReplicaLogDirs {path: [(topic, partition)]} -> {(topic, partition): error code}."""
    dirs = []
    for path, tps in moves.items():
        topics: dict[str, list[int]] = {}
        for t, p in tps:
            topics.setdefault(t, []).append(p)
        dirs.append(AQ.AlterReplicaLogDir(path=path, topics=[AQ.AlterReplicaLogDirTopic(name=t, partitions=ps)
                                                            for t, ps in topics.items()]))
    resp = call(b.bootstrap_servers, AQ(dirs=dirs), version)
    return {(t.topic_name, p.partition_index): p.error_code for t in resp.results for p in t.partitions}


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[bytes]:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{time.monotonic_ns()}",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([ck.TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < expected and time.monotonic() < deadline:
            for m in c.consume(500, 1.0):
                assert m.error() is None, m.error()
                got.append(m.value())
    finally:
        c.close()
    return got


@pytest.fixture
def dirs(tmp_path):
    return [tmp_path / "d1", tmp_path / "d2"]


def test_partitions_spread_over_dirs_each_with_meta_and_checkpoints_and_found_after_restart(dirs):
    with Broker({"log.dirs": ",".join(map(str, dirs))}, data_dir=dirs[0]) as b:
        b.create_topic(TOPIC, 6, 1)
        p = ck.Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 5})
        for i in range(600):
            p.produce(TOPIC, b"v%05d" % i, partition=i % 6)
        assert p.flush(30) == 0
        before = describe(b)
        held = {d: {tp[1] for tp in parts if tp[0] == TOPIC} for d, parts in before.items()}
        assert [len(held[str(d)]) for d in dirs] == [3, 3], held   # the dir with the fewest partitions
        b.restart()
        after = describe(b)
        assert {d: set(v) for d, v in after.items()} == {d: set(v) for d, v in before.items()}
        assert sorted(consume_all(b.bootstrap_servers, TOPIC, 6, 600)) == [b"v%05d" % i for i in range(600)]
    ids = set()
    for d in dirs:   # stopped: every dir has its own meta.properties and checkpoints of its partitions
        meta = read_meta_properties(d / "meta.properties")
        assert meta["version"] == "1" and meta["node.id"] == "1"
        ids.add(meta["directory.id"])
        for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                     "replication-offset-checkpoint"):
            entries = read_offset_checkpoint(d / name)
            assert {tp[1] for tp in entries if tp[0] == TOPIC} == held[str(d)], (d, name, entries)
        assert read_offset_checkpoint(d / "recovery-point-offset-checkpoint").keys() >= \
            {(TOPIC, i) for i in held[str(d)]}
    assert len(ids) == 2


def test_move_a_replica_between_dirs_under_produce_load(dirs):
    with Broker({"log.dirs": ",".join(map(str, dirs))}, data_dir=dirs[0]) as b:
        b.create_topic(TOPIC, 2, 1)
        src = next(d for d, parts in describe(b).items() if (TOPIC, 0, False) in parts)
        dst = next(str(d) for d in dirs if str(d) != src)
        acked: list[bytes] = []
        errors: list = []
        stop = threading.Event()

        def on_delivery(err, msg):
            if err is not None:
                errors.append(err)
            else:
                acked.append(msg.value())

        def produce():
            p = ck.Producer({"bootstrap.servers": b.bootstrap_servers, "acks": "all", "enable.idempotence": True,
                             "linger.ms": 2})
            i = 0
            while not stop.is_set():
                p.produce(TOPIC, b"%07d" % i + b"x" * 200, partition=0, on_delivery=on_delivery)
                i += 1
                if i % 500 == 0:
                    p.poll(0)
                    if len(p) > 20000:
                        p.flush(10)
            assert p.flush(30) == 0
        t = threading.Thread(target=produce)
        t.start()
        try:
            wait_until(lambda: len(acked) > 15000, 60, "3 MB produced before the move")
            assert alter(b, {dst: [(TOPIC, 0)]}) == {(TOPIC, 0): E.NONE}
            wait_until(lambda: (TOPIC, 0, False) in describe(b)[dst], 60, "the replica moved")
            moved_at = len(acked)
            wait_until(lambda: len(acked) > moved_at + 2000, 60, "producing after the move")
        finally:
            stop.set()
            t.join(60)
        assert not errors, errors[:3]
        state = describe(b)
        assert (TOPIC, 0, False) not in state[src] and not any(k[2] for d in state.values() for k in d)
        assert not (dirs[0] / f"{TOPIC}-0").exists() or not (dirs[1] / f"{TOPIC}-0").exists()
        got = consume_all(b.bootstrap_servers, TOPIC, 2, len(acked))
        assert sorted(got) == sorted(acked) and len(set(got)) == len(got)
        b.restart()   # the moved log is found in its new dir
        assert (TOPIC, 0, False) in describe(b)[dst]
        assert sorted(consume_all(b.bootstrap_servers, TOPIC, 2, len(acked))) == sorted(acked)
        assert alter(b, {src: [(TOPIC, 0)]}, version=1) == {(TOPIC, 0): E.NONE}   # and back, empty of load
        wait_until(lambda: (TOPIC, 0, False) in describe(b)[src], 60, "the replica moved back")


def test_alter_replica_log_dirs_errors(dirs):
    with Broker({"log.dirs": ",".join(map(str, dirs))}, data_dir=dirs[0]) as b:
        b.create_topic(TOPIC, 1, 1)
        here = next(d for d, parts in describe(b).items() if (TOPIC, 0, False) in parts)
        res = alter(b, {"/no/such/dir": [(TOPIC, 0)], here: [("no-such-topic", 0), (TOPIC, 5)]})
        assert res == {(TOPIC, 0): E.LOG_DIR_NOT_FOUND, ("no-such-topic", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
                       (TOPIC, 5): E.UNKNOWN_TOPIC_OR_PARTITION}
        assert alter(b, {here: [(TOPIC, 0)]}) == {(TOPIC, 0): E.NONE}   # already there: nothing to do
        assert not any(k[2] for d in describe(b).values() for k in d)
        # version 0 of both, which Kafka 4 dropped (KIP-896) and kcompat still serves, answers alike
        assert alter(b, {"/no/such/dir": [(TOPIC, 0)]}, version=0) == {(TOPIC, 0): E.LOG_DIR_NOT_FOUND}
        assert describe(b, version=0) == {d: {k: v for k, v in parts.items()} for d, parts in describe(b).items()}


@pytest.mark.timeout(1200)  # the first run on a machine resolves Kafka's jars from Maven Central
def test_kafka_log_dirs_describe_lists_both_dirs(dirs):
    lib = maven.resolve_kafka("4.3.1")
    with Broker({"log.dirs": ",".join(map(str, dirs))}, data_dir=dirs[0]) as b:
        b.create_topic(TOPIC, 4, 1)
        p = ck.Producer({"bootstrap.servers": b.bootstrap_servers})
        for i in range(40):
            p.produce(TOPIC, b"y" * 100, partition=i % 4)
        assert p.flush(30) == 0
        out = subprocess.run(java_command(lib, LOG_DIRS, ["--bootstrap-server", b.bootstrap_servers, "--describe",
                                                          "--topic-list", TOPIC]),
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
        [line] = [x for x in out.stdout.splitlines() if x.startswith("{")]
        [broker] = json.loads(line)["brokers"]
        assert sorted(d["logDir"] for d in broker["logDirs"]) == [os.path.abspath(d) for d in dirs]
        for d in broker["logDirs"]:
            assert d["error"] is None and len(d["partitions"]) == 2, broker
            for part in d["partitions"]:
                files = (dirs[[str(x) for x in dirs].index(d["logDir"])] / part["partition"]).glob("*.log")
                assert part["size"] == sum(f.stat().st_size for f in files) > 0 and not part["isFuture"]


@pytest.mark.timeout(1200)  # the first run on a machine resolves Kafka's jars from Maven Central
def test_a_throttled_move_shows_its_future_log_to_kafka_log_dirs_and_completes_when_the_throttle_is_lifted(dirs):
    """``replica.alter.log.dirs.io.max.bytes.per.second`` (the quota ``kafka-reassign-partitions.sh
    --replica-alter-log-dirs-throttle`` sets) holds the copy back: meanwhile Kafka's tool lists the
    replica in both dirs, the future one with its lag; raised dynamically, the move completes."""
    lib = maven.resolve_kafka("4.3.1")
    quota = "replica.alter.log.dirs.io.max.bytes.per.second"
    with Broker({"log.dirs": ",".join(map(str, dirs)), quota: "2000"}, data_dir=dirs[0]) as b:
        b.create_topic(TOPIC, 1, 1)
        p = ck.Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 5})
        for i in range(2000):
            p.produce(TOPIC, b"%06d" % i + b"z" * 200, partition=0)
            if i % 50 == 49:   # 40 batches of 10 KB: the copy goes a batch or so per step
                assert p.flush(30) == 0
        src = next(d for d, parts in describe(b).items() if (TOPIC, 0, False) in parts)
        dst = next(str(d) for d in dirs if str(d) != src)
        assert alter(b, {dst: [(TOPIC, 0)]}) == {(TOPIC, 0): E.NONE}   # 400 KB at 2 KB/s: over 3 minutes
        out = subprocess.run(java_command(lib, LOG_DIRS, ["--bootstrap-server", b.bootstrap_servers, "--describe",
                                                          "--topic-list", TOPIC]),
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
        [line] = [x for x in out.stdout.splitlines() if x.startswith("{")]
        [broker] = json.loads(line)["brokers"]
        seen = {(d["logDir"], part["isFuture"]): part["offsetLag"] for d in broker["logDirs"] for part in d["partitions"]}
        assert set(seen) == {(src, False), (dst, True)} and seen[(src, False)] == 0 and seen[(dst, True)] > 0, seen
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        res = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
            ConfigEntry(quota, str(100 << 20), incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([res])[res].result(30)
        wait_until(lambda: (TOPIC, 0, False) in describe(b)[dst], 60, "the move completed")
        got = consume_all(b.bootstrap_servers, TOPIC, 1, 2000)
        assert sorted(got) == [b"%06d" % i + b"z" * 200 for i in range(2000)]


@pytest.mark.timeout(1200)  # the first run on a machine resolves Kafka's jars from Maven Central
def test_kafka_reassign_partitions_moves_a_replica_to_the_log_dir_its_plan_names(dirs, tmp_path):
    """Kafka 4.3.1's ``kafka-reassign-partitions.sh --execute`` with ``log_dirs`` in its plan sends
    AlterReplicaLogDirs (and sets the alter-log-dirs throttle); ``--verify`` reports the move done
    once DescribeLogDirs shows the replica in that dir, and clears the throttle."""
    tools = JavaTools(str(maven.resolve_kafka("4.3.1")), tmp_path)
    with Broker({"log.dirs": ",".join(map(str, dirs))}, data_dir=dirs[0]) as b:
        b.create_topic(TOPIC, 2, 1)
        p = ck.Producer({"bootstrap.servers": b.bootstrap_servers})
        for i in range(500):
            p.produce(TOPIC, b"%05d" % i, partition=0)
        assert p.flush(30) == 0
        src = next(d for d, parts in describe(b).items() if (TOPIC, 0, False) in parts)
        dst = next(str(d) for d in dirs if str(d) != src)
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": TOPIC, "partition": 0, "replicas": [1], "log_dirs": [dst]}]}))
        base = ["--bootstrap-server", b.bootstrap_servers, "--reassignment-json-file", str(plan)]
        res = tools.run(REASSIGN, ["--execute", "--replica-alter-log-dirs-throttle", str(50 << 20), *base],
                        check=False, timeout=180)
        assert res.ok, res.summary(40)
        deadline = time.monotonic() + 120
        while True:
            res = tools.run(REASSIGN, ["--verify", *base], check=False, timeout=180)
            assert res.ok, res.summary(40)
            if "still in progress" not in res.stdout:
                break
            assert time.monotonic() < deadline, res.stdout
            time.sleep(0.5)
        assert f"Reassignment of replica {TOPIC}-0-1 completed successfully" in res.stdout, res.stdout
        assert (TOPIC, 0, False) in describe(b)[dst] and (TOPIC, 0, False) not in describe(b)[src]
        assert sorted(consume_all(b.bootstrap_servers, TOPIC, 2, 500)) == [b"%05d" % i for i in range(500)]
