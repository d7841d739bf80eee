"""Loading __consumer_offsets: a fresh coordinator that replays the log has the same groups and
offsets; ownership, loading and unloading answer as Kafka does."""

from __future__ import annotations

from kcompat.group import GroupConfig, GroupCoordinator, GroupState, Record
from kcompat.protocol.errors import ErrorCode
from tests.group.harness import FAST, Broker, assignment

S = GroupState


def snapshot(coord: GroupCoordinator, *, quiescent_only: bool = False) -> dict:
    """Comparable state of every group: what the log must reproduce."""
    out = {}
    for gid, g in coord._groups.items():
        if quiescent_only and g.state not in (S.STABLE, S.EMPTY):
            continue
        if g.generation_id == 0 and not g.offsets and not g.members:
            continue  # exists only in memory (e.g. a pending member id): never written
        out[gid] = dict(
            state=g.state, generation=g.generation_id, protocol_type=g.protocol_type, protocol=g.protocol_name,
            leader=g.leader_id,
            # Stable is entered after the record is written; an offsets-only group has no record
            state_timestamp=g.state_timestamp if g.is_(S.EMPTY) and g.protocol_type is not None else None,
            members={mid: (m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                           m.session_timeout_ms, m.metadata(g.protocol_name), m.assignment)
                     for mid, m in g.members.items()},
            static=dict(g.static_members), subscribed=g.subscribed_topics, offsets=dict(g.offsets))
    return out


def reload(b: Broker, config: GroupConfig = FAST) -> Broker:
    fresh = Broker(config, b.topics, own=False, now=b.now)
    for p in range(config.num_partitions):
        fresh.coord.load(p, b.records(p), fresh.now)
    return fresh


def scenario() -> Broker:
    b = Broker()
    # a Stable group of three, one of them static and restarted once
    tokens = [b.join_new("stable", client_id=f"c{i}")[1] for i in range(2)]
    tokens.append(b.join("stable", instance="static-1", client_id="c2", session=45_000))
    for _ in range(4):
        b.advance(100)
    resps = [b.reply(t) for t in tokens]
    gen, leader = resps[0].generation_id, resps[0].leader
    plan = {r.member_id: assignment({"t": [i, i + 3]}) for i, r in enumerate(resps)}
    for r in resps[1:]:
        b.sync("stable", r.member_id, gen)
    b.sync("stable", leader, gen, plan)
    b.commit("stable", {("t", 0): 100, ("t", 3): 103}, generation=gen, member_id=leader, metadata="m0", leader_epoch=2)
    b.reply(b.join("stable", instance="static-1", client_id="c2", session=45_000))  # restart: new member id
    # a consumer group whose members all left, with committed offsets
    (m, g2), = b.form_group("emptied", 1)
    b.commit("emptied", {("u", 1): 7}, generation=g2, member_id=m)
    b.leave("emptied", m)
    # offsets only, some overwritten, some deleted, one with its own retention
    b.commit("simple", {("t", 0): 1, ("t", 1): 2})
    b.commit("simple", {("t", 0): 5}, metadata="x" * 10, leader_epoch=9)
    b.commit("simple", {("u", 0): 3}, version=2, retention=10 * 24 * 3600 * 1000)
    b.offset_delete("simple", [("t", 1)])
    # created and deleted
    b.commit("gone", {("t", 2): 1})
    b.delete_groups("gone")
    (m3, g3), = b.form_group("gone-too", 1)
    b.leave("gone-too", m3)
    b.delete_groups("gone-too")
    return b


def test_reload_reproduces_groups_and_offsets():
    b = scenario()
    live = snapshot(b.coord)
    assert set(live) == {"stable", "emptied", "simple"}
    assert live["stable"]["state"] is S.STABLE and len(live["stable"]["members"]) == 3
    fresh = reload(b)
    assert snapshot(fresh.coord) == live


def test_reloaded_group_keeps_working_with_the_same_generation():
    b = scenario()
    g = b.group("stable")
    gen = g.generation_id
    members = list(g.members)
    fresh = reload(b)
    for m in members:
        assert fresh.heartbeat("stable", m, gen) == 0
    assert fresh.commit("stable", {("t", 0): 200}, generation=gen, member_id=members[0]) == {("t", 0): 0}
    assert fresh.fetch("stable", [("t", 0), ("t", 3)])[0] == {("t", 0): (200, -1, "", 0), ("t", 3): (103, 2, "m0", 0)}
    # a member rejoining with its full protocol list changes its metadata: rebalance, next generation
    t = fresh.join("stable", members[1])
    assert not fresh.answered(t) and fresh.group("stable").state is S.PREPARING_REBALANCE


def test_loaded_members_expire_after_their_session_timeout():
    b = scenario()
    fresh = reload(b)
    fresh.advance(10_000)  # the dynamic members' session (10 s) ends without heartbeats
    g = fresh.group("stable")
    assert [m.group_instance_id for m in g.members.values()] == ["static-1"]
    fresh.advance(35_000)  # the static member's 45 s
    assert fresh.group("stable").state is S.EMPTY


def test_restart_during_a_rebalance_comes_back_from_the_last_stable_generation():
    b = Broker()
    (leader, gen), (follower, _) = b.form_group("g", 2)
    t = b.join("g", leader)
    assert not b.answered(t)
    fresh = reload(b)
    g = fresh.group("g")
    assert g.state is S.STABLE and g.generation_id == gen and set(g.members) == {leader, follower}


def test_begin_loading_then_replay_during_load():
    b = scenario()
    fresh = Broker(FAST, b.topics, own=False, now=b.now)
    p = fresh.coord.partition_for("simple")
    fresh.coord.begin_loading(p)
    assert not fresh.coord.owns(p)
    assert fresh.fetch("simple", [("t", 0)], version=7)[1] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert fresh.reply(fresh.join("simple", version=3)).error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert fresh.heartbeat("simple", "m", 1) == ErrorCode.NONE  # answered blindly while loading
    assert fresh.reply(fresh.sync("simple", "m", 1)).error_code == ErrorCode.REBALANCE_IN_PROGRESS
    assert fresh.commit("simple", {("t", 0): 1}) == {("t", 0): ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
    for _, key, value in b.records(p):
        fresh.coord.replay(Record(p, key, value))
    fresh.coord.load(p, [], fresh.now)
    assert fresh.coord.owns(p)
    assert fresh.fetch("simple", [("t", 0)])[0][("t", 0)][0] == 5


def test_not_coordinator_for_partitions_not_owned():
    b = Broker(own=False)
    assert b.reply(b.join("g", version=3)).error_code == ErrorCode.NOT_COORDINATOR
    # without the member id, as Kafka 4.3.1 answers (its write operation fails)
    joined = b.reply(b.join("g", "m1", version=3))
    assert (joined.error_code, joined.member_id) == (ErrorCode.NOT_COORDINATOR, "")
    assert b.commit("g", {("t", 0): 1}) == {("t", 0): ErrorCode.NOT_COORDINATOR}
    assert b.describe("g")[0].error_code == ErrorCode.NOT_COORDINATOR
    assert b.delete_groups("g") == {"g": ErrorCode.NOT_COORDINATOR}
    assert b.offset_delete("g", [("t", 0)]) == (ErrorCode.NOT_COORDINATOR, {})
    assert b.leave("g", "m").error_code == ErrorCode.NOT_COORDINATOR
    assert b.list_groups().groups == []


def test_unload_answers_waiting_requests_with_not_coordinator():
    b = Broker()
    (leader, gen), (follower, _) = b.form_group("g", 2)
    t = b.join("g", leader)
    p = b.coord.partition_for("g")
    b.apply(b.coord.unload(p))
    r = b.reply(t)
    assert r.error_code == ErrorCode.NOT_COORDINATOR and r.member_id == leader
    assert b.group("g") is None and not b.coord.owns(p)
    assert b.heartbeat("g", follower, gen) == ErrorCode.NOT_COORDINATOR
    # another coordinator (or this one later) loads it back from the log
    b.coord.load(p, b.records(p), b.now)
    assert b.heartbeat("g", follower, gen) == 0


def test_unload_answers_waiting_syncs():
    b = Broker()
    tokens = [b.join_new("g")[1] for _ in range(2)]
    b.advance(100)
    b.advance(100)
    r = b.reply(tokens[1])
    b.reply(tokens[0])
    st = b.sync("g", r.member_id, r.generation_id)
    b.apply(b.coord.unload(b.coord.partition_for("g")))
    assert b.reply(st).error_code == ErrorCode.NOT_COORDINATOR


def test_shutdown_answers_everything_then_coordinator_not_available():
    b = Broker()
    (leader, gen), _ = b.form_group("g", 2)
    t = b.join("g", leader)
    b.apply(b.coord.shutdown())
    assert b.reply(t).error_code == ErrorCode.NOT_COORDINATOR
    assert b.reply(b.join("g", version=3)).error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert b.list_groups().error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert b.coord.next_deadline() is None


def test_load_skips_unreadable_records_and_other_record_types():
    b = scenario()
    p = b.coord.partition_for("simple")
    junk = [(0, b"\x00\x03\x00\x01g", b"\x00\x00"), (1, b"\x00", b"x"), (2, b"\x00\x01\x00", None)]
    fresh = Broker(FAST, b.topics, own=False, now=b.now)
    fresh.coord.load(p, junk + b.records(p), fresh.now)
    assert fresh.fetch("simple", [("t", 0)])[0][("t", 0)][0] == 5


def test_group_tombstone_keeps_offsets_of_the_group():
    """As Kafka's loader: a group tombstone drops the metadata; offsets without metadata still
    make an Empty group."""
    from kcompat.group.records import group_metadata_key, offset_commit_key, offset_commit_value, OffsetAndMetadata
    c = GroupCoordinator(GroupConfig(num_partitions=1), partition_exists=lambda t, p: True)
    c.load(0, [(0, offset_commit_key("g", "t", 0), offset_commit_value(OffsetAndMetadata(4, -1, "", 1))),
               (1, group_metadata_key("g"), None)], 10)
    g = c._groups["g"]
    assert g.state is S.EMPTY and g.generation_id == 0 and g.offsets[("t", 0)].offset == 4
