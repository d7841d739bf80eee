"""Giving a ``__consumer_offsets`` partition up (GroupCoordinator.unload, Kafka's onResignation)
and loading it again, and writes that fail (GroupCoordinator.write_failed, Kafka's callbacks of a
failed acks=-1 append)."""

from __future__ import annotations

from kcompat.group import GroupState
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.offset_commit import OffsetCommitRequest
from kcompat.protocol.messages.sync_group import SyncGroupRequest
from tests.group.harness import Broker, assignment

E = ErrorCode


def test_unload_answers_waiting_requests_drops_the_groups_and_stops_their_timers():
    b = Broker()
    (leader, gen), (follower, _) = b.form_group("g", 2)
    assert b.commit("g", {("t", 0): 5}, generation=gen, member_id=leader) == {("t", 0): 0}
    _, waiting = b.join_new("g")  # a third member: the group rebalances, its JoinGroup waits
    assert not b.answered(waiting)
    partition = b.coord.partition_for("g")
    b.apply(b.coord.unload(partition))
    assert b.reply(waiting).error_code == E.NOT_COORDINATOR
    assert b.group("g") is None and not b.coord.owns(partition)
    assert not any(key[1] == "g" for key in b.coord._timers._entries)
    assert b.heartbeat("g", leader, gen) == E.NOT_COORDINATOR
    assert b.commit("g", {("t", 0): 6}, generation=gen, member_id=leader) == {("t", 0): E.NOT_COORDINATOR}
    assert b.fetch("g", [("t", 0)])[1] == E.NOT_COORDINATOR
    written = len(b.appended)
    b.advance(120_000)  # well past every session and rebalance timeout: nothing fires for the group
    assert len(b.appended) == written
    # other partitions keep their groups
    other = next(g for g in ("h", "i", "j", "k", "l") if b.coord.partition_for(g) != partition)
    assert b.commit(other, {("t", 1): 3}) == {("t", 1): 0}
    assert b.fetch(other, [("t", 1)])[0][("t", 1)][0] == 3


def test_loading_again_restores_groups_and_offsets_from_the_log():
    b = Broker()
    (leader, gen), (follower, _) = b.form_group("g", 2)
    assert b.commit("g", {("t", 0): 5, ("t", 1): 6}, generation=gen, member_id=leader) == {("t", 0): 0, ("t", 1): 0}
    partition = b.coord.partition_for("g")
    b.apply(b.coord.unload(partition))
    b.coord.begin_loading(partition)
    assert b.commit("g", {("t", 0): 7}, generation=gen, member_id=leader) == {("t", 0): E.COORDINATOR_LOAD_IN_PROGRESS}
    b.coord.load(partition, b.records(partition), b.now)
    group = b.group("g")
    assert group.state is GroupState.STABLE and group.generation_id == gen
    assert set(group.members) == {leader, follower} and group.leader_id == leader
    offsets, error = b.fetch("g", [("t", 0), ("t", 1)])
    assert error == 0 and offsets[("t", 0)][0] == 5 and offsets[("t", 1)][0] == 6
    assert b.heartbeat("g", follower, gen) == 0
    assert ("hb", "g", follower) in b.coord._timers  # sessions run again


def commit_request(offset: int) -> OffsetCommitRequest:
    return OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=[
        OffsetCommitRequest.OffsetCommitRequestTopic(name="t", partitions=[
            OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset,
                                                             committed_metadata="")])])


def test_a_failed_offset_commit_leaves_the_committed_offsets_and_answers_a_coordinator_error():
    b = Broker()
    assert b.commit("g", {("t", 0): 1}) == {("t", 0): 0}
    for code, expected in ((E.REQUEST_TIMED_OUT, E.COORDINATOR_NOT_AVAILABLE),
                           (E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.COORDINATOR_NOT_AVAILABLE),
                           (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR)):
        token = ("commit", code)
        b._versions[token] = 8
        result = b.coord.offset_commit(token, commit_request(9), 8, b.now)
        assert len(result.records) == 1 and b.group("g").pending_commits[("t", 0)] == 1
        b.apply(b.coord.write_failed(result, result.records, int(code), b.now))  # never replayed
        assert b.reply(token).topics[0].partitions[0].error_code == expected
        assert not +b.group("g").pending_commits
        assert b.fetch("g", [("t", 0)])[0][("t", 0)][0] == 1


def test_a_failed_commit_of_a_new_offsets_only_group_leaves_no_group():
    b = Broker()
    token = ("commit", 1)
    b._versions[token] = 8
    result = b.coord.offset_commit(token, commit_request(9), 8, b.now)
    assert b.group("g") is not None
    b.apply(b.coord.write_failed(result, result.records, int(E.REQUEST_TIMED_OUT), b.now))
    assert b.group("g") is None


def test_a_lost_group_record_fails_the_sync_and_rebalances_the_group():
    b = Broker()
    ids = []
    tokens = []
    for _ in range(2):
        mid, tok = b.join_new("g")
        ids.append(mid)
        tokens.append(tok)
    while not all(b.answered(t) for t in tokens):
        b.advance(100)
    joins = [b.reply(t) for t in tokens]
    gen, leader = joins[0].generation_id, joins[0].leader
    follower = next(m for m in ids if m != leader)
    waiting = b.sync("g", follower, gen)  # waits for the leader's assignment
    assert not b.answered(waiting)
    token = ("sync", 1)
    b._versions[token] = 3
    plan = {leader: assignment({"t": [0]}), follower: assignment({"t": [1]})}
    req = SyncGroupRequest(group_id="g", generation_id=gen, member_id=leader, protocol_type="consumer",
                           protocol_name="range", assignments=[
                               SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                               for m, a in plan.items()])
    result = b.coord.sync_group(token, req, 3, b.now)
    assert len(result.records) == 1 and len(result.replies) == 2
    b.apply(b.coord.write_failed(result, result.records, int(E.REQUEST_TIMED_OUT), b.now))
    for t in (token, waiting):
        r = b.reply(t)
        assert r.error_code == E.COORDINATOR_NOT_AVAILABLE and r.assignment == b""
    group = b.group("g")
    assert group.state is GroupState.PREPARING_REBALANCE
    assert all(m.assignment == b"" for m in group.members.values())
    assert b.heartbeat("g", follower, gen) == E.REBALANCE_IN_PROGRESS
    assert not b.coord._self_applied
