"""KIP-848 consumer groups in the group coordinator, driven through ConsumerGroupHeartbeat on the
in-memory broker of :mod:`tests.group.harness`: joining and epochs, revocation before
reassignment, fencing, leaving, static members, session and revocation timeouts, regex
subscriptions, the records and their reload, offsets with member epochs, and how the classic
APIs treat consumer groups."""

from __future__ import annotations

import uuid

import pytest

from kcompat.group import GroupCoordinator
from kcompat.group import consumer_records as crec
from kcompat.group.consumer_group import ConsumerProtocolConfig, TopicInfo
from kcompat.protocol.errors import ErrorCode as E
from kcompat.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from kcompat.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest as HB
from kcompat.protocol.messages.list_groups import ListGroupsRequest
from tests.group.harness import FAST, Broker

T, U, NEW = uuid.UUID(int=1), uuid.UUID(int=2), uuid.UUID(int=3)
CONFIG = ConsumerProtocolConfig(heartbeat_interval_ms=500, session_timeout_ms=3000)


class Topics:
    """A TopicsView over {name: (id, partitions)}; ``version`` moves on every change."""

    def __init__(self, topics: dict[str, tuple[uuid.UUID, int]]) -> None:
        self.topics = dict(topics)
        self.v = 1

    def add(self, name: str, topic_id: uuid.UUID, partitions: int) -> None:
        self.topics[name] = (topic_id, partitions)
        self.v += 1

    def version(self) -> int:
        return self.v

    def topic_names(self):
        return list(self.topics)

    def topic(self, name: str):
        if name not in self.topics:
            return None
        tid, n = self.topics[name]
        return TopicInfo(tid, name, n, {p: frozenset() for p in range(n)})

    def name_of(self, topic_id):
        return next((n for n, (t, _) in self.topics.items() if t == topic_id), None)


class CG(Broker):
    def __init__(self, topics: Topics | None = None, config: ConsumerProtocolConfig = CONFIG) -> None:
        super().__init__(own=False, topics={"t": 6, "u": 3})
        self.view = topics or Topics({"t": (T, 6), "u": (U, 3)})
        self.coord = GroupCoordinator(FAST, partition_exists=self.partition_exists, topics=self.view,
                                      consumer_config=config)
        for p in range(FAST.num_partitions):
            self.coord.load(p, [], self.now)

    def hb(self, member_id: str, epoch: int, *, group: str = "g", topics=None, regex=None, owned=None,
           instance=None, rebalance: int = -1, assignor=None, version: int = 1):
        """One heartbeat; (error, epoch, {topic id: partitions} or None)."""
        tps = None if owned is None else [HB.TopicPartitions(topic_id=t, partitions=sorted(ps))
                                          for t, ps in owned.items()]
        req = HB(group_id=group, member_id=member_id, member_epoch=epoch, instance_id=instance, rack_id=None,
                 rebalance_timeout_ms=rebalance, subscribed_topic_names=topics, subscribed_topic_regex=regex,
                 server_assignor=assignor, topic_partitions=tps)
        r = self.reply(self.call("consumer_group_heartbeat", req, version, "client", "/127.0.0.1"))
        got = None if r.assignment is None else {tp.topic_id: set(tp.partitions) for tp in r.assignment.topic_partitions}
        return r.error_code, r.member_epoch, got

    def cjoin(self, member_id: str, topics=("t",), **kw):
        return self.hb(member_id, 0, topics=list(topics), owned={}, rebalance=kw.pop("rebalance", 5000), **kw)

    def cg(self, group: str = "g"):
        return self.group(group).consumer


def test_a_member_joins_and_gets_every_partition():
    b = CG()
    err, epoch, got = b.cjoin("m1")
    assert (err, epoch, got) == (0, 1, {T: set(range(6))})
    assert b.cg().state.value == "Stable"
    err, epoch, got = b.hb("m1", 1, owned={T: set(range(6))})
    assert (err, epoch, got) == (0, 1, None)             # nothing changed: no assignment sent
    types = [int.from_bytes(r.key[:2], "big") for r in b.appended]
    assert types[:5] == [crec.MEMBER_METADATA, crec.GROUP_METADATA, crec.TARGET_MEMBER, crec.TARGET_METADATA,
                         crec.CURRENT_ASSIGNMENT]


def test_partitions_are_revoked_before_they_are_assigned_elsewhere():
    b = CG()
    b.cjoin("m1")
    err, epoch, got = b.cjoin("m2")
    assert (err, epoch, got) == (0, 2, {})                # all six still owned by m1
    assert b.cg().state.value == "Reconciling"
    err, epoch1, got1 = b.hb("m1", 1, owned={T: set(range(6))})
    assert err == 0 and epoch1 == 1 and len(got1[T]) == 3  # m1 must revoke three first, epoch unchanged
    kept = got1[T]
    # m2 still gets nothing while m1 holds them
    assert b.hb("m2", 2, owned={})[2] in (None, {})
    err, epoch1, got1 = b.hb("m1", 1, owned={T: kept})      # revoked
    assert (err, epoch1) == (0, 2)
    err, epoch2, got2 = b.hb("m2", 2, owned={})
    assert err == 0 and got2 == {T: set(range(6)) - kept}
    assert b.cg().state.value == "Stable"


def test_joining_member_does_not_move_partitions_that_stay():
    b = CG()
    for m in ("m1", "m2"):
        b.cjoin(m)
    b.hb("m1", 1, owned={T: set(range(6))})
    owned1 = b.hb("m1", 1, owned={T: set(range(6))})[2] or b.cg().members["m1"].assigned[T]
    b.hb("m1", 2, owned={T: set(owned1)})
    before = {m: set(b.cg().members[m].assigned.get(T, ())) for m in ("m1", "m2")}
    b.cjoin("m3")
    target = b.cg().target
    for m in ("m1", "m2"):
        assert len(before[m] - target[m][T]) <= 1           # each gives up at most one partition
    assert sum(len(a[T]) for a in target.values()) == 6


def test_epoch_checks_fence_and_unknown_members():
    b = CG()
    b.cjoin("m1")
    assert b.hb("m1", 5, owned={T: set(range(6))})[0] == E.FENCED_MEMBER_EPOCH
    assert b.hb("nobody", 1)[0] == E.UNKNOWN_MEMBER_ID
    assert b.hb("m1", 1, group="other")[0] == E.GROUP_ID_NOT_FOUND
    # a fenced member rejoins with epoch 0 under its own id and starts from nothing
    err, epoch, got = b.cjoin("m1")
    assert err == 0 and epoch == 1 and got == {T: set(range(6))}


@pytest.mark.parametrize("req_kw,code", [
    (dict(member_id="", epoch=0, topics=["t"], owned={}, rebalance=1000), E.INVALID_REQUEST),  # v1: own id
    (dict(member_id="m", epoch=0, topics=["t"], owned=None, rebalance=1000), E.INVALID_REQUEST),
    (dict(member_id="m", epoch=0, topics=["t"], owned={}, rebalance=-1), E.INVALID_REQUEST),
    (dict(member_id="m", epoch=0, topics=None, owned={}, rebalance=1000), E.INVALID_REQUEST),
    (dict(member_id="m", epoch=-3), E.INVALID_REQUEST),
    (dict(member_id="m", epoch=0, topics=["t"], owned={}, rebalance=1000, assignor="sticky"), E.UNSUPPORTED_ASSIGNOR),
    (dict(member_id="m", epoch=0, regex="t(", owned={}, rebalance=1000), E.INVALID_REGULAR_EXPRESSION),
])
def test_invalid_heartbeats(req_kw, code):
    b = CG()
    kw = dict(req_kw)
    assert b.hb(kw.pop("member_id"), kw.pop("epoch"), **kw)[0] == code


def test_leave_session_timeout_and_revocation_timeout_fence():
    b = CG()
    b.cjoin("m1", rebalance=2000)
    b.cjoin("m2")
    assert b.hb("m2", -1)[0] == 0                          # leaves
    assert set(b.cg().members) == {"m1"}
    b.cjoin("m3")
    b.hb("m1", 1, owned={T: set(range(6))})                # asked to revoke three
    b.advance(1500)
    b.hb("m1", 1, owned={T: set(range(6))})                # still owns them: a heartbeat is not enough
    b.hb("m3", b.cg().members["m3"].member_epoch, owned={})
    b.advance(1000)                                        # the 2 s rebalance timeout passed
    assert "m1" not in b.cg().members
    assert b.hb("m3", b.cg().members["m3"].member_epoch, owned={})[2] == {T: set(range(6))}
    b.advance(3500)                                        # m3 stops heartbeating (3 s session)
    assert not b.cg().members and b.cg().state.value == "Empty"


def test_static_member_leaves_temporarily_and_rejoins_with_its_assignment():
    b = CG()
    b.cjoin("a1", instance="i1")
    b.cjoin("b1", instance="i2")
    a_epoch = b.cg().members["a1"].member_epoch
    b.hb("a1", a_epoch, owned={T: set(range(6))}, instance="i1")
    b.hb("a1", b.cg().members["a1"].member_epoch, owned=b.cg().members["a1"].assigned, instance="i1")
    b.hb("b1", b.cg().members["b1"].member_epoch, owned={}, instance="i2")
    kept = set(b.cg().members["a1"].assigned[T])
    assert b.hb("a1", -2, instance="i1")[0] == 0
    assert b.cjoin("x", instance="i2")[0] == E.UNRELEASED_INSTANCE_ID   # i2 is still held by b1
    err, epoch, got = b.cjoin("a2", instance="i1")                       # i1 comes back as a2
    assert err == 0 and got == {T: kept}
    assert "a1" not in b.cg().members


def test_regex_subscription_picks_up_a_topic_created_later():
    view = Topics({"t": (T, 6), "u": (U, 3)})
    b = CG(view)
    err, epoch, got = b.hb("m1", 0, regex="t|new.*", owned={}, rebalance=1000)
    assert got == {T: set(range(6))}
    view.add("new-1", NEW, 2)
    err, epoch2, got = b.hb("m1", epoch, owned={T: set(range(6))})
    assert epoch2 > epoch and got == {T: set(range(6)), NEW: {0, 1}}
    assert b.cg().resolved_regexes == {"t|new.*": ("new-1", "t")}


def test_offsets_need_the_member_epoch_and_v9():
    b = CG()
    b.cjoin("m1")
    assert b.commit("g", {("t", 0): 5}, generation=1, member_id="m1", version=9) == {("t", 0): 0}
    assert b.commit("g", {("t", 0): 6}, generation=0, member_id="m1", version=9) == {("t", 0): E.STALE_MEMBER_EPOCH}
    assert b.commit("g", {("t", 0): 6}, generation=1, member_id="zz", version=9) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert b.commit("g", {("t", 0): 6}, generation=1, member_id="m1", version=8) == {("t", 0): E.UNSUPPORTED_VERSION}
    assert b.commit("g", {("t", 0): 6}) == {("t", 0): E.UNKNOWN_MEMBER_ID}   # no epoch while it has members
    b.hb("m1", -1)
    assert b.commit("g", {("t", 0): 7}) == {("t", 0): 0}                       # empty: admin commits
    assert b.fetch("g", [("t", 0)])[0][("t", 0)][0] == 7


def _rebalanced_pair(b: CG) -> tuple[set[int], set[int]]:
    """m1 joins (epoch 1, all of t), m2 joins (epoch 2), m1 revokes half and moves to epoch 2,
    m2 takes the rest at epoch 2: (m1's partitions, m2's)."""
    b.cjoin("m1")
    b.cjoin("m2")
    kept = b.hb("m1", 1, owned={T: set(range(6))})[2][T]
    assert b.hb("m1", 1, owned={T: kept})[1] == 2
    given = b.hb("m2", 2, owned={})[2][T]
    assert given == set(range(6)) - kept
    return kept, given


def test_an_older_epoch_commits_the_partitions_the_member_had_by_then():
    """KIP-1251 (Kafka 4.3): a member's commit with an epoch older than its current one is taken
    for partitions assigned to it at or before that epoch, and still its own; any other
    partition in the request fails the whole request with STALE_MEMBER_EPOCH."""
    b = CG()
    kept, given = _rebalanced_pair(b)
    m1, m2 = b.cg().members["m1"], b.cg().members["m2"]
    assert m1.member_epoch == m2.member_epoch == 2
    assert {m1.assignment_epoch(T, p) for p in kept} == {1} and {m2.assignment_epoch(T, p) for p in given} == {2}
    k, g = min(kept), min(given)
    assert b.commit("g", {("t", k): 5}, generation=1, member_id="m1", version=9) == {("t", k): 0}
    assert b.commit("g", {("t", g): 5}, generation=1, member_id="m1", version=9) == {("t", g): E.STALE_MEMBER_EPOCH}
    assert b.commit("g", {("t", k): 6, ("t", g): 6}, generation=1, member_id="m1", version=9) == {
        ("t", k): E.STALE_MEMBER_EPOCH, ("t", g): E.STALE_MEMBER_EPOCH}
    assert b.commit("g", {("t", k): 6}, generation=0, member_id="m1", version=9) == {("t", k): E.STALE_MEMBER_EPOCH}
    assert b.commit("g", {("t", k): 6}, generation=3, member_id="m1", version=9) == {("t", k): E.STALE_MEMBER_EPOCH}
    assert b.commit("g", {("t", g): 6}, generation=1, member_id="m2", version=9) == {("t", g): E.STALE_MEMBER_EPOCH}
    assert b.commit("g", {("t", g): 7}, generation=2, member_id="m2", version=9) == {("t", g): 0}
    assert b.fetch("g", [("t", k), ("t", g)])[0] == {("t", k): (5, -1, "", 0), ("t", g): (7, -1, "", 0)}


def test_a_transactional_commit_with_a_stale_epoch_is_illegal_generation():
    """TxnOffsetCommit checks the member epoch as OffsetCommit does (KIP-1251), but a stale epoch
    is ILLEGAL_GENERATION there, the error a transactional producer knows (Kafka's
    validateTransactionalOffsetCommit maps STALE_MEMBER_EPOCH so; the Java producer treats an
    unexpected code as fatal)."""
    b = CG()
    kept, given = _rebalanced_pair(b)
    k, g = min(kept), min(given)
    assert b.txn_commit("g", {("t", k): 5}, generation=1, member_id="m1") == {("t", k): 0}
    assert b.txn_commit("g", {("t", g): 5}, generation=1, member_id="m1") == {("t", g): E.ILLEGAL_GENERATION}
    assert b.txn_commit("g", {("t", k): 5}, generation=3, member_id="m1") == {("t", k): E.ILLEGAL_GENERATION}
    assert b.txn_commit("g", {("t", k): 5}, generation=2, member_id="zz") == {("t", k): E.UNKNOWN_MEMBER_ID}


def test_assignment_epochs_are_stored_and_default_to_the_member_epoch():
    """The current-assignment record carries AssignmentEpochs (Kafka 4.3's tagged field); a record
    without them (Kafka before 4.3, kcompat before this) gives every partition the member epoch."""
    b = CG()
    kept, _ = _rebalanced_pair(b)
    m1 = b.cg().members["m1"]
    value = crec.current_assignment_value(m1.member_epoch, m1.previous_member_epoch, int(m1.state), m1.assigned,
                                          m1.pending_revocation, m1.assignment_epochs)
    stored = crec.parse_value(crec.CURRENT_ASSIGNMENT, value)
    [tp] = stored.assigned_partitions
    assert tp.partitions == sorted(kept) and tp.assignment_epochs == [1] * len(kept)
    tp.assignment_epochs = None
    assert crec.to_assignment_epochs(stored.assigned_partitions, stored.member_epoch) == {(T, p): 2 for p in kept}
    tp.assignment_epochs = [1]     # not one per partition: the default, as Kafka reads it
    assert crec.to_assignment_epochs(stored.assigned_partitions, -2) == {(T, p): 0 for p in kept}


def test_records_reload_into_the_same_group():
    b = CG()
    b.cjoin("m1")
    b.cjoin("m2", regex=None)
    b.hb("m1", 1, owned={T: set(range(6))})
    b.commit("g", {("t", 1): 9}, generation=b.cg().members["m1"].member_epoch, member_id="m1", version=9)
    before = b.cg()
    other = CG(b.view)
    for p in range(FAST.num_partitions):
        other.coord.load(p, b.records(p), other.now)
    after = other.cg()
    assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
    assert after.members == before.members and after.target == before.target
    assert other.group("g").offsets[("t", 1)].offset == 9
    assert other.hb("m1", before.members["m1"].member_epoch, owned=before.members["m1"].assigned)[0] == 0


def test_classic_apis_and_conversions():
    b = CG()
    b.commit("g", {("t", 0): 3})                        # offsets only: a simple classic group
    assert b.cjoin("m1")[0] == 0                          # it becomes a consumer group, keeping them
    assert b.fetch("g", [("t", 0)])[0][("t", 0)][0] == 3
    listed = b.reply(b.call("list_groups", ListGroupsRequest(states_filter=[], types_filter=[]), 5))
    assert [(g.group_id, g.group_type, g.group_state, g.protocol_type) for g in listed.groups] == \
        [("g", "consumer", "Stable", "consumer")]
    d = b.reply(b.call("consumer_group_describe", ConsumerGroupDescribeRequest(
        group_ids=["g", "nope"], include_authorized_operations=False), 1))
    assert d.groups[0].error_code == 0 and d.groups[0].members[0].member_id == "m1"
    assert d.groups[0].members[0].assignment.topic_partitions[0].topic_name == "t"
    assert d.groups[1].error_code == E.GROUP_ID_NOT_FOUND
    assert b.describe("g")[0].group_state == "Dead"                  # not a classic group
    assert b.delete_groups("g") == {"g": E.NON_EMPTY_GROUP}
    b.hb("m1", 1, owned={T: set(range(6))})
    b.hb("m1", -1)
    join = b.reply(Broker.join(b, "g"))                   # empty again: back to a classic group
    assert join.error_code in (0, E.MEMBER_ID_REQUIRED)
    assert b.group("g").consumer is None and b.fetch("g", [("t", 0)])[0][("t", 0)][0] == 3


def test_online_upgrade_then_downgrade_through_a_mixed_group():
    b = CG()
    (leader, gen), (follower, _) = b.form_group("g", 2)     # classic: partition 0 to the leader, 1 to the other
    b.commit("g", {("t", 0): 11}, generation=gen, member_id=leader, version=8)
    # a member with the consumer protocol joins: the classic group becomes a consumer group
    err, epoch, got = b.cjoin("c1")
    assert err == 0 and b.group("g").consumer is not None and b.group("g").generation_id == 0
    cg = b.cg()
    assert cg.members[leader].member_epoch == gen and cg.members[leader].assigned == {T: frozenset({0})}
    assert b.fetch("g", [("t", 0)])[0][("t", 0)][0] == 11
    # the classic members learn of the new epoch from their heartbeat, rejoin and sync
    assert b.heartbeat("g", leader, gen) == E.REBALANCE_IN_PROGRESS
    for member_id in (leader, follower):
        join = b.reply(Broker.join(b, "g", member_id))
        assert join.error_code == 0 and join.leader == "" and join.generation_id == cg.members[member_id].member_epoch
        sync = b.reply(b.sync("g", member_id, join.generation_id))
        assert sync.error_code == 0
    epoch = cg.members["c1"].member_epoch
    b.hb("c1", epoch, owned={})
    owned = {m: cg.members[m].assigned.get(T, frozenset()) for m in cg.members}
    assert sorted(p for ps in owned.values() for p in ps) == list(range(6))     # each partition once
    assert all(owned.values())
    described = b.reply(b.call("consumer_group_describe", ConsumerGroupDescribeRequest(
        group_ids=["g"], include_authorized_operations=False), 1)).groups[0]
    assert sorted(m.member_type for m in described.members) == [0, 0, 1]
    reloaded = CG(b.view)                                    # the mixed group as a new coordinator loads it
    for p in range(FAST.num_partitions):
        reloaded.coord.load(p, b.records(p), reloaded.now)
    assert reloaded.cg().members == cg.members and reloaded.cg().target == cg.target
    assert reloaded.group("g").members == {}                 # no classic group left behind
    # a classic member commits with its member epoch as generation, or an older one for the
    # partitions it had by then (KIP-1251: not older than their assignment epochs)
    gen_now = cg.members[leader].member_epoch
    assert b.commit("g", {("t", 0): 12}, generation=gen_now, member_id=leader, version=8) == {("t", 0): 0}
    assert b.commit("g", {("t", 0): 13}, generation=gen_now + 1, member_id=leader, version=8) == \
        {("t", 0): E.ILLEGAL_GENERATION}
    mine = min(cg.members[leader].assigned[T])
    assigned_at = cg.members[leader].assignment_epoch(T, mine)
    assert assigned_at < gen_now       # the partition came with the migration, before the rejoin
    assert b.commit("g", {("t", mine): 12}, generation=assigned_at, member_id=leader, version=8) == {("t", mine): 0}
    assert b.commit("g", {("t", mine): 13}, generation=assigned_at - 1, member_id=leader, version=8) == \
        {("t", mine): E.ILLEGAL_GENERATION}
    # the consumer-protocol member leaves: only classic members remain, the group is classic again
    assert b.hb("c1", cg.members["c1"].member_epoch, )[0] == 0
    b.hb("c1", -1)
    g = b.group("g")
    assert g.consumer is None and set(g.members) == {leader, follower}
    assert g.state.value == "PreparingRebalance" and g.protocol_type == "consumer"
    assert b.fetch("g", [("t", 0)])[0][("t", 0)][0] == 12
    # they rejoin as a classic group and get a new generation
    tokens = [Broker.join(b, "g", m) for m in (leader, follower)]
    for _ in range(50):
        if all(b.answered(t) for t in tokens):
            break
        b.advance(100)
    assert all(b.reply(t).error_code == 0 for t in tokens)


def test_migration_policy_disabled_refuses_the_upgrade():
    b = CG(config=ConsumerProtocolConfig(heartbeat_interval_ms=500, session_timeout_ms=3000,
                                         migration_policy="disabled"))
    b.form_group("g", 2)
    assert b.cjoin("c1")[0] == E.GROUP_ID_NOT_FOUND
    assert b.group("g").consumer is None and len(b.group("g").members) == 2
