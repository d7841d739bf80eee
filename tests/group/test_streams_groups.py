"""KIP-1071 streams groups in the group coordinator, driven through StreamsGroupHeartbeat on the
in-memory broker of :mod:`tests.group.harness`: joining with a topology, internal topics the
broker must create (their partition counts inferred as Kafka 4.3.1 does), the initial rebalance
delay, task assignment and reconciliation (a task moves only once its owner revoked it), leaving
and session expiry, offset commits checked against member and task epochs, StreamsGroupDescribe,
and how ListGroups / DescribeGroups / DeleteGroups treat a streams group."""

from __future__ import annotations

import uuid

from kcompat.group import GroupCoordinator
from kcompat.group import streams_records as strec
from kcompat.group.streams_assignor import AssignmentMember, StickyTaskAssignor
from kcompat.group.streams_groups import StreamsProtocolConfig
from kcompat.protocol.errors import ErrorCode as E
from kcompat.protocol.messages.streams_group_describe import StreamsGroupDescribeRequest
from kcompat.protocol.messages.streams_group_heartbeat import StreamsGroupHeartbeatRequest as HB
from tests.group.harness import FAST, Broker
from tests.group.test_consumer_groups import Topics

IN = uuid.UUID(int=1)
CONFIG = StreamsProtocolConfig(heartbeat_interval_ms=500, session_timeout_ms=3000, initial_rebalance_delay_ms=0,
                               assignment_interval_ms=0)
APP = "wc"
REPART = f"{APP}-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition"
CHANGELOG = f"{APP}-KSTREAM-AGGREGATE-STATE-STORE-0000000003-changelog"


def word_count_topology(epoch: int = 1):
    """The shape of a word count: subtopology 0 reads the input and writes the repartition
    topic, subtopology 1 reads it and keeps counts in a store with a changelog."""
    T = HB.Topology
    return T(epoch=epoch, subtopologies=[
        HB.Subtopology(subtopology_id="0", source_topics=["in"], source_topic_regex=[], state_changelog_topics=[],
                       repartition_sink_topics=[REPART], repartition_source_topics=[], copartition_groups=[]),
        HB.Subtopology(subtopology_id="1", source_topics=[], source_topic_regex=[],
                       state_changelog_topics=[HB.TopicInfo(name=CHANGELOG, partitions=0, replication_factor=0,
                                                            topic_configs=[])],
                       repartition_sink_topics=[],
                       repartition_source_topics=[HB.TopicInfo(name=REPART, partitions=0, replication_factor=0,
                                                               topic_configs=[HB.KeyValue(key="cleanup.policy",
                                                                                          value="delete")])],
                       copartition_groups=[])])


class SB(Broker):
    def __init__(self, config: StreamsProtocolConfig = CONFIG, partitions: int = 4, view: Topics | None = None) -> None:
        super().__init__(own=False, topics={"in": partitions})
        self.view = view or Topics({"in": (IN, partitions)})
        self.coord = GroupCoordinator(FAST, partition_exists=self.partition_exists, topics=self.view,
                                      streams_config=config)
        for p in range(FAST.num_partitions):
            self.coord.load(p, [], self.now)

    def hb(self, member_id: str, epoch: int, *, process: str | None = None, topology=None, active=None,
           standby=None, group: str = APP, rebalance_timeout: int = -1, **kw):
        owned = [] if epoch == 0 else None
        if active is not None:
            owned = [HB.TaskIds(subtopology_id=s, partitions=sorted(ps)) for s, ps in sorted(active.items())]
        req = HB(group_id=group, member_id=member_id, member_epoch=epoch, endpoint_information_epoch=0,
                 rebalance_timeout_ms=rebalance_timeout, topology=topology, process_id=process,
                 active_tasks=owned,
                 standby_tasks=None if owned is None else [
                     HB.TaskIds(subtopology_id=s, partitions=sorted(ps)) for s, ps in sorted((standby or {}).items())],
                 warmup_tasks=None if owned is None else [], **kw)
        return self.reply(self.call("streams_group_heartbeat", req, 0, "client", "/127.0.0.1"))

    def join(self, member_id: str, process: str | None = None, topology=None):
        return self.hb(member_id, 0, process=process or member_id, topology=topology or word_count_topology(),
                       rebalance_timeout=1000)

    def create_internal(self):
        """What the broker does with the topics the coordinator asks for."""
        for name, (partitions, _, _) in self.coord.streams_groups.take_topics_to_create().items():
            self.view.add(name, uuid.uuid4(), partitions)

    def sg(self, group: str = APP):
        return self.group(group).streams


def tasks(r) -> dict[str, set[int]] | None:
    return None if r.active_tasks is None else {t.subtopology_id: set(t.partitions) for t in r.active_tasks}


def statuses(r) -> list[int]:
    return [s.status_code for s in r.status or ()]


def test_first_join_asks_for_internal_topics_with_inferred_partitions_then_assigns_every_task():
    b = SB()
    r = b.join("m1")
    # a new group is at epoch 1 (Kafka's StreamsGroup): the join bumps it to 2, the member follows
    assert (r.error_code, r.member_id, r.member_epoch, r.heartbeat_interval_ms) == (0, "m1", 2, 500)
    # in the order of Kafka's HashMap of the topics to create (as Kafka 4.3.1 answers)
    assert statuses(r) == [3] and r.status[0].status_detail == f"Internal topics are missing: {CHANGELOG}, {REPART}"
    assert tasks(r) == {}
    wanted = b.coord.streams_groups.take_topics_to_create()
    assert wanted == {REPART: (4, -1, {"cleanup.policy": "delete"}), CHANGELOG: (4, -1, {})}
    for name, (n, _, _) in wanted.items():
        b.view.add(name, uuid.uuid4(), n)
    r = b.hb("m1", 2, active={})
    assert (r.error_code, r.member_epoch, statuses(r)) == (0, 3, [])
    assert tasks(r) == {"0": {0, 1, 2, 3}, "1": {0, 1, 2, 3}}
    assert b.sg().state.value == "Stable"
    r = b.hb("m1", 3, active=tasks(r))
    assert r.active_tasks is None and r.member_epoch == 3   # nothing changed: no tasks in the answer


def test_missing_source_topic_is_reported_and_nothing_is_assigned():
    b = SB()
    topo = word_count_topology()
    topo.subtopologies[0].source_topics = ["nope"]
    r = b.join("m1", topology=topo)
    assert r.error_code == 0 and statuses(r) == [1] and r.status[0].status_detail == "Source topics nope are missing."
    assert b.coord.streams_groups.take_topics_to_create() == {}
    assert b.sg().state.value == "NotReady"


def test_an_existing_internal_topic_with_other_partitions_is_incorrectly_partitioned():
    b = SB()
    b.view.add(CHANGELOG, uuid.uuid4(), 2)
    r = b.join("m1")
    assert statuses(r) == [2]
    assert r.status[0].status_detail == (f"Existing topic {CHANGELOG} has different number of partitions: "
                                         "expected 4, found 2")


def ready_group(b: SB) -> set:
    """m1 alone, internal topics created, every task its own; returns its epoch."""
    b.join("m1")
    b.create_internal()
    r = b.hb("m1", 2, active={})
    assert tasks(r) == {"0": {0, 1, 2, 3}, "1": {0, 1, 2, 3}}
    return r.member_epoch


def test_a_second_member_gets_tasks_only_after_the_first_revoked_them():
    b = SB()
    e1 = ready_group(b)
    all_tasks = {"0": {0, 1, 2, 3}, "1": {0, 1, 2, 3}}
    r2 = b.join("m2")
    e2 = r2.member_epoch
    assert e2 == e1 + 1 and tasks(r2) == {}                      # everything is still m1's
    r1 = b.hb("m1", e1, active=all_tasks)                         # asked to give half up, same epoch
    assert r1.member_epoch == e1
    kept = tasks(r1)
    assert sum(len(p) for p in kept.values()) == 4
    assert b.sg().state.value == "Reconciling"
    r2 = b.hb("m2", e2, active={})
    assert tasks(r2) is None or tasks(r2) == {}                   # not released yet
    r1 = b.hb("m1", e1, active=kept)                              # revoked: moves to the group epoch
    assert r1.member_epoch == e2
    r2 = b.hb("m2", e2, active={})
    given = tasks(r2)
    assert sum(len(p) for p in given.values()) == 4
    for s in ("0", "1"):
        assert given.get(s, set()) | kept.get(s, set()) == {0, 1, 2, 3}
        assert not given.get(s, set()) & kept.get(s, set())
    assert b.sg().state.value == "Stable"


def test_leave_and_session_expiry_hand_tasks_to_the_others():
    b = SB()
    e1 = ready_group(b)
    e2 = b.join("m2").member_epoch
    r1 = b.hb("m1", e1, active={"0": {0, 1, 2, 3}, "1": {0, 1, 2, 3}})
    kept = tasks(r1)
    assert b.hb("m1", e1, active=kept).member_epoch == e2
    b.hb("m2", e2, active={})
    left = b.hb("m2", -1)
    assert (left.error_code, left.member_epoch) == (0, -1)
    r1 = b.hb("m1", e2, active=kept)
    assert r1.member_epoch == e2 + 1 and tasks(r1) == {"0": {0, 1, 2, 3}, "1": {0, 1, 2, 3}}
    b.join("m3")
    b.advance(3001)                                               # neither heartbeats: both fenced
    assert b.sg().members == {}
    assert b.hb("m1", e2 + 1, active={}).error_code == E.UNKNOWN_MEMBER_ID


def test_epoch_checks_and_request_validation_carry_kafkas_messages():
    b = SB()
    r = b.hb("m1", 1, active={})
    assert (r.error_code, r.error_message) == (E.GROUP_ID_NOT_FOUND, f"Streams group {APP} not found.")
    b.join("m1")
    r = b.hb("m1", 7, active={})
    assert r.error_code == E.FENCED_MEMBER_EPOCH
    assert r.error_message.startswith("The streams group member has a greater member epoch (7)")
    r = b.hb("m1", 0, process="p", topology=None, rebalance_timeout=1000)
    assert (r.error_code, r.error_message) == (E.INVALID_REQUEST, "Topology must be non-null when (re-)joining.")
    r = b.hb("m1", 0, process="p", topology=word_count_topology())
    assert r.error_message == "RebalanceTimeoutMs must be provided in first request."
    r = b.hb("m1", 1, topology=word_count_topology())
    assert r.error_message == "Topology can only be provided when (re-)joining."
    r = b.hb("m2", 0, process="p", topology=word_count_topology(2), rebalance_timeout=1000)
    assert (r.error_code, r.error_message) == (E.INVALID_REQUEST, "Topology updates are not supported yet.")
    r = b.hb("m1", 0, process="p", topology=word_count_topology(), rebalance_timeout=1000, instance_id="i")
    assert r.error_message == "Static membership is not yet supported."
    r = b.hb("m1", -3)
    assert r.error_message == "MemberEpoch is -3, but must be greater than or equal to -2."
    assert b.hb("nobody", -1).error_code == E.UNKNOWN_MEMBER_ID


def test_initial_rebalance_delay_holds_the_first_assignment():
    b = SB(StreamsProtocolConfig(heartbeat_interval_ms=500, session_timeout_ms=30000, initial_rebalance_delay_ms=3000,
                                 assignment_interval_ms=0))
    b.view.add(REPART, uuid.uuid4(), 4)
    b.view.add(CHANGELOG, uuid.uuid4(), 4)
    r = b.join("m1")
    assert statuses(r) == [5] and r.status[0].status_detail == \
        "Assignment delayed due to the configured initial rebalance delay."
    assert tasks(r) == {} and r.member_epoch == 1     # a new group's assignment epoch is 1 (empty target)
    b.join("m2")
    b.advance(3000)
    r1, r2 = b.join("m1"), b.join("m2")
    assert statuses(r1) == statuses(r2) == []
    t1, t2 = tasks(r1), tasks(r2)
    assert sum(len(p) for p in t1.values()) == sum(len(p) for p in t2.values()) == 4


def test_offset_commits_follow_member_and_task_epochs():
    b = SB()
    e = ready_group(b)
    assert b.commit(APP, {("in", 0): 5}, generation=e, member_id="m1", version=9) == {("in", 0): 0}
    assert b.commit(APP, {("in", 0): 5}, generation=e, member_id="m1", version=8) == {
        ("in", 0): E.UNSUPPORTED_VERSION}
    assert b.commit(APP, {("in", 0): 5}, generation=e + 1, member_id="m1", version=9) == {
        ("in", 0): E.STALE_MEMBER_EPOCH}
    assert b.commit(APP, {("in", 0): 5}, generation=e, member_id="x", version=9) == {
        ("in", 0): E.UNKNOWN_MEMBER_ID}
    e2 = b.join("m2").member_epoch                     # m1 keeps half its tasks, assigned at epoch e
    r = b.hb("m1", e, active={"0": {0, 1, 2, 3}, "1": {0, 1, 2, 3}})
    assert b.hb("m1", e, active=tasks(r)).member_epoch == e2
    kept = b.sg().members["m1"].assigned.active["0"]
    assert set(kept.values()) == {e}
    p = min(kept)
    assert b.commit(APP, {("in", p): 6}, generation=e, member_id="m1", version=9) == {("in", p): 0}
    assert b.commit(APP, {("in", p): 6}, generation=e - 1, member_id="m1", version=9) == {
        ("in", p): E.STALE_MEMBER_EPOCH}
    # TxnOffsetCommit checks the task epochs too, and answers a stale epoch with ILLEGAL_GENERATION
    # (OffsetMetadataManager.validateTransactionalOffsetCommit)
    assert b.txn_commit(APP, {("in", p): 7}, generation=e, member_id="m1") == {("in", p): 0}
    assert b.txn_commit(APP, {("in", p): 7}, generation=e - 1, member_id="m1") == {("in", p): E.ILLEGAL_GENERATION}
    gone = next(q for q in range(4) if q not in kept)
    assert b.txn_commit(APP, {("in", gone): 7}, generation=e, member_id="m1") == {("in", gone): E.ILLEGAL_GENERATION}


def test_describe_list_describe_groups_and_delete():
    b = SB()
    e = ready_group(b)
    d = b.reply(b.call("streams_group_describe", StreamsGroupDescribeRequest(
        group_ids=[APP, "other"], include_authorized_operations=False), 0)).groups
    assert (d[0].error_code, d[0].group_state, d[0].group_epoch, d[0].assignment_epoch) == (0, "Stable", e, e)
    assert [s.subtopology_id for s in d[0].topology.subtopologies] == ["0", "1"]
    assert d[0].topology.subtopologies[1].state_changelog_topics[0].partitions == 4
    m = d[0].members[0]
    assert (m.member_id, m.member_epoch, m.process_id, m.topology_epoch) == ("m1", e, "m1", 1)
    assert {t.subtopology_id: t.partitions for t in m.assignment.active_tasks} == {"0": [0, 1, 2, 3],
                                                                                "1": [0, 1, 2, 3]}
    assert (d[1].error_code, d[1].error_message) == (E.GROUP_ID_NOT_FOUND, "Group other not found.")
    listed = b.list_groups(types=["streams"]).groups
    assert [(g.group_id, g.group_type, g.group_state, g.protocol_type) for g in listed] == [
        (APP, "streams", "Stable", "streams")]
    described = b.describe(APP, version=6)[0]
    assert (described.error_code, described.error_message) == (E.GROUP_ID_NOT_FOUND,
                                                                f"Group {APP} is not a classic group.")
    assert b.delete_groups(APP) == {APP: E.NON_EMPTY_GROUP}
    b.hb("m1", -1)
    assert b.delete_groups(APP) == {APP: 0}
    assert b.list_groups().groups == []


def test_sticky_assignor_balances_processes_and_keeps_previous_owners():
    a = StickyTaskAssignor()
    members = {"a1": AssignmentMember("A", {}, {}), "a2": AssignmentMember("A", {}, {}),
               "b1": AssignmentMember("B", {}, {})}
    out = a.assign(members, {"0": 6}, {"0"}, 0)
    counts = {m: len(act.get("0", ())) for m, (act, _) in out.items()}
    assert sum(counts.values()) == 6 and sorted(counts.values()) == [2, 2, 2]
    # previous owners keep their tasks when a member goes away
    prev = {m: AssignmentMember(members[m].process_id, out[m][0], {}) for m in ("a1", "b1")}
    again = a.assign(prev, {"0": 6}, {"0"}, 0)
    for m in prev:
        assert out[m][0]["0"] <= again[m][0]["0"]
    # standbys go to another process than the active task's
    two = {"a": AssignmentMember("A", {}, {}), "b": AssignmentMember("B", {}, {})}
    res = a.assign(two, {"0": 4, "1": 2}, {"1"}, 1)
    for s in ("1",):
        for m, (act, stb) in res.items():
            assert not act.get(s, frozenset()) & stb.get(s, frozenset())
        assert sorted(p for _, (_, stb) in res.items() for p in stb.get(s, ())) == [0, 1]


def test_other_protocols_do_not_take_a_streams_group_and_offsets_only_groups_become_streams_groups():
    from kcompat.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest

    b = SB()
    ready_group(b)
    r = b.reply(b.call("consumer_group_heartbeat", ConsumerGroupHeartbeatRequest(
        group_id=APP, member_id="c1", member_epoch=0, rebalance_timeout_ms=5000, subscribed_topic_names=["in"],
        topic_partitions=[]), 1, "client", "/127.0.0.1"))
    assert (r.error_code, r.error_message) == (E.GROUP_ID_NOT_FOUND, f"Group {APP} is not a consumer group.")
    assert b.reply(Broker.join(b, APP)).error_code == E.INCONSISTENT_GROUP_PROTOCOL   # a classic JoinGroup
    assert b.sg() is not None and set(b.sg().members) == {"m1"}
    # a group holding only committed offsets becomes a streams group and keeps them
    assert b.commit("offsets-only", {("in", 1): 7}) == {("in", 1): 0}
    r = b.hb("m9", 0, process="p", topology=word_count_topology(), rebalance_timeout=1000, group="offsets-only")
    assert r.error_code == 0 and b.group("offsets-only").streams is not None
    assert b.group("offsets-only").offsets[("in", 1)].offset == 7


def test_records_reload_into_the_same_group_and_deleted_groups_stay_gone():
    b = SB()
    e1 = ready_group(b)
    e2 = b.join("m2").member_epoch
    r1 = b.hb("m1", e1, active={"0": {0, 1, 2, 3}, "1": {0, 1, 2, 3}})   # m1 revoking half: UNREVOKED_TASKS
    keys = [entry[1] for entry in b.records()]
    assert {strec.parse_key(k[1], k).record_type for k in keys if k[1] in strec.STREAMS_RECORD_TYPES} == {
        17, 19, 20, 21, 22, 23}
    before = b.sg()
    other = SB(view=b.view)
    for p in range(FAST.num_partitions):
        other.coord.load(p, b.records(p), other.now)
    after = other.sg()
    assert (after.group_epoch, after.assignment_epoch, after.metadata_hash, after.validated_topology_epoch) == (
        before.group_epoch, before.assignment_epoch, before.metadata_hash, before.validated_topology_epoch)
    assert after.topology == before.topology and after.assignment_configs == before.assignment_configs
    assert after.members == before.members and after.target == before.target
    # the reloaded coordinator carries on: m1 revokes, m2 gets the rest, nothing bumps the epoch
    assert other.hb("m1", e1, active=tasks(r1)).member_epoch == e2
    given = tasks(other.hb("m2", e2, active={}))
    assert sum(len(p) for p in given.values()) == 4 and other.sg().group_epoch == e2
    other.hb("m1", -1)
    other.hb("m2", -1)
    assert other.delete_groups(APP) == {APP: 0}
    third = SB(view=b.view)
    for p in range(FAST.num_partitions):
        third.coord.load(p, b.records(p) + other.records(p), third.now)
    assert third.group(APP) is None


def test_copartitioned_topics_must_agree_and_repartition_topics_follow_them():
    """CopartitionedTopicsEnforcer: a join's inputs have one partition count."""
    from kcompat.group.streams_topology import InternalTopic, Subtopology, Topology, configure

    counts = {"left": 2, "right": 3, "other": 2}
    join = Topology(1, (Subtopology("0", ("left", "right"), copartition_groups=(((0, 1), ()),)),))
    configured = configure(join, counts.get)
    assert configured.tasks is None and configured.status == (
        2, "Following topics do not have the same number of partitions: [{left=2, right=3}]")
    # a repartitioned side of a join gets the partition count of the other side
    rekeyed = Topology(1, (
        Subtopology("0", ("right",), repartition_sink_topics=("wc-rekey-repartition",)),
        Subtopology("1", ("left",), repartition_source_topics=(InternalTopic("wc-rekey-repartition"),),
                    copartition_groups=(((0,), (0,)),))))
    configured = configure(rekeyed, counts.get)
    assert configured.partitions["wc-rekey-repartition"] == 2 and configured.tasks == {"0": 3, "1": 2}
    assert configured.to_create == {"wc-rekey-repartition": (2, -1, {})}
