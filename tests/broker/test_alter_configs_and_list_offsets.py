"""AlterConfigs (legacy, whole-set replace), the broker-side checks of BROKER resources both
AlterConfigs APIs share, and ListOffsets duplicate partitions."""

from __future__ import annotations

import uuid

from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic

from kcompat.protocol.messages.alter_configs import AlterConfigsRequest as AQ
from kcompat.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest as IQ
from kcompat.protocol.messages.list_offsets import ListOffsetsRequest
from kcompat.testing import wire


def test_legacy_alter_configs_replaces_the_whole_set(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = f"alter-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1, config={"retention.ms": "1000", "segment.bytes": "1048576"})])[
        topic].result(10)
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={"cleanup.policy": "compact"})
    admin.alter_configs([res])[res].result(10)
    desc = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
    configs = next(iter(desc.values())).result(10)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    # not named in the request -> removed, back to the default (Kafka's AlterConfigs semantics)
    assert configs["retention.ms"].value == "604800000"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    bad = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={"retention.ms": "soon"})
    try:
        admin.alter_configs([bad])[bad].result(10)
        raise AssertionError("an invalid value was accepted")
    except Exception as e:  # KafkaException(INVALID_CONFIG)
        assert "INVALID_CONFIG" in str(e) or "retention.ms" in str(e)


def legacy_broker_change(bootstrap: str, name: str, *configs: tuple[str, str]):
    """AlterConfigs v2 (validate only) of BROKER resource ``name``: [(error code, message)]."""
    resp = wire.call(bootstrap, AQ(validate_only=True, resources=[AQ.AlterConfigsResource(
        resource_type=4, resource_name=name, configs=[AQ.AlterableConfig(name=k, value=v) for k, v in configs])]), 2)
    return [(r.error_code, r.error_message) for r in resp.responses]


def incremental_broker_change(bootstrap: str, name: str, *configs: tuple[str, str]):
    """IncrementalAlterConfigs v1 SETs (validate only) of BROKER resource ``name``: [(error code, message)]."""
    resp = wire.call(bootstrap, IQ(validate_only=True, resources=[IQ.AlterConfigsResource(
        resource_type=4, resource_name=name, configs=[IQ.AlterableConfig(name=k, config_operation=0, value=v)
                                                      for k, v in configs])]), 1)
    return [(r.error_code, r.error_message) for r in resp.responses]


def test_a_broker_refuses_other_brokers_resources_and_cordoned_dirs_it_lacks_on_both_apis(broker):
    """Kafka's ConfigAdminManager.preprocess, before forwarding: a BROKER resource names this
    broker or the cluster default; this broker's cordoned.log.dirs must name its log dirs (KIP-1066).
    The expected answers are what a Kafka 4.3.1 node (id 1) gave to the same requests, legacy
    AlterConfigs v2 and IncrementalAlterConfigs v1 alike."""
    for change in (legacy_broker_change, incremental_broker_change):
        def send(name: str, config: str, value: str):
            return change(broker.bootstrap, name, (config, value))
        assert send("7", "log.cleaner.threads", "2") == [(42, "Unexpected broker id, expected 1, but received 7")]
        assert send("x", "log.cleaner.threads", "2") == [(42, "Node id must be an integer, but it is: x")]
        assert send("1", "cordoned.log.dirs", "/nope") == [(42, (
            "requirement failed: All entries in cordoned.log.dirs must be present in log.dirs or log.dir. "
            "Missing entries : /nope"))]
        assert send("1", "cordoned.log.dirs", "*,/x") == [(42, (
            "requirement failed: When cordoned.log.dirs is set to *, it must not contain other values"))]
        assert send("1", "log.cleaner.threads", "2") == [(0, None)]
        assert send("", "log.cleaner.threads", "2") == [(0, None)]


def test_dynamic_broker_config_refusals_are_invalid_request_with_kafka_43_messages(broker):
    """DynamicBrokerConfig.validateConfigs' refusals reach the client as INVALID_REQUEST
    (ConfigAdminManager.validateBrokerConfigChange wraps the ConfigException), the keys printed as
    Java prints its HashSet: what a Kafka 4.3.1 node (id 1) answered, legacy AlterConfigs v2 and
    IncrementalAlterConfigs v1 alike (kafka-configs showed InvalidRequestException)."""
    bs = broker.bootstrap
    for change in (legacy_broker_change, incremental_broker_change):
        assert change(bs, "1", ("num.partitions", "3")) == [
            (42, "Cannot update these configs dynamically: [num.partitions]")]
        assert change(bs, "", ("num.partitions", "3")) == [
            (42, "Cannot update these configs dynamically: [num.partitions]")]
        assert change(bs, "1", ("num.partitions", "3"), ("log.retention.hours", "5"), ("broker.id", "1")) == [
            (42, "Cannot update these configs dynamically: [log.retention.hours, num.partitions, broker.id]")]
        assert change(bs, "", ("listeners", "PLAINTEXT://x:1")) == [
            (42, "Cannot update these configs at default cluster level, broker id must be specified: [listeners]")]
        assert change(bs, "1", ("ssl.keystore.location", "/x")) == [
            (42, "These security configs can be dynamically updated only per-listener using the listener prefix: "
                 "[ssl.keystore.location]")]
        assert change(bs, "1", ("log.cleaner.threads", "abc")) == [
            (42, "Invalid value abc for configuration log.cleaner.threads: Not a number of type INT")]
        assert change(bs, "1", ("log.cleaner.threads", "-1")) == [
            (42, "Invalid value -1 for configuration log.cleaner.threads: Value must be at least 0")]


def test_list_offsets_duplicate_partition_is_invalid_request(broker):
    part = ListOffsetsRequest.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1)
    req = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name="dup-lo", partitions=[part, part])])
    resp = wire.call(broker.bootstrap, req, 7)
    assert [p.error_code for p in resp.topics[0].partitions] == [42, 42]
