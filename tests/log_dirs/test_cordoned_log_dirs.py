"""Cordoned log dirs (KIP-1066) on one real kcompat broker with two log dirs, driven by Kafka 4.3.1's
own ``kafka-configs.sh`` (``kafka.admin.ConfigCommand``) and ``kafka-log-dirs.sh``
(``org.apache.kafka.tools.LogDirsCommand``), with what Kafka 4.3.1 answers (checked against a real
4.3.1 broker with two log dirs):

- ``cordoned.log.dirs=<d2>`` on broker 1: new partitions all go to ``d1``; DescribeLogDirs v5 says
  ``IsCordoned`` for ``d2`` only (v4 has no such field); AlterReplicaLogDirs into ``d2`` is
  INVALID_REPLICA_ASSIGNMENT. ``kafka-log-dirs.sh --describe`` of 4.3.1 does not print the flag.
- Refusals with Kafka's INVALID_REQUEST messages: a path that is not a log dir, ``*`` with others;
  ``--entity-default`` is refused (a per-broker config).
- ``*``: every dir cordoned, so a new topic has no broker: "Unable to replicate the partition 1
  time(s): All brokers are currently fenced, or have all their log directories cordoned."
- The dynamic config survives a restart (a ConfigRecord), and so does the refusal; deleting it
  uncordons (new partitions in both dirs again).
- A static ``cordoned.log.dirs`` in the broker's properties cordons from the start; a bad static
  value stops the broker with Kafka's message.
"""

from __future__ import annotations

import json
import time

import pytest

from conformance import maven
from conformance.clients import tool_server
from conformance.procs import Completed
from conformance.reference import java_command
from kcompat.protocol.errors import ErrorCode as E
from kcompat.protocol.messages.alter_replica_log_dirs import AlterReplicaLogDirsRequest as AQ
from kcompat.protocol.messages.create_topics import CreateTopicsRequest as CQ
from kcompat.protocol.messages.describe_log_dirs import DescribeLogDirsRequest as DQ
from kcompat.testing.cluster import wait_until
from kcompat.testing.wire import call
from tests.support.broker_process import BrokerProcess

CONFIGS = "kafka.admin.ConfigCommand"
LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand"
ALL_CORDONED = ("Unable to replicate the partition 1 time(s): All brokers are currently fenced, or have all "
                "their log directories cordoned.")


@pytest.fixture(scope="module")
def lib():
    return maven.resolve_kafka("4.3.1")


def tool(lib, broker, main: str, *args: str) -> Completed:
    cmd = java_command(lib, main, ["--bootstrap-server", broker.bootstrap, *args], heap="256m")
    return tool_server.run_command(cmd, timeout=120)


def set_cordoned(lib, broker, value: str | None) -> Completed:
    """``kafka-configs.sh --alter --entity-type brokers --entity-name 1`` adding or deleting it."""
    op = ["--add-config", f"cordoned.log.dirs={value}"] if value is not None else \
        ["--delete-config", "cordoned.log.dirs"]
    return tool(lib, broker, CONFIGS, "--alter", "--entity-type", "brokers", "--entity-name", "1", *op)


def cordoned_flags(broker) -> dict[str, bool]:
    """{log dir: IsCordoned} from DescribeLogDirs v5."""
    resp = call(broker.bootstrap, DQ(topics=None), 5)
    assert resp.error_code == E.NONE and all(r.error_code == E.NONE for r in resp.results), resp
    return {r.log_dir: r.is_cordoned for r in resp.results}


def create(broker, topic: str, partitions: int):
    """CreateTopics v7 with replication factor 1: (error code, message)."""
    resp = call(broker.bootstrap, CQ(timeout_ms=30000, topics=[CQ.CreatableTopic(
        name=topic, num_partitions=partitions, replication_factor=1)]), 7)
    return resp.topics[0].error_code, resp.topics[0].error_message


def dirs_of(broker, topic: str) -> dict[str, int]:
    """{log dir: partitions of ``topic`` in it} (DescribeLogDirs v4), once every partition has a log."""
    resp = call(broker.bootstrap, DQ(topics=None), 4)
    return {r.log_dir: sum(len(t.partitions) for t in r.topics if t.name == topic) for r in resp.results}


def wait_cordoned(broker, wanted: dict[str, bool]) -> None:
    wait_until(lambda: cordoned_flags(broker) == wanted, timeout=30, what=f"log dirs cordoned as {wanted}")


@pytest.mark.timeout(1200)  # the first run on a machine resolves Kafka 4.3.1's jars from Maven Central
def test_cordoning_a_log_dir_with_kafka_configs_keeps_new_partitions_out_and_survives_a_restart(tmp_path, lib):
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    p1, p2 = str(d1), str(d2)
    with BrokerProcess(d1, {"log.dirs": f"{p1},{p2}"}) as b:
        assert cordoned_flags(b) == {p1: False, p2: False}
        out = set_cordoned(lib, b, p2)
        assert out.returncode == 0 and "Completed updating config for broker 1." in out.stdout, out.stderr[-2000:]
        wait_cordoned(b, {p1: False, p2: True})
        v4 = call(b.bootstrap, DQ(topics=None), 4)
        assert [r.is_cordoned for r in v4.results] == [False, False]   # not in v4
        described = tool(lib, b, CONFIGS, "--describe", "--entity-type", "brokers", "--entity-name", "1")
        assert described.stdout.splitlines() == [
            "Dynamic configs for broker 1 are:",
            f"  cordoned.log.dirs={p2} sensitive=false synonyms={{DYNAMIC_BROKER_CONFIG:cordoned.log.dirs={p2}, "
            "DEFAULT_CONFIG:cordoned.log.dirs=}"], described.stdout

        assert create(b, "drain", 6) == (E.NONE, None)
        wait_until(lambda: sum(dirs_of(b, "drain").values()) == 6, timeout=30, what="6 logs of drain")
        assert dirs_of(b, "drain") == {p1: 6, p2: 0}
        listed = tool(lib, b, LOG_DIRS, "--describe", "--topic-list", "drain")
        assert listed.returncode == 0, listed.stderr[-2000:]
        logdirs = json.loads(listed.stdout.splitlines()[-1])["brokers"][0]["logDirs"]
        assert {d["logDir"]: len(d["partitions"]) for d in logdirs} == {p1: 6, p2: 0}
        assert all(set(d) == {"partitions", "error", "logDir"} for d in logdirs)   # 4.3.1 prints no isCordoned
        moved = call(b.bootstrap, AQ(dirs=[AQ.AlterReplicaLogDir(path=p2, topics=[
            AQ.AlterReplicaLogDirTopic(name="drain", partitions=[0])])]), 2)
        assert moved.results[0].partitions[0].error_code == E.INVALID_REPLICA_ASSIGNMENT

        for value, message in [
                ("/nope", "InvalidRequestException: requirement failed: All entries in cordoned.log.dirs must be "
                          "present in log.dirs or log.dir. Missing entries : /nope"),
                (f"[*,{p1}]", "InvalidRequestException: requirement failed: When cordoned.log.dirs is set to *, it "
                              "must not contain other values")]:
            bad = set_cordoned(lib, b, value)
            assert bad.returncode != 0 and message in bad.stdout + bad.stderr, (bad.stdout + bad.stderr)[-2000:]
        default = tool(lib, b, CONFIGS, "--alter", "--entity-type", "brokers", "--entity-default",
                       "--add-config", "cordoned.log.dirs=*")
        assert default.returncode != 0 and "Cannot update these configs at default cluster level, broker id must " \
            "be specified" in default.stdout + default.stderr, default.stdout[-2000:]
        assert cordoned_flags(b) == {p1: False, p2: True}

        out = set_cordoned(lib, b, "*")
        assert out.returncode == 0, out.stderr[-2000:]
        wait_cordoned(b, {p1: True, p2: True})
        # the heartbeat carrying the new dirs reaches the controller right after the change
        wait_until(lambda: create(b, "nowhere", 1) == (E.INVALID_REPLICATION_FACTOR, ALL_CORDONED),
                   timeout=30, what="CreateTopics refused once every dir is cordoned")
        topics = tool(lib, b, "org.apache.kafka.tools.TopicCommand", "--create", "--topic", "nowhere2",
                      "--partitions", "1", "--replication-factor", "1")
        assert topics.returncode != 0 and f"Error while executing topic command : {ALL_CORDONED}" in topics.stdout, \
            (topics.stdout + topics.stderr)[-2000:]

        b.stop()
        b.start()
        assert cordoned_flags(b) == {p1: True, p2: True}
        wait_until(lambda: create(b, "nowhere", 1) == (E.INVALID_REPLICATION_FACTOR, ALL_CORDONED),
                   timeout=30, what="still refused after a restart")
        assert dirs_of(b, "drain") == {p1: 6, p2: 0}   # existing partitions stay where they are

        out = set_cordoned(lib, b, None)
        assert out.returncode == 0, out.stderr[-2000:]
        wait_cordoned(b, {p1: False, p2: False})
        wait_until(lambda: create(b, "spread", 4) == (E.NONE, None), timeout=30, what="spread created")
        wait_until(lambda: sum(dirs_of(b, "spread").values()) == 4, timeout=30, what="4 logs of spread")
        assert dirs_of(b, "spread") == {p1: 0, p2: 4}   # the dir with the fewest partitions first


def test_static_cordoned_log_dirs_apply_from_the_start_and_a_bad_one_stops_the_broker(tmp_path):
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    p1, p2 = str(d1), str(d2)
    with BrokerProcess(d1, {"log.dirs": f"{p1},{p2}", "cordoned.log.dirs": p1}) as b:
        assert cordoned_flags(b) == {p1: True, p2: False}
        wait_until(lambda: create(b, "static", 3) == (E.NONE, None), timeout=30, what="static created")
        wait_until(lambda: sum(dirs_of(b, "static").values()) == 3, timeout=30, what="3 logs of static")
        assert dirs_of(b, "static") == {p1: 0, p2: 3}
    bad = BrokerProcess(tmp_path / "d3", {"cordoned.log.dirs": p2}, log_path=tmp_path / "bad.log")
    with pytest.raises(RuntimeError):
        bad.start(timeout=60)
    deadline = time.monotonic() + 30
    while "Missing entries" not in bad.log_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert (f"requirement failed: All entries in cordoned.log.dirs must be present in log.dirs or log.dir. "
            f"Missing entries : {p2}") in bad.log_text()
