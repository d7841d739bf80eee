"""Cooperative-sticky assignment (incremental rebalancing, KIP-429) against a real kcompat process:
two members share a six-partition topic, a third joins; only the partitions that move are revoked
(the rebalance callbacks receive only the incremental changes), the members keep consuming the
partitions they keep, and every record is read exactly once.

confluent-kafka: ``partition.assignment.strategy=cooperative-sticky``; records keep arriving during
the rebalance (a member commits what it processed in on_revoke, before its partition moves).
kafka-python 3.0.12 supports it too (``CooperativeStickyAssignor``); its rebalance listener runs
on the client's IO loop and cannot commit there, so the third member joins while the group is idle
and committed.
"""

from __future__ import annotations

import pytest
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor

from tests.clients.common import topic_name, wait_until
from tests.clients.test_groups_common import (
    KINDS, BackgroundProducer, Members, assert_exactly_once, create_topic, describe_members, end_offsets, produce,
    unique, wait_balanced, wait_committed, wait_read,
)

PARTITIONS = 6
CONFIG = {
    "confluent": {"partition.assignment.strategy": "cooperative-sticky"},
    "kafka-python": {"partition_assignment_strategy": [CooperativeStickyAssignor]},
}


@pytest.mark.parametrize("kind", KINDS)
def test_third_member_takes_partitions_without_revoking_the_others(broker, request, kind):
    topic = topic_name(request)
    group = unique("coop")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    with Members() as ms:
        first = [ms.new(kind, f"m{i}", broker.bootstrap, group, topic, CONFIG[kind]) for i in range(2)]
        wait_balanced(first, PARTITIONS)
        before = {m.name: m.owned_now() for m in first}
        seen = {m.name: len(m.events_now()) for m in first}
        sent1 = produce(broker.bootstrap, topic, 600, "before", partitions=PARTITIONS)
        wait_read(sent1, first)
        wait_committed(first, end_offsets(sent1))

        with BackgroundProducer(broker.bootstrap, topic, "during") as bg:
            if kind == "kafka-python":
                bg.stop()  # see the module docstring: join while idle
            else:
                wait_read(_at_least(bg, 100), first)
            third = ms.new(kind, "m2", broker.bootstrap, group, topic, CONFIG[kind])
            members = first + [third]
            wait_balanced(members, PARTITIONS, timeout=40)
            during = bg.stop()
        sent2 = produce(broker.bootstrap, topic, 600, "after", partitions=PARTITIONS)
        everything = sent1 + during + sent2
        wait_read(everything, members)
        wait_committed(members, end_offsets(everything))
        # (closing revokes everything: look before)
        after = {m.name: m.owned_now() for m in members}
        events = {m.name: [e for e in m.events_now()[seen.get(m.name, 0):] if e.partitions] for m in members}
        ms.stop(*members)

    for m in first:
        kept, lost = after[m.name], before[m.name] - after[m.name]
        assert len(lost) == 1 and kept < before[m.name], (
            f"{m.name} owned {sorted(before[m.name])}, then {sorted(kept)}{describe_members(members)}")
        revoked = [set(e.partitions) for e in events[m.name] if e.kind == "revoke"]
        assert revoked == [lost], (
            f"{m.name} must see one revocation of exactly {sorted(lost)} (cooperative: partitions it keeps "
            f"are never revoked), got {revoked}{describe_members(members)}")
        assert not [e for e in events[m.name] if e.kind != "revoke"], (
            f"{m.name} was assigned or lost partitions{describe_members(members)}")
    assigned = [set(e.partitions) for e in events["m2"] if e.kind == "assign"]
    assert not [e for e in events["m2"] if e.kind != "assign"], describe_members(members)
    assert set().union(*assigned) == after["m2"] and len(after["m2"]) == 2, describe_members(members)
    assert_exactly_once(everything, members)
    if kind == "confluent":
        assert len(during) >= 100  # records kept arriving while the group rebalanced


def _at_least(bg: BackgroundProducer, n: int):
    wait_until(lambda: len(bg.sent) >= n or bg.error is not None, 20, what=f"{n} records produced")
    return list(bg.sent[:n])
