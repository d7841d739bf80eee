"""Leader election on the controller (Kafka 3.9 KRaft PartitionChangeBuilder /
ReplicationControlManager rules): ISR-only elections by default, unclean elections with
``unclean.leader.election.enable`` (on fencing, unfencing and the periodic pass), ElectLeaders
(preferred and unclean, KIP-460) and the auto leader rebalance. Pure: image + records."""

from __future__ import annotations

import pytest

from kcompat.kraft import leader_election as le
from kcompat.kraft.controller import NewTopic
from kcompat.kraft.image import NO_CHANGE_LEADER, RESOURCE_BROKER
from kcompat.protocol.errors import ErrorCode as E, KafkaError
from kcompat.protocol.metadata_records import ConfigRecord, PartitionChangeRecord
from tests.kraft.test_cluster_control import SESSION, T0, Harness


class H(Harness):
    def assigned(self, name: str, *replicas: list[int], configs: dict | None = None):
        (res,) = self.controller.create_topics(
            [NewTopic(name, assignments=dict(enumerate(map(list, replicas))), configs=configs or {})],
            validate_only=False, now_ms=T0)
        assert res.error == 0, res
        return self.image.topics[name]

    def set_isr(self, name: str, partition: int, isr: list[int]) -> None:
        t = self.image.topics[name]
        self.commit([PartitionChangeRecord(partition_id=partition, topic_id=t.topic_id, isr=isr)], T0)

    def set_leader(self, name: str, partition: int, leader: int) -> None:
        t = self.image.topics[name]
        self.commit([PartitionChangeRecord(partition_id=partition, topic_id=t.topic_id, leader=leader)], T0)

    def unclean(self, name: str, value: str | None = "true") -> None:
        self.controller.alter_topic_configs(name, {le.UNCLEAN_CONFIG: value}, validate_only=False, now_ms=T0)

    def fence(self, *brokers: int) -> None:
        """Only ``brokers`` miss their heartbeats for a session: they are fenced."""
        self.clock = getattr(self, "clock", T0) + SESSION + 1
        now = self.clock
        for b in self.image.brokers:
            if b not in brokers and not self.image.brokers[b].fenced:
                self.cc.heartbeat(b, self.image.brokers[b].epoch, self.image.offset, False, False, now - 1)
        assert sorted(self.cc.fence_stale_brokers(now)) == sorted(brokers)

    def changes(self) -> list[PartitionChangeRecord]:
        return [r for r in self.records if isinstance(r, PartitionChangeRecord)]


@pytest.fixture
def h():
    h = H()
    for b in (1, 2, 3):
        h.join(b)
    return h


# -- the pure choice -------------------------------------------------------------------------------

def test_choose_leader_online_unclean_and_preferred():
    live = {1, 2, 3}
    # ONLINE keeps a valid leader, else the first live ISR member in replica order, else none
    assert le.choose_leader([1, 2, 3], [2, 3], 3, le.ONLINE, live) == le.Leader(3)
    assert le.choose_leader([1, 2, 3], [3, 2], -1, le.ONLINE, live) == le.Leader(2)
    assert le.choose_leader([1, 2, 3], [4], -1, le.ONLINE, live) == le.Leader(-1)
    # UNCLEAN prefers the ISR, then the first live replica
    assert le.choose_leader([1, 2, 3], [3], -1, le.UNCLEAN, live) == le.Leader(3)
    assert le.choose_leader([4, 2, 3], [4], -1, le.UNCLEAN, live) == le.Leader(2, unclean=True)
    assert le.choose_leader([4, 5], [4], -1, le.UNCLEAN, live) == le.Leader(-1)
    # PREFERRED: the first replica if valid, else keep a valid leader, else another ISR member
    assert le.choose_leader([1, 2, 3], [1, 2, 3], 2, le.PREFERRED, live) == le.Leader(1)
    assert le.choose_leader([1, 2, 3], [2, 3], 2, le.PREFERRED, live) == le.Leader(2)
    assert le.choose_leader([1, 2, 3], [1, 2, 3], 2, le.PREFERRED, {2, 3}) == le.Leader(2)
    assert le.choose_leader([1, 2, 3], [1, 3], -1, le.PREFERRED, {2, 3}) == le.Leader(3)


# -- unclean.leader.election.enable ---------------------------------------------------------------

def test_by_default_only_isr_members_lead(h):
    t = h.assigned("clean", [2, 1, 3])
    h.set_isr("clean", 0, [2])
    h.fence(2)
    p = t.partitions[0]
    assert (p.leader, p.isr) == (-1, [2])      # 1 and 3 are live but out of sync
    assert h.cc.elect_unclean_leaders(T0) == 0
    assert p.leader == -1


def test_fencing_the_last_isr_member_elects_the_first_live_replica_when_the_topic_allows_it(h):
    t = h.assigned("dirty", [2, 3, 1], configs={le.UNCLEAN_CONFIG: "true"})
    h.set_isr("dirty", 0, [2])
    p = t.partitions[0]
    epoch = p.leader_epoch
    h.fence(2)
    assert (p.leader, p.isr, p.leader_epoch) == (3, [3], epoch + 1)   # replica order, ISR = leader
    rec = h.changes()[-1]
    assert (rec.leader, rec.isr, rec.leader_recovery_state) == (3, [3], -1)   # stays RECOVERED


def test_isr_members_still_come_first_with_unclean_election_enabled(h):
    t = h.assigned("both", [2, 3, 1], configs={le.UNCLEAN_CONFIG: "true"})
    h.set_isr("both", 0, [2, 1])
    h.fence(2)
    assert (t.partitions[0].leader, t.partitions[0].isr) == (1, [1])


def test_the_topic_override_wins_over_the_cluster_default(h):
    h.commit([ConfigRecord(resource_type=RESOURCE_BROKER, resource_name="", name=le.UNCLEAN_CONFIG, value="true")], T0)
    a = h.assigned("a", [2, 1])
    b = h.assigned("b", [2, 1], configs={le.UNCLEAN_CONFIG: "false"})
    h.set_isr("a", 0, [2])
    h.set_isr("b", 0, [2])
    h.fence(2)
    assert a.partitions[0].leader == 1 and b.partitions[0].leader == -1
    assert le.unclean_enabled_in_image(h.image, "a") and not le.unclean_enabled_in_image(h.image, "b")
    assert le.unclean_enabled_in_image(h.image, "nothing", static_default=False)  # the cluster default
    h.cc.unclean_enabled = lambda topic: False     # what the broker's ControllerService plugs in
    assert h.cc.elect_unclean_leaders(T0) == 0


def test_an_unfenced_out_of_sync_replica_leads_a_leaderless_partition_only_when_allowed(h):
    dirty = h.assigned("dirty", [3, 2], configs={le.UNCLEAN_CONFIG: "true"})
    clean = h.assigned("clean", [3, 2])
    for name in ("dirty", "clean"):
        h.set_isr(name, 0, [3])
    h.fence(2, 3)
    assert dirty.partitions[0].leader == clean.partitions[0].leader == -1
    epoch = h.register(2, T0 + SESSION + 2)
    assert not h.cc.heartbeat(2, epoch, h.image.offset, False, False, T0 + SESSION + 3).is_fenced
    assert (dirty.partitions[0].leader, dirty.partitions[0].isr) == (2, [2])
    assert (clean.partitions[0].leader, clean.partitions[0].isr) == (-1, [3])


def test_turning_the_config_on_later_elects_on_the_next_periodic_pass(h):
    t = h.assigned("later", [3, 1, 2])
    h.set_isr("later", 0, [3])
    h.fence(3)
    assert t.partitions[0].leader == -1
    h.unclean("later")
    assert h.cc.elect_unclean_leaders(T0) == 1
    assert (t.partitions[0].leader, t.partitions[0].isr) == (1, [1])
    assert h.cc.elect_unclean_leaders(T0) == 0          # nothing left to do: no records
    n = len(h.records)
    assert h.cc.elect_unclean_leaders(T0) == 0 and len(h.records) == n


def test_controlled_shutdown_of_the_last_isr_member_hands_over_uncleanly_when_allowed(h):
    t = h.assigned("cs", [1, 2], configs={le.UNCLEAN_CONFIG: "true"})
    h.set_isr("cs", 0, [1])
    res = h.cc.heartbeat(1, h.image.brokers[1].epoch, h.image.offset, False, True, T0 + 10)
    assert res.should_shut_down
    assert (t.partitions[0].leader, t.partitions[0].isr) == (2, [2])


# -- ElectLeaders ---------------------------------------------------------------------------------

def _codes(results):
    return {(t.topic, p.partition): p.error for t in results for p in t.partitions}


def test_preferred_election(h):
    h.assigned("pref", [1, 2, 3], [2, 3, 1], [3, 1, 2])
    h.set_leader("pref", 0, 2)                      # led by a non-preferred ISR member
    h.set_leader("pref", 1, 3)
    h.set_isr("pref", 1, [3, 1])                    # preferred replica 2 out of sync
    res = h.cc.elect_leaders(le.PREFERRED, [("pref", [0, 1, 2, 7]), ("nope", [0])], T0)
    assert _codes(res) == {("pref", 0): E.NONE, ("pref", 1): E.PREFERRED_LEADER_NOT_AVAILABLE,
                           ("pref", 2): E.ELECTION_NOT_NEEDED, ("pref", 7): E.UNKNOWN_TOPIC_OR_PARTITION,
                           ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    messages = {(t.topic, p.partition): p.message for t in res for p in t.partitions}
    assert messages[("pref", 0)] is None and messages[("nope", 0)] == "No such topic as nope"
    assert messages[("pref", 1)] == "The preferred leader was not available."
    p0 = h.image.topics["pref"].partitions[0]
    assert p0.leader == 1 and p0.leader_epoch == 2  # set_leader and the election each bump it
    # a fenced preferred replica is not available either
    h.set_leader("pref", 0, 2)
    h.fence(1)
    (t,) = h.cc.elect_leaders(le.PREFERRED, [("pref", [0])], T0)
    assert t.partitions[0].error == E.PREFERRED_LEADER_NOT_AVAILABLE


def test_a_partition_named_twice_is_elected_once(h):
    h.assigned("twice", [1, 2])
    h.set_leader("twice", 0, 2)
    n = len(h.changes())
    (t,) = h.cc.elect_leaders(le.PREFERRED, [("twice", [0, 0])], T0)
    assert [p.error for p in t.partitions] == [E.NONE, E.ELECTION_NOT_NEEDED]
    assert len(h.changes()) == n + 1


def test_null_topic_partitions_means_all_and_lists_only_partitions_that_needed_an_election(h):
    h.assigned("x", [1, 2], [2, 1])
    h.assigned("y", [3, 1])
    h.set_leader("x", 1, 1)
    res = h.cc.elect_leaders(le.PREFERRED, None, T0)
    assert [(t.topic, [(p.partition, p.error) for p in t.partitions]) for t in res] == \
        [("x", [(1, E.NONE)]), ("y", [])]
    assert h.image.topics["x"].partitions[1].leader == 2


def test_unclean_election(h):
    h.assigned("u", [3, 2, 1], [3, 1, 2], [3, 1, 2], [1, 2, 3])
    for p, isr in ((0, [3]), (1, [3]), (2, [3])):
        h.set_isr("u", p, isr)
    h.fence(3)
    h.set_isr("u", 2, [3, 1])          # an ISR member is live but was not elected yet (hypothetical)
    h.set_leader("u", 2, -1)
    res = h.cc.elect_leaders(le.UNCLEAN, [("u", [0, 1, 2, 3])], T0)
    assert _codes(res) == {("u", 0): E.NONE, ("u", 1): E.NONE, ("u", 2): E.NONE, ("u", 3): E.ELECTION_NOT_NEEDED}
    parts = h.image.topics["u"].partitions
    assert (parts[0].leader, parts[0].isr) == (2, [2])
    assert (parts[1].leader, parts[1].isr) == (1, [1])
    assert (parts[2].leader, parts[2].isr) == (1, [3, 1])   # from the ISR: a clean election
    # nobody live to elect
    h.assigned("gone", [2])
    h.set_isr("gone", 0, [2])
    h.fence(2)
    (t,) = h.cc.elect_leaders(le.UNCLEAN, [("gone", [0])], T0)
    assert (t.partitions[0].error, t.partitions[0].message) == \
        (E.ELIGIBLE_LEADERS_NOT_AVAILABLE, "Eligible topic partition leaders are not available.")


def test_an_unknown_election_type_is_an_invalid_request(h):
    with pytest.raises(KafkaError) as e:
        h.cc.elect_leaders(2, None, T0)
    assert e.value.code == E.INVALID_REQUEST


# -- auto.leader.rebalance.enable -----------------------------------------------------------------

def test_balance_moves_leaders_back_to_live_in_sync_preferred_replicas(h):
    h.assigned("bal", [1, 2], [2, 1], [3, 1], [1, 3])
    h.set_leader("bal", 0, 2)
    h.set_leader("bal", 2, 1)
    h.set_isr("bal", 2, [1])           # preferred 3 not in the ISR: stays with 1
    h.set_leader("bal", 3, 3)
    moved, more = h.cc.balance_leaders(T0)
    assert (moved, more) == (2, False)
    assert [p.leader for p in h.image.topics["bal"].partitions.values()] == [1, 2, 1, 1]
    assert h.cc.balance_leaders(T0) == (0, False)


def test_balance_is_bounded_per_pass(h):
    h.assigned("many", *([[1, 2]] * 5))
    for p in range(5):
        h.set_leader("many", p, 2)
    assert h.cc.balance_leaders(T0, limit=3) == (3, True)
    assert h.cc.balance_leaders(T0, limit=3) == (2, False)
    assert all(p.leader == 1 for p in h.image.topics["many"].partitions.values())


def test_records_name_only_what_changes(h):
    t = h.assigned("rec", [1, 2])
    rec = le.change(t.topic_id, t.partitions[0], le.PREFERRED, {1, 2}, leader=2)
    assert (rec.leader, rec.isr) == (1, None)
    assert le.change(t.topic_id, t.partitions[0], le.PREFERRED, {1, 2}) is None
    rec = le.change(t.topic_id, t.partitions[0], le.ONLINE, {2}, target_isr=[2])
    assert (rec.leader, rec.isr) == (2, [2])
    rec = le.change(t.topic_id, t.partitions[0], le.ONLINE, {1, 2}, target_isr=[1])
    assert (rec.leader, rec.isr) == (NO_CHANGE_LEADER, [1])
