"""JoinGroup, SyncGroup, Heartbeat and LeaveGroup as Kafka's classic group coordinator answers them."""

from __future__ import annotations

import pytest

from kcompat.group import GroupConfig, GroupState
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.join_group import JoinGroupResponse
from tests.group.harness import Broker, assignment, subscription

S = GroupState
G = "g"


# -- JoinGroup: member ids, validation --------------------------------------------------------

def test_member_id_required_from_v4_with_client_id_and_uuid():
    b = Broker()
    resp = b.reply(b.join(G, version=4, client_id="consumer-1"))
    assert resp.error_code == ErrorCode.MEMBER_ID_REQUIRED
    assert resp.member_id == "consumer-1-uuid1"
    assert resp.generation_id == -1 and resp.members == [] and resp.leader == ""
    g = b.group(G)
    assert g.state is S.EMPTY and g.pending_members == {"consumer-1-uuid1"} and not g.members
    # the member joins again with that id and becomes the leader of generation 1
    t = b.join(G, "consumer-1-uuid1", version=4, client_id="consumer-1")
    b.advance(100)
    r = b.reply(t)
    assert r.error_code == 0 and r.member_id == r.leader == "consumer-1-uuid1" and r.generation_id == 1


def test_member_id_generated_by_the_real_uuid4():
    from kcompat.group import GroupCoordinator
    c = GroupCoordinator(GroupConfig(num_partitions=1), partition_exists=lambda t, p: True)
    c.load(0, [], 0)
    from kcompat.protocol.messages.join_group import JoinGroupRequest
    req = JoinGroupRequest(group_id=G, session_timeout_ms=10000, rebalance_timeout_ms=10000, protocol_type="consumer",
                           protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")])
    (_, resp), = c.join_group("tok", req, 9, "rdkafka", "/10.0.0.1", 0).replies
    import uuid
    prefix, _, rest = resp.member_id.partition("-")
    assert prefix == "rdkafka" and uuid.UUID(rest).version == 4


def test_before_v4_a_new_member_joins_directly():
    b = Broker()
    mid, t = b.join_new(G, version=3)
    assert mid is None and not b.answered(t)
    b.advance(100)
    r = b.reply(t)
    assert r.error_code == 0 and r.member_id.startswith("c-") and r.leader == r.member_id


@pytest.mark.parametrize("session,ok", [(5999, False), (6000, True), (1800000, True), (1800001, False)])
def test_session_timeout_bounds(session, ok):
    b = Broker(GroupConfig(num_partitions=4))
    r = b.reply(b.join(G, "", session=session, version=5))
    if ok:
        assert r.error_code == ErrorCode.MEMBER_ID_REQUIRED
    else:
        assert r.error_code == ErrorCode.INVALID_SESSION_TIMEOUT and b.group(G) is None


def test_inconsistent_protocol_type_and_protocols():
    b = Broker()
    b.form_group(G, 1)
    r = b.reply(b.join(G, version=3, protocol_type="connect"))
    assert r.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL and r.member_id == ""
    r = b.reply(b.join(G, version=3, protocols=[("sticky", subscription("t"))]))
    assert r.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    # an empty group needs a protocol type and at least one protocol
    r = b.reply(b.join("other", version=3, protocol_type=""))
    assert r.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    r = b.reply(b.join("other", version=3, protocols=[]))
    assert r.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_unknown_member_id_for_unknown_group_and_invalid_group_id():
    b = Broker()
    assert b.reply(b.join(G, "ghost")).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert b.reply(b.join("", version=3)).error_code == ErrorCode.INVALID_GROUP_ID
    assert b.reply(b.sync("", "m", 1)).error_code == ErrorCode.INVALID_GROUP_ID
    assert b.heartbeat("", "m", 1) == ErrorCode.INVALID_GROUP_ID
    assert b.leave("", "m").error_code == ErrorCode.INVALID_GROUP_ID


def test_group_max_size():
    b = Broker(GroupConfig(initial_rebalance_delay_ms=100, num_partitions=4, max_size=2))
    members = b.form_group(G, 2)
    r = b.reply(b.join(G, version=3))
    assert r.error_code == ErrorCode.GROUP_MAX_SIZE_REACHED and r.member_id == ""
    # existing members are still accepted
    t = b.join(G, members[0][0])
    assert not b.answered(t) and b.group(G).state is S.PREPARING_REBALANCE


def test_reason_is_accepted_v8_and_responses_encode_for_every_version():
    for version in range(0, 10):
        b = Broker()
        t = b.join(G, version=version, reason="testing" if version >= 8 else None)
        r = b.reply(t)
        if version >= 4:
            assert r.error_code == ErrorCode.MEMBER_ID_REQUIRED
            t = b.join(G, r.member_id, version=version)
        b.advance(100)
        r = b.reply(t)
        assert r.error_code == 0 and r.generation_id == 1
        assert r.protocol_name == "range"


def test_error_responses_have_null_protocol_name_from_v7_and_empty_before():
    b = Broker()
    assert b.reply(b.join(G, "ghost", version=7)).protocol_name is None
    assert b.reply(b.join(G, "ghost", version=6)).protocol_name == ""


# -- join phase -------------------------------------------------------------------------------

def test_three_members_leader_gets_all_metadata_and_followers_none():
    b = Broker()
    tokens = [b.join_new(G, client_id=f"c{i}", topics=("t",) if i else ("t", "u"))[1] for i in range(3)]
    b.advance(100)
    b.advance(100)
    b.advance(100)
    resps = [b.reply(t) for t in tokens]
    assert all(r.error_code == 0 and r.generation_id == 1 and r.protocol_name == "range" for r in resps)
    leader = resps[0].member_id
    assert all(r.leader == leader for r in resps)
    assert [m.member_id for m in resps[0].members] == [r.member_id for r in resps]
    assert resps[0].members[0].metadata == subscription("t", "u")
    assert resps[1].members == [] and resps[2].members == []
    assert b.group(G).state is S.COMPLETING_REBALANCE


def test_protocol_selection_by_votes_among_common_protocols():
    b = Broker()
    prefs = [["roundrobin", "range"], ["range", "roundrobin", "sticky"], ["range", "roundrobin"]]
    tokens = [b.join_new(G, protocols=[(p, b"m") for p in ps])[1] for ps in prefs]
    for _ in range(4):
        b.advance(100)
    assert {b.reply(t).protocol_name for t in tokens} == {"range"}


def test_initial_rebalance_delay_waits_and_is_extended_by_new_members():
    b = Broker(GroupConfig(initial_rebalance_delay_ms=3000, num_partitions=4))
    _, t1 = b.join_new(G, rebalance=10_000)
    b.advance(2999)
    assert not b.answered(t1)
    _, t2 = b.join_new(G, rebalance=10_000)  # arrives within the delay: extends it
    b.advance(1)  # first delay over, a new member came: wait another delay
    assert not b.answered(t1)
    b.advance(2999)
    assert not b.answered(t1)
    b.advance(1)
    assert b.reply(t1).generation_id == b.reply(t2).generation_id == 1


def test_initial_delay_bounded_by_rebalance_timeout():
    b = Broker(GroupConfig(initial_rebalance_delay_ms=3000, num_partitions=4))
    tokens = [b.join_new(G, rebalance=7000)[1]]
    done_at = None
    for step in range(1, 40):
        b.advance(500)
        if step % 2 == 0 and step < 30:  # a new member every second
            tokens.append(b.join_new(G, rebalance=7000)[1])
        if b.answered(tokens[0]):
            done_at = step * 500
            break
    # delays: 3000 (remaining 4000), 3000 (remaining 1000), 1000 (remaining 0): done at 7000 ms
    assert done_at == 7000
    assert b.reply(tokens[0]).generation_id == 1


def test_initial_delay_zero_completes_with_the_first_member():
    b = Broker(GroupConfig(initial_rebalance_delay_ms=0, num_partitions=4))
    mid, t = b.join_new(G)
    r = b.reply(t)
    assert r.error_code == 0 and r.generation_id == 1 and r.leader == mid


def test_rejoin_after_lost_join_response_in_completing_rebalance():
    b = Broker()
    (leader, gen), (follower, _) = b.form_group(G, 2)
    lt = b.join(G, leader)
    b.heartbeat(G, follower, gen)
    ft = b.join(G, follower)
    assert b.reply(ft).generation_id == b.reply(lt).generation_id == gen + 1
    again = b.reply(b.join(G, leader))  # same metadata: same generation again, with the members
    assert again.generation_id == gen + 1 and len(again.members) == 2
    again = b.reply(b.join(G, follower))
    assert again.generation_id == gen + 1 and again.members == []
    # changed metadata: a new rebalance
    t = b.join(G, follower, topics=("t", "u"))
    assert not b.answered(t) and b.group(G).state is S.PREPARING_REBALANCE


def test_rebalance_when_a_member_joins_a_stable_group():
    b = Broker()
    (leader, gen), (follower, _) = b.form_group(G, 2)
    newcomer, nt = b.join_new(G)
    assert b.group(G).state is S.PREPARING_REBALANCE
    assert b.heartbeat(G, leader, gen) == ErrorCode.REBALANCE_IN_PROGRESS
    assert b.heartbeat(G, follower, gen) == ErrorCode.REBALANCE_IN_PROGRESS
    # commits of the current generation still go through while preparing (Kafka)
    assert b.commit(G, {("t", 0): 3}, generation=gen, member_id=leader) == {("t", 0): 0}
    assert b.reply(b.sync(G, follower, gen)).error_code == ErrorCode.REBALANCE_IN_PROGRESS
    lt, ft = b.join(G, leader), b.join(G, follower)
    resps = [b.reply(t) for t in (lt, ft, nt)]
    assert all(r.generation_id == gen + 1 for r in resps)
    assert resps[0].leader == leader and len(resps[0].members) == 3


def test_leader_rejoin_in_stable_rebalances_but_follower_with_same_metadata_does_not():
    b = Broker()
    (leader, gen), (follower, _) = b.form_group(G, 2)
    r = b.reply(b.join(G, follower))
    assert r.error_code == 0 and r.generation_id == gen and r.members == [] and b.group(G).state is S.STABLE
    t = b.join(G, leader)
    assert not b.answered(t) and b.group(G).state is S.PREPARING_REBALANCE


def test_rebalance_timeout_removes_members_that_do_not_rejoin():
    b = Broker()
    (leader, gen), (follower, _), (third, _) = b.form_group(G, 3, rebalance=20_000, session=30_000)
    t = b.join(G, leader, rebalance=20_000, session=30_000)
    b.advance(10_000)
    assert b.heartbeat(G, third, gen) == ErrorCode.REBALANCE_IN_PROGRESS  # alive but never rejoins
    b.advance(9_999)
    assert not b.answered(t)
    b.advance(1)
    r = b.reply(t)
    assert r.generation_id == gen + 1 and [m.member_id for m in r.members] == [leader]
    assert set(b.group(G).members) == {leader}
    assert b.heartbeat(G, third, gen) == ErrorCode.UNKNOWN_MEMBER_ID


def test_new_leader_elected_when_the_leader_does_not_rejoin():
    b = Broker()
    (leader, gen), (follower, _) = b.form_group(G, 2, rebalance=20_000, session=30_000)
    t = b.join(G, follower, topics=("t", "u"), rebalance=20_000, session=30_000)
    b.advance(20_000)
    r = b.reply(t)
    assert r.leader == follower and r.generation_id == gen + 1 and len(r.members) == 1


# -- SyncGroup ----------------------------------------------------------------------------------

def test_followers_wait_for_the_leaders_assignment_and_missing_members_get_empty_bytes():
    b = Broker()
    tokens = [b.join_new(G)[1] for _ in range(3)]
    for _ in range(3):
        b.advance(100)
    resps = [b.reply(t) for t in tokens]
    gen, leader = resps[0].generation_id, resps[0].leader
    f1, f2 = resps[1].member_id, resps[2].member_id
    s1, s2 = b.sync(G, f1, gen), b.sync(G, f2, gen)
    assert not b.answered(s1) and not b.answered(s2)
    plan = {leader: assignment({"t": [0, 1]}), f1: assignment({"t": [2]}), "not-a-member": b"x"}
    sl = b.sync(G, leader, gen, plan)
    assert b.reply(sl).assignment == plan[leader]
    r1, r2 = b.reply(s1), b.reply(s2)
    assert r1.error_code == 0 and r1.assignment == plan[f1]
    assert r2.error_code == 0 and r2.assignment == b""  # not in the leader's plan: empty, never null
    assert b.group(G).state is S.STABLE
    # a follower's assignment is ignored; a Stable group answers SyncGroup with the stored assignment
    r = b.reply(b.sync(G, f1, gen, {f1: b"mine"}, version=5))
    assert r.assignment == plan[f1] and r.protocol_type == "consumer" and r.protocol_name == "range"


def test_sync_errors():
    b = Broker()
    (leader, gen), (follower, _) = b.form_group(G, 2)
    assert b.reply(b.sync(G, "ghost", gen)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert b.reply(b.sync("nogroup", leader, gen)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert b.reply(b.sync(G, leader, gen + 1)).error_code == ErrorCode.ILLEGAL_GENERATION
    r = b.reply(b.sync(G, leader, gen, version=5, protocol_type="connect"))
    assert r.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL and r.protocol_type is None
    assert b.reply(b.sync(G, leader, gen, version=5, protocol_name="roundrobin")).error_code == \
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    # from v5 both fields are mandatory
    assert b.reply(b.sync(G, leader, gen, version=5, protocol_name=None)).error_code == \
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    # before v5 they are not sent and not checked
    assert b.reply(b.sync(G, leader, gen, version=4, protocol_name=None)).error_code == 0


def test_sync_timeout_removes_members_that_never_sync():
    b = Broker()
    tokens = [b.join_new(G, rebalance=20_000, session=30_000)[1] for _ in range(2)]
    b.advance(100)
    b.advance(100)
    r0, r1 = b.reply(tokens[0]), b.reply(tokens[1])
    leader, follower, gen = r0.member_id, r1.member_id, r0.generation_id
    assert b.reply(b.sync(G, leader, gen, {leader: b"L", follower: b"F"})).error_code == 0
    assert b.group(G).state is S.STABLE
    b.advance(19_999)
    assert b.heartbeat(G, leader, gen) == 0
    b.advance(1)  # the follower never sent SyncGroup within the rebalance timeout
    assert follower not in b.group(G).members
    assert b.group(G).state is S.PREPARING_REBALANCE
    assert b.heartbeat(G, leader, gen) == ErrorCode.REBALANCE_IN_PROGRESS


def test_rebalance_during_sync_phase_answers_waiting_syncs_with_rebalance_in_progress():
    b = Broker()
    tokens = [b.join_new(G)[1] for _ in range(2)]
    b.advance(100)
    b.advance(100)
    b.reply(tokens[0])
    r1 = b.reply(tokens[1])
    st = b.sync(G, r1.member_id, r1.generation_id)
    assert not b.answered(st)
    b.join_new(G)  # a third member: CompletingRebalance -> PreparingRebalance
    r = b.reply(st)
    assert r.error_code == ErrorCode.REBALANCE_IN_PROGRESS and r.assignment == b""


# -- Heartbeat and session expiry ---------------------------------------------------------------

def test_heartbeat_errors():
    b = Broker()
    (leader, gen), _ = b.form_group(G, 2)
    assert b.heartbeat(G, leader, gen) == 0
    assert b.heartbeat(G, leader, gen - 1) == ErrorCode.ILLEGAL_GENERATION
    assert b.heartbeat(G, "ghost", gen) == ErrorCode.UNKNOWN_MEMBER_ID
    assert b.heartbeat("nogroup", leader, gen) == ErrorCode.UNKNOWN_MEMBER_ID
    for version in range(5):
        assert b.heartbeat(G, leader, gen, version=version) == 0


def test_session_expiry_rebalances_and_heartbeats_keep_members_alive():
    b = Broker()
    (leader, gen), (follower, _) = b.form_group(G, 2, session=10_000)
    for _ in range(5):
        b.advance(9_000)
        assert b.heartbeat(G, leader, gen) == 0
        assert b.heartbeat(G, follower, gen) == 0
    b.advance(9_000)
    assert b.heartbeat(G, leader, gen) == 0
    b.advance(1_000)  # the follower's session is over
    assert follower not in b.group(G).members
    assert b.heartbeat(G, leader, gen) == ErrorCode.REBALANCE_IN_PROGRESS
    t = b.join(G, leader)
    r = b.reply(t)
    assert r.generation_id == gen + 1 and [m.member_id for m in r.members] == [leader]


def test_next_deadline_is_the_earliest_timer():
    b = Broker()
    (leader, gen), _ = b.form_group(G, 2, session=10_000)
    assert b.coord.next_deadline() <= b.now + 10_000
    b.now = b.coord.next_deadline()
    b.apply(b.coord.poll(b.now))
    assert b.coord.next_deadline() > b.now


def test_pending_member_expires_after_the_session_timeout():
    b = Broker()
    resp = b.reply(b.join(G, version=4, session=10_000))
    assert b.group(G).pending_members == {resp.member_id}
    b.advance(10_000)
    assert not b.group(G).pending_members
    # too late: the id is no longer known
    assert b.reply(b.join(G, resp.member_id, version=4)).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_join_waits_for_pending_members():
    b = Broker()
    (leader, gen), = b.form_group(G, 1, session=10_000)
    resp = b.reply(b.join(G, version=4, session=10_000))  # MEMBER_ID_REQUIRED, pending
    t = b.join(G, leader, session=10_000)  # leader rejoins: waits for the pending member too
    assert not b.answered(t)
    t2 = b.join(G, resp.member_id, version=4, session=10_000)
    r = b.reply(t)
    assert r.generation_id == gen + 1 and len(r.members) == 2 and b.reply(t2).generation_id == gen + 1


# -- LeaveGroup -----------------------------------------------------------------------------------

def test_leave_rebalances_and_last_leave_empties_the_group():
    b = Broker()
    (leader, gen), (follower, _) = b.form_group(G, 2)
    assert b.leave(G, follower).error_code == 0
    assert b.group(G).state is S.PREPARING_REBALANCE
    r = b.reply(b.join(G, leader))
    assert r.generation_id == gen + 1
    b.reply(b.sync(G, leader, gen + 1, {leader: b"x"}))
    assert b.leave(G, leader, version=0).error_code == 0
    g = b.group(G)
    assert g.state is S.EMPTY and g.generation_id == gen + 2 and g.protocol_name is None
    # the Empty group was written: generation, no members
    from kcompat.group.records import parse_group_value
    last = parse_group_value(b.records(g.partition)[-1][2])
    assert last.generation == gen + 2 and last.members == [] and last.protocol is None
    assert last.protocol_type == "consumer"


def test_batch_leave_v3_with_per_member_errors():
    b = Broker()
    (leader, gen), (follower, _), (third, _) = b.form_group(G, 3)
    resp = b.leave(G, version=3, members=[(leader, None), ("ghost", None), (follower, None)])
    assert resp.error_code == 0
    assert [(m.member_id, m.error_code) for m in resp.members] == [
        (leader, 0), ("ghost", ErrorCode.UNKNOWN_MEMBER_ID), (follower, 0)]
    assert set(b.group(G).members) == {third}
    # v0-2 carry the member error at the top
    assert b.leave(G, "ghost", version=2).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    # unknown group: per-member UNKNOWN_MEMBER_ID
    resp = b.leave("nogroup", version=5, members=[("m", None)])
    assert resp.error_code == 0 and resp.members[0].error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_leave_of_a_waiting_member_answers_its_join():
    b = Broker()
    (leader, gen), (follower, _) = b.form_group(G, 2)
    t = b.join(G, leader)
    assert not b.answered(t)
    b.leave(G, leader)
    r = b.reply(t)
    assert r.error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_leave_of_a_pending_member():
    b = Broker()
    resp = b.reply(b.join(G, version=4))
    r = b.leave(G, version=3, members=[(resp.member_id, None)])
    assert r.members[0].error_code == 0 and not b.group(G).pending_members


# -- cooperative rebalancing (KIP-429) ----------------------------------------------------------

def test_cooperative_pattern_rejoin_with_same_member_ids_and_generation_increases():
    """cooperative-sticky: members rejoin with their owned partitions in the subscription; a member
    that must revoke rejoins right after the first rebalance, giving a second generation."""
    coop = "cooperative-sticky"

    def sub(owned):
        from kcompat.protocol.messages.consumer_protocol_subscription import ConsumerProtocolSubscription
        import struct
        out = bytearray(struct.pack(">h", 1))
        ConsumerProtocolSubscription(topics=["t"], user_data=None, owned_partitions=[
            ConsumerProtocolSubscription.TopicPartition(topic="t", partitions=owned)] if owned else []).write(out, 1)
        return bytes(out)

    b = Broker()
    _, t1 = b.join_new(G, protocols=[(coop, sub([]))])
    b.advance(100)
    r = b.reply(t1)
    m1, gen = r.member_id, r.generation_id
    b.reply(b.sync(G, m1, gen, {m1: assignment({"t": list(range(6))})}, version=5, protocol_name=coop))
    # a second member joins; m1 rejoins still owning everything
    _, t2 = b.join_new(G, protocols=[(coop, sub([]))])
    assert b.heartbeat(G, m1, gen) == ErrorCode.REBALANCE_IN_PROGRESS
    t1 = b.join(G, m1, protocols=[(coop, sub(list(range(6))))])
    r1, r2 = b.reply(t1), b.reply(t2)
    assert r1.generation_id == r2.generation_id == gen + 1 and r1.protocol_name == coop
    m2 = r2.member_id
    # the leader's cooperative assignor only revokes in this round: m2 gets nothing yet
    b.sync(G, m2, gen + 1)
    b.sync(G, m1, gen + 1, {m1: assignment({"t": [0, 1, 2]}), m2: assignment({})}, version=5, protocol_name=coop)
    assert b.group(G).state is S.STABLE
    # m1 revoked 3-5 and rejoins at once with the same member id: generation gen + 2
    t1 = b.join(G, m1, protocols=[(coop, sub([0, 1, 2]))])
    assert b.heartbeat(G, m2, gen + 1) == ErrorCode.REBALANCE_IN_PROGRESS
    t2 = b.join(G, m2, protocols=[(coop, sub([]))])
    r1, r2 = b.reply(t1), b.reply(t2)
    assert r1.member_id == m1 and r2.member_id == m2 and r1.generation_id == r2.generation_id == gen + 2
    s2 = b.sync(G, m2, gen + 2)
    b.sync(G, m1, gen + 2, {m1: assignment({"t": [0, 1, 2]}), m2: assignment({"t": [3, 4, 5]})}, version=5,
           protocol_name=coop)
    assert b.reply(s2).assignment == assignment({"t": [3, 4, 5]})


# -- duplicated requests never leave a request unanswered -----------------------------------------

def test_second_join_of_a_waiting_member_answers_the_first():
    b = Broker()
    (leader, gen), (follower, _) = b.form_group(G, 2)
    t1 = b.join(G, leader)
    t2 = b.join(G, leader)
    assert b.reply(t1).error_code == ErrorCode.REBALANCE_IN_PROGRESS
    assert not b.answered(t2)
    b.join(G, follower)
    assert b.reply(t2).generation_id == gen + 1


def test_join_response_member_fields_by_version():
    r = JoinGroupResponse(members=[JoinGroupResponse.JoinGroupResponseMember(member_id="m", group_instance_id="i",
                                                                             metadata=b"x")])
    out = bytearray()
    r.write(out, 4)  # instance id not on the wire before v5
    back, _ = JoinGroupResponse.read(memoryview(bytes(out)), 0, 4)
    assert back.members[0].group_instance_id is None
