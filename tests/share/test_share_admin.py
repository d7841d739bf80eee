"""Kafka 4.3.1's share-group tools against kcompat processes (KIP-932 admin):
``kafka-share-groups.sh`` (``ShareGroupCommand``) --list, --describe (offsets with start offset
and lag, --members, --state), --reset-offsets (--to-earliest, --to-latest, --to-datetime; only on an
empty group), --delete-offsets and --delete, with share groups consumed by Kafka 4.3.1's
``KafkaShareConsumer`` (tests/share/java/ShareClient.java), Kafka's error answers on the wire
(DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets, DeleteGroups), and
``kafka-console-share-consumer.sh`` (``ConsoleShareConsumer``) reading N records, and the lag of
partitions led by other brokers of a cluster."""

from __future__ import annotations

import uuid
from pathlib import Path

import confluent_kafka as ck
import pytest

from conformance import maven
from conformance.clients.java import JavaTools
from kcompat.protocol.errors import ErrorCode as E
from kcompat.protocol.messages.alter_share_group_offsets import AlterShareGroupOffsetsRequest as AQ
from kcompat.protocol.messages.delete_groups import DeleteGroupsRequest
from kcompat.protocol.messages.delete_share_group_offsets import DeleteShareGroupOffsetsRequest as DQ
from kcompat.protocol.messages.describe_share_group_offsets import DescribeShareGroupOffsetsRequest as DSQ
from kcompat.protocol.messages.find_coordinator import FindCoordinatorRequest
from kcompat.protocol.messages.list_groups import ListGroupsRequest
from kcompat.protocol.messages.metadata import MetadataRequest
from kcompat.protocol.messages.read_share_group_state_summary import ReadShareGroupStateSummaryRequest as RSQ
from kcompat.testing import Broker, Cluster
from kcompat.testing.process import wait_for
from kcompat.testing.wire import call
from tests.share.test_share_consumers import BROKER_CONFIGS, ShareConsumer, new_topic, produce, set_group_configs

SHARE_GROUPS = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"
CONSOLE_SHARE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleShareConsumer"
EARLIEST = {"share.auto.offset.reset": "earliest"}


@pytest.fixture(scope="module")
def lib():
    return maven.resolve_kafka("4.3.1")


@pytest.fixture(scope="module")
def broker():
    with Broker(BROKER_CONFIGS) as b:
        yield b


@pytest.fixture
def tools(lib, tmp_path):
    return JavaTools(str(lib), tmp_path)


def share_groups(tools: JavaTools, b, *args: str):
    """kafka-share-groups.sh: the completed process (stdout, stderr, exit status)."""
    return tools.run(SHARE_GROUPS, ["--bootstrap-server", b.bootstrap_servers, *args], check=False, timeout=120)


def table(stdout: str, header: str) -> list[list[str]]:
    """The rows (split on blanks) of the table whose header line starts with ``header``."""
    lines = [line.split() for line in stdout.splitlines() if line.strip()]
    start = next(i for i, cells in enumerate(lines) if cells and cells[0] == header)
    return lines[start + 1:]


def offsets_table(tools, b, group: str) -> dict[tuple[str, int], tuple[str, str]]:
    """--describe --offsets: {(topic, partition): (START-OFFSET, LAG)}."""
    r = share_groups(tools, b, "--describe", "--group", group, "--offsets")
    assert r.returncode == 0, r.summary()
    return {(row[1], int(row[2])): (row[3], row[4]) for row in table(r.stdout, "GROUP")}


def share_group_states(b) -> dict[str, str]:
    resp = call(b.bootstrap_servers, ListGroupsRequest(states_filter=[], types_filter=["share"]), 5)
    assert resp.error_code == 0
    return {g.group_id: g.group_state for g in resp.groups}


def wait_empty(b, group: str) -> None:
    """The consumers left: the group is Empty (their leave heartbeats are in)."""
    wait_for(lambda: share_group_states(b).get(group) == "Empty", 60, what=f"share group {group} empty")


def ends(b, topic: str, partitions: int) -> dict[int, int]:
    c = ck.Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "ends"})
    try:
        return {p: c.get_watermark_offsets(ck.TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)}
    finally:
        c.close()


def consume_all(lib, b, group: str, topic: str, tmp_path: Path, name: str) -> ShareConsumer:
    """A share consumer that accepts every record until none came for 6 s. Every caller expects
    records, so the first may take up to 150 s: on a fresh broker the consumer's first
    FindCoordinator creates ``__consumer_offsets`` and the group is joined only then, which on a
    loaded machine took longer than 6 s (the group did not even exist when a 6 s first wait ran
    out, and the test saw no records)."""
    c = ShareConsumer(lib, b.bootstrap_servers, group, topic, "accept", idle_ms=6_000, first_idle_ms=150_000,
                      workdir=tmp_path, name=name)
    c.wait_done(180)
    wait_empty(b, group)
    return c


def summary(b, group: str, topic: str, partition: int):
    """ReadShareGroupStateSummary of one share partition, from the share coordinator."""
    tid = call(b.bootstrap_servers, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                                    allow_auto_topic_creation=False), 12).topics[0].topic_id
    resp = call(b.bootstrap_servers, RSQ(group_id=group, topics=[RSQ.ReadStateSummaryData(
        topic_id=tid, partitions=[RSQ.PartitionData(partition=partition, leader_epoch=0)])]), 1)
    return resp.results[0].partitions[0]


def test_describe_reset_to_earliest_and_a_new_consumer_reads_everything_again(lib, tools, tmp_path):
    with Broker(BROKER_CONFIGS) as b:
        topic = new_topic(b, partitions=2)
        group = f"g-{uuid.uuid4().hex[:6]}"
        set_group_configs(b.bootstrap_servers, group, EARLIEST)
        produce(b.bootstrap_servers, topic, 100)
        first = consume_all(lib, b, group, topic, tmp_path, "first")
        end = ends(b, topic, 2)
        assert sorted(first.offsets()) == sorted((p, o) for p in range(2) for o in range(end[p]))
        # --list (ListGroups with the share type filter) and --list --state
        r = share_groups(tools, b, "--list")
        assert group in r.stdout.split()
        r = share_groups(tools, b, "--list", "--state")
        assert [group, "Empty"] in table(r.stdout, "GROUP")
        # --describe: every record acknowledged, the start offsets are the ends
        described = offsets_table(tools, b, group)
        assert described == {(topic, p): (str(end[p]), "0") for p in range(2)}   # LAG 0: all delivered
        r = share_groups(tools, b, "--describe", "--group", group, "--state")
        assert table(r.stdout, "GROUP")[0][-2:] == ["Empty", "0"]
        r = share_groups(tools, b, "--describe", "--group", group, "--members")
        assert f"Share group '{group}' has no active members." in r.stderr
        # --reset-offsets --to-earliest --execute on the empty group
        r = share_groups(tools, b, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
        assert r.returncode == 0, r.summary()
        assert sorted(table(r.stdout, "GROUP")) == [[group, topic, "0", "0"], [group, topic, "1", "0"]]
        # start offset 0, lag = everything (Kafka: latest offset - start offset - delivery complete count)
        assert offsets_table(tools, b, group) == {(topic, p): ("0", str(end[p])) for p in range(2)}
        again = consume_all(lib, b, group, topic, tmp_path, "again")
        assert sorted(again.offsets()) == sorted(first.offsets())
        assert {dc for _p, _o, dc, _v in again.records} == {1}   # a fresh state: first deliveries


def test_reset_offsets_of_a_new_group_to_a_datetime_and_to_latest(lib, broker, tools, tmp_path):
    topic = new_topic(broker, partitions=1)
    p = ck.Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(100):   # 40 records of 2020, 60 of 2023
        p.produce(topic, value=str(i).encode(), timestamp=1_600_000_000_000 + i if i < 40 else 1_700_000_000_000 + i)
    assert p.flush(30) == 0
    group = f"g-{uuid.uuid4().hex[:6]}"   # no such group yet: --reset-offsets creates it (KAFKA-19662)
    r = share_groups(tools, broker, "--reset-offsets", "--group", group, "--topic", topic, "--to-datetime",
                     "2022-01-01T00:00:00.000", "--dry-run")
    assert table(r.stdout, "GROUP") == [[group, topic, "0", "40"]]
    assert group not in share_group_states(broker)                  # a dry run changes nothing
    r = share_groups(tools, broker, "--reset-offsets", "--group", group, "--topic", topic, "--to-datetime",
                     "2022-01-01T00:00:00.000", "--execute")
    assert r.returncode == 0 and table(r.stdout, "GROUP") == [[group, topic, "0", "40"]], r.summary()
    assert share_group_states(broker)[group] == "Empty"
    assert offsets_table(tools, broker, group) == {(topic, 0): ("40", "60")}
    # the group's share.auto.offset.reset is the default, latest: the consumer starts where it was set
    c = consume_all(lib, broker, group, topic, tmp_path, "dated")
    assert sorted(c.offsets()) == [(0, o) for o in range(40, 100)]
    r = share_groups(tools, broker, "--reset-offsets", "--group", group, "--topic", topic, "--to-latest",
                     "--execute")
    assert table(r.stdout, "GROUP") == [[group, topic, "0", "100"]]
    assert offsets_table(tools, broker, group) == {(topic, 0): ("100", "0")}


def test_an_active_member_blocks_reset_delete_offsets_and_delete(lib, broker, tools, tmp_path):
    topic = new_topic(broker, partitions=2)
    group = f"g-{uuid.uuid4().hex[:6]}"
    set_group_configs(broker.bootstrap_servers, group, EARLIEST)
    produce(broker.bootstrap_servers, topic, 20)
    holder = ShareConsumer(lib, broker.bootstrap_servers, group, topic, "hold", workdir=tmp_path, name="holder")
    try:
        assert holder.holding.wait(60), holder.proc.lines[-5:]
        r = share_groups(tools, broker, "--describe", "--group", group, "--members")
        (row,) = table(r.stdout, "GROUP")
        assert row[0] == group and row[3] == "share-hold" and row[-2:] == ["2", f"{topic}:0,1"]
        r = share_groups(tools, broker, "--describe", "--group", group, "--state", "--verbose")
        (row,) = table(r.stdout, "GROUP")
        assert (row[0], row[-4], row[-1]) == (group, "Stable", "1")   # state, ..., #members
        # the tool refuses first (its own check), the broker refuses too (Kafka's errors)
        r = share_groups(tools, broker, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest",
                         "--execute")
        assert r.returncode != 0 and f"Share group '{group}' is not empty." in r.stdout + r.stderr
        alter = call(broker.bootstrap_servers, AQ(group_id=group, topics=[AQ.AlterShareGroupOffsetsRequestTopic(
            topic_name=topic, partitions=[AQ.AlterShareGroupOffsetsRequestPartition(partition_index=0,
                                                                                    start_offset=0)])]), 0)
        assert (alter.error_code, alter.error_message, alter.responses) == (E.NON_EMPTY_GROUP,
                                                                             "The group is not empty.", [])
        r = share_groups(tools, broker, "--delete-offsets", "--group", group, "--topic", topic)
        assert "The group is not empty." in r.stdout
        delete = call(broker.bootstrap_servers, DQ(group_id=group, topics=[
            DQ.DeleteShareGroupOffsetsRequestTopic(topic_name=topic)]), 0)
        assert delete.error_code == E.NON_EMPTY_GROUP
        r = share_groups(tools, broker, "--delete", "--group", group)
        assert f"Share group '{group}' is not EMPTY." in r.stdout
        resp = call(broker.bootstrap_servers, DeleteGroupsRequest(groups_names=[group]), 2)
        assert [(g.group_id, g.error_code) for g in resp.results] == [(group, E.NON_EMPTY_GROUP)]
    finally:
        holder.kill()


def test_delete_offsets_then_delete_the_group_and_its_share_state(lib, tools, tmp_path):
    with Broker(BROKER_CONFIGS) as b:
        topic = new_topic(b, partitions=2)
        group = f"g-{uuid.uuid4().hex[:6]}"
        set_group_configs(b.bootstrap_servers, group, EARLIEST)
        produce(b.bootstrap_servers, topic, 60)
        everything = sorted(consume_all(lib, b, group, topic, tmp_path, "first").offsets())
        r = share_groups(tools, b, "--delete-offsets", "--group", group, "--topic", topic, "--topic", "nope")
        rows = {row[0]: " ".join(row[1:]) for row in table(r.stdout, "TOPIC")}
        assert rows == {topic: "Successful",
                        "nope": "Error: This server does not host this topic-partition."}, r.stdout
        assert summary(b, group, topic, 0).start_offset == -1                      # its share state is gone
        r = share_groups(tools, b, "--describe", "--group", group)
        assert f"Share group '{group}' has no offset information." in r.stdout
        # the state was deleted: a new consumer starts at share.auto.offset.reset (earliest)
        assert sorted(consume_all(lib, b, group, topic, tmp_path, "second").offsets()) == everything
        assert sum(summary(b, group, topic, p).start_offset for p in range(2)) == 60
        r = share_groups(tools, b, "--delete", "--group", group)
        assert f"Deletion of requested share groups ('{group}') was successful." in r.stdout, r.summary()
        assert group not in share_group_states(b)
        assert [summary(b, group, topic, p).start_offset for p in range(2)] == [-1, -1]
        r = share_groups(tools, b, "--delete", "--group", group)
        assert f"Group '{group}' is not a share group." in r.stdout
        # a new group of the same name starts from the start again
        assert sorted(consume_all(lib, b, group, topic, tmp_path, "third").offsets()) == everything


def test_errors_for_unknown_groups_and_groups_of_other_types(broker, tools):
    topic = new_topic(broker, partitions=1)
    consumer_group = f"c-{uuid.uuid4().hex[:6]}"
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": consumer_group})
    c.commit(offsets=[ck.TopicPartition(topic, 0, 0)], asynchronous=False)
    c.close()
    r = share_groups(tools, broker, "--describe", "--group", "nope")
    assert "GroupIdNotFoundException: Group nope not found." in r.stdout
    r = share_groups(tools, broker, "--describe", "--group", consumer_group)
    assert f"GroupIdNotFoundException: Group {consumer_group} is not a share group." in r.stdout
    r = share_groups(tools, broker, "--delete-offsets", "--group", "nope", "--topic", topic)
    assert "Group nope not found." in r.stdout
    r = share_groups(tools, broker, "--delete", "--group", consumer_group)
    assert f"Group '{consumer_group}' is not a share group." in r.stdout
    r = share_groups(tools, broker, "--reset-offsets", "--group", consumer_group, "--topic", topic, "--to-earliest",
                     "--execute")
    # the tool takes a group ShareGroupDescribe does not find for a new one; the broker refuses
    assert f"failed due to Failed altering group offsets for the following partitions: [{topic}-0]" in r.stdout
    assert "org.apache.kafka.common.errors.GroupIdNotFoundException: Failed altering" in r.stderr
    # on the wire: DescribeShareGroupOffsets answers an unknown group with no topics and no error
    # (Kafka's initializedShareGroupPartitions), and a topic it lacks with start offset -1
    resp = call(broker.bootstrap_servers, DSQ(groups=[
        DSQ.DescribeShareGroupOffsetsRequestGroup(group_id="nope", topics=None),
        DSQ.DescribeShareGroupOffsetsRequestGroup(group_id="nope", topics=[
            DSQ.DescribeShareGroupOffsetsRequestTopic(topic_name="no-such-topic", partitions=[0])]),
        DSQ.DescribeShareGroupOffsetsRequestGroup(group_id="nope", topics=[])]), 1)
    (all_topics, unknown_topic, no_topics) = resp.groups
    assert (all_topics.error_code, all_topics.topics, no_topics.topics) == (0, [], [])
    (t,) = unknown_topic.topics
    assert (t.topic_name, t.topic_id.int, [(p.partition_index, p.start_offset, p.lag) for p in t.partitions]) == \
        ("no-such-topic", 0, [(0, -1, -1)])
    alter = call(broker.bootstrap_servers, AQ(group_id=consumer_group, topics=[AQ.AlterShareGroupOffsetsRequestTopic(
        topic_name=topic, partitions=[AQ.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0)])]),
        0)
    assert (alter.error_code, alter.error_message) == (E.GROUP_ID_NOT_FOUND,
                                                       f"Group {consumer_group} is not a share group.")


def test_console_share_consumer_reads_n_records(broker, tools):
    topic = new_topic(broker, partitions=2)
    group = f"console-{uuid.uuid4().hex[:6]}"
    set_group_configs(broker.bootstrap_servers, group, EARLIEST)
    produce(broker.bootstrap_servers, topic, 30)
    r = tools.run(CONSOLE_SHARE_CONSUMER, ["--bootstrap-server", broker.bootstrap_servers, "--topic", topic,
                                           "--group", group, "--max-messages", "30"], check=False, timeout=120)
    assert r.returncode == 0, r.summary()
    assert sorted(int(v) for v in r.stdout.split()) == list(range(30))
    assert "Processed a total of 30 messages" in r.stderr
    wait_empty(broker, group)
    assert offsets_table(tools, broker, group).keys() == {(topic, 0), (topic, 1)}


def test_lag_of_partitions_led_by_other_brokers():
    """The coordinator asks each partition's leader for its latest offset (ListOffsets LATEST) and
    the share coordinators of the keys, wherever they are."""
    with Cluster(n=3) as c:
        c.create_topic("t", 3, replication_factor=1)
        p = ck.Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "1"})
        for i in range(90):
            p.produce("t", value=str(i).encode(), partition=i % 3)
        assert p.flush(60) == 0
        assert len({c.leader_of("t", p) for p in range(3)}) == 3
        node = wait_for(lambda: _coordinator(c.bootstrap_servers, "g"), 60, what="a group coordinator")
        alter = call(node, AQ(group_id="g", topics=[AQ.AlterShareGroupOffsetsRequestTopic(topic_name="t", partitions=[
            AQ.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=p + 1) for p in range(3)])]), 0)
        assert [(x.partition_index, x.error_code) for x in alter.responses[0].partitions] == [(0, 0), (1, 0), (2, 0)]
        resp = call(node, DSQ(groups=[DSQ.DescribeShareGroupOffsetsRequestGroup(group_id="g", topics=None)]), 1)
        (t,) = resp.groups[0].topics
        assert sorted((x.partition_index, x.start_offset, x.lag, x.error_code) for x in t.partitions) == [
            (0, 1, 29, 0), (1, 2, 28, 0), (2, 3, 27, 0)]


def _coordinator(bootstrap: str, group: str) -> str | None:
    """host:port of ``group``'s coordinator (None while there is none yet)."""
    fc = call(bootstrap.split(",")[0], FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), 4)
    co = fc.coordinators[0]
    return f"{co.host}:{co.port}" if co.error_code == 0 else None
