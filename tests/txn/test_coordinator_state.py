"""The transaction state table: every (state, event) pair against Kafka's validPreviousStates, and
every (state, request or timer) pair through a real coordinator."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcompat.protocol.errors import ErrorCode
from kcompat.txn.state import (
    COMPLETE_STATES, EXPIRATION_ALLOWED, PREPARE_STATES, TRANSITIONS, VALID_PREVIOUS_STATES, IllegalStateTransition,
    TxnEvent, TxnState, next_state,
)
from tests.txn.test_coordinator_harness import TxnBroker

S, E = TxnState, TxnEvent
ALL_PAIRS = list(itertools.product(TxnState, TxnEvent))


def test_table_realises_exactly_kafkas_valid_previous_states():
    edges = {(s, new) for (s, _), new in TRANSITIONS.items()}
    kafka = {(prev, new) for new, prevs in VALID_PREVIOUS_STATES.items() for prev in prevs}
    assert edges == kafka


@pytest.mark.parametrize("state,event", ALL_PAIRS, ids=[f"{s.name}-{e.name}" for s, e in ALL_PAIRS])
def test_every_state_event_pair(state, event):
    if (state, event) in TRANSITIONS:
        assert state in VALID_PREVIOUS_STATES[next_state(state, event)]
    else:
        with pytest.raises(IllegalStateTransition):
            next_state(state, event)


@given(st.sampled_from(TxnState), st.sampled_from(TxnEvent))
def test_pairs_with_hypothesis(state, event):
    try:
        new = next_state(state, event)
    except IllegalStateTransition as e:
        assert (state, event) not in TRANSITIONS and e.state is state and e.event is event
    else:
        assert state in VALID_PREVIOUS_STATES[new]
        assert (event is E.EXPIRE) == (new is S.DEAD)
        assert (event is E.FENCE_EPOCH) == (new is S.PREPARE_EPOCH_FENCE)


@given(st.lists(st.sampled_from(TxnEvent), max_size=50))
def test_random_walks_stay_in_the_table(events):
    state = S.EMPTY
    completed = 0
    for event in events:
        if (state, event) not in TRANSITIONS:
            with pytest.raises(IllegalStateTransition):
                next_state(state, event)
            continue
        new = next_state(state, event)
        assert state in VALID_PREVIOUS_STATES[new]
        if state in COMPLETE_STATES:  # a completed transaction goes back to Prepare* only by a TV2
            # abort with no partition (Kafka 4.3: PrepareAbort after Complete*), never to PrepareCommit
            assert new not in PREPARE_STATES or (event, new) == (E.ABORT, S.PREPARE_ABORT)
        completed += new in COMPLETE_STATES
        state = new
    if state is S.DEAD:  # Dead is final
        assert not [e for e in TxnEvent if (S.DEAD, e) in TRANSITIONS]


def test_dead_and_fence_are_left_only_as_kafka_allows():
    assert {e for (s, e) in TRANSITIONS if s is S.DEAD} == set()
    assert {(e, n) for (s, e), n in TRANSITIONS.items() if s is S.PREPARE_EPOCH_FENCE} == {(E.ABORT, S.PREPARE_ABORT)}
    assert EXPIRATION_ALLOWED == VALID_PREVIOUS_STATES[S.DEAD]


def test_state_names_and_ids_are_kafkas():
    assert [(str(s), s.id) for s in S] == [
        ("Empty", 0), ("Ongoing", 1), ("PrepareCommit", 2), ("PrepareAbort", 3), ("CompleteCommit", 4),
        ("CompleteAbort", 5), ("Dead", 6), ("PrepareEpochFence", 7)]
    assert all(S.from_id(s.id) is s and S.from_name(str(s)) is s for s in S)
    assert S.from_name("ongoing") is None
    with pytest.raises(ValueError):
        S.from_id(8)


# ---------------------------------------------------------------------------------------------
# every state x every input through the coordinator
# ---------------------------------------------------------------------------------------------

X = "x"
PART = ("t", 0)
TIMEOUT = 5000  # the transaction timeout; the harness expires idle ids after 600 s


def build(state: TxnState):
    """A broker with transactional id X in ``state``; returns (broker, producer id, epoch)."""
    b = TxnBroker()
    pid, epoch = b.begin(X, TIMEOUT)
    if state is S.EMPTY:
        return b, pid, epoch
    if state is S.DEAD:
        b.advance(700_000)
        assert b.meta(X) is None
        return b, pid, epoch
    assert b.add(X, pid, epoch, [PART]) == {PART: 0}
    if state is S.ONGOING:
        return b, pid, epoch
    commit = state in (S.PREPARE_COMMIT, S.COMPLETE_COMMIT)
    assert b.end(X, pid, epoch, commit) == 0
    if state in COMPLETE_STATES:
        b.write_markers()
    assert b.state(X) is state
    return b, pid, epoch


def do(b: TxnBroker, pid: int, epoch: int, action: str):
    if action == "init":
        return b.init(X, TIMEOUT).error_code
    if action == "add":
        return b.add(X, pid, epoch, [("t", 1)])[("t", 1)]
    if action == "add_offsets":
        return b.add_offsets(X, pid, epoch)
    if action == "commit":
        return b.end(X, pid, epoch, True)
    if action == "abort":
        return b.end(X, pid, epoch, False)
    if action == "markers":
        b.write_markers()
        return None
    if action == "timeout":  # past the transaction timeout and the next abort check
        b.advance(TIMEOUT + 2000)
        return None
    if action == "expire":  # past transactional.id.expiration.ms and the next expiration run
        b.advance(700_000)
        return None
    raise AssertionError(action)


N, C, ITS, MAP = (ErrorCode.NONE, ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.INVALID_TXN_STATE,
                  ErrorCode.INVALID_PRODUCER_ID_MAPPING)
EM, ON, PC, PA, CC, CA, D = (S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT, S.COMPLETE_COMMIT,
                             S.COMPLETE_ABORT, S.DEAD)

# (state, input) -> (immediate answer, state afterwards), as Kafka's TransactionCoordinator (TV1)
EXPECTED = {
    (EM, "init"): (N, EM), (EM, "add"): (N, ON), (EM, "add_offsets"): (N, ON), (EM, "commit"): (ITS, EM),
    (EM, "abort"): (ITS, EM), (EM, "markers"): (None, EM), (EM, "timeout"): (None, EM), (EM, "expire"): (None, D),

    # InitProducerId during a transaction fences it: PrepareAbort with a bumped epoch, retry later
    (ON, "init"): (C, PA), (ON, "add"): (N, ON), (ON, "add_offsets"): (N, ON), (ON, "commit"): (N, PC),
    (ON, "abort"): (N, PA), (ON, "markers"): (None, ON), (ON, "timeout"): (None, PA), (ON, "expire"): (None, PA),

    (PC, "init"): (C, PC), (PC, "add"): (C, PC), (PC, "add_offsets"): (C, PC), (PC, "commit"): (C, PC),
    (PC, "abort"): (C, PC), (PC, "markers"): (None, CC), (PC, "timeout"): (None, PC), (PC, "expire"): (None, PC),

    (PA, "init"): (C, PA), (PA, "add"): (C, PA), (PA, "add_offsets"): (C, PA), (PA, "commit"): (C, PA),
    (PA, "abort"): (C, PA), (PA, "markers"): (None, CA), (PA, "timeout"): (None, PA), (PA, "expire"): (None, PA),

    (CC, "init"): (N, EM), (CC, "add"): (N, ON), (CC, "add_offsets"): (N, ON), (CC, "commit"): (N, CC),
    (CC, "abort"): (ITS, CC), (CC, "markers"): (None, CC), (CC, "timeout"): (None, CC), (CC, "expire"): (None, D),

    (CA, "init"): (N, EM), (CA, "add"): (N, ON), (CA, "add_offsets"): (N, ON), (CA, "commit"): (ITS, CA),
    (CA, "abort"): (N, CA), (CA, "markers"): (None, CA), (CA, "timeout"): (None, CA), (CA, "expire"): (None, D),

    (D, "init"): (N, EM), (D, "add"): (MAP, D), (D, "add_offsets"): (MAP, D), (D, "commit"): (MAP, D),
    (D, "abort"): (MAP, D), (D, "markers"): (None, D), (D, "timeout"): (None, D), (D, "expire"): (None, D),
}
ACTIONS = sorted({a for _, a in EXPECTED})
STORED_STATES = [s for s in TxnState if s is not S.PREPARE_EPOCH_FENCE]  # the fence is never a resting state
assert set(EXPECTED) == set(itertools.product(STORED_STATES, ACTIONS))
KEYS = sorted(EXPECTED, key=lambda k: (k[0].id, k[1]))


def check(state: TxnState, action: str) -> None:
    b, pid, epoch = build(state)
    before = b.meta(X)
    answer, after = EXPECTED[(state, action)]
    assert do(b, pid, epoch, action) == answer
    assert b.state(X) is after
    described = b.describe(X)[0]
    if after is S.DEAD:
        assert described.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    else:
        assert described.error_code == 0 and described.transaction_state == str(after)
    m = b.meta(X)
    for old, event, new in m.transitions if m is not None else []:
        assert TRANSITIONS[(old, event)] is new
    if m is not None and before is not None and m is before:
        fenced = (state, action) in {(ON, "init"), (ON, "timeout"), (ON, "expire")}
        if fenced:  # zombie fencing: the abort carries epoch + 1 and passes through PrepareEpochFence
            assert m.producer_epoch == epoch + 1
            assert m.transitions[-2:] == [(ON, E.FENCE_EPOCH, S.PREPARE_EPOCH_FENCE),
                                          (S.PREPARE_EPOCH_FENCE, E.ABORT, PA)]
            assert b.end(X, pid, epoch, False) == ErrorCode.PRODUCER_FENCED


@pytest.mark.parametrize("state,action", KEYS, ids=[f"{s.name}-{a}" for s, a in KEYS])
def test_coordinator_state_by_input(state, action):
    check(state, action)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(STORED_STATES), st.sampled_from(ACTIONS))
def test_coordinator_state_by_input_with_hypothesis(state, action):
    check(state, action)
