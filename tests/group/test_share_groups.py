"""KIP-932 share groups in the group coordinator, driven through ShareGroupHeartbeat on the
in-memory broker of :mod:`tests.group.harness`: joining, epochs and the simple assignor (a
partition shared when members outnumber partitions), fencing on leave and session timeout,
ShareGroupDescribe, how other group types' APIs treat a share group (and the reverse), the records
in ``__consumer_offsets`` and their reload, DeleteGroups."""

from __future__ import annotations

import uuid

from hypothesis import given, settings, strategies as st

from kcompat.group import GroupCoordinator
from kcompat.group import share_group_records as srec
from kcompat.group.consumer_group import TopicInfo
from kcompat.group.share_group import simple_assign
from kcompat.group.share_groups import ShareProtocolConfig
from kcompat.protocol.errors import ErrorCode as E
from kcompat.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from kcompat.protocol.messages.list_groups import ListGroupsRequest
from kcompat.protocol.messages.share_group_describe import ShareGroupDescribeRequest
from kcompat.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest as HB
from tests.group.harness import FAST, Broker
from tests.group.test_consumer_groups import Topics

T, U = uuid.UUID(int=1), uuid.UUID(int=2)
CONFIG = ShareProtocolConfig(heartbeat_interval_ms=500, session_timeout_ms=3000, max_size=3)


class SG(Broker):
    def __init__(self, topics: Topics | None = None, overrides: dict | None = None) -> None:
        super().__init__(own=False, topics={"t": 3, "u": 1})
        self.view = topics or Topics({"t": (T, 3), "u": (U, 1)})
        self.overrides = overrides or {}
        self.coord = GroupCoordinator(FAST, partition_exists=self.partition_exists, topics=self.view,
                                      share_config=CONFIG, group_overrides=lambda g: self.overrides.get(g, {}))
        for p in range(FAST.num_partitions):
            self.coord.load(p, [], self.now)

    def hb(self, member_id: str, epoch: int, *, group: str = "g", topics=None, rack=None):
        """One heartbeat; (error, epoch, {topic id: partitions} or None, interval)."""
        req = HB(group_id=group, member_id=member_id, member_epoch=epoch, rack_id=rack,
                 subscribed_topic_names=topics)
        r = self.reply(self.call("share_group_heartbeat", req, 1, "client", "/127.0.0.1"))
        got = None if r.assignment is None else {tp.topic_id: set(tp.partitions) for tp in r.assignment.topic_partitions}
        return r.error_code, r.member_epoch, got, r.heartbeat_interval_ms

    def sjoin(self, member_id: str, topics=("t",), **kw):
        return self.hb(member_id, 0, topics=list(topics), **kw)

    def sg(self, group: str = "g"):
        return self.group(group).share

    def describe_share(self, *groups: str):
        return self.reply(self.call("share_group_describe", ShareGroupDescribeRequest(
            group_ids=list(groups), include_authorized_operations=False), 1)).groups


def test_join_assigns_every_partition_and_epochs_follow_the_group():
    b = SG()
    code, epoch, got, interval = b.sjoin("m1")
    assert (code, epoch, got, interval) == (0, 1, {T: {0, 1, 2}}, 500)
    code, epoch, got, _ = b.sjoin("m2")
    assert (code, epoch) == (0, 2)
    # no revocation in a share group: m1 takes its new target at its next heartbeat
    code, epoch1, got1, _ = b.hb("m1", 1)
    assert (code, epoch1) == (0, 2)
    assert got1 is not None and got is not None
    assert got1[T] | got[T] == {0, 1, 2} and not got1[T] & got[T]
    assert b.hb("m1", 2)[2] is None          # nothing changed: no assignment in the response


def test_more_members_than_partitions_share_partitions():
    b = SG()
    assert b.sjoin("a", topics=["u"])[2] == {U: {0}}
    assert b.sjoin("b", topics=["u"])[2] == {U: {0}}
    sg = b.sg()
    assert sg.target == {"a": {U: frozenset({0})}, "b": {U: frozenset({0})}}


def test_errors_as_kafka_answers_them():
    b = SG()
    assert b.hb("m1", 0, topics=[])[0] == E.INVALID_REQUEST
    assert b.hb("", 0, topics=["t"])[0] == E.INVALID_REQUEST
    assert b.hb("m1", 0, topics=["t"], rack="")[0] == E.INVALID_REQUEST
    assert b.hb("m1", -2, topics=["t"])[0] == E.INVALID_REQUEST
    assert b.hb("m1", 0, group="", topics=["t"])[0] == E.INVALID_REQUEST     # Kafka 4.3.1 (not INVALID_GROUP_ID)
    assert b.hb("m" * 37, 0, topics=["t"])[0] == E.INVALID_REQUEST            # KafkaApis.isMemberIdValid
    assert b.hb("m1", 3, group="nope")[0] == E.GROUP_ID_NOT_FOUND
    b.sjoin("m1")
    assert b.hb("m9", 4)[0] == E.UNKNOWN_MEMBER_ID
    assert b.hb("m1", 7)[0] == E.FENCED_MEMBER_EPOCH
    b.sjoin("m2")
    b.sjoin("m3")
    assert b.sjoin("m4")[0] == E.GROUP_MAX_SIZE_REACHED


def test_leave_and_session_timeout_fence_and_reassign():
    b = SG()
    b.sjoin("m1")
    b.sjoin("m2")
    code, epoch, _, _ = b.hb("m2", -1)
    assert (code, epoch) == (0, -1)
    assert set(b.sg().members) == {"m1"}
    code, epoch, got, _ = b.hb("m1", 1)
    assert (code, epoch, got) == (0, 3, {T: {0, 1, 2}})
    b.advance(2000)
    b.sjoin("m3")
    b.advance(1500)                         # m3's session (3000 ms) has 1500 ms left; m1's is over
    assert set(b.sg().members) == {"m3"}
    assert b.hb("m1", 3)[0] == E.UNKNOWN_MEMBER_ID


def test_group_overrides_set_session_and_interval():
    b = SG(overrides={"g": {"share.session.timeout.ms": "10000", "share.heartbeat.interval.ms": "700"}})
    assert b.sjoin("m1")[3] == 700
    b.advance(5000)
    assert "m1" in b.sg().members
    b.advance(5001)
    assert "m1" not in b.sg().members


def test_group_types_do_not_mix():
    b = SG()
    b.sjoin("m1")
    # a consumer group heartbeat, a classic join, offsets: Kafka's answers for a share group
    r = b.reply(b.call("consumer_group_heartbeat", ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="c1", member_epoch=0, rebalance_timeout_ms=5000, subscribed_topic_names=["t"],
        topic_partitions=[]), 1, "client", "/h"))
    assert r.error_code == E.GROUP_ID_NOT_FOUND
    assert b.reply(b.join("g")).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert b.commit("g", {("t", 0): 1}, version=9) == {("t", 0): E.GROUP_ID_NOT_FOUND}
    # ... and a share heartbeat for a classic group
    b.commit("c", {("t", 0): 1})
    assert b.sjoin("x", group="c")[0] == E.GROUP_ID_NOT_FOUND
    listed = b.reply(b.call("list_groups", ListGroupsRequest(states_filter=[], types_filter=["share"]), 5))
    assert [(g.group_id, g.group_type, g.group_state, g.protocol_type) for g in listed.groups] == \
        [("g", "share", "Stable", "share")]
    assert b.describe("g")[0].group_state == "Dead"


def test_describe():
    b = SG()
    b.sjoin("m1", rack="r1")
    d = b.describe_share("g", "nope")
    assert d[0].error_code == 0 and d[0].group_state == "Stable" and d[0].assignor_name == "simple"
    (m,) = d[0].members
    assert (m.member_id, m.rack_id, m.member_epoch, m.client_id) == ("m1", "r1", 1, "client")
    assert [(tp.topic_name, tp.partitions) for tp in m.assignment.topic_partitions] == [("t", [0, 1, 2])]
    assert d[1].error_code == E.GROUP_ID_NOT_FOUND


def test_records_reload_into_the_same_group():
    b = SG()
    b.sjoin("m1")
    b.sjoin("m2")
    b.hb("m1", 1)
    keys = [entry[1] for entry in b.records()]
    types = {srec.parse_key(k[1], k).record_type for k in keys if k[1] in srec.SHARE_RECORD_TYPES}
    assert types == {10, 11, 12, 13, 14, 15}
    before = b.sg()
    other = SG(b.view)
    for p in range(FAST.num_partitions):
        other.coord.load(p, b.records(p), other.now)
    after = other.sg()
    assert (after.group_epoch, after.assignment_epoch, after.metadata_hash) == \
        (before.group_epoch, before.assignment_epoch, before.metadata_hash)
    assert after.members == before.members and after.target == before.target
    assert after.initialized == before.initialized
    assert other.hb("m1", before.members["m1"].member_epoch)[0] == 0


def test_delete_groups_only_when_empty_and_the_group_is_gone_after_reload():
    b = SG()
    b.sjoin("m1")
    assert b.delete_groups("g") == {"g": E.NON_EMPTY_GROUP}
    b.hb("m1", -1)
    b.advance(FAST.offsets_retention_check_interval_ms * 2)    # expiry never removes a share group
    assert b.sg() is not None
    assert b.delete_groups("g") == {"g": E.NONE}
    other = SG(b.view)
    for p in range(FAST.num_partitions):
        other.coord.load(p, b.records(p), other.now)
    assert other.group("g") is None


@settings(max_examples=60, deadline=None)
@given(n_members=st.integers(1, 8), n_partitions=st.integers(1, 8), seed=st.randoms())
def test_simple_assignor_covers_every_partition_and_balances(n_members, n_partitions, seed):
    members = {f"m{i}": ("t",) for i in range(n_members)}
    topics = {"t": TopicInfo(T, "t", n_partitions, {})}
    current = {m: {T: frozenset(seed.sample(range(n_partitions), seed.randint(0, n_partitions)))}
               for m in members}
    got = simple_assign(members, topics, current)
    counts = [len(a.get(T, ())) for a in got.values()]
    covered = set().union(*(a.get(T, frozenset()) for a in got.values()))
    assert covered == set(range(n_partitions))
    assert max(counts) - min(counts) <= 1
    if n_members <= n_partitions:    # each partition exactly once
        assert sum(counts) == n_partitions
