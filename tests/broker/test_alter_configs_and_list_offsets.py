"""AlterConfigs (legacy, whole-set replace) and ListOffsets duplicate partitions."""

from __future__ import annotations

import uuid

from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic

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


def test_list_offsets_duplicate_partition_is_invalid_request(broker):
    part = ListOffsetsRequest.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1)
    req = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name="dup-lo", partitions=[part, part])])
    resp = wire.call(broker.bootstrap, req, 7)
    assert [p.error_code for p in resp.topics[0].partitions] == [42, 42]
