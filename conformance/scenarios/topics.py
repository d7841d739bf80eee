"""Topic administration: create/delete, errors, partitions, configs, DeleteRecords, DescribeCluster."""

from __future__ import annotations

import time

from conformance import wire
from conformance.registry import CONFLUENT, JAVA, KAFKA_PYTHON, scenario

ADMIN_CLIENTS = [KAFKA_PYTHON, CONFLUENT, JAVA]

# Kafka error names and the spellings clients use for them (exception classes, messages).
ERROR_SPELLINGS = {
    "TOPIC_ALREADY_EXISTS": ("TOPIC_ALREADY_EXISTS", "TopicAlreadyExists", "TopicExistsException", "already exists"),
    "INVALID_PARTITIONS": ("INVALID_PARTITIONS", "InvalidPartitions", "InvalidPartitionsException"),
    "INVALID_REPLICATION_FACTOR": ("INVALID_REPLICATION_FACTOR", "InvalidReplicationFactor"),
    "INVALID_CONFIG": ("INVALID_CONFIG", "InvalidConfiguration", "InvalidConfig", "ConfigException"),
    "INVALID_TOPIC_EXCEPTION": ("INVALID_TOPIC", "InvalidTopic", "TOPIC_EXCEPTION"),
    "UNKNOWN_TOPIC_OR_PARTITION": ("UNKNOWN_TOPIC_OR_PART", "UnknownTopicOrPartition", "does not exist"),
    "POLICY_VIOLATION": ("POLICY_VIOLATION", "PolicyViolation"),
    "INVALID_REQUEST": ("INVALID_REQUEST", "InvalidRequest"),
}


def classify(error: BaseException | str) -> str:
    """The Kafka error name found in a client's exception (or its text), else the text itself."""
    text = f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else str(error)
    for name, spellings in ERROR_SPELLINGS.items():
        if any(s.lower() in text.lower() for s in spellings):
            return name
    return text[:200]


def expect_error(ctx, label: str, expected: str, fn, *args) -> None:
    try:
        fn(*args)
    except Exception as e:
        ctx.expect_eq(label, classify(e), expected)
        return
    ctx.expect_eq(label, "no error", expected)


@scenario("topics.create-delete", area="topics", title="Create a topic with partitions and a config, then delete it",
          clients=ADMIN_CLIENTS, requires=[19, 20])
def create_delete(ctx):
    topic = ctx.topic(create=False)
    ctx.client.create_topic(topic, 3, {"retention.ms": "3600000"})
    ctx.admin.wait_leaders(topic, 3)
    parts = ctx.client.describe_topic(topic)
    ctx.expect_eq("partitions", sorted(parts), [0, 1, 2])
    ctx.client.delete_topic(topic)
    deadline = time.monotonic() + 15
    with ctx.wire() as conn:
        while True:
            err = wire.metadata(conn, [topic], version=4).topics[topic]["error"]
            if err == 3:
                break
            ctx.check(time.monotonic() < deadline, f"topic still described 15s after deletion ({wire.error_name(err)})")
            time.sleep(0.3)
    ctx.observe(deleted=True)


@scenario("topics.delete-recreate", area="topics",
          title="A topic deleted and created again under the same name starts empty", clients=ADMIN_CLIENTS,
          requires=[19, 20])
def delete_recreate(ctx):
    topic = ctx.topic()
    ctx.setup_produce(topic, [b"old-%d" % i for i in range(5)])
    ctx.client.delete_topic(topic)
    deadline = time.monotonic() + 20
    while True:
        try:
            ctx.client.create_topic(topic, 2)
            break
        except Exception as e:  # Kafka refuses the name until the deletion completed
            ctx.check(time.monotonic() < deadline, f"could not create the topic again within 20s: {e}")
            time.sleep(0.5)
    ctx.admin.wait_leaders(topic, 2)
    with ctx.wire() as conn:
        ends = [wire.list_offsets(conn, topic, p, -1)["offset"] for p in (0, 1)]
        ctx.expect_eq("log_end_offsets", ends, [0, 0])
        res = wire.fetch(conn, topic, 0, 0, max_wait_ms=100)
        ctx.expect_eq("old_records_visible", bool(res["records"]), False)
    ctx.expect_eq("partitions", sorted(ctx.client.describe_topic(topic)), [0, 1])


@scenario("topics.create-errors", area="topics",
          title="CreateTopics errors: existing name, 0 partitions, replication factor 3, bad config, bad name",
          clients=ADMIN_CLIENTS, requires=[19])
def create_errors(ctx):
    existing = ctx.topic()
    expect_error(ctx, "existing_topic", "TOPIC_ALREADY_EXISTS", ctx.client.create_topic, existing, 1)
    expect_error(ctx, "bad_config", "INVALID_CONFIG", ctx.client.create_topic, ctx.topic(create=False), 1,
                 {"retention.ms": "not-a-number"})
    if ctx.case.client != JAVA:  # TopicCommand validates these itself before calling the broker
        expect_error(ctx, "zero_partitions", "INVALID_PARTITIONS", ctx.client.create_topic,
                     ctx.topic(create=False), 0)
        expect_error(ctx, "bad_name", "INVALID_TOPIC_EXCEPTION", ctx.client.create_topic, "bad name!" + ctx.prefix, 1)
    rf = ctx.topic(create=False)
    try:
        if ctx.case.client == JAVA:
            ctx.client._topic_cmd("--create", "--topic", rf, "--partitions", 1, "--replication-factor", 3)
        elif ctx.case.client == CONFLUENT:
            from confluent_kafka.admin import NewTopic

            ctx.client.admin.create_topics([NewTopic(rf, 1, 3)], operation_timeout=20)[rf].result(30)
        else:
            from kafka.admin import NewTopic

            ctx.client.admin.create_topics([NewTopic(rf, 1, 3)], timeout_ms=20000)
        ctx.expect_eq("replication_factor_3", "no error", "INVALID_REPLICATION_FACTOR")
    except Exception as e:
        ctx.expect_eq("replication_factor_3", classify(e), "INVALID_REPLICATION_FACTOR")


@scenario("topics.create-partitions", area="topics",
          title="CreatePartitions grows a topic from 1 to 3 partitions; shrinking is refused",
          clients=ADMIN_CLIENTS, requires=[37])
def create_partitions(ctx):
    topic = ctx.topic(partitions=1)
    ctx.client.create_partitions(topic, 3)
    ctx.admin.wait_leaders(topic, 3)
    ctx.expect_eq("partitions_after_grow", sorted(ctx.client.describe_topic(topic)), [0, 1, 2])
    expect_error(ctx, "shrink_to_2", "INVALID_PARTITIONS", ctx.client.create_partitions, topic, 2)
    expect_error(ctx, "same_count", "INVALID_PARTITIONS", ctx.client.create_partitions, topic, 3)


DEFAULTS = {"cleanup.policy": "delete", "retention.ms": "604800000", "max.message.bytes": "1048588",
            "segment.bytes": "1073741824", "min.insync.replicas": "1", "compression.type": "producer",
            "message.timestamp.type": "CreateTime"}


@scenario("topics.describe-configs", area="topics",
          title="DescribeConfigs returns every topic config with Kafka's defaults and sources",
          clients=ADMIN_CLIENTS, requires=[32])
def describe_configs(ctx):
    topic = ctx.topic(configs={"retention.ms": "3600000"})
    configs = ctx.client.describe_configs(topic)
    ctx.detail(config_count=len(configs))
    ctx.observe(config_names=sorted(configs))
    ctx.expect_eq("retention.ms", (configs.get("retention.ms") or {}).get("value"), "3600000")
    ctx.expect_eq("retention.ms.source", (configs.get("retention.ms") or {}).get("source"), "DYNAMIC_TOPIC")
    for name, value in DEFAULTS.items():
        if name == "retention.ms":
            continue
        entry = configs.get(name) or {}
        ctx.expect_eq(f"{name}", entry.get("value"), value)
        if name == "min.insync.replicas":
            # A cluster with eligible leader replicas (KIP-966; what Kafka 4.1+ finalizes for a new
            # cluster) keeps a cluster-level min.insync.replicas, written by its controller: there
            # the topic's value comes from DYNAMIC_DEFAULT_BROKER.
            ctx.observed[f"{name}.source"] = source = entry.get("source")
            ctx.check(source in ("DEFAULT", "DYNAMIC_DEFAULT_BROKER"),
                      f"{name}.source: expected 'DEFAULT' (or 'DYNAMIC_DEFAULT_BROKER' with ELR), got {source!r}")
            continue
        ctx.expect_eq(f"{name}.source", entry.get("source"), "DEFAULT")


@scenario("topics.alter-configs", area="topics",
          title="Alter topic configs (set, then delete back to the default)", clients=ADMIN_CLIENTS,
          requires=[32, 44])
def alter_configs(ctx):
    topic = ctx.topic()
    ctx.client.alter_configs(topic, {"retention.ms": "7200000", "cleanup.policy": "compact"})
    after = ctx.client.describe_configs(topic)
    ctx.expect_eq("retention.ms", after["retention.ms"]["value"], "7200000")
    ctx.expect_eq("retention.ms.source", after["retention.ms"]["source"], "DYNAMIC_TOPIC")
    ctx.expect_eq("cleanup.policy", after["cleanup.policy"]["value"], "compact")
    ctx.client.alter_configs(topic, {}, ["retention.ms"])
    reset = ctx.client.describe_configs(topic)
    ctx.expect_eq("retention.ms_after_delete", reset["retention.ms"]["value"], "604800000")
    ctx.expect_eq("retention.ms_after_delete.source", reset["retention.ms"]["source"], "DEFAULT")
    ctx.expect_eq("cleanup.policy_kept", reset["cleanup.policy"]["value"], "compact")


@scenario("topics.delete-records", area="topics",
          title="DeleteRecords moves the log start offset; fetching below it is OFFSET_OUT_OF_RANGE",
          clients=ADMIN_CLIENTS, requires=[21])
def delete_records(ctx):
    topic = ctx.topic()
    ctx.setup_produce(topic, [b"r%d" % i for i in range(10)])
    low = ctx.client.delete_records(topic, 0, 4)
    ctx.expect_eq("low_watermark", low, 4)
    with ctx.wire() as conn:
        ctx.expect_eq("earliest_offset", wire.list_offsets(conn, topic, 0, -2)["offset"], 4)
        ctx.expect_eq("latest_offset", wire.list_offsets(conn, topic, 0, -1)["offset"], 10)
        below = wire.fetch(conn, topic, 0, 2, max_wait_ms=100)
        ctx.expect_eq("fetch_below_start", wire.error_name(below["error"]), wire.error_name(1))
        at = wire.fetch(conn, topic, 0, 4, max_wait_ms=100)
        ctx.expect_eq("fetch_at_start", wire.error_name(at["error"]), wire.error_name(0))
        ctx.check(at["records"], "fetch at the new log start returned no records")


BROKER_CONFIGS = ("num.partitions", "message.max.bytes", "log.retention.hours", "auto.create.topics.enable",
                  "default.replication.factor", "log.segment.bytes")


@scenario("topics.describe-broker-configs", area="topics",
          title="DescribeConfigs for the broker resource lists its configs (num.partitions, message.max.bytes, ...)",
          clients=ADMIN_CLIENTS, requires=[32, 3])
def describe_broker_configs(ctx):
    with ctx.wire() as conn:
        node = min(wire.metadata(conn, []).brokers)
    client = ctx.case.client
    if client == CONFLUENT:
        from confluent_kafka.admin import ConfigResource, ResourceType

        res = ConfigResource(ResourceType.BROKER, str(node))
        entries = ctx.client.admin.describe_configs([res], request_timeout=15)[res].result(20)
        values = {k: e.value for k, e in entries.items()}
    elif client == KAFKA_PYTHON:
        from kafka.admin import ConfigResource, ConfigResourceType

        res = ctx.client.admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, str(node))],
                                                config_filter="all")
        values = {k: v["value"] for k, v in res["broker"][str(node)].items()}
    else:
        out = ctx.client.tools.run("kafka.admin.ConfigCommand", ["--bootstrap-server", ctx.bootstrap,
                                                                 "--entity-type", "brokers", "--entity-name",
                                                                 str(node), "--describe", "--all"],
                                   timeout=ctx.timeout(60)).stdout
        import re

        values = {m.group(1): m.group(2) for m in re.finditer(r"^\s+([a-z0-9.\-]+)=(.*?) sensitive=", out, re.M)}
    ctx.detail(broker_config_count=len(values))
    missing = [k for k in BROKER_CONFIGS if k not in values]
    ctx.expect_eq("missing_core_broker_configs", missing, [])
    ctx.expect_eq("num.partitions", values.get("num.partitions"), "1")


@scenario("topics.describe-cluster", area="topics", title="DescribeCluster: cluster id, brokers and controller",
          clients=[KAFKA_PYTHON, CONFLUENT], requires=[60])
def describe_cluster(ctx):
    if ctx.case.client == CONFLUENT:
        desc = ctx.client.admin.describe_cluster(request_timeout=15).result(20)
        cluster_id, brokers, controller = desc.cluster_id, [n.id for n in desc.nodes], desc.controller
        controller = controller.id if controller is not None else None
    else:
        desc = ctx.client.admin.describe_cluster()
        cluster_id = desc.get("cluster_id")
        brokers = [b.get("broker_id", b.get("node_id")) for b in desc.get("brokers", [])]
        controller = desc.get("controller_id")
    ctx.check(cluster_id, f"no cluster id ({cluster_id!r})")
    ctx.check(brokers, "no brokers listed")
    ctx.observe(broker_count=len(brokers), controller_is_a_broker=controller in brokers)
    ctx.detail(cluster_id=cluster_id, brokers=brokers, controller=controller)
