"""Elections: the Prospective (pre-vote) and Candidate states, their vote tally, and the rule for
granting a vote.

- KIP-595 / Kafka ``CandidateState``: a candidate bumps the epoch, votes for itself (persisted),
  asks every voter, and wins with a majority. A voter grants at most one vote per epoch, persisted
  before the response, and only to a candidate whose log is at least as up to date as its own
  (last epoch, then end offset).
- KIP-996 / Kafka ``ProspectiveState``: before bumping the epoch a replica asks for pre-votes at its
  current epoch. Pre-votes bind nobody and change no state; a voter that is following a leader it
  has fetched from (or that is the leader) refuses, so a replica cut off from the quorum cannot
  disrupt a healthy leader when it comes back.
- After losing (a majority rejected) or timing out, a replica backs off for a random, binary
  exponential time capped at ``controller.quorum.election.backoff.max.ms``
  (``KafkaRaftClient.binaryExponentialElectionBackoffMs``).
"""

from __future__ import annotations

import random

from kcompat.kraft.raft.types import Role

RETRY_BACKOFF_BASE_MS = 100  # KafkaRaftClient.RETRY_BACKOFF_BASE_MS


class EpochElection:
    """Granted and rejected votes of one election round (Kafka ``EpochElection``)."""

    __slots__ = ("voters", "granted", "rejected")

    def __init__(self, voters: frozenset[int], local_id: int) -> None:
        self.voters = voters
        self.granted: set[int] = {local_id}
        self.rejected: set[int] = set()

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def record(self, voter_id: int, granted: bool) -> None:
        if voter_id not in self.voters or voter_id in self.granted or voter_id in self.rejected:
            return
        (self.granted if granted else self.rejected).add(voter_id)

    @property
    def is_won(self) -> bool:
        return len(self.granted) >= self.majority

    @property
    def is_lost(self) -> bool:
        return len(self.rejected) > len(self.voters) - self.majority

    def unrecorded(self) -> list[int]:
        return sorted(self.voters - self.granted - self.rejected)


class _ElectionRound:
    """Shared by Prospective and Candidate: the tally, the election timer and the backoff."""

    role: Role
    __slots__ = ("epoch", "leader_id", "voted_id", "election", "retries", "election_deadline",
                 "backoff_until")

    def __init__(self, epoch: int, voters: frozenset[int], local_id: int, retries: int,
                 election_deadline: int) -> None:
        self.epoch = epoch
        self.leader_id = -1
        self.voted_id = -1
        self.election = EpochElection(voters, local_id)
        self.retries = retries
        self.election_deadline = election_deadline
        self.backoff_until: int | None = None

    @property
    def is_backing_off(self) -> bool:
        return self.backoff_until is not None

    def start_backoff(self, now_ms: int, backoff_ms: int) -> None:
        self.backoff_until = now_ms + backoff_ms

    def deadline(self) -> int:
        return self.backoff_until if self.backoff_until is not None else self.election_deadline


class ProspectiveState(_ElectionRound):
    """Collecting pre-votes at the current epoch; keeps the leader or vote it had in this epoch."""

    role = Role.PROSPECTIVE
    __slots__ = ()

    def __repr__(self) -> str:
        return (f"Prospective(epoch={self.epoch}, leader={self.leader_id}, voted={self.voted_id}, "
                f"granted={sorted(self.election.granted)})")


class CandidateState(_ElectionRound):
    """Standing for election at a bumped epoch, having voted for itself."""

    role = Role.CANDIDATE
    __slots__ = ()

    def __init__(self, epoch: int, voters: frozenset[int], local_id: int, retries: int,
                 election_deadline: int) -> None:
        super().__init__(epoch, voters, local_id, retries, election_deadline)
        self.voted_id = local_id

    def __repr__(self) -> str:
        return f"Candidate(epoch={self.epoch}, granted={sorted(self.election.granted)})"


def binary_exponential_backoff_ms(retries: int, backoff_max_ms: int, rng: random.Random) -> int:
    """Random backoff after a failed election: ``100 * U[0, 2**retries)`` ms, at most the cap."""
    retries = max(1, retries)
    return min(RETRY_BACKOFF_BASE_MS * rng.randrange(2 << min(20, retries - 1)), backoff_max_ms)


def strict_exponential_backoff_ms(position: int, total: int, backoff_max_ms: int) -> int:
    """Election delay of a follower told the leader resigned (EndQuorumEpoch): the first preferred
    successor starts at once, later ones wait exponentially longer
    (``KafkaRaftClient.strictExponentialElectionBackoffMs``)."""
    if position == 0:
        return 0
    if position < 0 or position >= total:
        return backoff_max_ms
    base = backoff_max_ms >> (total - 1)
    return min(backoff_max_ms, base << (position - 1))


def can_grant_vote(state, candidate_id: int, log_up_to_date: bool, pre_vote: bool) -> bool:
    """Whether a voter in ``state`` grants ``candidate_id`` a (pre-)vote at the voter's epoch.

    The request's epoch has already been reconciled: a larger epoch moved the voter to Unattached
    first, a smaller one was refused with FENCED_LEADER_EPOCH (KafkaRaftClient.handleVoteRequest).
    Rules per role (Kafka ``EpochState.canGrantVote`` implementations):

    ==============  ===========================================  ==================================
    role            pre-vote                                      standard vote
    ==============  ===========================================  ==================================
    Unattached      log up to date                                already voted for it, or not voted
                                                                  yet and log up to date
    Prospective     log up to date                                as Unattached, and never when it
                                                                  knows this epoch's leader
    Candidate       log up to date                                no (voted for itself)
    Follower        log up to date and not yet fetched from the   no (the epoch has a leader)
                    leader since following it
    Leader          no                                            no
    Resigned        log up to date                                no (it led this epoch)
    ==============  ===========================================  ==================================
    """
    role = state.role
    if pre_vote:
        if role is Role.LEADER:
            return False
        if role is Role.FOLLOWER:
            return log_up_to_date and not state.has_fetched_from_leader
        return log_up_to_date
    if role is Role.UNATTACHED or role is Role.PROSPECTIVE:
        if state.voted_id >= 0:
            return state.voted_id == candidate_id
        if state.leader_id >= 0:
            return False
        return log_up_to_date
    return False
