"""States of a classic consumer group and the events that move it between them, as one table.

Kafka's ``GroupState`` objects (GroupMetadata.scala; ``ClassicGroupState`` in the group-coordinator
module) list for each state the states it may be entered from. Here the same rules are written as a
table ``(state, event) -> state``; the coordinator moves a group only through :func:`next_state`, so a
transition missing from the table is a bug that raises instead of corrupting the group.

    Empty               --PREPARE_REBALANCE-->   PreparingRebalance   (a member joins)
    Stable              --PREPARE_REBALANCE-->   PreparingRebalance   (join, leave, expiry, metadata change)
    CompletingRebalance --PREPARE_REBALANCE-->   PreparingRebalance   (same, during the sync phase)
    PreparingRebalance  --JOIN_COMPLETE-->       CompletingRebalance  (new generation with members)
    PreparingRebalance  --JOIN_COMPLETE_EMPTY--> Empty                (new generation, nobody left)
    CompletingRebalance --ASSIGNMENT_STORED-->   Stable               (leader's SyncGroup written)
    any state           --REMOVE-->              Dead                 (deleted, expired, unloaded)
"""

from __future__ import annotations

import enum


class GroupState(enum.Enum):
    """The value is the name Kafka prints (DescribeGroups, ListGroups, kafka-consumer-groups.sh)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


class GroupEvent(enum.Enum):
    PREPARE_REBALANCE = "prepare_rebalance"
    JOIN_COMPLETE = "join_complete"
    JOIN_COMPLETE_EMPTY = "join_complete_empty"
    ASSIGNMENT_STORED = "assignment_stored"
    REMOVE = "remove"


S, E = GroupState, GroupEvent

TRANSITIONS: dict[tuple[GroupState, GroupEvent], GroupState] = {
    (S.EMPTY, E.PREPARE_REBALANCE): S.PREPARING_REBALANCE,
    (S.STABLE, E.PREPARE_REBALANCE): S.PREPARING_REBALANCE,
    (S.COMPLETING_REBALANCE, E.PREPARE_REBALANCE): S.PREPARING_REBALANCE,
    (S.PREPARING_REBALANCE, E.JOIN_COMPLETE): S.COMPLETING_REBALANCE,
    (S.PREPARING_REBALANCE, E.JOIN_COMPLETE_EMPTY): S.EMPTY,
    (S.COMPLETING_REBALANCE, E.ASSIGNMENT_STORED): S.STABLE,
    **{(s, E.REMOVE): S.DEAD for s in S},
}

# Kafka's validPreviousStates, kept to check the table against (tests/group/test_state.py).
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    S.EMPTY: frozenset({S.PREPARING_REBALANCE}),
    S.PREPARING_REBALANCE: frozenset({S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY}),
    S.COMPLETING_REBALANCE: frozenset({S.PREPARING_REBALANCE}),
    S.STABLE: frozenset({S.COMPLETING_REBALANCE}),
    S.DEAD: frozenset(S),
}

del S, E


class IllegalStateTransition(RuntimeError):
    def __init__(self, state: GroupState, event: GroupEvent) -> None:
        super().__init__(f"group in state {state} cannot take event {event.value}")
        self.state = state
        self.event = event


def next_state(state: GroupState, event: GroupEvent) -> GroupState:
    """The state after ``event``; raises :class:`IllegalStateTransition` if the table has no entry."""
    try:
        return TRANSITIONS[(state, event)]
    except KeyError:
        raise IllegalStateTransition(state, event) from None


def can_rebalance(state: GroupState) -> bool:
    """Kafka's ``GroupMetadata.canRebalance``: PreparingRebalance may be entered from here."""
    return (state, GroupEvent.PREPARE_REBALANCE) in TRANSITIONS
