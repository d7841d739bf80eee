"""Typed parsing, validators and Kafka's string forms (ConfigDef semantics)."""

from __future__ import annotations

import pytest

from kcompat.config import BROKER_CONFIGS, TOPIC_CONFIGS, ConfigError, ConfigType, UpdateMode
from kcompat.config.types import format_value, java_double_str, parse_value

T = ConfigType


@pytest.mark.parametrize("raw,expected", [(" 42 ", 42), ("+7", 7), ("-2147483648", -(2**31))])
def test_int(raw, expected):
    assert parse_value("x", T.INT, raw) == expected


@pytest.mark.parametrize("raw", ["2147483648", "1.5", "1_000", "", "0x10", "12a"])
def test_int_rejects(raw):
    with pytest.raises(ConfigError, match="Invalid value .* for configuration x: Not a number of type INT"):
        parse_value("x", T.INT, raw)


def test_long_and_short_ranges():
    assert parse_value("x", T.LONG, "9223372036854775807") == 2**63 - 1
    with pytest.raises(ConfigError):
        parse_value("x", T.LONG, "9223372036854775808")
    with pytest.raises(ConfigError, match="SHORT"):
        parse_value("x", T.SHORT, "32768")


def test_boolean():
    assert parse_value("x", T.BOOLEAN, " TRUE ") is True
    assert parse_value("x", T.BOOLEAN, "false") is False
    with pytest.raises(ConfigError, match="Expected value to be either true or false"):
        parse_value("x", T.BOOLEAN, "yes")


def test_double():
    assert parse_value("x", T.DOUBLE, "0.5") == 0.5
    assert parse_value("x", T.DOUBLE, "1e3") == 1000.0
    assert parse_value("x", T.DOUBLE, "2d") == 2.0
    with pytest.raises(ConfigError):
        parse_value("x", T.DOUBLE, "inf")


def test_list():
    assert parse_value("x", T.LIST, " compact , delete ") == ["compact", "delete"]
    assert parse_value("x", T.LIST, "   ") == []
    assert parse_value("x", T.LIST, "a,,b") == ["a", "", "b"]


@pytest.mark.parametrize("x,s", [
    (0.5, "0.5"), (1.0, "1.0"), (0.9, "0.9"), (1e7, "1.0E7"), (1.7976931348623157e308, "1.7976931348623157E308"),
    (0.001, "0.001"), (0.0001, "1.0E-4"), (123456.789, "123456.789"), (-2.5, "-2.5"), (0.0, "0.0"),
])
def test_java_double_str(x, s):
    assert java_double_str(x) == s


def test_format_value():
    assert format_value(T.LIST, ["compact", "delete"]) == "compact,delete"
    assert format_value(T.BOOLEAN, True) == "true"
    assert format_value(T.LONG, 5) == "5"
    assert format_value(T.STRING, None) is None


def test_validator_messages_name_the_key():
    with pytest.raises(ConfigError, match="Invalid value 0 for configuration num.partitions: Value must be at least 1"):
        BROKER_CONFIGS["num.partitions"].parse("0")
    with pytest.raises(ConfigError, match="String must be one of: CreateTime, LogAppendTime"):
        BROKER_CONFIGS["log.message.timestamp.type"].parse("Now")
    with pytest.raises(ConfigError, match="Invalid value purge for configuration log.cleanup.policy"):
        BROKER_CONFIGS["log.cleanup.policy"].parse("delete,purge")
    with pytest.raises(ConfigError, match="no more than 1"):
        BROKER_CONFIGS["log.cleaner.min.cleanable.ratio"].parse("1.5")


def test_valid_values_text_like_kafka_docs():
    assert TOPIC_CONFIGS["retention.ms"].valid_values == "[-1,...]"
    assert TOPIC_CONFIGS["min.cleanable.dirty.ratio"].valid_values == "[0,...,1]"
    assert TOPIC_CONFIGS["cleanup.policy"].valid_values == "[compact, delete]"
    assert TOPIC_CONFIGS["compression.gzip.level"].valid_values == "[1,...,9] or -1"
    assert TOPIC_CONFIGS["segment.bytes"].valid_values == "[1048576,...]"


def test_required_broker_configs_are_defined():
    required = """listeners advertised.listeners listener.security.protocol.map inter.broker.listener.name
    controller.listener.names process.roles node.id broker.id controller.quorum.voters controller.quorum.bootstrap.servers
    log.dirs log.dir num.partitions default.replication.factor min.insync.replicas auto.create.topics.enable
    delete.topic.enable log.segment.bytes log.roll.ms log.roll.hours log.roll.jitter.ms log.roll.jitter.hours
    log.retention.ms log.retention.minutes log.retention.hours log.retention.bytes log.retention.check.interval.ms
    log.index.interval.bytes log.index.size.max.bytes log.flush.interval.messages log.flush.interval.ms
    log.flush.scheduler.interval.ms log.flush.offset.checkpoint.interval.ms log.flush.start.offset.checkpoint.interval.ms
    log.segment.delete.delay.ms log.cleanup.policy log.cleaner.enable log.cleaner.threads log.message.timestamp.type
    log.message.timestamp.before.max.ms log.message.timestamp.after.max.ms log.preallocate message.max.bytes
    socket.request.max.bytes socket.send.buffer.bytes socket.receive.buffer.bytes queued.max.requests
    queued.max.request.bytes num.network.threads num.io.threads num.recovery.threads.per.data.dir num.replica.fetchers
    replica.lag.time.max.ms replica.fetch.max.bytes replica.fetch.wait.max.ms unclean.leader.election.enable
    offsets.topic.num.partitions offsets.topic.replication.factor offsets.retention.minutes
    offsets.retention.check.interval.ms offsets.commit.timeout.ms group.initial.rebalance.delay.ms
    group.min.session.timeout.ms group.max.session.timeout.ms group.max.size transaction.state.log.num.partitions
    transaction.state.log.replication.factor transaction.state.log.min.isr transaction.max.timeout.ms
    transactional.id.expiration.ms producer.id.expiration.ms producer.id.expiration.check.interval.ms
    max.incremental.fetch.session.cache.slots fetch.max.bytes broker.session.timeout.ms broker.heartbeat.interval.ms
    auto.leader.rebalance.enable compression.type connections.max.idle.ms request.timeout.ms metadata.log.dir
    share.coordinator.state.topic.replication.factor share.coordinator.state.topic.min.isr""".split()
    missing = [k for k in required if k not in BROKER_CONFIGS]
    assert not missing


def test_kafka_types_defaults_and_modes():
    k = BROKER_CONFIGS
    assert (k["log.retention.hours"].type, k["log.retention.hours"].default) == (T.INT, 168)
    assert k["log.retention.ms"].update_mode is UpdateMode.CLUSTER_WIDE
    assert k["log.retention.hours"].update_mode is UpdateMode.READ_ONLY
    assert k["listeners"].update_mode is UpdateMode.PER_BROKER
    assert k["num.io.threads"].update_mode is UpdateMode.CLUSTER_WIDE
    assert k["offsets.topic.replication.factor"].type is T.SHORT
    assert k["message.max.bytes"].default == 1048588
    assert k["fetch.max.bytes"].default == 57671680
    assert k["ssl.keystore.password"].sensitive
    assert k["log.cleaner.io.max.bytes.per.second"].default_str == "1.7976931348623157E308"
    # kcompat follows Kafka's shipped server.properties (0) rather than its built-in 3000
    assert k["group.initial.rebalance.delay.ms"].default == 0
    assert k["transaction.state.log.min.isr"].default == 2


def test_topic_config_table():
    expected = """cleanup.policy compression.type delete.retention.ms file.delete.delay.ms flush.messages flush.ms
    follower.replication.throttled.replicas index.interval.bytes leader.replication.throttled.replicas
    local.retention.bytes local.retention.ms max.compaction.lag.ms max.message.bytes
    message.timestamp.after.max.ms message.timestamp.before.max.ms
    message.timestamp.type min.cleanable.dirty.ratio min.compaction.lag.ms
    min.insync.replicas preallocate remote.storage.enable retention.bytes retention.ms segment.bytes
    segment.index.bytes segment.jitter.ms segment.ms unclean.leader.election.enable remote.log.copy.disable
    remote.log.delete.on.disable compression.gzip.level compression.lz4.level compression.zstd.level""".split()
    assert sorted(k for k, v in TOPIC_CONFIGS.items() if not v.internal) == sorted(expected)
    assert [k for k, v in TOPIC_CONFIGS.items() if v.internal] == ["internal.segment.bytes"]
    assert TOPIC_CONFIGS["retention.ms"].default == 604800000
    assert TOPIC_CONFIGS["max.message.bytes"].default == 1048588
    assert TOPIC_CONFIGS["cleanup.policy"].typed_default() == ["delete"]
