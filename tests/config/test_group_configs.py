"""Dynamic group configs (ConfigResource GROUP = 32, KIP-848/KIP-932): Kafka 4.3.1's GroupConfig
names, defaults and validation messages (taken from Kafka 4.3.1's GroupConfig.validate and a 4.3.1
broker), the effective values the coordinators read, DescribeConfigs entries, IncrementalAlterConfigs
on a group, the broker-level group.share.* cross-checks, and the ConfigRecords in the metadata log."""

from __future__ import annotations

import pytest

from kcompat.config import (GROUP_CONFIGS, OP_APPEND, OP_DELETE, OP_SET, OP_SUBTRACT, BrokerConfig, ConfigError,
                            ConfigSynonym, apply_incremental, describe_group, effective_group_config,
                            validate_group_configs)
from kcompat.config.group import ShareAutoOffsetReset, parse_iso_duration_ns, parse_share_auto_offset_reset
from kcompat.kraft.image import RESOURCE_GROUP, MetadataImage
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.metadata_records import ConfigRecord
from tests.kraft.test_controller import NOW, Node

STATIC, DEFAULT, GROUP = 4, 5, 8

# GroupConfig.CONFIG_DEF of Kafka 4.3.1: name -> (type, default), in definition order
KAFKA_4_3 = {
    "consumer.session.timeout.ms": (3, "45000"), "consumer.heartbeat.interval.ms": (3, "5000"),
    "consumer.assignment.interval.ms": (3, "1000"), "share.session.timeout.ms": (3, "45000"),
    "share.heartbeat.interval.ms": (3, "5000"), "share.record.lock.duration.ms": (3, "30000"),
    "share.delivery.count.limit": (3, "5"), "share.partition.max.record.locks": (3, "2000"),
    "share.auto.offset.reset": (2, "latest"), "share.isolation.level": (2, "read_uncommitted"),
    "share.renew.acknowledge.enable": (1, "true"), "share.assignment.interval.ms": (3, "1000"),
    "streams.session.timeout.ms": (3, "45000"), "streams.heartbeat.interval.ms": (3, "5000"),
    "streams.num.standby.replicas": (3, "0"), "streams.initial.rebalance.delay.ms": (3, "3000"),
    "streams.assignment.interval.ms": (3, "1000"),
}


def test_the_seventeen_group_configs_of_kafka_4_3():
    assert list(GROUP_CONFIGS) == list(KAFKA_4_3)
    assert {n: (int(k.type), k.default_str) for n, k in GROUP_CONFIGS.items()} == KAFKA_4_3
    assert all(k.doc for k in GROUP_CONFIGS.values())


# (overrides, Kafka 4.3.1's message) with a default broker; every one is INVALID_CONFIG
BAD = [
    ({"foo.bar": "1"}, "Unknown group config name: foo.bar"),
    ({"share.record.lock.duration.ms": "500"},
     "Invalid value 500 for configuration share.record.lock.duration.ms: Value must be at least 1000"),
    ({"share.record.lock.duration.ms": "10000"},
     "share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms"),
    ({"share.record.lock.duration.ms": "70000"},
     "share.record.lock.duration.ms must be less than or equal to group.share.max.record.lock.duration.ms"),
    ({"share.record.lock.duration.ms": "abc"},
     "Invalid value abc for configuration share.record.lock.duration.ms: Not a number of type INT"),
    ({"share.delivery.count.limit": "1"},
     "Invalid value 1 for configuration share.delivery.count.limit: Value must be at least 2"),
    ({"share.delivery.count.limit": "11"},
     "share.delivery.count.limit must be less than or equal to group.share.max.delivery.count.limit"),
    ({"share.partition.max.record.locks": "5000"},
     "share.partition.max.record.locks must be less than or equal to group.share.max.partition.max.record.locks"),
    ({"share.isolation.level": "READ_COMMITTED"}, "Invalid value READ_COMMITTED for configuration "
     "share.isolation.level: String must be one of: read_committed, read_uncommitted"),
    ({"share.session.timeout.ms": "5000"},
     "share.session.timeout.ms must be greater than or equal to group.share.min.session.timeout.ms"),
    ({"consumer.session.timeout.ms": "5000"},
     "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"),
    ({"consumer.heartbeat.interval.ms": "1000"},
     "consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms"),
    ({"consumer.assignment.interval.ms": "20000"},
     "consumer.assignment.interval.ms must be less than or equal to group.consumer.max.assignment.interval.ms"),
    ({"streams.num.standby.replicas": "3"},
     "streams.num.standby.replicas must be less than or equal to group.streams.max.standby.replicas"),
    ({"share.renew.acknowledge.enable": "yes"},
     "Invalid value yes for configuration share.renew.acknowledge.enable: Expected value to be either true or false"),
    ({"streams.initial.rebalance.delay.ms": "-1"},
     "Invalid value -1 for configuration streams.initial.rebalance.delay.ms: Value must be at least 0"),
    ({"share.heartbeat.interval.ms": "15000", "share.session.timeout.ms": "15000"},
     "share.session.timeout.ms must be greater than or equal to group.share.min.session.timeout.ms"),
    ({"share.auto.offset.reset": None}, "Null value not supported for group configs: share.auto.offset.reset"),
] + [({"share.auto.offset.reset": v}, f"Invalid value {v} for configuration share.auto.offset.reset: Invalid value "
      f"`{v}` for configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the "
      "format 'by_duration:<PnDTnHnMn.nS>'.")
     for v in ("EARLIEST", "none", "bogus", "", "by_duration", "by_duration:", "by_duration:-PT1H", "by_duration:PT-1H",
               "by_duration:P1Y", "by_duration: PT1H", "by_duration:PT", "by_duration:P1DT",
               "by_duration:PT1.1234567891S")]


@pytest.mark.parametrize("overrides, message", BAD, ids=[m[:60] for _, m in BAD])
def test_kafkas_messages_for_bad_group_configs(overrides, message):
    with pytest.raises(ConfigError) as e:
        validate_group_configs(overrides, BrokerConfig({}))
    assert (e.value.message, e.value.error) == (message, "INVALID_CONFIG")


def test_valid_values_come_back_in_kafkas_string_form():
    ok = {"share.auto.offset.reset": " earliest ", "share.session.timeout.ms": "+50000",
          "share.heartbeat.interval.ms": "15000", "share.renew.acknowledge.enable": " FALSE ",
          "share.isolation.level": "read_committed", "share.delivery.count.limit": "10"}
    assert validate_group_configs(ok, BrokerConfig({})) == {
        "share.auto.offset.reset": "earliest", "share.session.timeout.ms": "50000",
        "share.heartbeat.interval.ms": "15000", "share.renew.acknowledge.enable": "false",
        "share.isolation.level": "read_committed", "share.delivery.count.limit": "10"}
    for v in ("by_duration:PT1H", "by_duration:pt1h", "by_duration:P1DT2H3M4.5S", "by_duration:+PT1H",
              "by_duration:PT1,5S", "by_duration:P-1DT25H", "by_duration:PT0S", "latest"):
        assert validate_group_configs({"share.auto.offset.reset": v}, BrokerConfig({})) == {"share.auto.offset.reset": v}


def test_session_must_exceed_heartbeat_over_the_merged_values():
    cfg = BrokerConfig({"group.share.max.heartbeat.interval.ms": "60000"})
    # the heartbeat alone is in its bounds but not below the broker's (default) session timeout
    with pytest.raises(ConfigError, match="^share.session.timeout.ms must be greater than share.heartbeat.interval.ms$"):
        validate_group_configs({"share.heartbeat.interval.ms": "45000"}, cfg)
    validate_group_configs({"share.heartbeat.interval.ms": "45000", "share.session.timeout.ms": "50000"}, cfg)


def test_the_broker_bounds_decide():
    loose = BrokerConfig({"group.share.min.record.lock.duration.ms": "1000", "group.share.min.session.timeout.ms": "6000",
                          "group.share.min.heartbeat.interval.ms": "500"})
    assert validate_group_configs({"share.record.lock.duration.ms": "1000", "share.session.timeout.ms": "6000",
                                   "share.heartbeat.interval.ms": "500"}, loose)
    tight = BrokerConfig({"group.share.max.delivery.count.limit": "6"})
    with pytest.raises(ConfigError, match="must be less than or equal to group.share.max.delivery.count.limit"):
        validate_group_configs({"share.delivery.count.limit": "7"}, tight)


def test_iso_durations_as_java_parses_them():
    assert parse_iso_duration_ns("PT1H") == 3600 * 10**9
    assert parse_iso_duration_ns("p1dt2h3m4.5s") == (86400 + 7200 + 180 + 4) * 10**9 + 500_000_000
    assert parse_iso_duration_ns("-PT1.5S") == -1_500_000_000
    assert parse_iso_duration_ns("PT-1.5S") == -1_500_000_000
    assert parse_iso_duration_ns("P-1DT25H") == 3600 * 10**9
    for bad in ("", "P", "PT", "P1Y", "PT1.1234567891S", "1H", "P1DT", f"PT{2**63}S"):
        with pytest.raises(ValueError):
            parse_iso_duration_ns(bad)
    r = parse_share_auto_offset_reset("by_duration:PT0.0015S")
    assert (r.strategy, r.duration_ms, str(r)) == ("by_duration", 1, "by_duration:PT0.0015S")
    assert r.start_timestamp(NOW) == NOW - 1
    assert parse_share_auto_offset_reset("earliest") == ShareAutoOffsetReset("earliest", None, "earliest")
    assert parse_share_auto_offset_reset("latest").start_timestamp(NOW) is None


def test_effective_values_default_from_the_broker():
    cfg = BrokerConfig({"group.share.record.lock.duration.ms": "20000", "group.share.delivery.count.limit": "3",
                        "group.consumer.session.timeout.ms": "50000"})
    gc = effective_group_config(cfg, {})
    assert (gc.share_record_lock_duration_ms, gc.share_delivery_count_limit, gc.share_partition_max_record_locks,
            gc.consumer_session_timeout_ms, gc.share_session_timeout_ms, gc.share_heartbeat_interval_ms) == \
        (20000, 3, 2000, 50000, 45000, 5000)
    assert (gc.share_auto_offset_reset.strategy, gc.share_isolation_level, gc.share_read_committed,
            gc.share_renew_acknowledge_enable, gc.streams_initial_rebalance_delay_ms, gc.overridden) == \
        ("latest", "read_uncommitted", False, True, 3000, frozenset())


def test_effective_values_take_the_overrides_capped_into_the_broker_bounds():
    overrides = {"share.auto.offset.reset": "by_duration:PT10M", "share.isolation.level": "read_committed",
                 "share.record.lock.duration.ms": "50000", "share.delivery.count.limit": "8",
                 "share.partition.max.record.locks": "100", "streams.num.standby.replicas": "2"}
    gc = effective_group_config(BrokerConfig({}), overrides, "g")
    assert (gc.share_auto_offset_reset.strategy, gc.share_auto_offset_reset.duration_ms, gc.share_read_committed,
            gc.share_record_lock_duration_ms, gc.share_delivery_count_limit, gc.share_partition_max_record_locks,
            gc.streams_num_standby_replicas, gc.overridden) == \
        ("by_duration", 600_000, True, 50000, 8, 100, 2, frozenset(overrides))
    # the bounds were narrowed after the overrides were set: GroupConfig.evaluate caps them
    narrow = BrokerConfig({"group.share.max.record.lock.duration.ms": "40000", "group.share.max.delivery.count.limit": "6",
                           "group.share.min.partition.max.record.locks": "500", "group.streams.max.standby.replicas": "1"})
    gc = effective_group_config(narrow, overrides, "g")
    assert (gc.share_record_lock_duration_ms, gc.share_delivery_count_limit, gc.share_partition_max_record_locks,
            gc.streams_num_standby_replicas) == (40000, 6, 500, 1)
    # names and values kcompat never writes are ignored, never raised
    gc = effective_group_config(BrokerConfig({}), {"no.such": "1", "share.delivery.count.limit": "x",
                                                   "share.auto.offset.reset": "bogus"})
    assert (gc.share_delivery_count_limit, str(gc.share_auto_offset_reset), gc.overridden) == (5, "latest", frozenset())


def entry(entries, name):
    (e,) = [e for e in entries if e.name == name]
    return e


def test_describe_group_sources_and_synonyms_as_kafka():
    cfg = BrokerConfig({"group.share.record.lock.duration.ms": "20000"})
    entries = describe_group({"share.auto.offset.reset": "earliest", "share.session.timeout.ms": "50000"}, cfg,
                             include_synonyms=True)
    assert [e.name for e in entries] == sorted(KAFKA_4_3)
    assert all(not e.read_only and not e.is_sensitive and e.documentation for e in entries)
    e = entry(entries, "share.auto.offset.reset")
    assert (e.value, e.source, e.config_type, e.synonyms) == ("earliest", GROUP, 2, [
        ConfigSynonym("share.auto.offset.reset", "earliest", GROUP),
        ConfigSynonym("share.auto.offset.reset", "latest", DEFAULT)])
    e = entry(entries, "share.session.timeout.ms")
    assert (e.value, e.source, e.synonyms) == ("50000", GROUP, [
        ConfigSynonym("share.session.timeout.ms", "50000", GROUP),
        ConfigSynonym("group.share.session.timeout.ms", "45000", DEFAULT)])
    e = entry(entries, "share.record.lock.duration.ms")
    assert (e.value, e.source, e.synonyms) == ("20000", STATIC, [
        ConfigSynonym("group.share.record.lock.duration.ms", "20000", STATIC),
        ConfigSynonym("group.share.record.lock.duration.ms", "30000", DEFAULT)])
    e = entry(entries, "share.renew.acknowledge.enable")
    assert (e.value, e.source, e.config_type) == ("true", DEFAULT, 1)
    only = describe_group({}, cfg, keys=["share.isolation.level", "nope"], include_documentation=False)
    assert [(e.name, e.value, e.source, e.synonyms, e.documentation) for e in only] == \
        [("share.isolation.level", "read_uncommitted", DEFAULT, [], None)]


def test_incremental_alter_of_a_group():
    cur = {"share.auto.offset.reset": "earliest"}
    new = apply_incremental(cur, [("share.isolation.level", OP_SET, "read_committed"),
                                  ("share.auto.offset.reset", OP_DELETE, None), ("nope", OP_DELETE, None)],
                            resource="group")
    assert new == {"share.isolation.level": "read_committed"}
    for op, word in ((OP_APPEND, "APPEND"), (OP_SUBTRACT, "SUBTRACT")):
        with pytest.raises(ConfigError) as e:
            apply_incremental(cur, [("share.auto.offset.reset", op, "latest")], resource="group")
        assert (e.value.message, e.value.error) == \
            (f"Can't {word} to key share.auto.offset.reset because its type is not LIST.", "INVALID_CONFIG")


# GroupCoordinatorConfig / ShareGroupConfig refuse these broker configs with these messages (4.3.1)
BAD_BROKER = [
    ({"group.share.heartbeat.interval.ms": "1000"},
     "group.share.heartbeat.interval.ms must be greater than or equal to group.share.min.heartbeat.interval.ms"),
    ({"group.share.heartbeat.interval.ms": "20000"},
     "group.share.heartbeat.interval.ms must be less than or equal to group.share.max.heartbeat.interval.ms"),
    ({"group.share.session.timeout.ms": "30000"},
     "group.share.session.timeout.ms must be greater than or equal to group.share.min.session.timeout.ms"),
    ({"group.share.min.session.timeout.ms": "70000"},
     "group.share.max.session.timeout.ms must be greater than or equal to group.share.min.session.timeout.ms"),
    ({"group.share.min.session.timeout.ms": "1000", "group.share.max.heartbeat.interval.ms": "50000",
      "group.share.heartbeat.interval.ms": "15000", "group.share.session.timeout.ms": "10000"},
     "group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms"),
    ({"group.share.record.lock.duration.ms": "10000"},
     "group.share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms"),
    ({"group.share.record.lock.duration.ms": "100000"},
     "group.share.max.record.lock.duration.ms must be greater than or equal to group.share.record.lock.duration.ms"),
    ({"group.share.delivery.count.limit": "8", "group.share.max.delivery.count.limit": "6"},
     "group.share.max.delivery.count.limit must be greater than or equal to group.share.delivery.count.limit"),
    ({"group.share.delivery.count.limit": "3", "group.share.min.delivery.count.limit": "4"},
     "group.share.delivery.count.limit must be greater than or equal to group.share.min.delivery.count.limit"),
    ({"group.share.partition.max.record.locks": "5000"}, "group.share.max.partition.max.record.locks must be "
     "greater than or equal to group.share.partition.max.record.locks"),
    ({"group.share.min.record.lock.duration.ms": "40000"},
     "Invalid value 40000 for configuration group.share.min.record.lock.duration.ms: Value must be no more than 30000"),
    ({"group.share.max.size": "2000"},
     "Invalid value 2000 for configuration group.share.max.size: Value must be no more than 1000"),
    ({"group.share.max.share.sessions": "100"},
     "group.share.max.share.sessions must be greater than or equal to group.share.max.size"),
    ({"group.share.assignors": "simple,range"}, "group.share.assignors: Class range cannot be found"),
    ({"group.share.assignors": "simple,simple"},
     "group.share.assignors must contain exactly one assignor, but found 2"),
    ({"group.consumer.assignment.interval.ms": "20000"},
     "group.consumer.assignment.interval.ms must be less than or equal to group.consumer.max.assignment.interval.ms"),
    ({"group.share.assignment.interval.ms": "20000"},
     "group.share.assignment.interval.ms must be less than or equal to group.share.max.assignment.interval.ms"),
    ({"group.streams.session.timeout.ms": "1000"},
     "group.streams.session.timeout.ms must be greater than or equal to group.streams.min.session.timeout.ms"),
    ({"group.streams.num.standby.replicas": "5"},
     "group.streams.num.standby.replicas must be less than or equal to group.streams.max.standby.replicas"),
]


@pytest.mark.parametrize("props, message", BAD_BROKER, ids=[m[:60] for _, m in BAD_BROKER])
def test_broker_group_share_configs_are_cross_checked_as_kafka(props, message):
    with pytest.raises(ConfigError) as e:
        BrokerConfig(props)
    assert e.value.message == message


def test_broker_group_share_defaults_of_kafka_4_3():
    cfg = BrokerConfig({})
    assert {k: cfg.get(k) for k in (
        "group.share.session.timeout.ms", "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms",
        "group.share.heartbeat.interval.ms", "group.share.min.heartbeat.interval.ms",
        "group.share.max.heartbeat.interval.ms", "group.share.max.size", "group.share.assignors",
        "group.share.record.lock.duration.ms", "group.share.min.record.lock.duration.ms",
        "group.share.max.record.lock.duration.ms", "group.share.delivery.count.limit",
        "group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit",
        "group.share.partition.max.record.locks", "group.share.min.partition.max.record.locks",
        "group.share.max.partition.max.record.locks", "group.share.max.share.sessions",
        "share.fetch.purgatory.purge.interval.requests")} == {
        "group.share.session.timeout.ms": 45000, "group.share.min.session.timeout.ms": 45000,
        "group.share.max.session.timeout.ms": 60000, "group.share.heartbeat.interval.ms": 5000,
        "group.share.min.heartbeat.interval.ms": 5000, "group.share.max.heartbeat.interval.ms": 15000,
        "group.share.max.size": 200, "group.share.assignors": ["simple"],
        "group.share.record.lock.duration.ms": 30000, "group.share.min.record.lock.duration.ms": 15000,
        "group.share.max.record.lock.duration.ms": 60000, "group.share.delivery.count.limit": 5,
        "group.share.min.delivery.count.limit": 2, "group.share.max.delivery.count.limit": 10,
        "group.share.partition.max.record.locks": 2000, "group.share.min.partition.max.record.locks": 100,
        "group.share.max.partition.max.record.locks": 4000, "group.share.max.share.sessions": 2000,
        "share.fetch.purgatory.purge.interval.requests": 1000}


def test_group_configs_are_config_records_of_type_32_that_outlive_the_group(tmp_path):
    n = Node(tmp_path)
    alter = n.controller.alter_group_configs
    alter("G", {"share.auto.offset.reset": "earliest", "share.delivery.count.limit": "3"}, validate_only=False,
          now_ms=NOW)
    assert n.published[-2:] == [
        ConfigRecord(resource_type=32, resource_name="G", name="share.auto.offset.reset", value="earliest"),
        ConfigRecord(resource_type=32, resource_name="G", name="share.delivery.count.limit", value="3")]
    alter("G", {"share.auto.offset.reset": "earliest"}, validate_only=False, now_ms=NOW)  # replaces
    assert n.published[-1] == ConfigRecord(resource_type=32, resource_name="G", name="share.delivery.count.limit",
                                           value=None)
    before = len(n.published)
    alter("G", {"share.auto.offset.reset": "latest"}, validate_only=True, now_ms=NOW)
    alter("G", {"share.auto.offset.reset": "earliest"}, validate_only=False, now_ms=NOW)   # no change: no record
    assert len(n.published) == before
    with pytest.raises(KafkaError) as e:
        alter("", {"share.auto.offset.reset": "earliest"}, validate_only=False, now_ms=NOW)
    assert (e.value.code, e.value.message) == (ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
    n.reopen()   # replayed from the metadata log
    assert n.image.group_config("G") == {"share.auto.offset.reset": "earliest"}
    assert n.image.group_config("other") == {} and n.image.names_with_configs(RESOURCE_GROUP) == ["G"]
    snapshot = MetadataImage()
    for i, r in enumerate(n.image.to_records()):
        snapshot.apply(r, i)
    assert snapshot.configs[(RESOURCE_GROUP, "G")] == {"share.auto.offset.reset": "earliest"}
    n.close()
