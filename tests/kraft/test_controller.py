"""Unit tests of kcompat.kraft: the controller (Kafka's ReplicationControlManager,
ConfigurationControlManager, ProducerIdControlManager rules), the metadata image built only by
replaying records, and the ``__cluster_metadata`` log (KRaft record framing, replay after reopen,
torn tails, producer id blocks that never overlap across reopen)."""

from __future__ import annotations

import uuid

import pytest

from kcompat.config import validate_topic_configs
from kcompat.kraft.controller import (
    MAX_PARTITIONS_PER_BATCH, METADATA_VERSION, PRODUCER_ID_BLOCK_SIZE, Controller, NewTopic,
)
from kcompat.kraft.image import RESOURCE_BROKER, RESOURCE_TOPIC, MetadataImage, record_type_of
from kcompat.kraft.metadata_log import METADATA_TOPIC, MetadataLog, decode_record, encode_record
from kcompat.kraft.replica_placer import UsableBroker
from kcompat.protocol import records as rb
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.metadata_records import (
    ConfigRecord, FeatureLevelRecord, PartitionChangeRecord, PartitionRecord, ProducerIdsRecord,
    RemoveTopicRecord, TopicRecord,
)
from kcompat.protocol.primitives import DecodeError
from kcompat.txn.producer_id_manager import ProducerIdManager

NOW = 1_700_000_000_000


class Node:
    """A controller over a metadata log in ``path``; ``reopen()`` replays from disk."""

    def __init__(self, path, *, num_partitions: int = 1, brokers=(1,), delete_enabled: bool = True) -> None:
        self.path = path
        self.num_partitions = num_partitions
        self.brokers = list(brokers)
        self.delete_enabled = delete_enabled
        self.published: list = []
        self.open()

    def open(self) -> None:
        self.image = MetadataImage()
        self.log = MetadataLog(self.path, NOW)
        self.replayed = self.log.replay(self.image)
        self.controller = Controller(
            self.image, self._commit, node_id=1, defaults=lambda: (self.num_partitions, 1),
            validate_topic_configs=validate_topic_configs,
            usable_brokers=lambda: [UsableBroker(b, None, False) for b in self.brokers],
            delete_topic_enable=lambda: self.delete_enabled)
        self.controller.bootstrap(NOW)

    def _commit(self, records: list, now_ms: int) -> None:
        """A one-voter commit: durable in the local log, then replayed into the image."""
        last = self.log.append(records, now_ms)
        for i, r in enumerate(records):
            self.image.apply(r, last - len(records) + 1 + i)
        self.published.extend(records)

    def reopen(self) -> None:
        self.log.close()
        self.open()

    def close(self) -> None:
        self.log.close()

    def create(self, *topics: NewTopic, validate_only: bool = False):
        return self.controller.create_topics(list(topics), validate_only=validate_only, now_ms=NOW)


@pytest.fixture
def node(tmp_path):
    n = Node(tmp_path)
    yield n
    n.close()


def dump(image: MetadataImage):
    """Everything an image holds, comparable with ==."""
    topics = {name: (t.topic_id, {pid: (p.replicas, p.isr, p.leader, p.leader_epoch, p.partition_epoch)
                                  for pid, p in sorted(t.partitions.items())})
              for name, t in sorted(image.topics.items())}
    assert {t.topic_id: name for name, t in image.topics.items()} == \
        {tid: t.name for tid, t in image.topics_by_id.items()}
    return (topics, {k: dict(v) for k, v in sorted(image.configs.items())}, image.next_producer_id,
            dict(image.features), image.offset)


def err(fn) -> ErrorCode:
    with pytest.raises(KafkaError) as e:
        fn()
    return e.value.code


# -- create --------------------------------------------------------------------------------------------

def test_bootstrap_finalizes_metadata_version_once(node):
    # metadata.version and streams.version 1 (KIP-1071 streams groups on, as a new Kafka 4.3.1 node)
    assert node.image.features == {"metadata.version": METADATA_VERSION, "streams.version": 1}
    assert node.log.log.log_end_offset == 2
    node.reopen()
    assert node.replayed == 2 and node.log.log.log_end_offset == 2  # not written again


def test_create_topics(node):
    res = node.create(NewTopic("a", 3), NewTopic("b"), NewTopic("c", assignments={0: [1], 1: [1]}),
                      NewTopic("d", 1, configs={"retention.ms": " 1000 ", "cleanup.policy": "compact"}))
    assert [(r.name, r.error, r.num_partitions, r.replication_factor) for r in res] == [
        ("a", 0, 3, 1), ("b", 0, 1, 1), ("c", 0, 2, 1), ("d", 0, 1, 1)]
    assert len({r.topic_id for r in res}) == 4
    a = node.image.topics["a"]
    assert a.topic_id == res[0].topic_id and node.image.topics_by_id[a.topic_id] is a
    assert {pid: (p.replicas, p.isr, p.leader, p.leader_epoch) for pid, p in a.partitions.items()} == \
        {0: ([1], [1], 1, 0), 1: ([1], [1], 1, 0), 2: ([1], [1], 1, 0)}
    assert node.image.topic_configs("d") == {"retention.ms": "1000", "cleanup.policy": "compact"}
    assert res[3].configs == {"retention.ms": "1000", "cleanup.policy": "compact"}
    kinds = [record_type_of(r) for r in node.published]
    assert kinds.count(2) == 4 and kinds.count(3) == 7 and kinds.count(4) == 2


@pytest.mark.parametrize("topic,code", [
    (NewTopic(""), ErrorCode.INVALID_TOPIC_EXCEPTION),
    (NewTopic("bad name"), ErrorCode.INVALID_TOPIC_EXCEPTION),
    (NewTopic(".."), ErrorCode.INVALID_TOPIC_EXCEPTION),
    (NewTopic("x" * 250), ErrorCode.INVALID_TOPIC_EXCEPTION),
    (NewTopic("ok", 0), ErrorCode.INVALID_PARTITIONS),
    (NewTopic("ok", -2), ErrorCode.INVALID_PARTITIONS),
    (NewTopic("ok", 1, 0), ErrorCode.INVALID_REPLICATION_FACTOR),
    (NewTopic("ok", 1, 2), ErrorCode.INVALID_REPLICATION_FACTOR),
    (NewTopic("ok", 2, assignments={0: [1], 1: [1]}), ErrorCode.INVALID_REQUEST),
    (NewTopic("ok", assignments={0: [1], 2: [1]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    (NewTopic("ok", assignments={0: [1, 1]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    (NewTopic("ok", assignments={0: [7]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    (NewTopic("ok", assignments={0: []}), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    (NewTopic("ok", 1, configs={"no.such.config": "1"}), ErrorCode.INVALID_CONFIG),
    (NewTopic("ok", 1, configs={"retention.ms": "soon"}), ErrorCode.INVALID_CONFIG),
    (NewTopic("ok", 1, configs={"retention.ms": None}), ErrorCode.INVALID_CONFIG),
    (NewTopic("ok", MAX_PARTITIONS_PER_BATCH + 1), ErrorCode.POLICY_VIOLATION),
    (NewTopic("ok", 2**31 - 1), ErrorCode.POLICY_VIOLATION),
])
def test_create_topic_errors_commit_nothing(node, topic, code):
    before = dump(node.image)
    leo = node.log.log.log_end_offset
    (res,) = node.create(topic)
    assert res.error == code and res.message
    assert dump(node.image) == before and node.log.log.log_end_offset == leo


@pytest.mark.parametrize("name,reason", [
    ("", "the empty string is not allowed"),
    (".", "'.' is not allowed"),
    ("..", "'..' is not allowed"),
    ("x" * 250, f"the length of '{'x' * 250}' is longer than the max allowed length 249"),
    ("bad name", "'bad name' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"),
])
def test_invalid_topic_names_get_kafka_43_messages(node, name, reason):
    """Kafka 4.3.1's ``Topic.validate`` messages, which ``kafka-topics --create`` prints."""
    (res,) = node.create(NewTopic(name))
    assert (res.error, res.message) == (ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic name is invalid: {reason}")


def test_create_topics_request_level_checks(node):
    assert node.create(NewTopic("x"))[0].error == 0
    res = node.create(NewTopic("x"), NewTopic("dup"), NewTopic("dup"), NewTopic("x_y"), NewTopic("x.y"),
                      NewTopic("fine"))
    assert [(r.name, r.error) for r in res] == [
        ("x", ErrorCode.TOPIC_ALREADY_EXISTS), ("dup", ErrorCode.INVALID_REQUEST), ("dup", ErrorCode.INVALID_REQUEST),
        ("x_y", 0), ("x.y", ErrorCode.INVALID_TOPIC_EXCEPTION), ("fine", 0)]
    assert sorted(node.image.topics) == ["fine", "x", "x_y"]
    # the partition cap counts the whole request (defaults included), as Kafka's
    node.num_partitions = 6000
    res = node.create(NewTopic("big1"), NewTopic("big2"), NewTopic("tiny", 1))
    assert [r.error for r in res] == [ErrorCode.POLICY_VIOLATION] * 3
    assert res[0].message == "Excessively large number of partitions per request."
    assert node.create(NewTopic("big1"))[0].num_partitions == 6000


def test_validate_only_commits_nothing(node):
    node.published.clear()
    leo = node.log.log.log_end_offset
    before = dump(node.image)
    res = node.create(NewTopic("v", 4, configs={"retention.ms": "5"}), validate_only=True)
    assert res[0].error == 0 and res[0].num_partitions == 4
    assert dump(node.image) == before and node.log.log.log_end_offset == leo and node.published == []


# -- delete, partitions, configs -------------------------------------------------------------------

def test_delete_topics_by_name_and_id(node):
    node.create(NewTopic("a", 2, configs={"retention.ms": "10"}), NewTopic("b"), NewTopic("c"))
    a_id = node.image.topics["a"].topic_id
    b_id = node.image.topics["b"].topic_id
    unknown = uuid.uuid4()
    by_name, by_id = node.controller.delete_topics(["a", "zz"], [a_id, b_id, unknown], now_ms=NOW)
    assert [(n, e) for n, _i, e, _m in by_name] == [("a", 0), ("zz", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert [(n, i, e) for n, i, e, _m in by_id] == [("a", a_id, 0), ("b", b_id, 0),
                                                    (None, unknown, ErrorCode.UNKNOWN_TOPIC_ID)]
    removes = [r for r in node.published if record_type_of(r) == 9]
    assert sorted(r.topic_id for r in removes) == sorted([a_id, b_id])  # "a" removed once
    assert sorted(node.image.topics) == ["c"]
    assert (RESOURCE_TOPIC, "a") not in node.image.configs
    # the name can be reused; the new topic has a new id
    node.create(NewTopic("a"))
    assert node.image.topics["a"].topic_id != a_id


def test_delete_topics_disabled(tmp_path):
    n = Node(tmp_path, delete_enabled=False)
    n.create(NewTopic("a"))
    by_name, _ = n.controller.delete_topics(["a"], [], now_ms=NOW)
    assert by_name[0][2] == ErrorCode.TOPIC_DELETION_DISABLED and "a" in n.image.topics
    n.close()


def test_create_partitions(node):
    node.create(NewTopic("p", 2))
    cp = node.controller.create_partitions
    assert err(lambda: cp("p", 2, None, validate_only=False, now_ms=NOW)) == ErrorCode.INVALID_PARTITIONS
    assert err(lambda: cp("p", 1, None, validate_only=False, now_ms=NOW)) == ErrorCode.INVALID_PARTITIONS
    assert err(lambda: cp("nope", 5, None, validate_only=False, now_ms=NOW)) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert err(lambda: cp("p", 4, [[1]], validate_only=False, now_ms=NOW)) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert err(lambda: cp("p", 3, [[9]], validate_only=False, now_ms=NOW)) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert err(lambda: cp("p", 2**31 - 1, None, validate_only=False, now_ms=NOW)) == ErrorCode.UNKNOWN_SERVER_ERROR
    cp("p", 5, None, validate_only=True, now_ms=NOW)
    assert len(node.image.topics["p"].partitions) == 2
    cp("p", 4, [[1], [1]], validate_only=False, now_ms=NOW)
    cp("p", 5, None, validate_only=False, now_ms=NOW)
    assert sorted(node.image.topics["p"].partitions) == [0, 1, 2, 3, 4]
    assert all(p.replicas == [1] and p.leader == 1 for p in node.image.topics["p"].partitions.values())


def test_topic_and_broker_configs(node):
    node.create(NewTopic("t"))
    alter = node.controller.alter_topic_configs
    alter("t", {"retention.ms": "100", "segment.bytes": "1048576"}, validate_only=False, now_ms=NOW)
    assert node.image.topic_configs("t") == {"retention.ms": "100", "segment.bytes": "1048576"}
    alter("t", {"retention.ms": "200"}, validate_only=False, now_ms=NOW)  # replaces: segment.bytes removed
    assert node.image.topic_configs("t") == {"retention.ms": "200"}
    alter("t", {"retention.ms": "300"}, validate_only=True, now_ms=NOW)
    assert node.image.topic_configs("t") == {"retention.ms": "200"}
    assert err(lambda: alter("t", {"retention.ms": "x"}, validate_only=False, now_ms=NOW)) == ErrorCode.INVALID_CONFIG
    assert err(lambda: alter("u", {}, validate_only=False, now_ms=NOW)) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    leo = node.log.log.log_end_offset
    alter("t", {"retention.ms": "200"}, validate_only=False, now_ms=NOW)  # no change, no records
    assert node.log.log.log_end_offset == leo
    node.controller.alter_broker_configs("", {"log.retention.ms": "5000"}, validate_only=False, now_ms=NOW)
    node.controller.alter_broker_configs("1", {"message.max.bytes": "2000"}, validate_only=False, now_ms=NOW)
    assert node.image.broker_configs("") == {"log.retention.ms": "5000"}
    assert node.image.broker_configs("1") == {"message.max.bytes": "2000"}
    node.controller.alter_broker_configs("1", {}, validate_only=False, now_ms=NOW)
    assert node.image.broker_configs("1") == {} and (RESOURCE_BROKER, "1") not in node.image.configs


def test_partition_change_records_bump_epochs():
    image = MetadataImage()
    tid = uuid.uuid4()
    image.apply(TopicRecord(name="t", topic_id=tid), 0)
    image.apply(PartitionRecord(partition_id=0, topic_id=tid, replicas=[1, 2], isr=[1, 2], leader=1,
                                leader_epoch=0, partition_epoch=0), 1)
    image.apply(PartitionChangeRecord(partition_id=0, topic_id=tid, isr=[1], leader=-2), 2)  # ISR shrink
    p = image.topics["t"].partitions[0]
    assert (p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ([1], 1, 0, 1)
    image.apply(PartitionChangeRecord(partition_id=0, topic_id=tid, leader=2, isr=None), 3)  # new leader
    assert (p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ([1], 2, 1, 2)
    assert image.offset == 3
    image.apply(ProducerIdsRecord(broker_id=1, broker_epoch=0, next_producer_id=5000), 4)
    image.apply(ProducerIdsRecord(broker_id=1, broker_epoch=0, next_producer_id=3000), 5)
    assert image.next_producer_id == 5000  # never goes back
    image.apply(RemoveTopicRecord(topic_id=tid), 6)
    assert image.topics == {} and image.topics_by_id == {}


# -- producer id blocks --------------------------------------------------------------------------------

def test_producer_id_blocks_are_consecutive_and_never_overlap_across_reopen(tmp_path):
    n = Node(tmp_path)
    handed_out: list[int] = []
    for round_ in range(6):
        mgr = ProducerIdManager(lambda: n.controller.allocate_producer_ids(1, NOW))
        count = 3 if round_ % 2 else PRODUCER_ID_BLOCK_SIZE + 7  # sometimes more than one block
        handed_out += [mgr.generate() for _ in range(count)]
        n.reopen()  # a restart never reuses the rest of the block
    n.close()
    assert len(set(handed_out)) == len(handed_out)
    assert handed_out == sorted(handed_out)
    blocks = sorted({pid // PRODUCER_ID_BLOCK_SIZE for pid in handed_out})
    assert blocks == list(range(len(blocks)))
    assert handed_out[0] == 0


def test_allocate_producer_ids(node):
    assert node.controller.allocate_producer_ids(1, NOW) == (0, PRODUCER_ID_BLOCK_SIZE)
    assert node.controller.allocate_producer_ids(1, NOW) == (PRODUCER_ID_BLOCK_SIZE, PRODUCER_ID_BLOCK_SIZE)
    node.reopen()
    assert node.image.next_producer_id == 2 * PRODUCER_ID_BLOCK_SIZE
    assert node.controller.allocate_producer_ids(1, NOW)[0] == 2 * PRODUCER_ID_BLOCK_SIZE


# -- replay ----------------------------------------------------------------------------------------------

def busy_history(n: Node) -> None:
    n.create(NewTopic("a", 3, configs={"retention.ms": "1000"}), NewTopic("b"), NewTopic("c", 2))
    n.controller.create_partitions("b", 4, None, validate_only=False, now_ms=NOW)
    n.controller.alter_topic_configs("a", {"retention.ms": "2000", "cleanup.policy": "compact"},
                                     validate_only=False, now_ms=NOW)
    n.controller.allocate_producer_ids(1, NOW)
    n.controller.delete_topics(["c"], [], now_ms=NOW)
    n.controller.alter_broker_configs("", {"log.retention.ms": "9"}, validate_only=False, now_ms=NOW)
    n.create(NewTopic("c"))
    n.controller.allocate_producer_ids(1, NOW)


def test_replay_after_reopen_gives_the_same_image(tmp_path):
    n = Node(tmp_path)
    busy_history(n)
    live = dump(n.image)
    n.reopen()
    assert dump(n.image) == live
    assert n.replayed == n.log.log.log_end_offset
    n.reopen()  # and again: replay is deterministic
    assert dump(n.image) == live
    n.close()


def test_replay_ignores_a_torn_tail(tmp_path):
    n = Node(tmp_path)
    busy_history(n)
    live = dump(n.image)
    n.close()
    seg = sorted((tmp_path / f"{METADATA_TOPIC}-0").glob("*.log"))[-1]
    good = seg.read_bytes()
    # a crash in the middle of the next append: half a batch at the end of the segment
    extra = rb.build_batch([(NOW, None, encode_record(TopicRecord(name="torn", topic_id=uuid.uuid4())), ())],
                           base_offset=live[4] + 1)
    seg.write_bytes(good + extra[:len(extra) // 2])
    n.open()
    assert dump(n.image) == live and "torn" not in n.image.topics
    # the log goes on from the committed end, and producer ids still never repeat
    first, _ = n.controller.allocate_producer_ids(1, NOW)
    assert first == live[2]
    n.reopen()
    assert n.image.next_producer_id == live[2] + PRODUCER_ID_BLOCK_SIZE
    n.close()


# -- record framing -----------------------------------------------------------------------------------

@pytest.mark.parametrize("record", [
    TopicRecord(name="t", topic_id=uuid.UUID(int=7)),
    PartitionRecord(partition_id=3, topic_id=uuid.UUID(int=7), replicas=[1, 2], isr=[1], leader=1,
                    leader_epoch=4, partition_epoch=5),
    ConfigRecord(resource_type=RESOURCE_TOPIC, resource_name="t", name="retention.ms", value="1"),
    ConfigRecord(resource_type=RESOURCE_BROKER, resource_name="", name="x", value=None),
    RemoveTopicRecord(topic_id=uuid.UUID(int=9)),
    ProducerIdsRecord(broker_id=1, broker_epoch=0, next_producer_id=123000),
    FeatureLevelRecord(name="metadata.version", feature_level=20),
])
def test_metadata_record_framing_round_trips(record):
    data = encode_record(record)
    # MetadataRecordSerde: frame version 1, record type (api key), record version, then the record
    assert data[0] == 1 and data[1] == type(record).API_KEY
    assert decode_record(data) == record


def test_decode_rejects_unknown_frames():
    good = encode_record(TopicRecord(name="t", topic_id=uuid.UUID(int=7)))
    with pytest.raises(DecodeError):
        decode_record(b"\x02" + good[1:])
    with pytest.raises(DecodeError):
        decode_record(b"\x01\x7f\x00")  # record type 127


def test_stored_batches_have_null_keys_and_framed_values(node):
    node.create(NewTopic("a", 2))
    data = node.log.log.read(0, 1 << 20)
    recs = [r for pos, h in rb.iter_batches(data) for r in rb.iter_records(data[pos:pos + h.size])]
    assert [r.offset for r in recs] == list(range(len(recs)))
    assert all(r.key is None for r in recs)
    assert [type(decode_record(r.value)).__name__ for r in recs] == [
        "FeatureLevelRecord", "FeatureLevelRecord", "TopicRecord", "PartitionRecord", "PartitionRecord"]


def test_manual_assignments_as_kraft_checks_them(tmp_path):
    """ReplicationControlManager's rules: any registered broker, fenced ones too (outside the ISR,
    never leading); not when every replica of a partition is fenced; no unregistered broker, no
    repeats, the replication factor of the other (or existing) partitions."""
    n = Node(tmp_path, brokers=(1, 2, 3))
    fenced = {3}
    n.controller._usable_brokers = lambda: [UsableBroker(b, None, b in fenced) for b in (1, 2, 3)]
    try:
        ok = n.create(NewTopic("m", assignments={0: [3, 1], 1: [2, 3]}))[0]
        assert ok.error == ErrorCode.NONE
        parts = n.image.topics["m"].partitions
        assert (parts[0].replicas, parts[0].isr, parts[0].leader) == ([3, 1], [1], 1)
        assert (parts[1].replicas, parts[1].isr, parts[1].leader) == ([2, 3], [2], 2)
        cases = [
            ({0: [3]}, "All brokers specified in the manual partition assignment for partition 0 are fenced or in "
                       "controlled shutdown."),
            ({0: [1, 9]}, "The manual partition assignment includes broker 9, but no such broker is registered."),
            ({0: [2, 2]}, "The manual partition assignment includes the broker 2 more than once."),
            ({0: []}, "The manual partition assignment includes an empty replica list."),
            ({0: [1], 1: [1, 2]}, "The manual partition assignment includes a partition with 2 replica(s), but this "
                                  "is not consistent with previous partitions, which have 1 replica(s)."),
        ]
        for i, (assignment, message) in enumerate(cases):
            r = n.create(NewTopic(f"bad{i}", assignments=assignment))[0]
            assert (r.error, r.message) == (ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)
        with pytest.raises(KafkaError) as e:   # CreatePartitions: the topic's replication factor
            n.controller.create_partitions("m", 3, [[1]], validate_only=False, now_ms=NOW)
        assert e.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT and "which have 2 replica(s)" in e.value.message
    finally:
        n.close()
