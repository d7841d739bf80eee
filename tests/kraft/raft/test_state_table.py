"""The quorum state machine table (roles x triggers), pair by pair and with hypothesis driving
random sequences (DESIGN.md section 6)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcompat.kraft.raft import MemoryQuorumStateStore, OffsetAndEpoch, RaftConfig, Role
from kcompat.kraft.raft.state import TRANSITIONS, IllegalTransition, QuorumState, Trigger

VOTERS = frozenset({1, 2, 3})


class RecordingStore(MemoryQuorumStateStore):
    def __init__(self) -> None:
        super().__init__()
        self.history = []

    def write(self, state) -> None:
        super().write(state)
        self.history.append(state)


def quorum(node_id: int = 1) -> QuorumState:
    q = QuorumState(RaftConfig(node_id=node_id, voters=VOTERS, cluster_id="t"), RecordingStore(),
                    random.Random(0))
    q.initialize(OffsetAndEpoch(0, 0), 0)
    return q


def in_role(role: Role) -> QuorumState:
    q = quorum()
    if role is Role.UNATTACHED:
        return q
    if role is Role.FOLLOWER:
        q.to_follower(1, 2, 0)
        return q
    if role is Role.PROSPECTIVE:
        q.to_prospective(0)
        return q
    q.to_candidate(0)
    if role is Role.CANDIDATE:
        return q
    q.state.election.record(2, True)
    q.to_leader(0, 0)
    if role is Role.LEADER:
        return q
    q.to_resigned([2, 3], 0)
    return q


def fire(q: QuorumState, trigger: Trigger) -> None:
    e = q.epoch
    if trigger is Trigger.HIGHER_EPOCH:
        q.to_unattached(e + 1, 0)
    elif trigger is Trigger.LEADER_KNOWN:
        q.to_follower(e + 1, 3, 0)
    elif trigger is Trigger.GRANT_VOTE:
        q.to_voted(e, 2, 0)
    elif trigger is Trigger.START_PRE_VOTE:
        q.to_prospective(0)
    elif trigger is Trigger.START_ELECTION:
        q.to_candidate(0)
    elif trigger is Trigger.WIN_ELECTION:
        if q.role is Role.CANDIDATE:
            q.state.election.record(2, True)
        q.to_leader(0, 0)
    elif trigger is Trigger.RESIGN:
        q.to_resigned([], 0)
    elif trigger is Trigger.PRE_VOTE_LOST:
        q.to_unattached_after_pre_vote(0)


@pytest.mark.parametrize("trigger", list(Trigger), ids=lambda t: t.name)
@pytest.mark.parametrize("role", list(Role), ids=lambda r: r.name)
def test_every_role_trigger_pair(role, trigger):
    q = in_role(role)
    assert q.role is role
    target = TRANSITIONS.get((role, trigger))
    if target is None:
        with pytest.raises(IllegalTransition):
            fire(q, trigger)
    else:
        fire(q, trigger)
        assert q.role is target


def test_observer_only_unattached_or_follower():
    q = quorum(node_id=9)
    for method in (lambda: q.to_prospective(0), lambda: q.to_candidate(0), lambda: q.to_voted(0, 2, 0)):
        with pytest.raises(IllegalTransition):
            method()
    q.to_follower(3, 1, 0)
    assert q.role is Role.FOLLOWER


def test_same_epoch_leader_only_when_unknown():
    q = in_role(Role.FOLLOWER)
    with pytest.raises(IllegalTransition):
        q.to_follower(q.epoch, 3, 0)                 # a second leader in the epoch
    q = in_role(Role.CANDIDATE)
    q.to_follower(q.epoch, 2, 0)                     # the candidate lost to 2
    assert q.state.voted_id == 1                     # and keeps its vote for itself


def test_restart_states():
    for role, expected in ((Role.LEADER, Role.RESIGNED), (Role.FOLLOWER, Role.FOLLOWER),
                           (Role.CANDIDATE, Role.UNATTACHED), (Role.UNATTACHED, Role.UNATTACHED)):
        q = in_role(role)
        again = QuorumState(q.config, q.store, random.Random(1))
        again.initialize(OffsetAndEpoch(0, 0), 0)
        assert again.role is expected and again.epoch == q.epoch
        assert again.state.voted_id == q.state.voted_id or role is Role.FOLLOWER
    q = quorum()
    again = QuorumState(q.config, q.store, random.Random(1))
    again.initialize(OffsetAndEpoch(10, 7), 0)       # the log has seen epoch 7
    assert again.role is Role.UNATTACHED and again.epoch == 7


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(list(Trigger)), st.integers(0, 2), st.sampled_from([2, 3])),
                max_size=40))
def test_random_sequences_keep_epochs_and_votes(steps):
    q = quorum()
    store = q.store
    epochs = [q.epoch]
    for trigger, bump, other in steps:
        before = q.role
        try:
            if trigger is Trigger.HIGHER_EPOCH:
                q.to_unattached(q.epoch + bump, 0)
            elif trigger is Trigger.LEADER_KNOWN:
                q.to_follower(q.epoch + bump, other, 0)
            elif trigger is Trigger.GRANT_VOTE:
                q.to_voted(q.epoch, other, 0)
            else:
                fire(q, trigger)
        except IllegalTransition:
            continue
        assert TRANSITIONS[(before, trigger)] is q.role
        epochs.append(q.epoch)
    assert epochs == sorted(epochs)
    persisted = store.history
    assert [s.epoch for s in persisted] == sorted(s.epoch for s in persisted)
    votes: dict[int, int] = {}
    for s in persisted:
        if s.voted_id >= 0:
            assert votes.setdefault(s.epoch, s.voted_id) == s.voted_id, persisted
    leaders: dict[int, int] = {}
    for s in persisted:
        if s.leader_id >= 0:
            assert leaders.setdefault(s.epoch, s.leader_id) == s.leader_id, persisted
