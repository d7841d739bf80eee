"""kcompat's broker and topic config tables side by side with Apache Kafka 4.3.1's.

One DescribeConfigs of every broker config (``config_filter=all``, the broker's own id) and of a
new topic's configs, sent by kafka-python to a single-node Kafka 4.3.1 and to a zero-config
kcompat, must name the same configs, with the same value, type, read-only flag and sensitivity.
The exceptions are listed below with their reasons: values that depend on how each broker was
started (ports, directories, what the reference's ``server.properties`` sets), kcompat's own
configs, and the known differences. CreateTopics with a topic config Kafka 4.0 removed gets the
same refusal from both."""

from __future__ import annotations

import pytest
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
from kafka.errors import InvalidConfigurationError

from kcompat.testing.admin import wait_for_leaders
from tests.support.side_by_side import against_both

# kcompat's own configs (the HTTP API and its REST proxy): Kafka has no such keys.
KCOMPAT_ONLY = {"http.listeners", "consumer.instance.timeout.ms"}
# Set by the reference's server.properties or by how each broker is started (ports, data
# directories) or a kcompat zero-config default (KCOMPAT_DEFAULTS): only type, read-only flag and
# sensitivity are compared.
STARTUP_DEPENDENT = {
    "advertised.listeners", "broker.id", "controller.listener.names", "controller.quorum.voters",
    "group.initial.rebalance.delay.ms", "inter.broker.listener.name", "listener.security.protocol.map",
    "listeners", "log.dir", "log.dirs", "node.id", "num.partitions", "offsets.topic.replication.factor",
    "process.roles", "transaction.state.log.min.isr", "transaction.state.log.replication.factor",
    "share.coordinator.state.topic.min.isr", "share.coordinator.state.topic.replication.factor",
}
# Known differences: name -> (field, reason).
KNOWN = {
    # kcompat reads it once when the tiered storage runtime starts, so it refuses a dynamic update
    "remote.fetch.max.wait.ms": "read_only",
}
REMOVED_TOPIC_CONFIGS = {"message.format.version": "3.0-IV1", "message.downconversion.enable": "true",
                         "message.timestamp.difference.max.ms": "1000"}


def _entries(admin: KafkaAdminClient, rtype: ConfigResourceType, name: str) -> dict[str, tuple]:
    """{config name: (value, read_only, config_type, is_sensitive)} of one resource."""
    result = admin.describe_configs([ConfigResource(rtype, name)], config_filter="all")
    (by_name,) = result.values()
    (entries,) = by_name.values()
    return {k: (v["value"], v["read_only"], v["config_type"], v["is_sensitive"]) for k, v in entries.items()}


def tables(bootstrap: str) -> dict:
    """The broker's and a new topic's config tables, and the refusals of removed topic configs."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic("tables", 1, 1)])
        wait_for_leaders(bootstrap, ["tables"])
        refusals = {}
        for i, (key, value) in enumerate(sorted(REMOVED_TOPIC_CONFIGS.items())):
            with pytest.raises(InvalidConfigurationError) as e:
                admin.create_topics([NewTopic(f"removed{i}", 1, 1, topic_configs={key: value})])
            refusals[key] = str(e.value).split("error_message='", 1)[1].split("'", 1)[0]
        return {"broker": _entries(admin, ConfigResourceType.BROKER, "1"),
                "topic": _entries(admin, ConfigResourceType.TOPIC, "tables"), "refusals": refusals}
    finally:
        admin.close()


@pytest.mark.timeout(1200)   # the first run on a machine resolves Kafka 4.3.1's jars from Maven Central
def test_config_tables_match_kafka_4_3_1(tmp_path):
    ours, theirs = against_both(tmp_path, tables)

    assert ours["refusals"] == theirs["refusals"]
    assert ours["refusals"]["message.format.version"] == "Unknown topic config name: message.format.version"
    assert set(ours["topic"]) == set(theirs["topic"])
    assert ours["topic"] == theirs["topic"]

    assert set(ours["broker"]) - KCOMPAT_ONLY == set(theirs["broker"])
    fields = ("value", "read_only", "config_type", "is_sensitive")
    differences = []
    for name, their in sorted(theirs["broker"].items()):
        for field, a, b in zip(fields, ours["broker"][name], their):
            if a != b and not (field == "value" and name in STARTUP_DEPENDENT) and KNOWN.get(name) != field:
                differences.append((name, field, a, b))
    assert differences == []
    # each known difference is still one: drop it from KNOWN when it goes away
    for name, field in KNOWN.items():
        i = fields.index(field)
        assert ours["broker"][name][i] != theirs["broker"][name][i], (name, field)
