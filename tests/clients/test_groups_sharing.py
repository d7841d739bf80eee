"""Consumer groups sharing a topic, with confluent-kafka and kafka-python against a real kcompat
process at its default settings (group.initial.rebalance.delay.ms=0 as in Kafka's shipped
server.properties; the clients' default range assignor unless a test says otherwise):

- three members share a six-partition topic, each reading its two partitions, every record read
  exactly once across the group and the committed offsets at the end of the log;
- a member joining a stable group takes partitions (the assignment is spread again) and reads on
  from the offsets the previous owners committed;
- two groups read the same topic independently, each seeing every record, each with its own
  committed offsets;
- with each client's roundrobin assignor the coordinator selects that protocol and the leader's
  interleaved assignment reaches every member.

Members commit synchronously after every batch and change only while every member is idle, so
"exactly once" is an exact assertion (see ``test_groups_common``).
"""

from __future__ import annotations

import pytest
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

from tests.clients.common import kp_admin, topic_name, wait_until
from tests.clients.test_groups_common import (
    KINDS, Members, assert_exactly_once, balanced, broker_committed, create_topic, describe_members, end_offsets,
    produce, unique, wait_balanced, wait_committed, wait_read,
)

PARTITIONS = 6


def _partitions_read(member) -> set[int]:
    return {r.partition for r in member.reads_now()}


@pytest.mark.parametrize("kind", KINDS)
def test_three_members_share_six_partitions_exactly_once(broker, request, kind):
    topic = topic_name(request)
    group = unique("share")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    with Members() as ms:
        members = [ms.new(kind, f"m{i}", broker.bootstrap, group, topic) for i in range(3)]
        wait_balanced(members, PARTITIONS, timeout=30)
        assignment = {m.name: m.owned_now() for m in members}
        events = {m.name: len(m.events_now()) for m in members}
        sent = produce(broker.bootstrap, topic, 3000, "share", partitions=PARTITIONS)
        wait_read(sent, members, timeout=60)
        ends = end_offsets(sent)
        wait_committed(members, ends)
        # no rebalance while they consumed: each read exactly the two partitions it was given
        for m in members:
            assert len(m.events_now()) == events[m.name], f"rebalance while consuming:{describe_members(members)}"
            assert _partitions_read(m) == assignment[m.name], describe_members(members)
        ms.stop(*members)
    assert_exactly_once(sent, members)
    committed = broker_committed(broker.bootstrap, group, topic, PARTITIONS)
    assert {p: c[0] for p, c in committed.items()} == ends


@pytest.mark.parametrize("kind", KINDS)
def test_new_member_takes_partitions(broker, request, kind):
    topic = topic_name(request)
    group = unique("join")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    with Members() as ms:
        first = [ms.new(kind, f"m{i}", broker.bootstrap, group, topic) for i in range(2)]
        wait_balanced(first, PARTITIONS)
        sent1 = produce(broker.bootstrap, topic, 600, "before", partitions=PARTITIONS)
        wait_read(sent1, first)
        wait_committed(first, end_offsets(sent1))

        newcomer = ms.new(kind, "new", broker.bootstrap, group, topic)
        members = first + [newcomer]
        wait_balanced(members, PARTITIONS, timeout=30)
        taken = newcomer.owned_now()
        assert len(taken) == 2 and all(len(m.owned_now()) == 2 for m in first)

        sent2 = produce(broker.bootstrap, topic, 600, "after", partitions=PARTITIONS)
        wait_read(sent2, members)
        wait_committed(members, end_offsets(sent1 + sent2))
        ms.stop(*members)
    # the newcomer started at the committed offsets: it read only records of the second batch, and
    # only from the partitions it was given
    second = {(s.partition, s.offset) for s in sent2}
    assert {(r.partition, r.offset) for r in newcomer.reads_now()} == {
        (s.partition, s.offset) for s in sent2 if s.partition in taken}
    assert all((r.partition, r.offset) in second for r in newcomer.reads_now())
    assert_exactly_once(sent1 + sent2, members)


@pytest.mark.parametrize("kind", KINDS)
def test_two_groups_read_the_same_topic_independently(broker, request, kind):
    topic = topic_name(request)
    group_a, group_b = unique("ga"), unique("gb")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    with Members() as ms:
        a = [ms.new(kind, f"a{i}", broker.bootstrap, group_a, topic) for i in range(2)]
        b = [ms.new(kind, "b0", broker.bootstrap, group_b, topic)]
        wait_balanced(a, PARTITIONS)
        wait_balanced(b, PARTITIONS)
        sent1 = produce(broker.bootstrap, topic, 600, "both", partitions=PARTITIONS)
        ends1 = end_offsets(sent1)
        wait_read(sent1, a)
        wait_read(sent1, b)
        wait_committed(a, ends1)
        wait_committed(b, ends1)
        ms.stop(*b)
        # group b is gone; group a reads on, and its commits do not move group b's offsets
        sent2 = produce(broker.bootstrap, topic, 300, "a-only", partitions=PARTITIONS)
        ends2 = end_offsets(sent1 + sent2)
        wait_read(sent2, a)
        wait_committed(a, ends2)
        assert {p: c[0] for p, c in broker_committed(broker.bootstrap, group_a, topic, PARTITIONS).items()} == ends2
        assert {p: c[0] for p, c in broker_committed(broker.bootstrap, group_b, topic, PARTITIONS).items()} == ends1
        # a new member of group b resumes where group b stopped: exactly the second batch
        b2 = [ms.new(kind, "b1", broker.bootstrap, group_b, topic)]
        wait_read(sent2, b2)
        wait_committed(b2, ends2)
        assert balanced(b2, PARTITIONS)
        ms.stop(*a, *b2)
    assert_exactly_once(sent1 + sent2, a)
    assert_exactly_once(sent1, b)
    assert_exactly_once(sent2, b2)


ROUNDROBIN = {"confluent": {"partition.assignment.strategy": "roundrobin"},
              "kafka-python": {"partition_assignment_strategy": [RoundRobinPartitionAssignor]}}


@pytest.mark.parametrize("kind", KINDS)
def test_roundrobin_assignor_interleaves_partitions(broker, request, kind):
    """Both clients' roundrobin assignors order members by member id and deal partitions out in
    turn: with three members on six partitions the k-th member gets k and k + 3 (range would give
    neighbours), which also shows the coordinator selected "roundrobin" and delivered the leader's
    assignment to every member through SyncGroup."""
    topic = topic_name(request)
    group = unique("rr")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    with Members() as ms:
        members = [ms.new(kind, f"m{i}", broker.bootstrap, group, topic, ROUNDROBIN[kind]) for i in range(3)]

        def interleaved() -> bool:
            if not balanced(members, PARTITIONS) or any(not m.member_ids for m in members):
                return False
            ids = sorted(m.member_ids[-1] for m in members)
            return all(m.owned_now() == {p for p in range(PARTITIONS) if p % 3 == ids.index(m.member_ids[-1])}
                       for m in members)
        wait_until(interleaved, 30, what=f"a roundrobin assignment:{describe_members(members)}")
        admin = kp_admin(broker.bootstrap)
        try:
            d = admin.describe_groups([group])[group]
        finally:
            admin.close()
        assert (d["group_state"], d["protocol_data"]) == ("Stable", "roundrobin")
        sent = produce(broker.bootstrap, topic, 600, "rr", partitions=PARTITIONS)
        wait_read(sent, members)
        wait_committed(members, end_offsets(sent))
        ms.stop(*members)
    assert_exactly_once(sent, members)
