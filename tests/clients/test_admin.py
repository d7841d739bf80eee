"""Topic administration through kafka-python's KafkaAdminClient and confluent-kafka's AdminClient
against a real kcompat process: create (configs, validate_only, errors), describe configs (the full
list with defaults and sources), incremental alter configs, create partitions, delete topics,
delete records, describe cluster, and topic auto-creation with auto.create.topics.enable on and off.
"""

from __future__ import annotations

import time
from pathlib import Path

import confluent_kafka as ck
import kafka.errors as kerr
import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewPartitions, NewTopic, OffsetSpec, ResourceType,
)
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import AlterConfigOp
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType

from tests.clients.common import (
    Rec, assert_same_records, ck_admin, ck_consume, ck_consumer, ck_produce, ck_producer, close_ck_producer,
    kp_admin, kp_consume, kp_produce, make_records, topic_name,
)
from tests.support.broker_process import BrokerProcess

# Kafka 3.9 topic configs that every DescribeConfigs of a topic lists, with their defaults on a
# broker started without configuration (all DEFAULT_CONFIG).
KAFKA_TOPIC_DEFAULTS = {
    "cleanup.policy": "delete",
    "compression.type": "producer",
    "delete.retention.ms": "86400000",
    "file.delete.delay.ms": "60000",
    "flush.messages": "9223372036854775807",
    "flush.ms": "9223372036854775807",
    "index.interval.bytes": "4096",
    "max.compaction.lag.ms": "9223372036854775807",
    "max.message.bytes": "1048588",
    "message.timestamp.type": "CreateTime",
    "min.cleanable.dirty.ratio": "0.5",
    "min.compaction.lag.ms": "0",
    "min.insync.replicas": "1",
    "preallocate": "false",
    "retention.bytes": "-1",
    "retention.ms": "604800000",
    "segment.bytes": "1073741824",
    "segment.index.bytes": "10485760",
    "segment.jitter.ms": "0",
    "segment.ms": "604800000",
    "unclean.leader.election.enable": "false",
    "local.retention.bytes": "-2",
    "local.retention.ms": "-2",
    "remote.storage.enable": "false",
    "follower.replication.throttled.replicas": "",
    "leader.replication.throttled.replicas": "",
}


@pytest.fixture(scope="module")
def kadmin(broker):
    a = kp_admin(broker.bootstrap)
    yield a
    a.close()


@pytest.fixture(scope="module")
def cadmin(broker):
    return ck_admin(broker.bootstrap)


def ck_error(fut, timeout: float = 20.0) -> KafkaError:
    """The KafkaError a confluent admin future fails with (fails the test if it succeeds)."""
    with pytest.raises(KafkaException) as e:
        fut.result(timeout=timeout)
    return e.value.args[0]


def cluster_id_on_disk(data_dir: Path) -> str:
    for line in (data_dir / "meta.properties").read_text().splitlines():
        if line.startswith("cluster.id="):
            return line.split("=", 1)[1].strip()
    raise AssertionError("no cluster.id in meta.properties")


# -- kafka-python KafkaAdminClient --------------------------------------------------------------------


def test_kp_create_topics(broker, kadmin, request):
    t = topic_name(request)
    res = kadmin.create_topics({t: {"num_partitions": 3, "configs": {"retention.ms": "3600000",
                                                                     "cleanup.policy": "delete"}}})
    (topic,) = res["topics"]
    assert (topic["name"], topic["error_code"], topic["num_partitions"], topic["replication_factor"]) == (t, 0, 3, 1)
    # CreateTopics v5+ returns the topic's configs (KIP-525)
    assert topic["configs"]["retention.ms"]["value"] == "3600000"
    assert topic["configs"]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert topic["configs"]["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
    (md,) = kadmin.describe_topics([t])
    assert md["error_code"] == 0
    assert sorted(p["partition_index"] for p in md["partitions"]) == [0, 1, 2]
    assert all(p["leader_id"] >= 0 and p["replica_nodes"] == [p["leader_id"]] for p in md["partitions"])

    # validate_only: answered as if created, but nothing is created
    t2 = topic_name(request, "validate")
    res = kadmin.create_topics({t2: {"num_partitions": 2}}, validate_only=True)
    assert res["topics"][0]["error_code"] == 0 and res["topics"][0]["num_partitions"] == 2
    assert t2 not in kadmin.list_topics()
    assert kadmin.describe_topics([t2])[0]["error_code"] == kerr.UnknownTopicOrPartitionError.errno

    with pytest.raises(kerr.TopicAlreadyExistsError):
        kadmin.create_topics({t: {"num_partitions": 1}})
    with pytest.raises(kerr.TopicAlreadyExistsError):
        kadmin.create_topics({t: {"num_partitions": 1}}, validate_only=True)
    for bad in ["bad name!", "..", ".", "x" * 250, "a/b"]:
        with pytest.raises(kerr.InvalidTopicError):
            kadmin.create_topics({bad: {"num_partitions": 1}})
    with pytest.raises(kerr.InvalidConfigurationError):
        kadmin.create_topics({topic_name(request, "badcfg"): {"configs": {"retention.ms": "soon"}}})
    with pytest.raises(kerr.InvalidConfigurationError):
        kadmin.create_topics({topic_name(request, "unknowncfg"): {"configs": {"no.such.config": "1"}}})
    with pytest.raises(kerr.InvalidPartitionsError):
        kadmin.create_topics({topic_name(request, "zero"): {"num_partitions": 0}})
    with pytest.raises(kerr.InvalidReplicationFactorError):
        kadmin.create_topics({topic_name(request, "rf3"): {"num_partitions": 1, "replication_factor": 3}})
    # default partition count (-1) = num.partitions = 1
    t3 = topic_name(request, "defaults")
    assert kadmin.create_topics([t3])["topics"][0]["num_partitions"] == 1


def test_kp_describe_configs_full_list_and_incremental_alter(broker, kadmin, request):
    t = topic_name(request)
    kadmin.create_topics({t: {"num_partitions": 1}})

    def describe(filter_="all"):
        return kadmin.describe_configs([KpConfigResource(ConfigResourceType.TOPIC, t)],
                                       config_filter=filter_)["topic"][t]

    full = describe()
    missing = set(KAFKA_TOPIC_DEFAULTS) - set(full)
    assert not missing, f"DescribeConfigs lacks {sorted(missing)}"
    assert len(full) >= 30, sorted(full)
    for name, default in KAFKA_TOPIC_DEFAULTS.items():
        assert full[name]["value"] == default, name
        assert full[name]["config_source"] == "DEFAULT_CONFIG", name
        assert full[name]["read_only"] is False and full[name]["is_sensitive"] is False, name
    assert describe("modified") == {}

    # SET: an override with source DYNAMIC_TOPIC_CONFIG
    out = kadmin.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, t,
                                                 configs={"retention.ms": (AlterConfigOp.SET, "86400000"),
                                                          "max.message.bytes": "2000000"})])
    assert out == {"topic": {t: "OK"}}
    full = describe()
    assert (full["retention.ms"]["value"], full["retention.ms"]["config_source"]) == ("86400000",
                                                                                      "DYNAMIC_TOPIC_CONFIG")
    assert full["max.message.bytes"]["value"] == "2000000"
    assert set(describe("modified")) == {"retention.ms", "max.message.bytes"}

    # an invalid value: INVALID_CONFIG, nothing changes
    out = kadmin.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, t,
                                                 configs={"retention.ms": "next tuesday"})])
    assert "InvalidConfigurationError" in out["topic"][t], out
    out = kadmin.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, t,
                                                 configs={"cleanup.policy": "shred"})])
    assert "InvalidConfigurationError" in out["topic"][t], out
    assert describe()["retention.ms"]["value"] == "86400000"

    # validate_only changes nothing
    out = kadmin.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, t, configs={"retention.ms": "1000"})],
                               validate_only=True)
    assert out == {"topic": {t: "OK"}}
    assert describe()["retention.ms"]["value"] == "86400000"

    # DELETE: back to the default
    out = kadmin.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, t,
                                                 configs={"retention.ms": (AlterConfigOp.DELETE, None)})])
    assert out == {"topic": {t: "OK"}}
    full = describe()
    assert (full["retention.ms"]["value"], full["retention.ms"]["config_source"]) == ("604800000", "DEFAULT_CONFIG")
    assert set(describe("modified")) == {"max.message.bytes"}
    # (kafka-python's describe_configs ignores per-resource error codes, so the unknown-topic
    # error is checked with confluent's AdminClient below)


def test_kp_create_partitions(broker, kadmin, request):
    t = topic_name(request)
    kadmin.create_topics({t: {"num_partitions": 2}})
    kadmin.create_partitions({t: 4})
    (md,) = kadmin.describe_topics([t])
    assert sorted(p["partition_index"] for p in md["partitions"]) == [0, 1, 2, 3]
    sent = kp_produce(broker.bootstrap, t, [Rec(b"k", b"to the new partition")], partition=3)
    assert (sent[0].partition, sent[0].offset) == (3, 0)
    assert_same_records(sent, kp_consume(broker.bootstrap, t, 3))

    with pytest.raises(kerr.InvalidPartitionsError):
        kadmin.create_partitions({t: 2})
    with pytest.raises(kerr.InvalidPartitionsError):
        kadmin.create_partitions({t: 4})
    kadmin.create_partitions({t: 8}, validate_only=True)
    assert len(kadmin.describe_topics([t])[0]["partitions"]) == 4
    with pytest.raises(kerr.UnknownTopicOrPartitionError):
        kadmin.create_partitions({topic_name(request, "missing"): 3})


def test_kp_delete_topic_and_recreate(broker, kadmin, request):
    t = topic_name(request)
    kadmin.create_topics({t: {"num_partitions": 2}})
    kp_produce(broker.bootstrap, t, make_records(10, "old"), partition=0)
    res = kadmin.delete_topics([t])
    assert [(x["name"], x["error_code"]) for x in res["topics"]] == [(t, 0)]
    assert t not in kadmin.list_topics()
    assert kadmin.describe_topics([t])[0]["error_code"] == kerr.UnknownTopicOrPartitionError.errno
    with pytest.raises(kerr.UnknownTopicOrPartitionError):
        kadmin.delete_topics([t])

    kadmin.create_topics({t: {"num_partitions": 1}})
    assert len(kadmin.describe_topics([t])[0]["partitions"]) == 1
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    tp = TopicPartition(t, 0)
    assert c.beginning_offsets([tp]) == {tp: 0} and c.end_offsets([tp]) == {tp: 0}
    c.close()
    sent = kp_produce(broker.bootstrap, t, make_records(5, "new"))
    assert [s.offset for s in sent] == [0, 1, 2, 3, 4]
    assert_same_records(sent, kp_consume(broker.bootstrap, t, 0))


def test_kp_delete_records(broker, kadmin, request):
    t = topic_name(request)
    kadmin.create_topics({t: {"num_partitions": 1}})
    sent = kp_produce(broker.bootstrap, t, make_records(30, "dr"), linger_ms=20)
    tp = TopicPartition(t, 0)
    res = kadmin.delete_records({tp: 10})
    assert res[tp]["low_watermark"] == 10
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest")
    try:
        assert c.beginning_offsets([tp]) == {tp: 10}
        assert c.end_offsets([tp]) == {tp: 30}
        assert_same_records(sent[10:], kp_consume(broker.bootstrap, t, 0, consumer=c))
        # below the low watermark: OFFSET_OUT_OF_RANGE, reset to earliest (= the low watermark)
        assert_same_records(sent[10:], kp_consume(broker.bootstrap, t, 0, 3, consumer=c))
    finally:
        c.close()
    # with no reset policy the consumer surfaces the error
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="none")
    try:
        c.assign([tp])
        c.seek(tp, 3)
        with pytest.raises(kerr.OffsetOutOfRangeError):
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                assert c.poll(timeout_ms=200) == {}
    finally:
        c.close()
    with pytest.raises(kerr.OffsetOutOfRangeError):
        kadmin.delete_records({tp: 31})
    assert kadmin.delete_records({tp: -1})[tp]["low_watermark"] == 30  # -1: up to the high watermark
    assert kadmin.delete_records({tp: 5})[tp]["low_watermark"] == 30  # never moves back


def test_kp_describe_cluster(broker, kadmin):
    info = kadmin.describe_cluster()
    assert len(info["brokers"]) == 1
    (b,) = info["brokers"]
    host, port = broker.bootstrap.rsplit(":", 1)
    assert (b["host"], b["port"]) == (host, int(port))
    assert info["controller_id"] == b["broker_id"]
    assert info["cluster_id"] == cluster_id_on_disk(broker.data_dir)


# -- confluent-kafka AdminClient ------------------------------------------------------------------------


def test_ck_create_topics(broker, cadmin, request):
    t = topic_name(request)
    fs = cadmin.create_topics([NewTopic(t, num_partitions=2, config={"retention.ms": "3600000"})])
    assert fs[t].result(timeout=20) is None
    md = cadmin.list_topics(timeout=10)
    assert sorted(md.topics[t].partitions) == [0, 1]

    t2 = topic_name(request, "validate")
    cadmin.create_topics([NewTopic(t2, num_partitions=1)], validate_only=True)[t2].result(timeout=20)
    assert t2 not in cadmin.list_topics(timeout=10).topics

    assert ck_error(cadmin.create_topics([NewTopic(t, num_partitions=1)])[t]).code() == KafkaError.TOPIC_ALREADY_EXISTS
    bad = "no spaces please"
    assert ck_error(cadmin.create_topics([NewTopic(bad, num_partitions=1)])[bad]).code() == KafkaError.TOPIC_EXCEPTION
    t3 = topic_name(request, "badcfg")
    err = ck_error(cadmin.create_topics([NewTopic(t3, num_partitions=1, config={"segment.bytes": "12"})])[t3])
    assert err.code() == KafkaError.INVALID_CONFIG  # below segment.bytes' minimum
    t4 = topic_name(request, "rf")
    err = ck_error(cadmin.create_topics([NewTopic(t4, num_partitions=1, replication_factor=2)])[t4])
    assert err.code() == KafkaError.INVALID_REPLICATION_FACTOR


def test_ck_describe_configs_and_incremental_alter(broker, cadmin, request):
    t = topic_name(request)
    cadmin.create_topics([NewTopic(t, num_partitions=1)])[t].result(timeout=20)
    res = ConfigResource(ResourceType.TOPIC, t)

    def describe():
        return cadmin.describe_configs([ConfigResource(ResourceType.TOPIC, t)])[res].result(timeout=20)

    full = describe()
    assert not set(KAFKA_TOPIC_DEFAULTS) - set(full)
    for name, default in KAFKA_TOPIC_DEFAULTS.items():
        e = full[name]
        assert (e.value, e.source, e.is_default, e.is_read_only) == (default, ConfigSource.DEFAULT_CONFIG.value,
                                                                   True, False), name

    def alter(*entries, validate_only=False):
        r = ConfigResource(ResourceType.TOPIC, t, incremental_configs=list(entries))
        return cadmin.incremental_alter_configs([r], validate_only=validate_only)[r]

    alter(ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
          ConfigEntry("cleanup.policy", "compact,delete", incremental_operation=AlterConfigOpType.SET),
          ConfigEntry("segment.bytes", "2000000", incremental_operation=AlterConfigOpType.SET)).result(timeout=20)
    full = describe()
    assert (full["retention.ms"].value, full["retention.ms"].source) == ("7200000",
                                                                         ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert full["retention.ms"].is_default is False
    assert full["cleanup.policy"].value == "compact,delete"
    # synonyms (librdkafka asks for them): the topic override, then the broker's default
    syn = {n: (e.value, e.source) for n, e in full["segment.bytes"].synonyms.items()}
    assert syn == {"segment.bytes": ("2000000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
                   "log.segment.bytes": ("1073741824", ConfigSource.DEFAULT_CONFIG.value)}

    err = ck_error(alter(ConfigEntry("retention.ms", "-7x", incremental_operation=AlterConfigOpType.SET)))
    assert err.code() == KafkaError.INVALID_CONFIG
    err = ck_error(alter(ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET)))
    assert err.code() == KafkaError.INVALID_CONFIG
    alter(ConfigEntry("segment.ms", "1000", incremental_operation=AlterConfigOpType.SET),
          validate_only=True).result(timeout=20)
    assert describe()["segment.ms"].value == "604800000"

    alter(ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
          ConfigEntry("cleanup.policy", None, incremental_operation=AlterConfigOpType.DELETE),
          ConfigEntry("segment.bytes", None, incremental_operation=AlterConfigOpType.DELETE)).result(timeout=20)
    full = describe()
    assert (full["retention.ms"].value, full["retention.ms"].source) == ("604800000",
                                                                         ConfigSource.DEFAULT_CONFIG.value)
    assert full["cleanup.policy"].value == "delete"
    assert (full["segment.bytes"].value, full["segment.bytes"].source) == ("1073741824",
                                                                           ConfigSource.DEFAULT_CONFIG.value)

    missing = ConfigResource(ResourceType.TOPIC, topic_name(request, "missing"))
    assert ck_error(cadmin.describe_configs([missing])[missing]).code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_ck_create_partitions(broker, cadmin, request):
    t = topic_name(request)
    cadmin.create_topics([NewTopic(t, num_partitions=1)])[t].result(timeout=20)
    cadmin.create_partitions([NewPartitions(t, 3)])[t].result(timeout=20)
    assert sorted(cadmin.list_topics(timeout=10).topics[t].partitions) == [0, 1, 2]
    err = ck_error(cadmin.create_partitions([NewPartitions(t, 2)])[t])
    assert err.code() == KafkaError.INVALID_PARTITIONS
    # KRaft's messages (ReplicationControlManager), as kafka-topics --alter prints them on Kafka 4.3.1
    assert err.str() == f"The topic {t} currently has 3 partition(s); 2 would not be an increase."
    err = ck_error(cadmin.create_partitions([NewPartitions(t, 3)])[t])
    assert (err.code(), err.str()) == (KafkaError.INVALID_PARTITIONS, "Topic already has 3 partition(s).")
    sent = ck_produce(broker.bootstrap, t, [Rec(b"k", b"v")], partition=2)
    assert_same_records(sent, ck_consume(broker.bootstrap, t, 2))


def test_ck_delete_topic_and_recreate(broker, cadmin, request):
    t = topic_name(request)
    cadmin.create_topics([NewTopic(t, num_partitions=3)])[t].result(timeout=20)
    ck_produce(broker.bootstrap, t, make_records(10, "old"), partition=1)
    cadmin.delete_topics([t])[t].result(timeout=20)
    assert t not in cadmin.list_topics(timeout=10).topics
    assert ck_error(cadmin.delete_topics([t])[t]).code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    cadmin.create_topics([NewTopic(t, num_partitions=2)])[t].result(timeout=20)
    assert sorted(cadmin.list_topics(timeout=10).topics[t].partitions) == [0, 1]
    c = ck_consumer(broker.bootstrap)
    assert c.get_watermark_offsets(ck.TopicPartition(t, 1), timeout=10) == (0, 0)
    c.close()
    sent = ck_produce(broker.bootstrap, t, make_records(4, "new"), partition=1)
    assert [s.offset for s in sent] == [0, 1, 2, 3]
    assert_same_records(sent, ck_consume(broker.bootstrap, t, 1))


def test_ck_delete_records_moves_low_watermark(broker, cadmin, request):
    t = topic_name(request)
    cadmin.create_topics([NewTopic(t, num_partitions=1)])[t].result(timeout=20)
    sent = ck_produce(broker.bootstrap, t, make_records(40, "dr"), **{"linger.ms": 20})
    tp = ck.TopicPartition(t, 0, 25)
    deleted = cadmin.delete_records([tp])[tp].result(timeout=20)
    assert deleted.low_watermark == 25
    lo = ck.TopicPartition(t, 0)
    assert cadmin.list_offsets({lo: OffsetSpec.earliest()})[lo].result(timeout=20).offset == 25
    assert cadmin.list_offsets({lo: OffsetSpec.latest()})[lo].result(timeout=20).offset == 40
    c = ck_consumer(broker.bootstrap)
    assert c.get_watermark_offsets(lo, timeout=10) == (25, 40)
    c.close()
    assert_same_records(sent[25:], ck_consume(broker.bootstrap, t, 0))
    # below the low watermark with auto.offset.reset=earliest: reset to it
    assert_same_records(sent[25:], ck_consume(broker.bootstrap, t, 0, 2, **{"auto.offset.reset": "earliest"}))
    # with auto.offset.reset=error: the consumer reports the out-of-range reset failure
    c = ck_consumer(broker.bootstrap, **{"auto.offset.reset": "error"})
    try:
        c.assign([ck.TopicPartition(t, 0, 2)])
        err = None
        deadline = time.monotonic() + 10
        while err is None and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None:
                assert m.error() is not None, f"read offset {m.offset()} below the low watermark"
                if m.topic() == t:
                    err = m.error()
        assert err is not None and err.code() == KafkaError._AUTO_OFFSET_RESET, err
        assert "out of range" in err.str().lower() or "OFFSET_OUT_OF_RANGE" in err.str(), err.str()
    finally:
        c.close()
    tp = ck.TopicPartition(t, 0, 41)
    assert ck_error(cadmin.delete_records([tp])[tp]).code() == KafkaError.OFFSET_OUT_OF_RANGE


def test_ck_describe_cluster(broker, cadmin):
    res = cadmin.describe_cluster(request_timeout=10).result(timeout=20)
    assert len(res.nodes) == 1
    (node,) = res.nodes
    host, port = broker.bootstrap.rsplit(":", 1)
    assert (node.host, node.port) == (host, int(port))
    assert res.controller is not None and res.controller.id == node.id
    assert res.cluster_id == cluster_id_on_disk(broker.data_dir)
    assert cadmin.list_topics(timeout=10).cluster_id == res.cluster_id


# -- auto-creation -----------------------------------------------------------------------------------


def test_auto_create_on_produce(broker, kadmin, request):
    t1, t2 = topic_name(request, "kp"), topic_name(request, "ck")
    sent = kp_produce(broker.bootstrap, t1, [Rec(b"k", b"first")])
    assert (sent[0].partition, sent[0].offset) == (0, 0)
    sent2 = ck_produce(broker.bootstrap, t2, [Rec(None, b"first")])
    assert (sent2[0].partition, sent2[0].offset) == (0, 0)
    for t, s in [(t1, sent), (t2, sent2)]:
        (md,) = kadmin.describe_topics([t])
        assert md["error_code"] == 0 and len(md["partitions"]) == 1  # num.partitions=1
        assert_same_records(s, kp_consume(broker.bootstrap, t, 0))


def test_auto_create_on_metadata(broker, kadmin, request):
    # Metadata with allow_auto_topic_creation=false (the admin client's) does not create
    t0 = topic_name(request, "admin")
    assert kadmin.describe_topics([t0])[0]["error_code"] == kerr.UnknownTopicOrPartitionError.errno
    assert t0 not in kadmin.list_topics()
    # kafka-python asks for auto-creation in the metadata request for a topic
    # (allow_auto_create_topics=True); partitions_for() only looks the topic up, it sends nothing
    t1 = topic_name(request, "kp")
    p = KafkaProducer(bootstrap_servers=broker.bootstrap)
    try:
        assert p.partitions_for(t1) == {0}
    finally:
        p.close(timeout=5)
    # librdkafka's producer asks for auto-creation on a metadata request for the topic
    t2 = topic_name(request, "ck")
    p = ck_producer(broker.bootstrap)
    try:
        md = p.list_topics(t2, timeout=10)
        assert md.topics[t2].error is None and list(md.topics[t2].partitions) == [0]
    finally:
        close_ck_producer(p)
    assert {t1, t2} <= set(kadmin.list_topics())


def test_auto_create_disabled(tmp_path, request):
    with BrokerProcess(tmp_path / "data", overrides={"auto.create.topics.enable": "false"}) as b:
        t = topic_name(request)
        p = KafkaProducer(bootstrap_servers=b.bootstrap, max_block_ms=2000)
        try:
            # kafka-python (like the Java producer) waits max_block_ms for the topic to appear
            with pytest.raises(kerr.KafkaTimeoutError):
                p.send(t, b"nowhere").get(timeout=10)
        finally:
            p.close(timeout=5)
        errors = []
        cp = ck_producer(b.bootstrap, **{"topic.metadata.propagation.max.ms": 1000})
        try:
            cp.produce(t, b"nowhere", on_delivery=lambda e, m: errors.append(e))
            assert cp.flush(20) == 0
        finally:
            close_ck_producer(cp)
        assert len(errors) == 1 and errors[0] is not None
        assert errors[0].code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC), errors[0]
        cp = ck_producer(b.bootstrap)
        try:  # a metadata request allowing auto-creation: unknown topic, not created
            assert cp.list_topics(t, timeout=10).topics[t].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        finally:
            close_ck_producer(cp)
        a = kp_admin(b.bootstrap)
        try:
            assert a.describe_topics([t])[0]["error_code"] == kerr.UnknownTopicOrPartitionError.errno
            assert t not in a.list_topics()
            # explicit creation still works
            a.create_topics({t: {"num_partitions": 1}})
        finally:
            a.close()
        sent = ck_produce(b.bootstrap, t, [Rec(b"k", b"now it exists")])
        assert_same_records(sent, ck_consume(b.bootstrap, t, 0))
