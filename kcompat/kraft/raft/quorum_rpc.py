"""Leadership RPCs of the Raft core: Vote (with KIP-996 pre-vote), BeginQuorumEpoch and
EndQuorumEpoch, both the requests this replica answers and the responses to the ones it sends
(Kafka ``KafkaRaftClient.handleVoteRequest`` / ``handleVoteResponse`` /
``handleBeginQuorumEpochRequest`` / ``handleEndQuorumEpochRequest``, KIP-595).

A mixin of :class:`kcompat.kraft.raft.client.RaftClient`, which owns the state it uses.
"""

from __future__ import annotations

from kcompat.kraft.raft import messages as m
from kcompat.kraft.raft.candidate import (
    binary_exponential_backoff_ms, can_grant_vote, strict_exponential_backoff_ms,
)
from kcompat.kraft.raft.messages import (
    FENCED_LEADER_EPOCH, INCONSISTENT_CLUSTER_ID, INCONSISTENT_VOTER_SET, INVALID_REQUEST, NONE,
)
from kcompat.kraft.raft.types import OffsetAndEpoch, Role
from kcompat.protocol.messages.begin_quorum_epoch import BeginQuorumEpochRequest
from kcompat.protocol.messages.end_quorum_epoch import EndQuorumEpochRequest
from kcompat.protocol.messages.vote import VoteRequest, VoteResponse


class QuorumRpc:
    """Vote, BeginQuorumEpoch and EndQuorumEpoch handling for RaftClient."""

    def _send_votes(self, s, now_ms: int) -> None:
        if s.election.is_lost:
            return
        pre_vote = s.role is Role.PROSPECTIVE
        last = OffsetAndEpoch(self.log.end_offset, self.log.last_fetched_epoch)
        for voter in s.election.unrecorded():
            if self.requests.is_ready(voter, now_ms):
                self._send(voter, "vote", m.vote_request(
                    self.p, self.config.cluster_id, s.epoch, self.node_id, voter, last.epoch,
                    last.offset, pre_vote), now_ms, pre_vote=pre_vote)

    def _send_end_quorum_epoch(self, s, now_ms: int) -> None:
        for voter in sorted(s.unacked):
            if self.requests.is_ready(voter, now_ms):
                self._send(voter, "end", m.end_quorum_epoch_request(
                    self.p, self.config.cluster_id, self.node_id, s.epoch, s.successors), now_ms)

    def _handle_vote_request(self, req: VoteRequest, now_ms: int) -> VoteResponse:
        if not self._cluster_ok(req.cluster_id):
            return m.vote_response(self.p, NONE, top_error=INCONSISTENT_CLUSTER_ID)
        part = self.p.single(req.topics)
        if part is None:
            return m.vote_response(self.p, NONE, top_error=INVALID_REQUEST)
        epoch, candidate = part.candidate_epoch, part.candidate_id
        last_epoch, last_offset = part.last_offset_epoch, part.last_offset
        pre_vote = m.is_pre_vote(part)
        illegal_epoch = last_epoch > epoch if pre_vote else last_epoch >= epoch
        if last_offset < 0 or last_epoch < 0 or illegal_epoch or candidate < 0:
            return m.vote_response(self.p, INVALID_REQUEST, *self._leader_info())
        if epoch < self.quorum.epoch:
            return m.vote_response(self.p, FENCED_LEADER_EPOCH, *self._leader_info())
        if candidate not in self.config.voters or not self.quorum.is_voter or candidate == self.node_id:
            return m.vote_response(self.p, INCONSISTENT_VOTER_SET, *self._leader_info())
        if epoch > self.quorum.epoch:
            self.quorum.to_unattached(epoch, now_ms)
            self._on_transition(now_ms)
        up_to_date = OffsetAndEpoch(last_offset, last_epoch).newer_or_equal(
            OffsetAndEpoch(self.log.end_offset, self.log.last_fetched_epoch))
        state = self.quorum.state
        granted = can_grant_vote(state, candidate, up_to_date, pre_vote)
        self.metrics[f"{'pre_' if pre_vote else ''}votes_{'granted' if granted else 'rejected'}"] += 1
        if granted and not pre_vote and state.voted_id < 0:
            self.quorum.to_voted(epoch, candidate, now_ms)  # persisted before the reply
            self._on_transition(now_ms)
        return m.vote_response(self.p, NONE, *self._leader_info(), granted=granted)

    def _handle_begin_quorum_epoch(self, req: BeginQuorumEpochRequest, now_ms: int):
        if not self._cluster_ok(req.cluster_id):
            return m.begin_quorum_epoch_response(self.p, NONE, top_error=INCONSISTENT_CLUSTER_ID)
        part = self.p.single(req.topics)
        if part is None:
            return m.begin_quorum_epoch_response(self.p, NONE, top_error=INVALID_REQUEST)
        if part.leader_epoch < self.quorum.epoch:
            return m.begin_quorum_epoch_response(self.p, FENCED_LEADER_EPOCH, *self._leader_info())
        if part.leader_id not in self.config.voters:
            return m.begin_quorum_epoch_response(self.p, INCONSISTENT_VOTER_SET, *self._leader_info())
        self._maybe_transition(part.leader_id, part.leader_epoch, now_ms)
        return m.begin_quorum_epoch_response(self.p, NONE, *self._leader_info())

    def _handle_end_quorum_epoch(self, req: EndQuorumEpochRequest, now_ms: int):
        if not self._cluster_ok(req.cluster_id):
            return m.end_quorum_epoch_response(self.p, NONE, top_error=INCONSISTENT_CLUSTER_ID)
        part = self.p.single(req.topics)
        if part is None:
            return m.end_quorum_epoch_response(self.p, NONE, top_error=INVALID_REQUEST)
        if part.leader_epoch < self.quorum.epoch:
            return m.end_quorum_epoch_response(self.p, FENCED_LEADER_EPOCH, *self._leader_info())
        if part.leader_id not in self.config.voters:
            return m.end_quorum_epoch_response(self.p, INCONSISTENT_VOTER_SET, *self._leader_info())
        self._maybe_transition(part.leader_id, part.leader_epoch, now_ms)
        s = self.quorum.state
        if s.role is Role.FOLLOWER and s.leader_id == part.leader_id:
            successors = m.preferred_successors(part)
            position = successors.index(self.node_id) if self.node_id in successors else -1
            s.override_fetch_timeout(now_ms, strict_exponential_backoff_ms(
                position, len(successors), self.config.election_backoff_max_ms))
        return m.end_quorum_epoch_response(self.p, NONE, *self._leader_info())

    def _handle_vote_response(self, entry, resp: VoteResponse, now_ms: int) -> bool:
        if resp.error_code != NONE:
            return False
        part = self.p.single(resp.topics)
        if part is None:
            return False
        generation = self.quorum.transitions
        handled = self._common_response(part.error_code, part.leader_id, part.leader_epoch, now_ms)
        if handled is not None:
            return handled
        if part.error_code != NONE or self.quorum.transitions != generation:
            return part.error_code == NONE
        s = self.quorum.state
        pre_vote = entry.meta["pre_vote"]
        if s.role is Role.PROSPECTIVE and pre_vote:
            s.election.record(entry.destination, part.vote_granted)
            if s.election.is_won:
                self._maybe_win(now_ms)
            elif s.election.is_lost:
                self._pre_vote_lost(now_ms)
        elif s.role is Role.CANDIDATE and not pre_vote:
            s.election.record(entry.destination, part.vote_granted)
            if s.election.is_won:
                self._maybe_win(now_ms)
            elif s.election.is_lost and not s.is_backing_off:
                # rejected: back off at once rather than wait out the election timeout
                s.start_backoff(now_ms, binary_exponential_backoff_ms(
                    s.retries, self.config.election_backoff_max_ms, self.rng))
        return True

    def _handle_simple_response(self, entry, resp, now_ms: int) -> bool:
        """BeginQuorumEpoch and EndQuorumEpoch responses."""
        if resp.error_code != NONE:
            return False
        part = self.p.single(resp.topics)
        if part is None:
            return False
        generation = self.quorum.transitions
        handled = self._common_response(part.error_code, part.leader_id, part.leader_epoch, now_ms)
        if handled is not None:
            return handled
        if part.error_code != NONE or self.quorum.transitions != generation:
            return part.error_code == NONE
        s = self.quorum.state
        if entry.kind == "begin" and s.role is Role.LEADER:
            s.acknowledge(entry.destination)
        elif entry.kind == "end" and s.role is Role.RESIGNED:
            s.unacked.discard(entry.destination)
        return True
