"""States of a transactional id and the events that move it between them, as one table.

Kafka's ``TransactionState`` (TransactionState.java, Kafka 4.3) lists for each state the
states it may be entered from (``validPreviousStates``). Here the same rules are written as a table
``(state, event) -> state``; the coordinator moves a transactional id only through
:func:`next_state`, so a transition missing from the table raises instead of corrupting the state.

    Empty, CompleteCommit, CompleteAbort --INIT_PRODUCER_ID-->  Empty              (epoch bump / new producer id)
    Empty, Ongoing, Complete*           --ADD_PARTITIONS-->    Ongoing            (AddPartitionsToTxn, AddOffsetsToTxn)
    Ongoing                             --COMMIT-->            PrepareCommit      (EndTxn commit)
    Ongoing                             --ABORT-->             PrepareAbort       (EndTxn abort)
    Empty, CompleteCommit, CompleteAbort --ABORT-->            PrepareAbort       (EndTxn v5 abort with no partition
                                                                                   added: transaction.version 2 only)
    Ongoing                             --FENCE_EPOCH-->       PrepareEpochFence  (InitProducerId during a
                                                                                   transaction, or its timeout)
    PrepareEpochFence                   --ABORT-->             PrepareAbort       (abort with the bumped epoch)
    PrepareCommit                       --MARKERS_WRITTEN-->   CompleteCommit     (every marker written)
    PrepareAbort                        --MARKERS_WRITTEN-->   CompleteAbort
    Empty, CompleteCommit, CompleteAbort --EXPIRE-->           Dead               (transactional.id.expiration.ms)

PrepareEpochFence and Dead are never written to ``__transaction_state``: a fence is written as the
PrepareAbort that follows it (with the bumped epoch), and Dead as a tombstone.
"""

from __future__ import annotations

import enum


class TxnState(enum.Enum):
    """The value is the name Kafka prints (``TransactionState.name``: DescribeTransactions,
    ListTransactions, kafka-transactions.sh); :attr:`id` is the status byte of the log value."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"

    def __str__(self) -> str:
        return self.value

    @property
    def id(self) -> int:
        return _IDS[self]

    @classmethod
    def from_id(cls, state_id: int) -> TxnState:
        try:
            return _BY_ID[state_id]
        except KeyError:
            raise ValueError(f"unknown transaction state id {state_id}") from None

    @classmethod
    def from_name(cls, name: str) -> TxnState | None:
        try:
            return cls(name)
        except ValueError:
            return None


_IDS = {state: i for i, state in enumerate(TxnState)}  # Kafka's ids 0..7, in declaration order
_BY_ID = {i: state for state, i in _IDS.items()}


class TxnEvent(enum.Enum):
    INIT_PRODUCER_ID = "init_producer_id"
    ADD_PARTITIONS = "add_partitions"
    COMMIT = "commit"
    ABORT = "abort"
    FENCE_EPOCH = "fence_epoch"
    MARKERS_WRITTEN = "markers_written"
    EXPIRE = "expire"


S, E = TxnState, TxnEvent

TRANSITIONS: dict[tuple[TxnState, TxnEvent], TxnState] = {
    (S.EMPTY, E.INIT_PRODUCER_ID): S.EMPTY,
    (S.COMPLETE_COMMIT, E.INIT_PRODUCER_ID): S.EMPTY,
    (S.COMPLETE_ABORT, E.INIT_PRODUCER_ID): S.EMPTY,
    (S.EMPTY, E.ADD_PARTITIONS): S.ONGOING,
    (S.ONGOING, E.ADD_PARTITIONS): S.ONGOING,
    (S.COMPLETE_COMMIT, E.ADD_PARTITIONS): S.ONGOING,
    (S.COMPLETE_ABORT, E.ADD_PARTITIONS): S.ONGOING,
    (S.ONGOING, E.COMMIT): S.PREPARE_COMMIT,
    (S.ONGOING, E.ABORT): S.PREPARE_ABORT,
    (S.EMPTY, E.ABORT): S.PREPARE_ABORT,   # KIP-890 part 2: an abort with no partition bumps the epoch
    (S.COMPLETE_COMMIT, E.ABORT): S.PREPARE_ABORT,
    (S.COMPLETE_ABORT, E.ABORT): S.PREPARE_ABORT,
    (S.ONGOING, E.FENCE_EPOCH): S.PREPARE_EPOCH_FENCE,
    (S.PREPARE_EPOCH_FENCE, E.ABORT): S.PREPARE_ABORT,
    (S.PREPARE_COMMIT, E.MARKERS_WRITTEN): S.COMPLETE_COMMIT,
    (S.PREPARE_ABORT, E.MARKERS_WRITTEN): S.COMPLETE_ABORT,
    (S.EMPTY, E.EXPIRE): S.DEAD,
    (S.COMPLETE_COMMIT, E.EXPIRE): S.DEAD,
    (S.COMPLETE_ABORT, E.EXPIRE): S.DEAD,
}

# Kafka's validPreviousStates (Kafka 4.3: PrepareAbort may follow Empty and Complete* for an EndTxn v5
# abort, KIP-890 part 2), kept to check the table against (tests/txn/test_coordinator_state.py). The
# coordinator takes those three edges only for a transaction.version 2 client; older clients get
# INVALID_TXN_STATE before reaching the table.
VALID_PREVIOUS_STATES: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}

# Kafka's TransactionState.isExpirationAllowed
EXPIRATION_ALLOWED = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})
PREPARE_STATES = frozenset({S.PREPARE_COMMIT, S.PREPARE_ABORT})
COMPLETE_STATES = frozenset({S.COMPLETE_COMMIT, S.COMPLETE_ABORT})

del S, E


class IllegalStateTransition(RuntimeError):
    def __init__(self, state: TxnState, event: TxnEvent) -> None:
        super().__init__(f"transactional id in state {state} cannot take event {event.value}")
        self.state = state
        self.event = event


def next_state(state: TxnState, event: TxnEvent) -> TxnState:
    """The state after ``event``; raises :class:`IllegalStateTransition` if the table has no entry."""
    try:
        return TRANSITIONS[(state, event)]
    except KeyError:
        raise IllegalStateTransition(state, event) from None
