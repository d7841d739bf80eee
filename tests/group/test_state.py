"""The group state table: every (state, event) pair against Kafka's valid previous states, and every
(state, request or timer) pair through a real coordinator."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcompat.group.state import (
    TRANSITIONS, VALID_PREVIOUS_STATES, GroupEvent, GroupState, IllegalStateTransition, can_rebalance, next_state,
)
from kcompat.protocol.errors import ErrorCode
from tests.group.harness import Broker

S = GroupState
ALL_PAIRS = list(itertools.product(GroupState, GroupEvent))


def test_table_realises_exactly_kafkas_valid_previous_states():
    edges = {(s, new) for (s, _), new in TRANSITIONS.items()}
    kafka = {(prev, new) for new, prevs in VALID_PREVIOUS_STATES.items() for prev in prevs}
    assert edges == kafka


@pytest.mark.parametrize("state,event", ALL_PAIRS, ids=[f"{s.name}-{e.name}" for s, e in ALL_PAIRS])
def test_every_state_event_pair(state, event):
    if (state, event) in TRANSITIONS:
        new = next_state(state, event)
        assert state in VALID_PREVIOUS_STATES[new]
    else:
        with pytest.raises(IllegalStateTransition):
            next_state(state, event)


@given(st.sampled_from(GroupState), st.sampled_from(GroupEvent))
def test_pairs_with_hypothesis(state, event):
    try:
        new = next_state(state, event)
    except IllegalStateTransition as e:
        assert (state, event) not in TRANSITIONS and e.state is state and e.event is event
    else:
        assert state in VALID_PREVIOUS_STATES[new]
        assert (event is GroupEvent.REMOVE) == (new is S.DEAD)


@given(st.lists(st.sampled_from(GroupEvent), max_size=40))
def test_random_walks_stay_in_the_table(events):
    state = S.EMPTY
    for event in events:
        if (state, event) in TRANSITIONS:
            new = next_state(state, event)
            assert state in VALID_PREVIOUS_STATES[new]
            state = new
        else:
            with pytest.raises(IllegalStateTransition):
                next_state(state, event)
    if state is S.DEAD:  # Dead is final: only REMOVE is defined
        assert [e for e in GroupEvent if (S.DEAD, e) in TRANSITIONS] == [GroupEvent.REMOVE]


def test_can_rebalance_is_kafkas():
    assert {s for s in S if can_rebalance(s)} == {S.EMPTY, S.STABLE, S.COMPLETING_REBALANCE}


def test_state_names_are_kafkas():
    assert [str(s) for s in S] == ["Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"]


# ---------------------------------------------------------------------------------------------
# every state x every input through the coordinator
# ---------------------------------------------------------------------------------------------

PENDING = "pending"  # the request waits for a later reply
G = "g"


def build(state: GroupState):
    """A broker with group G in ``state``; returns (broker, leader id, follower id, generation)."""
    b = Broker()
    (leader, gen), (follower, _) = b.form_group(G, 2)
    if state is S.STABLE:
        return b, leader, follower, gen
    if state is S.PREPARING_REBALANCE:
        b.join(G, version=3)  # a new member: waits for the others to rejoin
        assert b.group(G).state is S.PREPARING_REBALANCE
        return b, leader, follower, gen
    if state is S.COMPLETING_REBALANCE:
        lt = b.join(G, leader)  # a leader's JoinGroup always rebalances
        assert b.heartbeat(G, follower, gen) == ErrorCode.REBALANCE_IN_PROGRESS
        ft = b.join(G, follower)
        assert b.reply(lt).generation_id == b.reply(ft).generation_id == gen + 1
        assert b.group(G).state is S.COMPLETING_REBALANCE
        return b, leader, follower, gen + 1
    b.leave(G, leader)
    b.leave(G, follower)
    assert b.group(G).state is S.EMPTY
    if state is S.EMPTY:
        return b, leader, follower, gen + 1
    assert b.delete_groups(G) == {G: 0}
    assert b.group(G) is None
    return b, leader, follower, gen + 1


def do(b: Broker, leader: str, follower: str, gen: int, action: str):
    def answer(token, field="error_code"):
        r = b.reply(token)
        return PENDING if r is None else getattr(r, field)

    if action == "join_new":
        return answer(b.join(G, version=3))
    if action == "join_follower":
        return answer(b.join(G, follower))
    if action == "join_leader":
        return answer(b.join(G, leader))
    if action == "sync_leader":
        return answer(b.sync(G, leader, gen, {leader: b"L", follower: b"F"}))
    if action == "sync_follower":
        return answer(b.sync(G, follower, gen))
    if action == "heartbeat":
        return b.heartbeat(G, follower, gen)
    if action == "leave":
        return b.leave(G, follower).error_code
    if action == "commit":
        return b.commit(G, {("t", 0): 1}, generation=gen, member_id=follower)[("t", 0)]
    if action == "expire":  # nobody heartbeats for longer than the session timeout
        b.advance(10_001)
        return None
    if action == "delete":
        return b.delete_groups(G)[G]
    raise AssertionError(action)


N, U, RIP, NE = ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.NON_EMPTY_GROUP
P, C, ST, E, D = S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.STABLE, S.EMPTY, S.DEAD

# (state, input) -> (immediate answer, state afterwards), as Kafka's GroupCoordinator
EXPECTED = {
    (E, "join_new"): (PENDING, P), (E, "join_follower"): (U, E), (E, "join_leader"): (U, E),
    (E, "sync_leader"): (U, E), (E, "sync_follower"): (U, E), (E, "heartbeat"): (U, E), (E, "leave"): (U, E),
    (E, "commit"): (U, E), (E, "expire"): (None, E), (E, "delete"): (N, D),

    (P, "join_new"): (PENDING, P), (P, "join_follower"): (PENDING, P), (P, "join_leader"): (PENDING, P),
    (P, "sync_leader"): (RIP, P), (P, "sync_follower"): (RIP, P), (P, "heartbeat"): (RIP, P), (P, "leave"): (N, P),
    (P, "commit"): (N, P), (P, "expire"): (None, C), (P, "delete"): (NE, P),

    (C, "join_new"): (PENDING, P), (C, "join_follower"): (N, C), (C, "join_leader"): (N, C),
    (C, "sync_leader"): (N, ST), (C, "sync_follower"): (PENDING, C), (C, "heartbeat"): (N, C), (C, "leave"): (N, P),
    (C, "commit"): (RIP, C), (C, "expire"): (None, E), (C, "delete"): (NE, C),

    (ST, "join_new"): (PENDING, P), (ST, "join_follower"): (N, ST), (ST, "join_leader"): (PENDING, P),
    (ST, "sync_leader"): (N, ST), (ST, "sync_follower"): (N, ST), (ST, "heartbeat"): (N, ST), (ST, "leave"): (N, P),
    (ST, "commit"): (N, ST), (ST, "expire"): (None, E), (ST, "delete"): (NE, ST),

    (D, "join_new"): (PENDING, P), (D, "join_follower"): (U, D), (D, "join_leader"): (U, D),
    (D, "sync_leader"): (U, D), (D, "sync_follower"): (U, D), (D, "heartbeat"): (U, D), (D, "leave"): (U, D),
    (D, "commit"): (ErrorCode.ILLEGAL_GENERATION, D), (D, "expire"): (None, D),
    (D, "delete"): (ErrorCode.GROUP_ID_NOT_FOUND, D),
}
ACTIONS = sorted({a for _, a in EXPECTED})
assert set(EXPECTED) == set(itertools.product(GroupState, ACTIONS))


def _state_of(b: Broker) -> GroupState:
    g = b.group(G)
    return S.DEAD if g is None else g.state


@pytest.mark.parametrize("state,action", sorted(EXPECTED, key=lambda k: (k[0].name, k[1])),
                         ids=[f"{s.name}-{a}" for s, a in sorted(EXPECTED, key=lambda k: (k[0].name, k[1]))])
def test_coordinator_state_by_input(state, action):
    b, leader, follower, gen = build(state)
    answer, after = EXPECTED[(state, action)]
    assert do(b, leader, follower, gen, action) == answer
    assert _state_of(b) is after
    described = b.describe(G)[0]
    assert described.error_code == 0 and described.group_state == str(after)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(GroupState), st.sampled_from(ACTIONS))
def test_coordinator_state_by_input_with_hypothesis(state, action):
    b, leader, follower, gen = build(state)
    answer, after = EXPECTED[(state, action)]
    assert do(b, leader, follower, gen, action) == answer
    assert _state_of(b) is after
    for group_transitions in [b.group(G).transitions if b.group(G) else []]:
        for old, event, new in group_transitions:
            assert TRANSITIONS[(old, event)] is new
