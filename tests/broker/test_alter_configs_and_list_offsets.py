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


def test_a_broker_refuses_other_brokers_resources_and_cordoned_dirs_it_lacks_on_both_apis(broker):
    """Kafka's ConfigAdminManager.preprocess, before forwarding: a BROKER resource names this
    broker or the cluster default; this broker's cordoned.log.dirs must name its log dirs (KIP-1066).
    The expected answers are what a Kafka 4.3.1 node (id 1) gave to the same requests, legacy
    AlterConfigs v2 and IncrementalAlterConfigs v1 alike."""
    def legacy(name: str, config: str, value: str):
        resp = wire.call(broker.bootstrap, AQ(validate_only=True, resources=[AQ.AlterConfigsResource(
            resource_type=4, resource_name=name, configs=[AQ.AlterableConfig(name=config, value=value)])]), 2)
        return [(r.error_code, r.error_message) for r in resp.responses]

    def incremental(name: str, config: str, value: str):
        resp = wire.call(broker.bootstrap, IQ(validate_only=True, resources=[IQ.AlterConfigsResource(
            resource_type=4, resource_name=name, configs=[IQ.AlterableConfig(name=config, config_operation=0,
                                                                             value=value)])]), 1)
        return [(r.error_code, r.error_message) for r in resp.responses]

    for send in (legacy, incremental):
        assert send("7", "log.cleaner.threads", "2") == [(42, "Unexpected broker id, expected 1, but received 7")]
        assert send("x", "log.cleaner.threads", "2") == [(42, "Node id must be an integer, but it is: x")]
        assert send("1", "cordoned.log.dirs", "/nope") == [(42, (
            "requirement failed: All entries in cordoned.log.dirs must be present in log.dirs or log.dir. "
            "Missing entries : /nope"))]
        assert send("1", "cordoned.log.dirs", "*,/x") == [(42, (
            "requirement failed: When cordoned.log.dirs is set to *, it must not contain other values"))]
        assert send("1", "log.cleaner.threads", "2") == [(0, None)]
        assert send("", "log.cleaner.threads", "2") == [(0, None)]


def test_list_offsets_duplicate_partition_is_invalid_request(broker):
    part = ListOffsetsRequest.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1)
    req = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name="dup-lo", partitions=[part, part])])
    resp = wire.call(broker.bootstrap, req, 7)
    assert [p.error_code for p in resp.topics[0].partitions] == [42, 42]
