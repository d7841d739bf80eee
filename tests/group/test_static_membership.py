"""Static membership (KIP-345) and the static leader's skip-assignment (KIP-814)."""

from __future__ import annotations

from kcompat.group import GroupState
from kcompat.group.records import parse_group_value
from kcompat.protocol.errors import ErrorCode
from tests.group.harness import Broker, assignment

S = GroupState
G = "g"


def static_group(b: Broker, instances=("i-a", "i-b"), session=30_000, version=5):
    """Static members join (no MEMBER_ID_REQUIRED for them) and sync. Returns {instance: member id}, gen."""
    tokens = {i: b.join(G, instance=i, version=version, session=session, client_id=f"client-{i}")
              for i in instances}
    for _ in range(5):
        b.advance(100)
    resps = {i: b.reply(t) for i, t in tokens.items()}
    assert all(r.error_code == 0 for r in resps.values()), resps
    ids = {i: r.member_id for i, r in resps.items()}
    gen = next(iter(resps.values())).generation_id
    leader = next(iter(resps.values())).leader
    plan = {mid: assignment({"t": [n]}) for n, mid in enumerate(ids.values())}
    toks = {mid: b.sync(G, mid, gen, plan if mid == leader else None, instance=i) for i, mid in ids.items()}
    for mid, t in toks.items():
        assert b.reply(t).assignment == plan[mid]
    return ids, gen, leader, plan


def test_static_member_ids_start_with_the_instance_id():
    b = Broker()
    ids, gen, leader, _ = static_group(b)
    assert ids["i-a"] == "i-a-uuid1" and ids["i-b"] == "i-b-uuid2"
    assert b.group(G).static_members == {"i-a": ids["i-a"], "i-b": ids["i-b"]}
    described = b.describe(G, version=4)[0]
    assert {m.group_instance_id for m in described.members} == {"i-a", "i-b"}


def test_restarted_static_member_gets_its_assignment_back_without_rebalance():
    b = Broker()
    ids, gen, leader, plan = static_group(b)
    follower_instance = next(i for i, m in ids.items() if m != leader)
    old_id = ids[follower_instance]
    records_before = len(b.appended)
    # the member restarts (no LeaveGroup for static members) and joins with an unknown member id
    r = b.reply(b.join(G, instance=follower_instance, version=5))
    assert r.error_code == 0 and r.generation_id == gen and r.member_id != old_id
    assert r.leader == leader and r.members == []
    g = b.group(G)
    assert g.state is S.STABLE and g.generation_id == gen
    # the new member id is persisted
    value = parse_group_value(b.appended[records_before].value)
    assert {m.member_id for m in value.members} == {leader, r.member_id}
    # SyncGroup returns the stored assignment
    s = b.reply(b.sync(G, r.member_id, gen, instance=follower_instance))
    assert s.error_code == 0 and s.assignment == plan[old_id]
    # the old member id is fenced
    assert b.heartbeat(G, old_id, gen, instance=follower_instance) == ErrorCode.FENCED_INSTANCE_ID
    assert b.reply(b.sync(G, old_id, gen, instance=follower_instance)).error_code == ErrorCode.FENCED_INSTANCE_ID
    assert b.commit(G, {("t", 0): 1}, generation=gen, member_id=old_id, instance=follower_instance) == {
        ("t", 0): ErrorCode.FENCED_INSTANCE_ID}
    assert b.reply(b.join(G, old_id, instance=follower_instance)).error_code == ErrorCode.FENCED_INSTANCE_ID
    assert b.heartbeat(G, r.member_id, gen, instance=follower_instance) == 0
    # no dynamic check without the instance id: the old id is simply unknown
    assert b.heartbeat(G, old_id, gen) == ErrorCode.UNKNOWN_MEMBER_ID


def test_restarted_static_leader_before_v9_sees_the_old_leader_id():
    b = Broker()
    ids, gen, leader, _ = static_group(b)
    leader_instance = next(i for i, m in ids.items() if m == leader)
    r = b.reply(b.join(G, instance=leader_instance, version=8))
    assert r.error_code == 0 and r.leader == leader != r.member_id and not r.skip_assignment and r.members == []
    assert b.group(G).leader_id == r.member_id


def test_restarted_static_leader_v9_skips_assignment():
    b = Broker()
    ids, gen, leader, plan = static_group(b, version=9)
    leader_instance = next(i for i, m in ids.items() if m == leader)
    r = b.reply(b.join(G, instance=leader_instance, version=9))
    assert r.error_code == 0 and r.skip_assignment and r.leader == r.member_id
    assert len(r.members) == 2 and b.group(G).state is S.STABLE
    s = b.reply(b.sync(G, r.member_id, gen, {}, instance=leader_instance, version=5))  # no assignment computed
    assert s.assignment == plan[leader]


def test_static_rejoin_with_other_protocols_rebalances():
    b = Broker()
    ids, gen, leader, _ = static_group(b)
    t = b.join(G, instance="i-b", protocols=[("roundrobin", b"x")])
    assert not b.answered(t) and b.group(G).state is S.PREPARING_REBALANCE


def test_static_member_rejoining_while_its_old_id_waits_fences_the_old_request():
    b = Broker()
    ids, gen, leader, _ = static_group(b)
    old = ids["i-b"]
    t_old = b.join(G, old, instance="i-b", topics=("t", "u"))  # old incarnation waits in a rebalance
    assert not b.answered(t_old)
    assert b.group(G).state is S.PREPARING_REBALANCE
    t_new = b.join(G, instance="i-b")
    r = b.reply(t_old)
    assert r.error_code == ErrorCode.FENCED_INSTANCE_ID and r.member_id == old
    assert not b.answered(t_new)
    t_leader = b.join(G, ids["i-a"], instance="i-a")
    r_new, r_leader = b.reply(t_new), b.reply(t_leader)
    assert r_new.generation_id == r_leader.generation_id == gen + 1 and r_new.member_id != old


def test_static_members_that_do_not_rejoin_stay_until_their_session_expires():
    b = Broker()
    ids, gen, leader, _ = static_group(b, session=60_000)
    t = b.join(G, ids["i-a"], instance="i-a", rebalance=30_000, session=60_000, topics=("t", "u"))
    b.advance(30_000)  # rebalance timeout: i-b did not rejoin but is static, so it stays
    r = b.reply(t)
    assert r.generation_id == gen + 1 and set(b.group(G).members) == set(ids.values())
    assert {m.member_id for m in r.members} == set(ids.values())
    b.advance(30_000)  # no heartbeat from i-b for its whole session
    assert ids["i-b"] not in b.group(G).members


def test_admin_removes_a_static_member_by_instance_id():
    b = Broker()
    ids, gen, leader, _ = static_group(b)
    resp = b.leave(G, version=4, members=[("", "i-b"), ("", "i-zzz")])
    assert [(m.group_instance_id, m.error_code) for m in resp.members] == [
        ("i-b", 0), ("i-zzz", ErrorCode.UNKNOWN_MEMBER_ID)]
    assert ids["i-b"] not in b.group(G).members and "i-b" not in b.group(G).static_members
    assert b.group(G).state is S.PREPARING_REBALANCE


def test_leave_with_a_stale_member_id_for_an_instance_is_fenced():
    b = Broker()
    ids, gen, leader, _ = static_group(b)
    resp = b.leave(G, version=3, members=[("stale", "i-b")])
    assert resp.members[0].error_code == ErrorCode.FENCED_INSTANCE_ID
    assert ids["i-b"] in b.group(G).members


def test_unknown_static_instance_with_a_member_id_is_unknown():
    b = Broker()
    ids, gen, leader, _ = static_group(b)
    assert b.heartbeat(G, ids["i-a"], gen, instance="i-nope") == ErrorCode.UNKNOWN_MEMBER_ID
