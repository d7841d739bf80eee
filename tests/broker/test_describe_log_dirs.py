"""DescribeLogDirs (key 35) against a real broker: each partition's size is the bytes of its ``.log``
files on disk and grows with produced data, the topics filter, v4's filesystem sizes, the
CLUSTER_AUTHORIZATION_FAILED of Kafka's DESCRIBE-on-cluster check, kafka-python's
``describe_log_dirs`` and Kafka 4.3.1's ``kafka-log-dirs.sh --describe`` printing the same sizes."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import uuid

import confluent_kafka as ck
import pytest
from kafka import KafkaAdminClient

from conformance import maven
from conformance.reference import java_command
from kcompat.protocol.errors import ErrorCode as E
from kcompat.protocol.messages.create_acls import CreateAclsRequest as CQ
from kcompat.protocol.messages.describe_log_dirs import DescribeLogDirsRequest as Q
from kcompat.security.acl import AclOperation as Op, AclPermissionType as Perm, PatternType as PT, ResourceType as RT
from kcompat.testing import Broker
from kcompat.testing.wire import call, read_response, send_request

LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand"


@pytest.fixture(scope="module")
def broker():
    with Broker() as b:
        b.topic = f"sized-{uuid.uuid4().hex[:6]}"
        b.create_topic(b.topic, 3, 1)
        b.other = f"other-{uuid.uuid4().hex[:6]}"
        b.create_topic(b.other, 1, 1)
        yield b


def produce(b, topic: str, partition: int, n: int) -> None:
    producer = ck.Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 5})
    for i in range(n):
        producer.produce(topic, b"x" * 100 + b"%06d" % i, partition=partition)
    assert producer.flush(30) == 0


def on_disk(b, topic: str, partition: int) -> int:
    """The bytes of the partition's segment files (``.log``) as the filesystem reports them."""
    d = b.data_dir / f"{topic}-{partition}"
    return sum(f.stat().st_size for f in d.glob("*.log"))


def describe(b, topics, version: int = 4):
    """{topic: {partition: (size, offset lag, is future)}} of the broker's one log dir, and the result."""
    resp = call(b.bootstrap_servers, Q(topics=topics), version)
    assert len(resp.results) == 1, resp
    result = resp.results[0]
    assert result.error_code == E.NONE and result.log_dir == os.path.abspath(b.data_dir), resp
    got = {t.name: {p.partition_index: (p.partition_size, p.offset_lag, p.is_future_key) for p in t.partitions}
           for t in result.topics}
    return got, result


def test_sizes_are_the_log_files_and_grow_with_data(broker):
    t = broker.topic
    empty, _ = describe(broker, [Q.DescribableLogDirTopic(topic=t, partitions=[0, 1, 2])])
    assert empty == {t: {0: (0, 0, False), 1: (0, 0, False), 2: (0, 0, False)}}
    produce(broker, t, 0, 200)
    first, _ = describe(broker, None)
    assert first[t][0] == (on_disk(broker, t, 0), 0, False) and first[t][0][0] > 200 * 100, first
    assert first[t][1][0] == first[t][2][0] == 0
    assert first[broker.other] == {0: (0, 0, False)}
    produce(broker, t, 0, 200)
    produce(broker, t, 2, 10)
    second, _ = describe(broker, None)
    assert second[t][0][0] == on_disk(broker, t, 0) > first[t][0][0] + 200 * 100
    assert 0 < second[t][2][0] == on_disk(broker, t, 2) < second[t][0][0]


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_every_version_and_the_topics_filter(broker, version):
    t = broker.topic
    wanted = [Q.DescribableLogDirTopic(topic=t, partitions=[2, 0, 99]),
              Q.DescribableLogDirTopic(topic="no-such-topic", partitions=[0])]
    got, result = describe(broker, wanted, version)
    assert sorted(got) == [t] and sorted(got[t]) == [0, 2], got     # unknown partitions are left out
    assert got[t][0] == (on_disk(broker, t, 0), 0, False)
    if version >= 4:   # the filesystem of the log dir, as Java's FileStore reports it
        usage = shutil.disk_usage(broker.data_dir)
        assert result.total_bytes == usage.total and 0 < result.usable_bytes <= usage.total
    else:
        assert (result.total_bytes, result.usable_bytes) == (-1, -1)
    none, _ = describe(broker, [Q.DescribableLogDirTopic(topic=t, partitions=[7])], version)
    assert none == {}


def test_kafka_python_describe_log_dirs(broker):
    produce(broker, broker.topic, 1, 50)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        [answer] = admin.describe_log_dirs()
    finally:
        admin.close()
    assert answer["broker"] == 1
    [log_dir] = answer["log_dirs"]
    assert log_dir["error_code"] == 0 and log_dir["log_dir"] == os.path.abspath(broker.data_dir)
    sizes = {(t["name"], p["partition_index"]): p["partition_size"] for t in log_dir["topics"] for p in t["partitions"]}
    assert sizes[(broker.topic, 1)] == on_disk(broker, broker.topic, 1) > 0


@pytest.mark.timeout(1200)  # the first run on a machine resolves Kafka's jars from Maven Central
def test_kafka_log_dirs_describe(broker):
    lib = maven.resolve_kafka("4.3.1")
    produce(broker, broker.other, 0, 30)
    out = subprocess.run(java_command(lib, LOG_DIRS, ["--bootstrap-server", broker.bootstrap_servers, "--describe",
                                                      "--topic-list", f"{broker.topic},{broker.other}"]),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    [line] = [x for x in out.stdout.splitlines() if x.startswith("{")]
    doc = json.loads(line)
    [b] = doc["brokers"]
    [d] = b["logDirs"]
    assert b["broker"] == 1 and d["error"] is None and d["logDir"] == os.path.abspath(broker.data_dir), doc
    parts = {p["partition"]: (p["size"], p["offsetLag"], p["isFuture"]) for p in d["partitions"]}
    expected = {f"{broker.topic}-{i}": (on_disk(broker, broker.topic, i), 0, False) for i in range(3)}
    expected[f"{broker.other}-0"] = (on_disk(broker, broker.other, 0), 0, False)
    assert parts == expected and expected[f"{broker.other}-0"][0] > 30 * 100, doc


def test_two_log_dirs(tmp_path):
    """With ``log.dirs`` naming two dirs, each dir reports the partitions it holds (the log manager
    spreads new partitions over them) and its own filesystem sizes."""
    dirs = [tmp_path / "a", tmp_path / "b"]
    with Broker({"log.dirs": ",".join(map(str, dirs))}, data_dir=dirs[0]) as b:
        b.create_topic("spread", 4, 1)
        for i in range(4):
            produce(b, "spread", i, 10 * (i + 1))
        resp = call(b.bootstrap_servers, Q(topics=None), 4)
        assert [r.log_dir for r in resp.results] == [str(d) for d in dirs]
        held = {}
        for d, r in zip(dirs, resp.results):
            assert r.error_code == 0 and r.total_bytes == shutil.disk_usage(d).total
            for t in r.topics:
                for p in t.partitions:
                    files = (d / f"spread-{p.partition_index}").glob("*.log")
                    assert p.partition_size == sum(f.stat().st_size for f in files) > 0
                    held[p.partition_index] = d
        assert sorted(held) == [0, 1, 2, 3] and set(held.values()) == set(dirs), held


def test_needs_describe_on_the_cluster():
    """With Kafka's StandardAuthorizer and the cluster allowed to 127.0.0.1 only, a client on
    127.0.0.2 gets no results and, from v3, CLUSTER_AUTHORIZATION_FAILED."""
    configs = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
               "allow.everyone.if.no.acl.found": "true"}
    with Broker(configs) as b:
        b.create_topic("t", 1, 1)
        acl = CQ.AclCreation(resource_type=RT.CLUSTER, resource_name="kafka-cluster", resource_pattern_type=PT.LITERAL,
                             principal="User:ANONYMOUS", host="127.0.0.1", operation=Op.DESCRIBE,
                             permission_type=Perm.ALLOW)
        assert [r.error_code for r in send(b, CQ(creations=[acl]), 3, "127.0.0.1").results] == [0]
        for version in (1, 2, 3, 4):
            denied = send(b, Q(topics=None), version, "127.0.0.2")
            assert denied.results == [] and denied.error_code == (E.CLUSTER_AUTHORIZATION_FAILED if version >= 3 else 0)
            allowed = send(b, Q(topics=None), version, "127.0.0.1")
            assert allowed.error_code == 0 and [r.error_code for r in allowed.results] == [0]
            assert [t.name for t in allowed.results[0].topics] == ["t"]


def send(b, request, version: int, source: str):
    """One round trip from a socket bound to ``source``."""
    host, port = b.bootstrap_servers.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30, source_address=(source, 0)) as sock:
        send_request(sock, request, version)
        return read_response(sock, type(request).API_KEY, version)[1]
