"""Static membership (KIP-345, ``group.instance.id``) against a real kcompat process: a static member
that closes (neither librdkafka nor kafka-python sends LeaveGroup for a static member) and comes back
within session.timeout.ms gets its partitions back without a rebalance: the broker keeps it in the
group meanwhile, the other members see no revocation or assignment, DescribeGroups shows the same
members (only the returning instance has a new member id) in state Stable, and the member resumes
at the offsets it committed.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import ConsumerGroupState

from tests.clients.common import ck_admin, topic_name
from tests.clients.test_groups_common import (
    KINDS, Members, assert_exactly_once, client_config, create_topic, describe_members, end_offsets, produce,
    unique, wait_balanced, wait_committed, wait_read,
)

PARTITIONS = 6
HEARTBEAT_INTERVAL_S = 3.0  # both clients' default


def describe(bootstrap: str, group: str) -> tuple[ConsumerGroupState, dict[str, tuple[str, set[int]]]]:
    """State and members of ``group`` (confluent AdminClient.describe_consumer_groups):
    group.instance.id -> (member id, assigned partitions)."""
    admin = ck_admin(bootstrap)  # keep a reference: the futures never complete once the client is collected
    d = admin.describe_consumer_groups([group], request_timeout=15)[group].result(timeout=20)
    return d.state, {m.group_instance_id: (m.member_id, {tp.partition for tp in m.assignment.topic_partitions})
                     for m in d.members}


@pytest.mark.parametrize("kind", KINDS)
def test_static_member_restart_gets_its_partitions_back_without_rebalance(broker, request, kind):
    topic = topic_name(request)
    group = unique("static")
    create_topic(broker.bootstrap, topic, PARTITIONS)

    def config(i: int) -> dict:
        return client_config(kind, {"group.instance.id": f"{group}-s{i}"})

    with Members() as ms:
        members = [ms.new(kind, f"s{i}", broker.bootstrap, group, topic, config(i)) for i in range(3)]
        wait_balanced(members, PARTITIONS)
        sent1 = produce(broker.bootstrap, topic, 600, "before", partitions=PARTITIONS)
        wait_read(sent1, members)
        wait_committed(members, end_offsets(sent1))
        state, before = describe(broker.bootstrap, group)
        assert state == ConsumerGroupState.STABLE and set(before) == {f"{group}-s{i}" for i in range(3)}
        assert {i: parts for i, (_, parts) in before.items()} == {
            f"{group}-{m.name}": m.owned_now() for m in members}
        others = [members[0], members[2]]
        seen = {m.name: len(m.events_now()) for m in others}

        leaving = members[1]
        ms.stop(leaving)
        # no LeaveGroup: the broker still counts the closed static member in, the group stays Stable
        state, during = describe(broker.bootstrap, group)
        assert state == ConsumerGroupState.STABLE and during == before

        returning = ms.new(kind, "s1-again", broker.bootstrap, group, topic, config(1))
        members = [members[0], returning, members[2]]
        wait_balanced(members, PARTITIONS, timeout=20,
                      counts={"s0": 2, "s1-again": 2, "s2": 2})
        assert returning.owned_now() == before[f"{group}-s1"][1], describe_members(members)
        sent2 = produce(broker.bootstrap, topic, 600, "after", partitions=PARTITIONS)
        wait_read(sent2, members)
        wait_committed(members, end_offsets(sent1 + sent2))
        # give the others time to hear of a rebalance, had there been one (from their next heartbeats)
        time.sleep(max(0.0, 2 * HEARTBEAT_INTERVAL_S + 0.5 - (time.monotonic() - returning.events_now()[0].t)))
        for m in others:
            assert len(m.events_now()) == seen[m.name], f"{m.name} saw a rebalance{describe_members(members)}"
        state, after = describe(broker.bootstrap, group)
        ms.stop(*members)

    assert state == ConsumerGroupState.STABLE
    assert {i: parts for i, (_, parts) in after.items()} == {i: parts for i, (_, parts) in before.items()}
    for i in (0, 2):
        assert after[f"{group}-s{i}"][0] == before[f"{group}-s{i}"][0], "a member that stayed got a new member id"
    assert after[f"{group}-s1"][0] != before[f"{group}-s1"][0], "the restarted static member kept its member id"
    assert [set(e.partitions) for e in returning.events_now() if e.kind == "assign"][0] == before[f"{group}-s1"][1]
    # it resumed at its committed offsets: only the second batch, only its partitions
    assert all(r.value.startswith(b"after") for r in returning.reads_now())
    assert_exactly_once(sent1 + sent2, [members[0], leaving, returning, members[2]])
