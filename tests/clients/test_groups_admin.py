"""Consumer-group administration against a real kcompat process, through confluent-kafka's AdminClient
and kafka-python's KafkaAdminClient: list groups (with a state filter), describe them (state,
assignor, members with their client id, host and assignment), list committed offsets, delete groups
(NON_EMPTY_GROUP while members are active; deleted when empty: then Dead, unlisted, no offsets),
delete committed offsets (OffsetDelete: GROUP_SUBSCRIBED_TO_TOPIC while active members subscribe to
the topic, as Kafka; removed when empty) and alter them (OffsetCommit from the admin client).

confluent-kafka 2.16.1's AdminClient has no delete_consumer_group_offsets (librdkafka has it; the
Python binding does not expose it): OffsetDelete is exercised through kafka-python.
"""

from __future__ import annotations

import confluent_kafka as ck
import kafka.errors as kerr
import pytest
from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaError, KafkaException
from kafka import KafkaAdminClient
from kafka import TopicPartition as KpTopicPartition

from tests.clients.common import ck_admin, topic_name
from tests.clients.test_groups_common import (
    Members, create_topic, end_offsets, produce, unique, wait_balanced, wait_committed, wait_read,
)

PARTITIONS = 6
TIMEOUT = 20


@pytest.fixture
def kadmin(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    yield admin
    admin.close()


def _active_group(ms: Members, kind: str, bootstrap: str, group: str, topic: str):
    members = [ms.new(kind, f"m{i}", bootstrap, group, topic) for i in range(2)]
    wait_balanced(members, PARTITIONS)
    sent = produce(bootstrap, topic, 300, "admin", partitions=PARTITIONS)
    wait_read(sent, members)
    ends = end_offsets(sent)
    wait_committed(members, ends)
    return members, ends


def test_confluent_admin_client(broker, request):
    topic = topic_name(request)
    group, other = unique("admin-ck"), unique("admin-ck-other")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    admin = ck_admin(broker.bootstrap)

    def listed(states=None) -> dict[str, ConsumerGroupState]:
        kw = {"states": states} if states is not None else {}
        res = admin.list_consumer_groups(request_timeout=15, **kw).result(timeout=TIMEOUT)
        assert not res.errors, res.errors
        return {g.group_id: g.state for g in res.valid}

    def describe(g: str):
        return admin.describe_consumer_groups([g], request_timeout=15)[g].result(timeout=TIMEOUT)

    def offsets(g: str, partitions=None) -> dict[int, int]:
        req = ConsumerGroupTopicPartitions(g, None if partitions is None else
                                           [ck.TopicPartition(topic, p) for p in partitions])
        res = admin.list_consumer_group_offsets([req], request_timeout=15)[g].result(timeout=TIMEOUT)
        return {tp.partition: tp.offset for tp in res.topic_partitions if tp.offset >= 0}

    with Members() as ms:
        members, ends = _active_group(ms, "confluent", broker.bootstrap, group, topic)
        # a second group with offsets only (commits without membership): Empty
        res = admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(other, [ck.TopicPartition(topic, 0, 1)])], request_timeout=15)
        res[other].result(timeout=TIMEOUT)

        assert listed()[group] == ConsumerGroupState.STABLE and listed()[other] == ConsumerGroupState.EMPTY
        simple = {g.group_id: g.is_simple_consumer_group
                  for g in admin.list_consumer_groups(request_timeout=15).result(timeout=TIMEOUT).valid}
        assert (simple[group], simple[other]) == (False, True)  # protocol type "consumer" vs none
        assert group in listed({ConsumerGroupState.STABLE}) and other not in listed({ConsumerGroupState.STABLE})
        assert other in listed({ConsumerGroupState.EMPTY}) and group not in listed({ConsumerGroupState.EMPTY})

        d = describe(group)
        assert (d.group_id, d.state, d.partition_assignor, d.is_simple_consumer_group) == (
            group, ConsumerGroupState.STABLE, "range", False)
        assert d.coordinator.id == 1
        by_id = {m.member_id: m for m in d.members}
        assert set(by_id) == {m.member_ids[-1] for m in members}
        for m in members:
            desc = by_id[m.member_ids[-1]]
            assert (desc.client_id, desc.host, desc.group_instance_id) == ("rdkafka", "/127.0.0.1", None)
            assert {(tp.topic, tp.partition) for tp in desc.assignment.topic_partitions} == {
                (topic, p) for p in m.owned_now()}
        assert offsets(group) == ends
        assert offsets(group, [0, 1]) == {p: ends[p] for p in (0, 1)}

        with pytest.raises(KafkaException) as e:
            admin.delete_consumer_groups([group], request_timeout=15)[group].result(timeout=TIMEOUT)
        assert e.value.args[0].code() == KafkaError.NON_EMPTY_GROUP
        assert offsets(group) == ends
        ms.stop(*members)

    assert listed({ConsumerGroupState.EMPTY}).keys() >= {group, other}
    d = describe(group)
    assert (d.state, d.members) == (ConsumerGroupState.EMPTY, [])
    # the admin client commits for an empty group
    res = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [ck.TopicPartition(topic, 0, 1)])], request_timeout=15)
    res[group].result(timeout=TIMEOUT)
    assert offsets(group) == {**ends, 0: 1}

    for g in (group, other):
        assert admin.delete_consumer_groups([g], request_timeout=15)[g].result(timeout=TIMEOUT) is None
    assert not listed().keys() & {group, other}
    assert describe(group).state == ConsumerGroupState.DEAD
    assert offsets(group) == {} and offsets(group, [0]) == {}
    with pytest.raises(KafkaException) as e:
        admin.delete_consumer_groups([group], request_timeout=15)[group].result(timeout=TIMEOUT)
    assert e.value.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND


def test_kafka_python_admin_client(broker, kadmin, request):
    topic = topic_name(request)
    group = unique("admin-kp")
    create_topic(broker.bootstrap, topic, PARTITIONS)

    def offsets() -> dict[int, int]:
        return {tp.partition: om.offset for tp, om in kadmin.list_group_offsets({group: None})[group].items()}

    with Members() as ms:
        members, ends = _active_group(ms, "kafka-python", broker.bootstrap, group, topic)
        assert {"group_id": group, "protocol_type": "consumer", "group_state": "Stable", "group_type": "classic"} in (
            kadmin.list_groups())
        assert group in {g["group_id"] for g in kadmin.list_groups(states_filter=["Stable"])}
        assert group not in {g["group_id"] for g in kadmin.list_groups(states_filter=["Empty"])}

        d = kadmin.describe_groups([group])[group]
        assert (d["group_state"], d["protocol_type"], d["protocol_data"], d["error"]) == (
            "Stable", "consumer", "range", None)
        by_id = {m["member_id"]: m for m in d["members"]}
        assert set(by_id) == {m.member_ids[-1] for m in members}
        for m in members:
            desc = by_id[m.member_ids[-1]]
            assert desc["client_host"] == "/127.0.0.1" and desc["client_id"].startswith("kafka-python")
            assert desc["member_metadata"]["topics"] == [topic]
            assert [(a["topic"], sorted(a["partitions"])) for a in desc["member_assignment"]["assigned_partitions"]] == [
                (topic, sorted(m.owned_now()))]
        assert offsets() == ends

        assert kadmin.delete_groups([group]) == {group: "NonEmptyGroupError"}
        # members subscribe to the topic: its offsets cannot be deleted while they are active
        assert kadmin.delete_group_offsets(group, [KpTopicPartition(topic, 0)]) == {
            KpTopicPartition(topic, 0): kerr.GroupSubscribedToTopicError}
        assert offsets() == ends
        ms.stop(*members)

    assert group in {g["group_id"] for g in kadmin.list_groups(states_filter=["Empty"])}
    d = kadmin.describe_groups([group])[group]
    assert (d["group_state"], d["members"]) == ("Empty", [])
    res = kadmin.delete_group_offsets(group, [KpTopicPartition(topic, 0), KpTopicPartition(topic, 1),
                                              KpTopicPartition(topic, PARTITIONS)])
    assert res == {KpTopicPartition(topic, 0): kerr.NoError, KpTopicPartition(topic, 1): kerr.NoError,
                   KpTopicPartition(topic, PARTITIONS): kerr.UnknownTopicOrPartitionError}
    assert offsets() == {p: off for p, off in ends.items() if p not in (0, 1)}

    assert kadmin.delete_groups([group]) == {group: "OK"}
    assert group not in {g["group_id"] for g in kadmin.list_groups()}
    assert kadmin.describe_groups([group])[group]["group_state"] == "Dead"
    assert offsets() == {}
    assert kadmin.delete_groups([group]) == {group: "GroupIdNotFoundError"}
