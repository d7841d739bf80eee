"""BrokerConfig: loading, overrides, validation, derived values, dynamic configs."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kcompat.config import BROKER_CONFIGS, BrokerConfig, ConfigError, ConfigSource, Listener

# The settings of Kafka 3.9's config/kraft/server.properties (combined broker+controller).
KRAFT_39_SAMPLE = """\
############################# Server Basics #############################
# The role of this server. Setting this puts us in KRaft mode
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:9093
############################# Socket Server Settings #############################
#   FORMAT:
#     listeners = listener_name://host_name:port
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
############################# Log Basics #############################
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
#log.flush.interval.messages=10000
#log.flush.interval.ms=1000
log.retention.hours=168
#log.retention.bytes=1073741824
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""

# Kafka 3.9's config/kraft/reconfig-server.properties uses a dynamic quorum (KIP-853).
RECONFIG_39_SAMPLE = KRAFT_39_SAMPLE.replace(
    "controller.quorum.voters=1@localhost:9093", "controller.quorum.bootstrap.servers=localhost:9093")

# The settings of Kafka 3.x's ZooKeeper-mode config/server.properties.
ZK_3X_SAMPLE = """\
broker.id=0
#listeners=PLAINTEXT://:9092
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kafka-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.retention.check.interval.ms=300000
zookeeper.connect=localhost:2181
zookeeper.connection.timeout.ms=18000
group.initial.rebalance.delay.ms=0
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "server.properties"
    p.write_text(text)
    return p


def make(**props: str) -> BrokerConfig:
    return BrokerConfig({k.replace("_", "."): v for k, v in props.items()})


# ------------------------------------------------------------------ loading


def test_zero_config_defaults():
    cfg = BrokerConfig.load(None)
    assert cfg.listeners == [Listener("PLAINTEXT", "127.0.0.1", 9092)]
    assert cfg.advertised_listeners == [Listener("PLAINTEXT", "127.0.0.1", 9092)]
    assert cfg.log_dirs == [Path("kcompat-data")]
    assert cfg.node_id == 1 and cfg.get("broker.id") == 1
    assert cfg.process_roles == ["broker", "controller"]
    assert [tuple(v) for v in cfg.controller_quorum_voters] == [(1, "127.0.0.1", 9093)]
    assert cfg.get("num.partitions") == 1
    assert cfg.get("default.replication.factor") == 1
    assert cfg.get("log.segment.bytes") == 1073741824
    assert cfg.log_retention_ms == 7 * 24 * 3600 * 1000
    # the one property the zero-config node sets: its HTTP listener (metrics and console)
    assert cfg.static_props == {"http.listeners": "HTTP://127.0.0.1:8090"} and "num.partitions" in cfg.defaulted_keys


def test_kafka_39_sample_loads(tmp_path):
    cfg = BrokerConfig.load(write(tmp_path, KRAFT_39_SAMPLE))
    assert cfg.listeners == [Listener("PLAINTEXT", "0.0.0.0", 9092), Listener("CONTROLLER", "0.0.0.0", 9093)]
    assert cfg.advertised_broker_listeners == [Listener("PLAINTEXT", "localhost", 9092)]
    assert cfg.controller_listener_names == ["CONTROLLER"]
    assert cfg.security_protocol("controller") == "PLAINTEXT"
    assert cfg.inter_broker_listener_name == "PLAINTEXT"
    assert cfg.log_dirs == [Path("/tmp/kraft-combined-logs")]
    assert cfg.metadata_log_dir == Path("/tmp/kraft-combined-logs")
    assert cfg.get("offsets.topic.replication.factor") == 1
    assert cfg.is_static("log.retention.hours") and not cfg.is_static("log.retention.ms")
    assert cfg.source_of("num.partitions") is ConfigSource.STATIC_BROKER_CONFIG
    assert cfg.source_of("fetch.max.bytes") is ConfigSource.DEFAULT_CONFIG


def test_kafka_39_reconfig_sample_loads(tmp_path):
    cfg = BrokerConfig.load(write(tmp_path, RECONFIG_39_SAMPLE))
    assert cfg.controller_quorum_voters == []
    assert cfg.controller_quorum_bootstrap_servers == [("localhost", 9093)]


def test_kafka_zookeeper_sample_loads_in_kraft_defaults(tmp_path):
    cfg = BrokerConfig.load(write(tmp_path, ZK_3X_SAMPLE))
    assert cfg.node_id == 0 and cfg.get("broker.id") == 0
    assert [tuple(v) for v in cfg.controller_quorum_voters] == [(0, "127.0.0.1", 9093)]
    assert cfg.get("group.initial.rebalance.delay.ms") == 0
    assert "zookeeper.connect" in cfg.ignored_keys()


def test_ignored_keys_warned_once(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="kcompat.config"):
        cfg = BrokerConfig.load(write(tmp_path, KRAFT_39_SAMPLE))
        cfg.log_ignored_keys()
    warnings = [r for r in caplog.records if "no effect" in r.getMessage()]
    assert len(warnings) == 1
    assert "num.io.threads" in warnings[0].getMessage()
    assert "num.partitions" not in cfg.ignored_keys()


def test_overrides_beat_file(tmp_path):
    cfg = BrokerConfig.load(write(tmp_path, KRAFT_39_SAMPLE), ["num.partitions=6", "log.retention.ms=1000"])
    assert cfg.get("num.partitions") == 6
    assert cfg.log_retention_ms == 1000


def test_unknown_key_in_file(tmp_path):
    with pytest.raises(ConfigError) as e:
        BrokerConfig.load(write(tmp_path, "num.partition=3\n"))
    assert e.value.key == "num.partition" and "num.partition" in str(e.value)


def test_unknown_key_in_override():
    with pytest.raises(ConfigError, match="log.retention.hour'"):
        BrokerConfig.load(None, ["log.retention.hour=1"])


def test_pass_through_prefixes_are_accepted():
    cfg = make(**{"listener.name.plaintext.ssl.keystore.location": "/x", "rsm.config.x": "1"})
    assert cfg.get("listener.name.plaintext.ssl.keystore.location") == "/x"
    assert cfg.get("rsm.config.x") == "1"
    assert "rsm.config.x" in cfg.ignored_keys()
    # a listener's ssl.* override acts as ssl.* does (kcompat.security.ssl_context): not "ignored"
    assert "listener.name.plaintext.ssl.keystore.location" not in cfg.ignored_keys()


@pytest.mark.parametrize("key,value,fragment", [
    ("num.partitions", "three", "Not a number of type INT"),
    ("num.partitions", "0", "Value must be at least 1"),
    ("auto.create.topics.enable", "yes", "either true or false"),
    ("log.message.timestamp.type", "create", "String must be one of"),
    ("compression.type", "brotli", "String must be one of"),
    ("log.cleanup.policy", "delete,archive", "String must be one of"),
    ("offsets.topic.replication.factor", "40000", "SHORT"),
    ("log.segment.bytes", "1048575", "Value must be at least 1048576"),
    ("compression.gzip.level", "0", "at least 1"),
])
def test_invalid_values_name_the_key(key, value, fragment):
    with pytest.raises(ConfigError) as e:
        BrokerConfig.load(None, [f"{key}={value}"])
    assert e.value.key == key
    assert key in str(e.value) and fragment in str(e.value)


def test_values_are_trimmed():
    assert make(num_partitions=" 4  ").get("num.partitions") == 4


def test_snake_case_attribute_access():
    cfg = make(num_partitions="4")
    assert cfg.num_partitions == 4
    assert cfg.log_retention_check_interval_ms == 300000
    with pytest.raises(AttributeError):
        cfg.not_a_config


# ------------------------------------------------------------------ precedence of synonym groups


@pytest.mark.parametrize("props,expected", [
    ({}, 168 * 3600000),
    ({"log.retention.hours": "1"}, 3600000),
    ({"log.retention.hours": "1", "log.retention.minutes": "5"}, 300000),
    ({"log.retention.hours": "1", "log.retention.minutes": "5", "log.retention.ms": "1234"}, 1234),
    ({"log.retention.ms": "-1"}, -1),
    ({"log.retention.ms": "-5"}, -1),
    ({"log.retention.hours": "-1"}, -1),
    ({"log.retention.minutes": "-3", "log.retention.hours": "2"}, -1),
])
def test_retention_precedence(props, expected):
    assert BrokerConfig(props).log_retention_ms == expected


def test_retention_zero_is_rejected():
    with pytest.raises(ConfigError, match="log.retention.ms must be unlimited"):
        BrokerConfig({"log.retention.ms": "0"})


def test_roll_and_jitter_precedence():
    assert BrokerConfig({}).log_roll_ms == 604800000
    assert BrokerConfig({"log.roll.hours": "2"}).log_roll_ms == 7200000
    assert BrokerConfig({"log.roll.hours": "2", "log.roll.ms": "500"}).log_roll_ms == 500
    assert BrokerConfig({"log.roll.jitter.hours": "1"}).log_roll_jitter_ms == 3600000
    assert BrokerConfig({"log.roll.jitter.hours": "1", "log.roll.jitter.ms": "7"}).log_roll_jitter_ms == 7
    with pytest.raises(ConfigError, match="log.roll.hours"):
        BrokerConfig({"log.roll.hours": "0"})


def test_flush_interval_falls_back_to_scheduler():
    assert BrokerConfig({}).log_flush_interval_ms == 2**63 - 1
    assert BrokerConfig({"log.flush.scheduler.interval.ms": "50"}).log_flush_interval_ms == 50
    assert BrokerConfig({"log.flush.scheduler.interval.ms": "50", "log.flush.interval.ms": "9"}).log_flush_interval_ms == 9


def test_log_dirs_precedence():
    assert BrokerConfig({"log.dir": "/a"}).log_dirs == [Path("/a")]
    assert BrokerConfig({"log.dir": "/a", "log.dirs": "/b, /c"}).log_dirs == [Path("/b"), Path("/c")]
    assert BrokerConfig({"log.dirs": "/b", "metadata.log.dir": "/m"}).metadata_log_dir == Path("/m")


def test_timestamp_bounds_default_as_kafka_4():
    cfg = BrokerConfig({})
    assert cfg.get("log.message.timestamp.after.max.ms") == 3_600_000
    assert cfg.get("log.message.timestamp.before.max.ms") == 2**63 - 1


def test_removed_timestamp_difference_still_loads_with_no_effect():
    """Kafka 4.0 removed log.message.timestamp.difference.max.ms (KAFKA-17997): a 3.9
    server.properties setting it loads (Kafka 4.3 warns), the bounds keep their defaults, and
    the key is named among those with no effect."""
    cfg = BrokerConfig({"log.message.timestamp.difference.max.ms": "1000"})
    assert cfg.get("log.message.timestamp.after.max.ms") == 3_600_000
    assert cfg.get("log.message.timestamp.before.max.ms") == 2**63 - 1
    assert "log.message.timestamp.difference.max.ms" in cfg.ignored_keys()
    assert "log.message.timestamp.difference.max.ms" not in BROKER_CONFIGS
    # any value, as Kafka 4.3 takes it dynamically
    cfg.alter_dynamic({"log.message.timestamp.difference.max.ms": "abc"}, per_broker=True)
    assert cfg.get("log.message.timestamp.difference.max.ms") == "abc"


def test_default_voters_follow_node_id_and_controller_listener():
    assert BrokerConfig({"node.id": "7"}).get("controller.quorum.voters") == ["7@127.0.0.1:9093"]
    cfg = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://:9095",
                        "controller.listener.names": "CONTROLLER"})
    assert cfg.get("controller.quorum.voters") == ["1@127.0.0.1:9095"]
    assert cfg.source_of("controller.quorum.voters") is ConfigSource.DEFAULT_CONFIG
    cfg = BrokerConfig({"controller.quorum.bootstrap.servers": "localhost:9093"})
    assert cfg.controller_quorum_voters == []


def test_node_id_and_broker_id_are_synonyms():
    assert BrokerConfig({"broker.id": "3", "controller.quorum.voters": "3@h:9093"}).node_id == 3
    assert BrokerConfig({"node.id": "3", "controller.quorum.voters": "3@h:9093"}).get("broker.id") == 3
    with pytest.raises(ConfigError, match="node.id"):
        BrokerConfig({"node.id": "1", "broker.id": "2"})


# ------------------------------------------------------------------ listeners


def test_listeners_empty_host_and_port_zero():
    cfg = make(listeners="PLAINTEXT://:0", advertised_listeners="PLAINTEXT://localhost:0")
    assert cfg.listeners == [Listener("PLAINTEXT", "0.0.0.0", 0)]
    assert cfg.advertised_listeners == [Listener("PLAINTEXT", "localhost", 0)]


def test_listeners_ipv6_and_names_uppercased():
    cfg = make(listeners="plaintext://[::1]:9092,INTERNAL://127.0.0.1:9094",
               listener_security_protocol_map="PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT")
    assert cfg.listeners == [Listener("PLAINTEXT", "::1", 9092), Listener("INTERNAL", "127.0.0.1", 9094)]


def test_two_port_zero_listeners_allowed():
    make(listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", advertised_listeners="PLAINTEXT://localhost:0")


def test_advertised_defaults_to_listeners_with_hostname_for_empty_host():
    cfg = make(listeners="PLAINTEXT://:9092")
    (ep,) = cfg.advertised_listeners
    assert ep.name == "PLAINTEXT" and ep.port == 9092 and ep.host not in ("", "0.0.0.0")


@pytest.mark.parametrize("props,fragment", [
    ({"listeners": "PLAINTEXT:/127.0.0.1:9092"}, "Unable to parse"),
    ({"listeners": "PLAINTEXT://127.0.0.1"}, "Unable to parse"),
    ({"listeners": "PLAINTEXT://127.0.0.1:70000"}, "Invalid port"),
    ({"listeners": "PLAINTEXT://a:9092,PLAINTEXT://b:9093"}, "different name"),
    ({"listeners": "PLAINTEXT://a:9092,SSL://b:9092"}, "different port"),
    ({"listeners": "FOO://a:9092"}, "No security protocol defined for listener FOO"),
    ({"listeners": "PLAINTEXT://0.0.0.0:9092"}, "0.0.0.0"),
    ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "nonroutable"),
    ({"advertised.listeners": "SSL://h:9092"}, "subset"),
    ({"listener.security.protocol.map": "PLAINTEXT:TLS"}, "Invalid security protocol"),
    ({"inter.broker.listener.name": "SSL"}, "inter.broker.listener.name must be a listener name"),
    ({"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"}, "Only one of"),
])
def test_bad_listener_configs(props, fragment):
    with pytest.raises(ConfigError, match=fragment):
        BrokerConfig(props)


def test_ipv4_and_ipv6_may_share_a_port():
    cfg = make(listeners="PLAINTEXT://127.0.0.1:9092,SSL://[::1]:9092", advertised_listeners="PLAINTEXT://h:9092")
    assert len(cfg.listeners) == 2


def test_controller_listener_rules():
    base = {"listeners": "PLAINTEXT://:9092,CONTROLLER://:9093", "advertised.listeners": "PLAINTEXT://h:9092"}
    cfg = BrokerConfig({**base, "controller.listener.names": "CONTROLLER"})
    assert cfg.listener_security_protocol_map["CONTROLLER"] == "PLAINTEXT"
    with pytest.raises(ConfigError, match="controller.listener.names must contain at least one value appearing"):
        BrokerConfig({**base, "controller.listener.names": "OTHER", "listener.security.protocol.map":
                      "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"})
    with pytest.raises(ConfigError, match="controller.listener.names must contain at least one value"):
        BrokerConfig({"process.roles": "broker", "controller.quorum.voters": "1@c:9093"})
    with pytest.raises(ConfigError, match="inter-broker"):
        BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:9092", "controller.listener.names": "PLAINTEXT"})


def test_broker_only_node():
    cfg = BrokerConfig({"process.roles": "broker", "node.id": "2", "controller.quorum.voters": "1@c:9093",
                        "controller.listener.names": "CONTROLLER", "listeners": "PLAINTEXT://127.0.0.1:9092"})
    assert cfg.process_roles == ["broker"] and cfg.security_protocol("CONTROLLER") == "PLAINTEXT"


@pytest.mark.parametrize("props,fragment", [
    ({"process.roles": ""}, "KRaft"),
    ({"process.roles": "broker,broker"}, "Duplicate role"),
    ({"process.roles": "zookeeper"}, "String must be one of: broker, controller"),
    ({"controller.quorum.voters": "2@h:9093"}, "must be included in the set of voters"),
    ({"controller.quorum.voters": ""}, "either controller.quorum.bootstrap.servers"),
    ({"controller.quorum.voters": "1-h:9093"}, "{id}@{host}:{port}"),
    ({"controller.quorum.voters": "x@h:9093"}, "node id"),
    ({"controller.quorum.bootstrap.servers": "h"}, "controller.quorum.bootstrap.servers"),
    ({"node.id": "-1"}, "node.id"),
    ({"replica.fetch.wait.max.ms": "40000"}, "replica.socket.timeout.ms"),
    ({"log.cleaner.dedupe.buffer.size": "1000"}, "1MB per cleaner thread"),
    ({"log.dirs": " , "}, "At least one log directory"),
])
def test_cross_config_validation(props, fragment):
    with pytest.raises(ConfigError) as e:
        BrokerConfig(props)
    assert fragment in str(e.value)


# ------------------------------------------------------------------ dynamic configs


def test_dynamic_resolution_order():
    cfg = BrokerConfig({"log.retention.hours": "5", "message.max.bytes": "2000"})
    assert cfg.log_retention_ms == 5 * 3600000 and cfg.source_of("message.max.bytes") is ConfigSource.STATIC_BROKER_CONFIG
    cfg.alter_dynamic({"message.max.bytes": "3000", "log.retention.ms": "60000"}, per_broker=False)
    assert cfg.get("message.max.bytes") == 3000 and cfg.log_retention_ms == 60000
    assert cfg.source_of("message.max.bytes") is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    cfg.alter_dynamic({"message.max.bytes": "4000"}, per_broker=True)
    assert cfg.get("message.max.bytes") == 4000
    assert cfg.source_of("message.max.bytes") is ConfigSource.DYNAMIC_BROKER_CONFIG
    cfg.alter_dynamic({"message.max.bytes": None}, per_broker=True)
    assert cfg.get("message.max.bytes") == 3000
    cfg.alter_dynamic({"message.max.bytes": None, "log.retention.ms": None}, per_broker=False)
    assert cfg.get("message.max.bytes") == 2000 and cfg.log_retention_ms == 5 * 3600000


def test_dynamic_read_only_rejected_like_kafka():
    cfg = BrokerConfig({})
    with pytest.raises(ConfigError) as e:
        cfg.validate_dynamic_update({"log.retention.hours": "1", "num.partitions": "2"}, per_broker=True)
    assert str(e.value) == "Cannot update these configs dynamically: [log.retention.hours, num.partitions]"
    assert cfg.dynamic_per_broker == {}


def test_dynamic_per_broker_only_config_at_cluster_level():
    cfg = BrokerConfig({})
    with pytest.raises(ConfigError, match="broker id must be specified: \\[listeners\\]"):
        cfg.validate_dynamic_update({"listeners": "PLAINTEXT://127.0.0.1:9093"}, per_broker=False)
    cfg.validate_dynamic_update({"listeners": "PLAINTEXT://127.0.0.1:9093"}, per_broker=True)


def test_dynamic_security_config_needs_listener_prefix():
    cfg = BrokerConfig({})
    with pytest.raises(ConfigError, match="only per-listener"):
        cfg.validate_dynamic_update({"ssl.keystore.location": "/k"}, per_broker=True)
    cfg.validate_dynamic_update({"listener.name.plaintext.ssl.keystore.location": "/k"}, per_broker=True)


def test_dynamic_type_errors_and_unknown_keys():
    cfg = BrokerConfig({})
    with pytest.raises(ConfigError, match="message.max.bytes"):
        cfg.validate_dynamic_update({"message.max.bytes": "big"}, per_broker=False)
    with pytest.raises(ConfigError, match="Unknown broker config"):
        cfg.validate_dynamic_update({"message.max.byte": "1"}, per_broker=False)


def test_dynamic_update_rolled_back_when_result_invalid():
    cfg = BrokerConfig({})
    with pytest.raises(ConfigError, match="No security protocol"):
        cfg.alter_dynamic({"listeners": "FOO://127.0.0.1:9092"}, per_broker=True)
    assert cfg.dynamic_per_broker == {} and cfg.get("listeners") == "PLAINTEXT://127.0.0.1:9092"


def test_set_dynamic_replaces_layers():
    cfg = BrokerConfig({})
    cfg.set_dynamic(per_broker={"log.cleaner.threads": "2"}, cluster_default={"log.cleaner.threads": "3"})
    assert cfg.get("log.cleaner.threads") == 2


def test_replica_selector_class_is_kafkas_rack_aware_selector_or_nothing():
    """KIP-392: kcompat has Kafka's one ReplicaSelector; any other class fails the start as a class
    Kafka cannot load would; broker.rack now has an effect (no 'accepted without effect' warning)."""
    from kcompat.isr.replica_selector import RACK_AWARE_SELECTOR
    cfg = BrokerConfig.load(None, [f"replica.selector.class={RACK_AWARE_SELECTOR}", "broker.rack=rack-a"])
    assert cfg.get("replica.selector.class") == RACK_AWARE_SELECTOR and cfg.get("broker.rack") == "rack-a"
    assert cfg.ignored_keys() == []
    assert BrokerConfig.load(None, []).get("replica.selector.class") is None
    with pytest.raises(ConfigError, match="replica.selector.class"):
        BrokerConfig.load(None, ["replica.selector.class=com.example.NearestSelector"])


@pytest.mark.parametrize("props,fragment", [
    ({"group.consumer.heartbeat.interval.ms": "500"},
     "group.consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms"),
    ({"group.consumer.session.timeout.ms": "90000"},
     "group.consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"),
    ({"group.consumer.min.session.timeout.ms": "1000", "group.consumer.session.timeout.ms": "1000",
      "group.consumer.min.heartbeat.interval.ms": "1000"},
     "group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms"),
])
def test_consumer_group_protocol_bounds_as_kafka(props, fragment):
    with pytest.raises(ConfigError, match=fragment):
        BrokerConfig(props)
    ok = BrokerConfig({"group.consumer.heartbeat.interval.ms": "500",
                       "group.consumer.min.heartbeat.interval.ms": "500"})
    assert ok.get("group.consumer.heartbeat.interval.ms") == 500 and not ok.ignored_keys()
