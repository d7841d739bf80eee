"""Commits from a member the group no longer has are fenced by the broker, as Kafka, and the client
sees the error — confluent-kafka and kafka-python against a real kcompat process:

- a member removed from the group (LeaveGroup from the admin client, by member id) commits with its
  old member id and generation: UNKNOWN_MEMBER_ID (kafka-python: CommitFailedError caused by
  UnknownMemberIdError; confluent-kafka: KafkaException UNKNOWN_MEMBER_ID);
- a kafka-python member that misses a rebalance (it hears of none: it heartbeats rarely) is removed
  when the rebalance timeout (its max.poll.interval.ms) passes, and its commit fails the same way;
- a static member replaced by a new instance with the same group.instance.id: FENCED_INSTANCE_ID
  (kafka-python FencedInstanceIdError; confluent-kafka KafkaException FENCED_INSTANCE_ID);

and in every case the offsets the group committed are unchanged. The fenced member heartbeats only
every 20 s (session.timeout.ms 60 s), so it cannot learn of its removal from a heartbeat first: the
commit itself reaches the broker with the stale member id / generation, and the error is the
broker's. The broker runs with group.initial.rebalance.delay.ms=0 (these tests are not about it).
"""

from __future__ import annotations

import time

import confluent_kafka as ck
import kafka.errors as kerr
import pytest
from confluent_kafka import KafkaError, KafkaException
from kafka import KafkaAdminClient, KafkaConsumer, OffsetAndMetadata
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import MemberToRemove

from conformance.clients.kafka_python import subscribe_when_known
from tests.clients.common import topic_name
from tests.clients.test_groups_common import (
    KINDS, Members, broker_committed, create_topic, produce, unique, wait_balanced,
)
from tests.support.broker_process import BrokerProcess

PARTITIONS = 2
QUIET = {"session.timeout.ms": 60000, "heartbeat.interval.ms": 20000}  # no heartbeat within a test


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    data = tmp_path_factory.mktemp("broker") / "data"
    with BrokerProcess(data, overrides={"group.initial.rebalance.delay.ms": "0"}) as b:
        yield b


class Direct:
    """A group consumer driven from the test thread: ``poll`` until it owns partitions and read
    something, then ``commit`` explicit offsets (each client's synchronous commit)."""

    def __init__(self, kind: str, bootstrap: str, group: str, topic: str, settings: dict) -> None:
        self.kind, self.topic = kind, topic
        if kind == "confluent":
            self.c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest", **settings})
            self.c.subscribe([topic])
        else:
            self.c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                   auto_offset_reset="earliest",
                                   **{k.replace(".", "_"): v for k, v in settings.items()})
            subscribe_when_known(self.c, [topic])
        self.read: dict[int, int] = {}

    def poll(self, seconds: float = 0.1) -> None:
        if self.kind == "confluent":
            for m in self.c.consume(100, seconds):
                if m.error() is None:
                    self.read[m.partition()] = m.offset() + 1
        else:
            for tp, recs in self.c.poll(timeout_ms=int(seconds * 1000)).items():
                if recs:
                    self.read[tp.partition] = recs[-1].offset + 1

    def poll_until_reading(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.read) < PARTITIONS:
            assert time.monotonic() < deadline, f"{self.kind} consumer did not get and read its partitions"
            self.poll()

    def member_id(self) -> str:
        if self.kind == "confluent":
            return self.c.memberid()
        return self.c._coordinator._generation.member_id  # no public API in kafka-python

    def commit(self, offsets: dict[int, int]) -> None:
        if self.kind == "confluent":
            res = self.c.commit(offsets=[ck.TopicPartition(self.topic, p, o) for p, o in offsets.items()],
                                asynchronous=False)
            errors = [tp.error for tp in res if tp.error is not None]
            if errors:
                raise KafkaException(errors[0])
        else:
            self.c.commit({KpTopicPartition(self.topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})

    def close(self) -> None:
        self.c.close()


def assert_fenced(kind: str, excinfo, code: int, kp_cause: type) -> None:
    """The commit failed with the broker's ``code``."""
    e = excinfo.value
    if kind == "confluent":
        assert isinstance(e, KafkaException) and e.args[0].code() == code, repr(e)
    elif kp_cause is kerr.FencedInstanceIdError:
        assert isinstance(e, kerr.FencedInstanceIdError), repr(e)
    else:
        # kafka-python raises CommitFailedError with the broker's error as its argument (a
        # CommitFailedError without one comes from the client's own checks, not from the broker)
        assert isinstance(e, kerr.CommitFailedError) and e.args and isinstance(e.args[0], kp_cause), repr(e)


@pytest.mark.parametrize("kind", KINDS)
def test_commit_from_a_removed_member_is_fenced(broker, request, kind):
    topic = topic_name(request)
    group = unique("removed")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    produce(broker.bootstrap, topic, 50, "r", partitions=PARTITIONS)
    member = Direct(kind, broker.bootstrap, group, topic, QUIET)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        member.poll_until_reading()
        first = {p: 1 for p in range(PARTITIONS)}
        member.commit(first)
        member_id = member.member_id()
        removed = admin.remove_group_members(group, [MemberToRemove(member_id=member_id)])
        assert list(removed.values()) == [kerr.NoError], removed
        with pytest.raises(Exception) as e:
            member.commit(member.read)
        assert_fenced(kind, e, KafkaError.UNKNOWN_MEMBER_ID, kerr.UnknownMemberIdError)
        assert {p: c[0] for p, c in broker_committed(broker.bootstrap, group, topic, PARTITIONS).items()} == first
    finally:
        admin.close()
        member.close()


def test_kafka_python_member_that_misses_a_rebalance_is_kicked_out(broker, request):
    topic = topic_name(request)
    group = unique("missed")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    produce(broker.bootstrap, topic, 50, "m", partitions=PARTITIONS)
    # the rebalance timeout is the largest max.poll.interval.ms of the members
    fast = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 1000, "max_poll_interval_ms": 6000}
    slow = Direct("kafka-python", broker.bootstrap, group, topic, {**QUIET, "max.poll.interval.ms": 6000})
    try:
        with Members() as ms:
            slow.poll_until_reading()
            first = dict(slow.read)
            slow.commit(first)
            others = [ms.new("kafka-python", "other", broker.bootstrap, group, topic, fast)]
            # the newcomer's join starts a rebalance: "other" joins, "slow" never hears of it (it keeps
            # polling, so it does not leave for exceeding max.poll.interval.ms either)
            started = time.monotonic()
            deadline = started + 30
            while not others[0].owned_now() == set(range(PARTITIONS)):
                assert time.monotonic() < deadline, others[0].describe()
                slow.poll()
            waited = time.monotonic() - started
            with pytest.raises(Exception) as e:
                slow.commit({p: o + 1 for p, o in first.items()})
            assert_fenced("kafka-python", e, KafkaError.UNKNOWN_MEMBER_ID, kerr.UnknownMemberIdError)
            assert waited >= 5, f"the slow member was removed after {waited:.1f}s, before the rebalance timeout"
            assert {p: c[0] for p, c in broker_committed(broker.bootstrap, group, topic, PARTITIONS).items()} == first
            ms.stop(*others)
    finally:
        slow.close()


@pytest.mark.parametrize("kind", KINDS)
def test_commit_from_a_replaced_static_member_is_fenced(broker, request, kind):
    topic = topic_name(request)
    group = unique("fenced")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    produce(broker.bootstrap, topic, 50, "f", partitions=PARTITIONS)
    static = {**QUIET, "group.instance.id": f"{group}-instance"}
    old = Direct(kind, broker.bootstrap, group, topic, static)
    try:
        old.poll_until_reading()
        first = {p: 1 for p in range(PARTITIONS)}
        old.commit(first)
        with Members() as ms:
            new = ms.new(kind, "new", broker.bootstrap, group, topic,
                         {k.replace(".", "_") if kind == "kafka-python" else k: v for k, v in static.items()})
            wait_balanced([new], PARTITIONS)
            with pytest.raises(Exception) as e:
                old.commit(old.read)
            assert_fenced(kind, e, KafkaError.FENCED_INSTANCE_ID, kerr.FencedInstanceIdError)
            # the new instance committed what it read; the old one's commit changed nothing
            ms.stop(new)
        committed = {p: c[0] for p, c in broker_committed(broker.bootstrap, group, topic, PARTITIONS).items()}
        assert committed == {**first, **new.committed_now()}
    finally:
        old.close()
