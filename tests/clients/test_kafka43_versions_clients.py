"""Kafka 4.3.1's Java clients negotiate and use the newest request versions kcompat serves, end to
end: the producer (ConsoleProducer) sends Produce v13 (topic ids) and Metadata v13, a consumer in
a consumer group (ConsoleConsumer, ``group.protocol=consumer``) fetches with Fetch v18 and commits
and reads its offsets with OffsetCommit/OffsetFetch v10 (topic ids; the classic protocol's
coordinator still sends v9), and the admin client (GetOffsetShell,
``kafka-consumer-groups.sh --describe``) lists offsets with ListOffsets v11 and describes the
cluster and a classic group with DescribeCluster v2 and DescribeGroups v6. The broker's
``kafka_network_requestmetrics_requests_total{request,version}`` counts which versions arrived."""

from __future__ import annotations

import re
import urllib.request
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from conformance import maven
from conformance.clients.java import JavaTools
from tests.support.wire_helpers import broker_with_metrics

RECORDS = 30
PARTITIONS = 3


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with broker_with_metrics(tmp_path_factory.mktemp("k43-clients") / "data",
                             {"offsets.topic.num.partitions": "1"}) as b:
        yield b


@pytest.fixture(scope="module")
def tools(tmp_path_factory):
    return JavaTools(str(maven.resolve_kafka("4.3.1")), tmp_path_factory.mktemp("java"))


def requests_by_version(b) -> dict[tuple[str, int], float]:
    """{(request name, version): requests received so far}."""
    with urllib.request.urlopen(b.metrics_url, timeout=10) as r:
        text = r.read().decode()
    return {(s.labels["request"], int(s.labels["version"])): s.value
            for f in text_string_to_metric_families(text) for s in f.samples
            if s.name == "kafka_network_requestmetrics_requests_total"}


def grew(before: dict, after: dict) -> dict[str, set[int]]:
    """{request name: the versions whose count grew between the two scrapes}."""
    out: dict[str, set[int]] = {}
    for key, n in after.items():
        if n > before.get(key, 0):
            out.setdefault(key[0], set()).add(key[1])
    return out


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_java_4_3_1_clients_use_the_newest_versions(broker, tools, protocol):
    topic, group = f"k43c-{uuid.uuid4().hex[:8]}", f"k43c-g-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)

    before = requests_by_version(broker)
    values = [f"v{i}" for i in range(RECORDS)]
    tools.run("org.apache.kafka.tools.ConsoleProducer", ["--bootstrap-server", broker.bootstrap, "--topic", topic,
                                              "--request-required-acks", "all"],
              input="\n".join(values) + "\n", timeout=120)
    produced = grew(before, requests_by_version(broker))
    assert produced["Produce"] == {13} and 13 in produced["Metadata"], produced

    before = requests_by_version(broker)
    res = tools.run("org.apache.kafka.tools.consumer.ConsoleConsumer",
                    ["--bootstrap-server", broker.bootstrap, "--topic", topic, "--group", group,
                     "--from-beginning", "--max-messages", str(RECORDS), "--timeout-ms", "60000",
                     "--command-property", f"group.protocol={protocol}"], timeout=150)
    assert sorted(re.findall(r"^v\d+$", res.stdout, re.M)) == sorted(values), res.stderr[-2000:]
    consumed = grew(before, requests_by_version(broker))
    assert consumed["Fetch"] == {18}, consumed
    # the consumer protocol's commit manager names topics by id; Kafka 4.3.1's classic
    # ConsumerCoordinator still sends names (v9)
    offsets_version = 10 if protocol == "consumer" else 9
    assert consumed["OffsetCommit"] == {offsets_version} and consumed["OffsetFetch"] == {offsets_version}, consumed

    # the group's committed offsets, read back by the admin client (OffsetFetch v10, ListOffsets)
    before = requests_by_version(broker)
    res = tools.run("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
                    ["--bootstrap-server", broker.bootstrap, "--describe", "--group", group], timeout=120)
    rows = [line.split() for line in res.stdout.splitlines() if topic in line]
    # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ...
    assert sorted((int(r[2]), r[3] == r[4], r[5]) for r in rows) == [(p, True, "0") for p in range(PARTITIONS)], \
        res.stdout
    assert sum(int(r[3]) for r in rows) == RECORDS
    described = grew(before, requests_by_version(broker))
    # the admin client reads committed offsets by name (OffsetFetch v9) in Kafka 4.3.1; a classic
    # group is described with DescribeGroups v6 (KIP-1043) after ConsumerGroupDescribe
    assert described["ListOffsets"] == {11} and described["OffsetFetch"] == {9}, described
    assert described["DescribeCluster"] == {2}, described
    if protocol == "classic":
        assert described["DescribeGroups"] == {6}, described

    res = tools.run("org.apache.kafka.tools.GetOffsetShell",
                    ["--bootstrap-server", broker.bootstrap, "--topic", topic, "--time", "-1"], timeout=120)
    ends = {int(m.group(1)): int(m.group(2)) for m in re.finditer(rf"^{topic}:(\d+):(\d+)$", res.stdout, re.M)}
    assert sorted(ends) == list(range(PARTITIONS)) and sum(ends.values()) == RECORDS, res.stdout
