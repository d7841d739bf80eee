"""The quorum state machine: roles x triggers -> role, as a table, and the holder of the current
role state that performs (and persists) transitions (Kafka ``QuorumState``; KIP-595, KIP-996).

Epoch rules that the table does not show, checked by :class:`QuorumState`:

- epochs never decrease; a transition to the same epoch is allowed only where it adds knowledge
  (Unattached -> voted, or learning the leader of the current epoch while not already following
  or leading);
- the election state (epoch, leader, vote) is written to the store before the transition takes
  effect, so a vote is durable before it is granted;
- Prospective keeps the epoch and what it knew in it (leader or vote); only Candidate bumps the epoch.
  A lost pre-vote goes back to following the known leader, else to Unattached in the same epoch
  (Kafka ``prospectiveTransitionAfterElectionLoss``);
- observers (non-voters) are only ever Unattached or Follower.

Restart (Kafka ``QuorumState.initialize``): a replica that was leader comes back Resigned in the same
epoch (it may not lead it again: unflushed records of that epoch may be gone); one that voted for
itself comes back Unattached having voted for itself; one that voted, voted; one that knew the
leader follows it; if the log holds a larger epoch than the file, Unattached in that epoch.
"""

from __future__ import annotations

import enum
import random

from kcompat.kraft.raft.candidate import CandidateState, ProspectiveState
from kcompat.kraft.raft.config import RaftConfig
from kcompat.kraft.raft.follower import FollowerState
from kcompat.kraft.raft.leader import LeaderState
from kcompat.kraft.raft.store import ElectionState, QuorumStateStore
from kcompat.kraft.raft.types import LeaderAndEpoch, OffsetAndEpoch, Role

FOREVER = 1 << 62


class Trigger(enum.Enum):
    HIGHER_EPOCH = "learned a larger epoch without its leader"
    LEADER_KNOWN = "learned the leader of an epoch"
    GRANT_VOTE = "granted a standard vote"
    START_PRE_VOTE = "election or fetch timeout, pre-vote enabled"
    START_ELECTION = "election or fetch timeout without pre-vote, or pre-vote won"
    PRE_VOTE_LOST = "pre-vote rejected by a majority or timed out, no leader known"
    WIN_ELECTION = "majority of votes granted"
    RESIGN = "graceful resignation or check quorum failed"


U, P, C, L, F, R = (Role.UNATTACHED, Role.PROSPECTIVE, Role.CANDIDATE, Role.LEADER,
                    Role.FOLLOWER, Role.RESIGNED)

# (role, trigger) -> role. A pair missing from the table is an illegal transition.
TRANSITIONS: dict[tuple[Role, Trigger], Role] = {
    **{(r, Trigger.HIGHER_EPOCH): U for r in Role},
    **{(r, Trigger.LEADER_KNOWN): F for r in Role},
    (U, Trigger.GRANT_VOTE): U,
    (P, Trigger.GRANT_VOTE): U,
    (P, Trigger.PRE_VOTE_LOST): U,
    **{(r, Trigger.START_PRE_VOTE): P for r in (U, P, C, F, R)},
    **{(r, Trigger.START_ELECTION): C for r in (U, P, C, F, R)},
    (C, Trigger.WIN_ELECTION): L,
    (L, Trigger.RESIGN): R,
}

# Roles in which learning the leader of the *current* epoch is legal (a follower already knows it,
# a leader or resigned leader is it).
_SAME_EPOCH_LEADER_OK = frozenset({U, P, C})


class IllegalTransition(RuntimeError):
    pass


def next_role(role: Role, trigger: Trigger) -> Role:
    try:
        return TRANSITIONS[(role, trigger)]
    except KeyError:
        raise IllegalTransition(f"{trigger.name} is not allowed in {role.value}") from None


class UnattachedState:
    """Knows the epoch but not its leader; may have voted in it. (``leader_id`` is -1, or this
    replica's own id after it led the epoch, resigned and lost a pre-vote: no other replica can
    lead the epoch.)"""

    role = Role.UNATTACHED

    def __init__(self, epoch: int, voted_id: int, election_deadline: int) -> None:
        self.epoch = epoch
        self.leader_id = -1
        self.voted_id = voted_id
        self.election_deadline = election_deadline

    def __repr__(self) -> str:
        return f"Unattached(epoch={self.epoch}, voted={self.voted_id})"


class ResignedState:
    """A leader stepping down: tells the voters (EndQuorumEpoch) and waits for the next election."""

    role = Role.RESIGNED

    def __init__(self, local_id: int, epoch: int, voters: frozenset[int], successors: list[int],
                 election_deadline: int) -> None:
        self.epoch = epoch
        self.leader_id = local_id
        self.voted_id = local_id
        self.successors = successors
        self.unacked = set(voters) - {local_id}
        self.election_deadline = election_deadline

    def __repr__(self) -> str:
        return f"Resigned(epoch={self.epoch})"


EpochState = UnattachedState | ProspectiveState | CandidateState | LeaderState | FollowerState | ResignedState


class QuorumState:
    """The current role state of this replica; every change goes through a table-checked transition."""

    def __init__(self, config: RaftConfig, store: QuorumStateStore, rng: random.Random) -> None:
        self.config = config
        self.local_id = config.node_id
        self.voters = config.voters
        self.store = store
        self.rng = rng
        self.state: EpochState = UnattachedState(0, -1, FOREVER)
        self._leader_and_epoch = LeaderAndEpoch(-1, 0)
        self._persisted: ElectionState | None = None
        self.transitions = 0  # bumped on every transition, to tell requests of old states apart

    # ------------------------------------------------------------------------ queries
    @property
    def role(self) -> Role:
        return self.state.role

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_and_epoch(self) -> LeaderAndEpoch:
        return self._leader_and_epoch

    @property
    def is_voter(self) -> bool:
        return self.local_id in self.voters

    def random_election_timeout(self) -> int:
        t = self.config.election_timeout_ms
        return t + self.rng.randrange(t)

    # ------------------------------------------------------------------------ restart
    def initialize(self, log_end: OffsetAndEpoch, now_ms: int) -> None:
        stored = self.store.read()
        if stored is not None and stored.voters and stored.voters != self.voters:
            raise ValueError(f"configured voters {sorted(self.voters)} differ from the quorum-state "
                             f"file's {sorted(stored.voters)}")
        election = stored or ElectionState(0, voters=self.voters)
        self._persisted = stored
        timeout = now_ms + self.random_election_timeout() if self.is_voter else FOREVER
        local = self.local_id
        if election.epoch < log_end.epoch:
            state: EpochState = UnattachedState(log_end.epoch, -1, timeout)
        elif election.leader_id == local and self.is_voter:
            state = ResignedState(local, election.epoch, self.voters, [], timeout)
        elif election.has_leader and election.leader_id in self.voters and election.leader_id != local:
            voted = election.voted_id if self.is_voter else -1
            state = FollowerState(election.epoch, election.leader_id, voted,
                                  self.config.fetch_timeout_ms, now_ms)
        elif election.has_voted and self.is_voter:
            state = UnattachedState(election.epoch, election.voted_id, timeout)
        else:
            state = UnattachedState(election.epoch, -1, timeout)
        self._set(state)

    # ------------------------------------------------------------------------ transitions
    def _check(self, trigger: Trigger) -> Role:
        target = next_role(self.state.role, trigger)
        if not self.is_voter and target not in (Role.UNATTACHED, Role.FOLLOWER):
            raise IllegalTransition(f"observer {self.local_id} cannot become {target.value}")
        return target

    def _set(self, state: EpochState) -> None:
        if state.epoch < self.state.epoch:
            raise IllegalTransition(f"epoch would go back from {self.state.epoch} to {state.epoch}")
        # Prospective and Resigned carry the election state they came from, so nothing is written
        election = ElectionState(state.epoch, state.leader_id, state.voted_id, self.voters)
        if election != self._persisted:
            self.store.write(election)
            self._persisted = election
        self.state = state
        self.transitions += 1
        # a Prospective still names the leader it was following (Kafka 4.0 ProspectiveState); a
        # replica that led the epoch names itself only while Leader or Resigned
        leader = state.leader_id
        if leader == self.local_id and state.role is not Role.LEADER and state.role is not Role.RESIGNED:
            leader = -1
        self._leader_and_epoch = LeaderAndEpoch(leader, state.epoch)

    def to_unattached(self, epoch: int, now_ms: int) -> None:
        self._check(Trigger.HIGHER_EPOCH)
        if epoch <= self.state.epoch:
            raise IllegalTransition(f"Unattached needs an epoch above {self.state.epoch}, got {epoch}")
        old = self.state
        if not self.is_voter:
            deadline = FOREVER
        elif old.role in (Role.UNATTACHED, Role.PROSPECTIVE, Role.CANDIDATE):
            # keep the running election timer (Kafka: remainingElectionTimeMs)
            deadline = getattr(old, "election_deadline", now_ms + self.random_election_timeout())
        else:
            deadline = now_ms + self.random_election_timeout()
        self._set(UnattachedState(epoch, -1, deadline))

    def to_unattached_after_pre_vote(self, now_ms: int) -> None:
        """A lost pre-vote without a known leader: Unattached in the same epoch, keeping the vote."""
        self._check(Trigger.PRE_VOTE_LOST)
        cur = self.state
        if cur.leader_id >= 0 and cur.leader_id != self.local_id:
            raise IllegalTransition(f"{cur!r} knows its leader: follow it")
        state = UnattachedState(cur.epoch, cur.voted_id, now_ms + self.random_election_timeout())
        state.leader_id = cur.leader_id  # -1, or this replica if it led the epoch: no other may
        self._set(state)

    def to_voted(self, epoch: int, candidate_id: int, now_ms: int) -> None:
        self._check(Trigger.GRANT_VOTE)
        if candidate_id == self.local_id or candidate_id not in self.voters or not self.is_voter:
            raise IllegalTransition(f"cannot vote for {candidate_id}")
        if epoch != self.state.epoch or self.state.voted_id >= 0 or self.state.leader_id >= 0:
            raise IllegalTransition(f"cannot vote in epoch {epoch} from {self.state!r}")
        self._set(UnattachedState(epoch, candidate_id, now_ms + self.random_election_timeout()))

    def to_follower(self, epoch: int, leader_id: int, now_ms: int) -> None:
        self._check(Trigger.LEADER_KNOWN)
        if leader_id == self.local_id or leader_id not in self.voters:
            raise IllegalTransition(f"{leader_id} cannot be the leader")
        cur = self.state
        if epoch < cur.epoch or (epoch == cur.epoch and (
                cur.role not in _SAME_EPOCH_LEADER_OK or cur.leader_id not in (-1, leader_id))):
            # one leader per epoch: a Prospective that knew the leader may only go back to it
            raise IllegalTransition(f"cannot follow {leader_id} in epoch {epoch} from {cur!r}")
        voted = cur.voted_id if epoch == cur.epoch else -1
        self._set(FollowerState(epoch, leader_id, voted, self.config.fetch_timeout_ms, now_ms))

    def to_prospective(self, now_ms: int) -> None:
        self._check(Trigger.START_PRE_VOTE)
        cur = self.state
        retries = cur.retries + 1 if cur.role in (Role.PROSPECTIVE, Role.CANDIDATE) else 1
        p = ProspectiveState(cur.epoch, self.voters, self.local_id, retries,
                             now_ms + self.random_election_timeout())
        # keep what is known in this epoch (its leader, possibly this replica, and the vote): a
        # later standard vote or leader discovery in the epoch must respect it
        p.leader_id = cur.leader_id
        p.voted_id = cur.voted_id
        self._set(p)

    def to_candidate(self, now_ms: int) -> None:
        self._check(Trigger.START_ELECTION)
        cur = self.state
        retries = cur.retries + 1 if cur.role in (Role.PROSPECTIVE, Role.CANDIDATE) else 1
        self._set(CandidateState(cur.epoch + 1, self.voters, self.local_id, retries,
                                 now_ms + self.random_election_timeout()))

    def to_leader(self, epoch_start_offset: int, now_ms: int) -> LeaderState:
        self._check(Trigger.WIN_ELECTION)
        cur = self.state
        if not cur.election.is_won:
            raise IllegalTransition("cannot lead without a majority of votes")
        leader = LeaderState(self.local_id, cur.epoch, epoch_start_offset, self.voters,
                             cur.election.granted, self.config.fetch_timeout_ms, now_ms)
        self._set(leader)
        return leader

    def to_resigned(self, successors: list[int], now_ms: int) -> None:
        self._check(Trigger.RESIGN)
        self._set(ResignedState(self.local_id, self.state.epoch, self.voters, successors,
                                now_ms + self.random_election_timeout()))
