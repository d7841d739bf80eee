"""DescribeConfigs values/sources/synonyms, topic config validation, IncrementalAlterConfigs."""

from __future__ import annotations

import pytest

from kcompat.config import (OP_APPEND, OP_DELETE, OP_SET, OP_SUBTRACT, TOPIC_CONFIGS, BrokerConfig, ConfigError,
                            ConfigSynonym, apply_incremental, describe_broker, describe_topic, log_config_for,
                            validate_topic_configs)

TOPIC, DYN_BROKER, DYN_DEFAULT, STATIC, DEFAULT = 1, 2, 3, 4, 5


def entry(entries, name):
    (e,) = [e for e in entries if e.name == name]
    return e


def topic_entry(overrides, cfg, name):
    return entry(describe_topic(overrides, cfg, include_synonyms=True), name)


# ------------------------------------------------------------------ describe_topic


def test_all_topic_configs_described_sorted_not_read_only():
    entries = describe_topic({}, BrokerConfig({}), include_synonyms=False)
    assert [e.name for e in entries] == sorted(k for k, v in TOPIC_CONFIGS.items() if not v.internal)
    assert all(not e.read_only and not e.is_sensitive and e.synonyms == [] for e in entries)
    assert all(e.documentation for e in entries)


def test_internal_segment_bytes_is_described_only_when_set_and_sizes_the_segments():
    # Kafka 4.3.1 LogConfig.INTERNAL_SEGMENT_BYTES_CONFIG: any INT, shown only when set
    assert "internal.segment.bytes" not in {e.name for e in describe_topic({}, BrokerConfig({}))}
    (e,) = [e for e in describe_topic({"internal.segment.bytes": "-5"}, BrokerConfig({}))
            if e.name == "internal.segment.bytes"]
    assert (e.value, e.source) == ("-5", TOPIC)
    assert log_config_for({"internal.segment.bytes": "20000"}, BrokerConfig({}))["internal.segment.bytes"] == 20000


def test_defaults():
    cfg = BrokerConfig({})
    e = topic_entry({}, cfg, "segment.bytes")
    assert (e.value, e.source, e.config_type) == ("1073741824", DEFAULT, 3)
    assert e.synonyms == [ConfigSynonym("log.segment.bytes", "1073741824", DEFAULT)]
    e = topic_entry({}, cfg, "cleanup.policy")
    assert (e.value, e.config_type, e.is_default) == ("delete", 7, True)
    e = topic_entry({}, cfg, "min.cleanable.dirty.ratio")
    assert (e.value, e.config_type) == ("0.5", 6)
    e = topic_entry({}, cfg, "remote.storage.enable")  # no server default
    assert (e.value, e.source, e.synonyms) == ("false", DEFAULT, [])


def test_retention_ms_default_has_no_synonyms_like_kafka():
    # Kafka's ConfigHelper drops synonyms before the first one named log.retention.ms; the only
    # default in the group is log.retention.hours=168, so the list is empty.
    e = topic_entry({}, BrokerConfig({}), "retention.ms")
    assert (e.value, e.source, e.synonyms) == ("604800000", DEFAULT, [])
    for name in ("segment.ms", "segment.jitter.ms", "flush.ms"):
        assert topic_entry({}, BrokerConfig({}), name).synonyms == []


def test_static_retention_hours_changes_value_but_not_source():
    e = topic_entry({}, BrokerConfig({"log.retention.hours": "1"}), "retention.ms")
    assert (e.value, e.source, e.synonyms) == ("3600000", DEFAULT, [])


def test_static_retention_ms_is_static_broker_config():
    cfg = BrokerConfig({"log.retention.ms": "3600000", "log.retention.hours": "2"})
    e = topic_entry({}, cfg, "retention.ms")
    assert (e.value, e.source) == ("3600000", STATIC)
    assert e.synonyms == [ConfigSynonym("log.retention.ms", "3600000", STATIC),
                          ConfigSynonym("log.retention.hours", "2", STATIC),
                          ConfigSynonym("log.retention.hours", "168", DEFAULT)]


def test_static_broker_synonym():
    cfg = BrokerConfig({"log.segment.bytes": "2097152", "log.cleanup.policy": "compact, delete"})
    e = topic_entry({}, cfg, "segment.bytes")
    assert (e.value, e.source) == ("2097152", STATIC)
    assert e.synonyms == [ConfigSynonym("log.segment.bytes", "2097152", STATIC),
                          ConfigSynonym("log.segment.bytes", "1073741824", DEFAULT)]
    e = topic_entry({}, cfg, "cleanup.policy")
    assert (e.value, e.source) == ("compact,delete", STATIC)
    assert e.synonyms[0] == ConfigSynonym("log.cleanup.policy", "compact, delete", STATIC)
    e = topic_entry({}, BrokerConfig({"message.max.bytes": "5000"}), "max.message.bytes")
    assert (e.value, e.source, e.synonyms[0]) == ("5000", STATIC, ConfigSynonym("message.max.bytes", "5000", STATIC))


def test_topic_override_wins_and_comes_first():
    cfg = BrokerConfig({"log.segment.bytes": "2097152"})
    e = topic_entry({"segment.bytes": "1048576"}, cfg, "segment.bytes")
    assert (e.value, e.source) == ("1048576", TOPIC)
    assert e.synonyms == [ConfigSynonym("segment.bytes", "1048576", TOPIC),
                          ConfigSynonym("log.segment.bytes", "2097152", STATIC),
                          ConfigSynonym("log.segment.bytes", "1073741824", DEFAULT)]
    e = topic_entry({"retention.ms": "1000"}, BrokerConfig({"log.retention.hours": "1"}), "retention.ms")
    assert (e.value, e.source, e.synonyms) == ("1000", TOPIC, [ConfigSynonym("retention.ms", "1000", TOPIC)])
    e = topic_entry({"cleanup.policy": "compact , delete"}, cfg, "cleanup.policy")
    assert e.value == "compact,delete"


def test_dynamic_broker_layers_in_topic_synonyms():
    cfg = BrokerConfig({"log.retention.ms": "100000"})
    cfg.alter_dynamic({"log.retention.ms": "200000"}, per_broker=False)
    cfg.alter_dynamic({"log.retention.ms": "300000"}, per_broker=True)
    e = topic_entry({}, cfg, "retention.ms")
    assert (e.value, e.source) == ("300000", DYN_BROKER)
    assert e.synonyms == [ConfigSynonym("log.retention.ms", "300000", DYN_BROKER),
                          ConfigSynonym("log.retention.ms", "200000", DYN_DEFAULT),
                          ConfigSynonym("log.retention.ms", "100000", STATIC),
                          ConfigSynonym("log.retention.hours", "168", DEFAULT)]


def test_keys_filter_and_no_synonyms():
    entries = describe_topic({}, BrokerConfig({}), include_synonyms=False, keys=["retention.ms", "nope"],
                             include_documentation=False)
    assert [(e.name, e.documentation, e.synonyms) for e in entries] == [("retention.ms", None, [])]


def test_timestamp_bounds_as_kafka_4_3_1():
    """Kafka 4.3.1 (probed): after = 1 hour and before = Long.MAX_VALUE, both DEFAULT_CONFIG with
    their log.* synonym; message.timestamp.difference.max.ms is no topic config any more, and a
    broker's removed log.message.timestamp.difference.max.ms changes neither."""
    for cfg in (BrokerConfig({}), BrokerConfig({"log.message.timestamp.difference.max.ms": "5000"})):
        after = topic_entry({}, cfg, "message.timestamp.after.max.ms")
        assert (after.value, after.source) == ("3600000", DEFAULT)
        assert after.synonyms == [ConfigSynonym("log.message.timestamp.after.max.ms", "3600000", DEFAULT)]
        before = topic_entry({}, cfg, "message.timestamp.before.max.ms")
        assert (before.value, before.source) == (str(2**63 - 1), DEFAULT)
        assert not describe_topic({}, cfg, keys=["message.timestamp.difference.max.ms"])


def test_removed_broker_timestamp_difference_described_as_unknown_when_set():
    """Kafka 4.3.1 (probed): listed only when set, as a key it does not know: value null
    (sensitive), type UNKNOWN, read-only, source and synonyms from where it is set."""
    name = "log.message.timestamp.difference.max.ms"
    assert not describe_broker(BrokerConfig({}), 1, keys=[name])
    cfg = BrokerConfig({name: "1000"})
    cfg.alter_dynamic({name: "2000"}, per_broker=True)
    [e] = describe_broker(cfg, 1, keys=[name], include_synonyms=True)
    assert (e.value, e.source, e.read_only, e.is_sensitive, e.config_type) == (None, DYN_BROKER, True, True, 0)
    assert e.synonyms == [ConfigSynonym(name, None, DYN_BROKER), ConfigSynonym(name, None, STATIC)]


# ------------------------------------------------------------------ log_config_for


def test_log_config_for_typed_values():
    cfg = BrokerConfig({"log.roll.hours": "2", "log.retention.minutes": "10", "log.cleanup.policy": "compact"})
    # an override of a config Kafka 4.0 removed (stored by an older kcompat) is ignored
    lc = log_config_for({"segment.bytes": "1048576", "message.timestamp.difference.max.ms": "77"}, cfg)
    assert lc["segment.bytes"] == 1048576
    assert lc["segment.ms"] == 7200000
    assert lc["retention.ms"] == 600000
    assert lc["cleanup.policy"] == ["compact"]
    assert lc["retention.bytes"] == -1 and lc["flush.ms"] == 2**63 - 1
    assert lc["message.timestamp.type"] == "CreateTime"
    assert lc["message.timestamp.before.max.ms"] == 2**63 - 1 and lc["message.timestamp.after.max.ms"] == 3_600_000
    assert lc["unclean.leader.election.enable"] is False
    assert lc["min.cleanable.dirty.ratio"] == 0.5
    assert set(lc) == set(TOPIC_CONFIGS)


def test_log_config_for_unlimited_retention():
    assert log_config_for({}, BrokerConfig({"log.retention.hours": "-1"}))["retention.ms"] == -1
    assert log_config_for({"retention.ms": "-1"}, BrokerConfig({}))["retention.ms"] == -1


# ------------------------------------------------------------------ validate_topic_configs


def test_validate_normalises():
    out = validate_topic_configs({"retention.ms": " 1000 ", "cleanup.policy": "compact ,delete",
                                  "min.cleanable.dirty.ratio": ".25", "preallocate": "TRUE"})
    assert out == {"retention.ms": "1000", "cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": "0.25",
                   "preallocate": "true"}


@pytest.mark.parametrize("configs,key,fragment", [
    ({"retention.msx": "1"}, "retention.msx", "Unknown topic config name: retention.msx"),
    ({"message.timestamp.difference.max.ms": "1000"}, "message.timestamp.difference.max.ms",   # removed in Kafka 4.0
     "Unknown topic config name: message.timestamp.difference.max.ms"),
    ({"retention.ms": "soon"}, "retention.ms", "Not a number of type LONG"),
    ({"retention.ms": "-2"}, "retention.ms", "Value must be at least -1"),
    ({"segment.bytes": "1048575"}, "segment.bytes", "Value must be at least 1048576"),   # Kafka 4.1+
    ({"internal.segment.bytes": "small"}, "internal.segment.bytes", "Not a number of type INT"),
    ({"cleanup.policy": "purge"}, "cleanup.policy", "String must be one of: compact, delete"),
    ({"message.timestamp.type": "createtime"}, "message.timestamp.type", "String must be one of"),
    ({"compression.type": "brotli"}, "compression.type", "String must be one of"),
    ({"min.cleanable.dirty.ratio": "2"}, "min.cleanable.dirty.ratio", "no more than 1"),
    ({"leader.replication.throttled.replicas": "0-1"}, "leader.replication.throttled.replicas", "literal '*'"),
    ({"retention.bytes": None}, "retention.bytes", "Null value not supported"),
    ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "min.compaction.lag.ms", "conflict"),
    ({"remote.storage.enable": "true"}, "remote.storage.enable", "Tiered Storage"),
    ({"message.format.version": "3.0-IV1"}, "message.format.version",   # removed in Kafka 4.0 (KIP-724)
     "Unknown topic config name: message.format.version"),
    ({"message.downconversion.enable": "true"}, "message.downconversion.enable",
     "Unknown topic config name: message.downconversion.enable"),
])
def test_validate_rejects(configs, key, fragment):
    with pytest.raises(ConfigError) as e:
        validate_topic_configs(configs)
    assert e.value.key == key and fragment in str(e.value) and e.value.error == "INVALID_CONFIG"


def test_validate_accepts_kafka_forms():
    validate_topic_configs({"leader.replication.throttled.replicas": "*", "follower.replication.throttled.replicas": "0:1,1:2",
                            "compression.gzip.level": "-1", "cleanup.policy": ""})


# ------------------------------------------------------------------ apply_incremental


def test_incremental_set_and_delete():
    cur = {"retention.ms": "1000", "segment.ms": "5000"}
    out = apply_incremental(cur, [("retention.ms", OP_SET, "2000"), ("segment.ms", OP_DELETE, None),
                                  ("max.message.bytes", OP_DELETE, None)])
    assert out == {"retention.ms": "2000"} and cur == {"retention.ms": "1000", "segment.ms": "5000"}


def test_incremental_append_starts_from_default():
    assert apply_incremental({}, [("cleanup.policy", OP_APPEND, "compact")]) == {"cleanup.policy": "delete,compact"}
    assert apply_incremental({"cleanup.policy": "compact"}, [("cleanup.policy", OP_APPEND, "compact,delete")]) == \
        {"cleanup.policy": "compact,delete"}
    out = apply_incremental({}, [("leader.replication.throttled.replicas", OP_APPEND, "0:1,1:2")])
    assert out == {"leader.replication.throttled.replicas": "0:1,1:2"}


def test_incremental_subtract():
    out = apply_incremental({"cleanup.policy": "compact,delete"}, [("cleanup.policy", OP_SUBTRACT, "delete")])
    assert out == {"cleanup.policy": "compact"}
    assert apply_incremental({}, [("cleanup.policy", OP_SUBTRACT, "delete")]) == {"cleanup.policy": ""}
    assert apply_incremental({}, [("leader.replication.throttled.replicas", OP_SUBTRACT, "0:1")]) == \
        {"leader.replication.throttled.replicas": ""}


def test_incremental_append_subtract_only_for_lists():
    for op, word in ((OP_APPEND, "APPEND"), (OP_SUBTRACT, "SUBTRACT")):
        with pytest.raises(ConfigError) as e:
            apply_incremental({}, [("retention.ms", op, "1")])
        assert str(e.value) == f"Can't {word} to key retention.ms because its type is not LIST."
        assert e.value.error == "INVALID_CONFIG"


def test_incremental_errors():
    with pytest.raises(ConfigError, match="Unknown topic config name: foo"):
        apply_incremental({}, [("foo", OP_SET, "1")])
    with pytest.raises(ConfigError, match="Unknown topic config name: foo"):
        apply_incremental({}, [("foo", OP_APPEND, "1")])


def test_incremental_delete_of_an_unknown_topic_config_is_accepted():
    """Kafka 4.3.1 (probed) answers DELETE of message.timestamp.difference.max.ms with success:
    how an override left from Kafka 3.x (or an older kcompat) is cleared."""
    stale = {"retention.ms": "1000", "message.timestamp.difference.max.ms": "77"}
    assert apply_incremental(stale, [("message.timestamp.difference.max.ms", OP_DELETE, None)]) == {"retention.ms": "1000"}
    assert apply_incremental({}, [("message.timestamp.difference.max.ms", OP_DELETE, None)]) == {}
    with pytest.raises(ConfigError, match="Not a number"):
        apply_incremental({}, [("retention.ms", OP_SET, "x")])
    with pytest.raises(ConfigError) as e:
        apply_incremental({}, [("retention.ms", OP_SET, "1"), ("retention.ms", OP_DELETE, None)])
    assert e.value.error == "INVALID_REQUEST"
    with pytest.raises(ConfigError) as e:
        apply_incremental({}, [("retention.ms", 7, "1")])
    assert e.value.error == "INVALID_REQUEST"


def test_incremental_for_broker_resource():
    cfg = BrokerConfig({})
    out = apply_incremental(cfg.dynamic_cluster_default, [("log.cleanup.policy", OP_APPEND, "compact")], resource="broker")
    assert out == {"log.cleanup.policy": "delete,compact"}
    cfg.alter_dynamic(out, per_broker=False)
    assert cfg.get("log.cleanup.policy") == ["delete", "compact"]


# ------------------------------------------------------------------ describe_broker


def test_describe_broker_per_broker():
    cfg = BrokerConfig({"num.partitions": "3", "log.retention.ms": "5000", "ssl.keystore.password": "secret"})
    entries = describe_broker(cfg, 1, include_synonyms=True)
    e = entry(entries, "num.partitions")
    assert (e.value, e.source, e.read_only, e.config_type) == ("3", STATIC, True, 3)
    assert e.synonyms == [ConfigSynonym("num.partitions", "3", STATIC), ConfigSynonym("num.partitions", "1", DEFAULT)]
    e = entry(entries, "log.retention.hours")  # synonyms before log.retention.hours are dropped
    assert (e.value, e.source, e.read_only) == ("168", DEFAULT, True)
    assert e.synonyms == [ConfigSynonym("log.retention.hours", "168", DEFAULT)]
    e = entry(entries, "log.retention.ms")
    assert (e.value, e.source, e.read_only) == ("5000", STATIC, False)
    e = entry(entries, "ssl.keystore.password")
    assert (e.value, e.is_sensitive, e.config_type) == (None, True, 9)
    assert e.synonyms == [ConfigSynonym("ssl.keystore.password", None, STATIC)]
    e = entry(entries, "log.dirs")
    assert (e.value, e.source) == (None, DEFAULT)
    assert entry(entries, "log.dir").value == "kcompat-data"
    assert entry(entries, "listeners").value == "PLAINTEXT://127.0.0.1:9092"
    assert entry(entries, "controller.quorum.voters").value == "1@127.0.0.1:9093"
    assert entry(entries, "log.cleaner.io.max.bytes.per.second").value == "1.7976931348623157E308"
    assert not [e for e in entries if e.name == "producer.id.expiration.check.interval.ms"]  # internal


def test_describe_broker_listener_prefixed_keys():
    cfg = BrokerConfig({"listener.name.plaintext.ssl.keystore.location": "/k",
                        "listener.name.plaintext.ssl.keystore.password": "pw", "listener.name.x.custom.thing": "v"})
    entries = describe_broker(cfg, 1, include_synonyms=True)
    e = entry(entries, "listener.name.plaintext.ssl.keystore.location")
    assert (e.value, e.config_type, e.is_sensitive, e.source, e.read_only) == ("/k", 2, False, STATIC, True)
    assert e.synonyms == [ConfigSynonym("listener.name.plaintext.ssl.keystore.location", "/k", STATIC)]
    e = entry(entries, "listener.name.plaintext.ssl.keystore.password")
    assert (e.value, e.is_sensitive, e.config_type) == (None, True, 9)
    e = entry(entries, "listener.name.x.custom.thing")
    assert (e.value, e.is_sensitive, e.config_type) == (None, True, 0)


def test_describe_broker_cluster_default_and_dynamic():
    cfg = BrokerConfig({"message.max.bytes": "2000"})
    cfg.alter_dynamic({"message.max.bytes": "3000"}, per_broker=False)
    (e,) = describe_broker(cfg, "", include_synonyms=True)
    assert (e.name, e.value, e.source) == ("message.max.bytes", "3000", DYN_DEFAULT)
    assert e.synonyms == [ConfigSynonym("message.max.bytes", "3000", DYN_DEFAULT)]
    cfg.alter_dynamic({"message.max.bytes": "4000"}, per_broker=True)
    e = entry(describe_broker(cfg, "1", include_synonyms=True, keys=["message.max.bytes"]), "message.max.bytes")
    assert (e.value, e.source, e.read_only) == ("4000", DYN_BROKER, False)
    assert [s.source for s in e.synonyms] == [DYN_BROKER, DYN_DEFAULT, STATIC, DEFAULT]


def test_describe_broker_wrong_id():
    with pytest.raises(ConfigError) as e:
        describe_broker(BrokerConfig({}), 2)
    assert e.value.error == "INVALID_REQUEST" and "Unexpected broker id" in str(e.value)
    with pytest.raises(ConfigError, match="must be an integer"):
        describe_broker(BrokerConfig({}), "x")
