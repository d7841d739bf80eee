"""The Raft core's API: requests and responses in, ``poll(now_ms)`` for timers and outbound messages,
and the application side (append, committed batches, snapshots, leadership) — Kafka
``KafkaRaftClient`` without threads, sockets or clocks (DESIGN.md section 7).

Driving it::

    client = RaftClient(config, log, store, rng, now_ms)
    on a request from a peer:    client.handle_request(request, reply_to, now_ms)
    on a response or failure:    client.handle_response(request_id, response_or_None, now_ms)
    after either, and whenever the deadline passes:
        result = client.poll(now_ms)
        for msg in result.outbound: Send -> transmit msg.request to msg.destination;
                                    Reply -> answer the request that came with msg.reply_to
        sleep until result.deadline_ms or the next message
    the application:             client.append(batch_bytes, now_ms) -> last offset (NotLeaderError)
                                 client.take_events() -> committed batches / snapshot loads / leader changes
                                 client.create_snapshot(end_offset, state_bytes, now_ms)

Every call runs to completion and leaves the log flushed (``RaftLog.flush``) and the election state
persisted before it returns; nothing the core has acted on can be lost by a crash afterwards.
``append`` only queues: the next ``poll`` writes all queued batches and flushes once (group commit),
so call ``poll`` soon after appending (its deadline is then "now").
"""

from __future__ import annotations

import logging
import random
import struct
from collections import Counter
from typing import Hashable

from kcompat.kraft.raft import messages as m
from kcompat.kraft.raft.candidate import binary_exponential_backoff_ms
from kcompat.kraft.raft.config import RaftConfig
from kcompat.kraft.raft.leader import LeaderState
from kcompat.kraft.raft.log import RaftLog
from kcompat.kraft.raft.messages import (
    BROKER_NOT_AVAILABLE, FENCED_LEADER_EPOCH, INVALID_REQUEST, NONE, NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION,
)
from kcompat.kraft.raft.quorum_rpc import QuorumRpc
from kcompat.kraft.raft.replication import ParkedFetch, Replication
from kcompat.kraft.raft.requests import RequestManager
from kcompat.kraft.raft.snapshot import snapshot_id_at
from kcompat.kraft.raft.state import FOREVER, QuorumState
from kcompat.kraft.raft.store import QuorumStateStore
from kcompat.kraft.raft.types import (
    CommittedBatch, LeaderAndEpoch, LeaderChanged, NotLeaderError, OffsetAndEpoch, PollResult,
    RaftInvariantError, Reply, Role, Send, SnapshotId, SnapshotLoaded,
)
from kcompat.protocol import records as rb
from kcompat.protocol.messages.begin_quorum_epoch import BeginQuorumEpochRequest
from kcompat.protocol.messages.describe_quorum import DescribeQuorumRequest, DescribeQuorumResponse
from kcompat.protocol.messages.end_quorum_epoch import EndQuorumEpochRequest
from kcompat.protocol.messages.fetch import FetchRequest
from kcompat.protocol.messages.fetch_snapshot import FetchSnapshotRequest
from kcompat.protocol.messages.leader_change_message import LeaderChangeMessage
from kcompat.protocol.messages.vote import VoteRequest

log = logging.getLogger("kcompat.kraft.raft")

LEADER_CHANGE_CONTROL_TYPE = 2  # ControlRecordType.LEADER_CHANGE
_CONTROL_KEY = struct.Struct(">hh")


def leader_change_batch(leader_id: int, voters, granting, now_ms: int) -> bytes:
    """The control batch a new leader appends first (Kafka ``LeaderState.appendLeaderChangeMessage``):
    key (version 0, type LEADER_CHANGE), value LeaderChangeMessage v0."""
    msg = LeaderChangeMessage(version=0, leader_id=leader_id,
                              voters=[LeaderChangeMessage.Voter(voter_id=v) for v in sorted(voters)],
                              granting_voters=[LeaderChangeMessage.Voter(voter_id=v) for v in sorted(granting)])
    value = bytearray()
    msg.write(value, 0)
    return rb.build_batch([(now_ms, _CONTROL_KEY.pack(0, LEADER_CHANGE_CONTROL_TYPE), bytes(value), ())],
                          control=True)


class RaftClient(QuorumRpc, Replication):
    """One replica of the ``__cluster_metadata`` Raft quorum, I/O free."""

    def __init__(self, config: RaftConfig, log_: RaftLog, store: QuorumStateStore,
                 rng: random.Random | None = None, now_ms: int = 0) -> None:
        self.config = config
        self.log = log_
        self.rng = rng or random.Random()
        self.p = m.Partition(config.topic_name, 0)
        self.quorum = QuorumState(config, store, self.rng)
        self.requests = RequestManager(config.request_timeout_ms, config.retry_backoff_ms)
        self._outbound: list = []
        self._parked: list[ParkedFetch] = []
        self._pending: list[bytes] = []     # leader appends not yet in the log (Kafka BatchAccumulator)
        self._pending_end = 0               # the offset the next append gets
        self._hw: int | None = None
        self._events: list = []
        self._next_offset: int | None = None  # the application's position; None until started
        self._fired_leader: LeaderAndEpoch | None = None
        self._leader_fired = True            # False while a local leadership waits to be announced
        self._listener_mark: tuple | None = None
        self._seen_transitions = -1
        self._discovery = 0                  # round robin over voters for leader discovery
        # event counts for metrics and for checking what a simulation exercised
        self.metrics: Counter[str] = Counter()
        self.quorum.initialize(OffsetAndEpoch(log_.end_offset, log_.last_fetched_epoch), now_ms)
        self._on_transition(now_ms)
        self._maybe_single_voter(now_ms)
        self._update_listener()

    # ==================================================================================== queries
    @property
    def node_id(self) -> int:
        return self.config.node_id

    @property
    def role(self) -> Role:
        return self.quorum.role

    @property
    def epoch(self) -> int:
        return self.quorum.epoch

    @property
    def leader_and_epoch(self) -> LeaderAndEpoch:
        return self.quorum.leader_and_epoch

    @property
    def is_leader(self) -> bool:
        return self.quorum.role is Role.LEADER

    @property
    def high_watermark(self) -> int | None:
        """The committed offset (exclusive) this replica knows; None until known after a start."""
        return self._hw

    @property
    def log_end_offset(self) -> int:
        return self.log.end_offset

    def describe_quorum(self, now_ms: int) -> DescribeQuorumResponse.PartitionData | None:
        """DescribeQuorum data (voters with log end offsets and last fetch / caught-up times) when
        this replica is the leader, else None."""
        s = self.quorum.state
        if s.role is not Role.LEADER:
            return None
        return s.describe(self.p.partition, now_ms)

    # ==================================================================================== application
    def append(self, records: bytes, now_ms: int, epoch: int | None = None) -> int:
        """Queue record batches (RecordBatch v2 bytes; base offsets and partition leader epochs are
        set here) for the leader's log; returns the offset of the last record. They are written and
        flushed by the next :meth:`poll` and are committed once the high watermark passes them —
        or lost if leadership is lost first. Raises NotLeaderError."""
        s = self.quorum.state
        if s.role is not Role.LEADER or s.resign_requested or (epoch is not None and epoch != s.epoch):
            raise NotLeaderError(self.leader_and_epoch)
        count = 0
        size = 0
        for _pos, header in rb.iter_batches(records):
            count += header.last_offset_delta + 1
            size += header.size
        if count == 0 or size != len(records):
            raise ValueError("records must be one or more complete record batches")
        self._pending.append(bytes(records))
        self._pending_end += count
        return self._pending_end - 1

    def take_events(self) -> list:
        """Committed batches, snapshot loads and leader changes since the last call, in order."""
        self._update_listener()
        events, self._events = self._events, []
        return events

    def create_snapshot(self, end_offset: int, data: bytes, now_ms: int) -> SnapshotId:
        """Store the application's state of every record below ``end_offset`` (at most the high
        watermark); the log below it may then be deleted (KIP-630)."""
        if self._hw is None or end_offset > self._hw:
            raise ValueError(f"snapshot end {end_offset} beyond the high watermark {self._hw}")
        latest = self.log.latest_snapshot_id()
        if latest is not None and end_offset <= latest.offset:
            return latest
        if end_offset < self.log.start_offset:
            raise ValueError(f"snapshot end {end_offset} below the log start {self.log.start_offset}")
        snapshot_id = snapshot_id_at(self.log, end_offset)
        self.log.create_snapshot(snapshot_id, data)
        if self.config.delete_log_on_snapshot:
            self.log.delete_before_snapshot(snapshot_id)
        return snapshot_id

    def resign(self, now_ms: int) -> None:
        """Step down gracefully: the next poll moves to Resigned and sends EndQuorumEpoch."""
        s = self.quorum.state
        if s.role is not Role.LEADER:
            raise NotLeaderError(self.leader_and_epoch)
        s.resign_requested = True

    # ==================================================================================== poll
    def poll(self, now_ms: int) -> PollResult:
        self.requests.expire(now_ms)
        self._expire_parked(now_ms)
        for _ in range(8):  # a few transitions may chain (candidate -> leader with one voter)
            generation = self.quorum.transitions
            self._poll_state(now_ms)
            if self.quorum.transitions == generation:
                break
        self._update_listener()
        outbound, self._outbound = self._outbound, []
        return PollResult(outbound, self._deadline(now_ms))

    def _deadline(self, now_ms: int) -> int:
        s = self.quorum.state
        role = s.role
        d = FOREVER
        if role is Role.LEADER:
            d = s.deadline()
            if self._pending:
                d = now_ms
        elif role is Role.FOLLOWER:
            if self.quorum.is_voter or not s.fetch_timed_out(now_ms):
                d = s.fetch_deadline
                if not self.requests.has_inflight(s.leader_id):
                    d = min(d, self.requests.backoff_until.get(s.leader_id, now_ms))
            elif not self.requests.inflight:
                d = now_ms + self.config.retry_backoff_ms
        elif role in (Role.CANDIDATE, Role.PROSPECTIVE):
            d = s.deadline()
        elif role in (Role.UNATTACHED, Role.RESIGNED):
            d = s.election_deadline
        rq = self.requests.next_deadline(now_ms)
        if rq is not None:
            d = min(d, rq)
        for f in self._parked:
            d = min(d, f.deadline_ms)
        if not self.quorum.is_voter and role is Role.UNATTACHED and not self.requests.inflight:
            d = min(d, now_ms + self.config.retry_backoff_ms)
        return max(d, now_ms)

    def _poll_state(self, now_ms: int) -> None:
        s = self.quorum.state
        role = s.role
        if role is Role.LEADER:
            self._poll_leader(s, now_ms)
        elif role is Role.FOLLOWER:
            if not s.fetch_timed_out(now_ms):
                self._send_fetch(s, now_ms)
            elif self.quorum.is_voter:
                log.info("node %d: fetch timeout in epoch %d", self.node_id, s.epoch)
                self._start_election(now_ms)
            else:
                self._send_discovery_fetch(now_ms)  # an observer looks for a new leader
        elif role is Role.PROSPECTIVE:
            if now_ms >= s.election_deadline:
                self._pre_vote_lost(now_ms)
            else:
                self._send_votes(s, now_ms)
        elif role is Role.CANDIDATE:
            if s.is_backing_off:
                if now_ms >= s.backoff_until:
                    self._start_election(now_ms)
            elif now_ms >= s.election_deadline:
                s.start_backoff(now_ms, binary_exponential_backoff_ms(
                    s.retries, self.config.election_backoff_max_ms, self.rng))
            else:
                self._send_votes(s, now_ms)
        elif role is Role.UNATTACHED:
            if self.quorum.is_voter and now_ms >= s.election_deadline:
                self._start_election(now_ms)
            elif not self.quorum.is_voter:
                self._send_discovery_fetch(now_ms)
        elif role is Role.RESIGNED:
            self._send_end_quorum_epoch(s, now_ms)
            if now_ms >= s.election_deadline:
                self._start_election(now_ms)

    def _start_election(self, now_ms: int) -> None:
        if self.config.pre_vote and len(self.config.voters) > 1:
            self.metrics["pre_vote_rounds"] += 1
            self.quorum.to_prospective(now_ms)
        else:
            self.metrics["elections"] += 1
            self.quorum.to_candidate(now_ms)
        self._on_transition(now_ms)
        self._maybe_win(now_ms)

    def _pre_vote_lost(self, now_ms: int) -> None:
        """Back to following the leader this replica knew, else Unattached in the same epoch until
        its election timer fires again (KIP-996)."""
        s = self.quorum.state
        self.metrics["pre_votes_lost"] += 1
        if s.leader_id >= 0 and s.leader_id != self.node_id:
            self.quorum.to_follower(s.epoch, s.leader_id, now_ms)
        else:
            self.quorum.to_unattached_after_pre_vote(now_ms)
        self._on_transition(now_ms)

    def _maybe_win(self, now_ms: int) -> None:
        s = self.quorum.state
        if not s.election.is_won:
            return
        if s.role is Role.PROSPECTIVE:
            self.metrics["elections"] += 1
            self.quorum.to_candidate(now_ms)
            self._on_transition(now_ms)
            self._maybe_win(now_ms)
        elif s.role is Role.CANDIDATE:
            self._become_leader(now_ms)

    def _maybe_single_voter(self, now_ms: int) -> None:
        if self.config.voters == {self.node_id} and self.quorum.role is not Role.LEADER:
            self.quorum.to_candidate(now_ms)
            self._on_transition(now_ms)
            self._maybe_win(now_ms)

    # ------------------------------------------------------------------------------ leader
    def _become_leader(self, now_ms: int) -> None:
        self.metrics["became_leader"] += 1
        granting = set(self.quorum.state.election.granted)
        epoch_start = self.log.end_offset
        leader = self.quorum.to_leader(epoch_start, now_ms)
        self._on_transition(now_ms)
        # Commit needs a record of the new epoch on a majority: write the LeaderChangeMessage now.
        self.log.append_as_leader(leader_change_batch(self.node_id, self.config.voters, granting, now_ms),
                                  leader.epoch)
        self.log.flush()
        self._pending_end = self.log.end_offset
        if leader.update_local(self.log.end_offset):
            self._set_high_watermark(leader.high_watermark)
        log.info("node %d: leader of epoch %d from offset %d", self.node_id, leader.epoch, epoch_start)

    def _poll_leader(self, s: LeaderState, now_ms: int) -> None:
        if s.resign_requested or s.check_quorum_expired(now_ms):
            self.metrics["resigned_by_request" if s.resign_requested else "resigned_check_quorum"] += 1
            if not s.resign_requested:
                log.info("node %d: no fetch from a majority for %d ms, resigning epoch %d",
                         self.node_id, s.check_quorum_timeout_ms, s.epoch)
            self.quorum.to_resigned(s.successors_by_progress(), now_ms)
            self._on_transition(now_ms)
            return
        if self._pending:
            self.log.append_as_leader(b"".join(self._pending), s.epoch)
            self._pending.clear()
            self.log.flush()
            if self.log.end_offset != self._pending_end:
                raise RaftInvariantError("leader log end differs from the offsets handed out")
            if s.update_local(self.log.end_offset):
                self._set_high_watermark(s.high_watermark)
            self._complete_parked(now_ms)
        if now_ms >= s.begin_quorum_deadline:
            for voter in sorted(self.config.voters):
                if voter != self.node_id and self.requests.is_ready(voter, now_ms):
                    self._send(voter, "begin", m.begin_quorum_epoch_request(
                        self.p, self.config.cluster_id, self.node_id, s.epoch, voter), now_ms)
            s.begin_quorum_deadline = now_ms + s.begin_quorum_interval_ms

    # ------------------------------------------------------------------------------ sending
    def _send(self, destination: int, kind: str, request, now_ms: int, **meta) -> None:
        request_id = self.requests.sent(destination, kind, now_ms, **meta)
        self._outbound.append(Send(request_id, destination, request))

    # ==================================================================================== transitions
    def _on_transition(self, now_ms: int) -> None:
        """Work that follows every state change: forget in-flight requests, answer parked fetches."""
        if self.quorum.transitions == self._seen_transitions:
            return
        self._seen_transitions = self.quorum.transitions
        self.requests.reset()
        if self.quorum.role is not Role.LEADER:
            self._pending.clear()
        self._complete_parked(now_ms)

    def _maybe_transition(self, leader_id: int, epoch: int, now_ms: int) -> None:
        """Move to what a message says about ``epoch`` and its leader (Kafka ``maybeTransition``)."""
        q = self.quorum
        cur = q.state
        if leader_id == self.node_id:
            # others can only have heard it from this node, in an epoch it voted for itself
            if epoch > cur.epoch or (epoch == cur.epoch and self.node_id not in (cur.leader_id, cur.voted_id)):
                raise RaftInvariantError(f"node {self.node_id} told it leads epoch {epoch} in {cur!r}")
            return
        if epoch == cur.epoch and leader_id >= 0 and cur.leader_id >= 0 and cur.leader_id != leader_id:
            raise RaftInvariantError(f"two leaders in epoch {epoch}: {cur.leader_id} and {leader_id}")
        if epoch > cur.epoch:
            if leader_id >= 0 and leader_id in self.config.voters:
                q.to_follower(epoch, leader_id, now_ms)
            else:
                q.to_unattached(epoch, now_ms)
        elif epoch == cur.epoch and leader_id >= 0 and cur.leader_id < 0 and leader_id in self.config.voters:
            # the leader of the current epoch, not known until now (Unattached, Prospective without
            # a leader, Candidate that lost)
            q.to_follower(epoch, leader_id, now_ms)
        self._on_transition(now_ms)

    # ==================================================================================== requests
    def handle_request(self, request, reply_to: Hashable, now_ms: int) -> None:
        """Handle a KRaft request from a peer; its response comes out of the next :meth:`poll` as a
        :class:`Reply` carrying ``reply_to`` (a Fetch may be parked until data arrives)."""
        if isinstance(request, FetchRequest):
            self._handle_fetch_request(request, reply_to, now_ms)
        elif isinstance(request, VoteRequest):
            self._reply(reply_to, self._handle_vote_request(request, now_ms))
        elif isinstance(request, BeginQuorumEpochRequest):
            self._reply(reply_to, self._handle_begin_quorum_epoch(request, now_ms))
        elif isinstance(request, EndQuorumEpochRequest):
            self._reply(reply_to, self._handle_end_quorum_epoch(request, now_ms))
        elif isinstance(request, FetchSnapshotRequest):
            self._reply(reply_to, self._handle_fetch_snapshot_request(request, now_ms))
        elif isinstance(request, DescribeQuorumRequest):
            self._reply(reply_to, self._handle_describe_quorum(request, now_ms))
        else:
            raise TypeError(f"not a KRaft request: {type(request).__name__}")

    def _reply(self, reply_to, response) -> None:
        self._outbound.append(Reply(reply_to, response))

    def _cluster_ok(self, cluster_id: str | None) -> bool:
        return cluster_id is None or cluster_id == self.config.cluster_id

    def _leader_info(self) -> tuple[int, int]:
        la = self.quorum.leader_and_epoch
        return la.leader_id, la.epoch

    def _handle_describe_quorum(self, req: DescribeQuorumRequest, now_ms: int):
        part = self.p.single(req.topics)
        if part is None:
            return m.describe_quorum_error(self.p, UNKNOWN_TOPIC_OR_PARTITION)
        data = self.describe_quorum(now_ms)
        if data is None:
            return m.describe_quorum_error(self.p, NOT_LEADER_OR_FOLLOWER)
        return DescribeQuorumResponse(topics=[DescribeQuorumResponse.TopicData(
            topic_name=self.p.topic, partitions=[data])])

    # ==================================================================================== responses
    def handle_response(self, request_id: int, response, now_ms: int) -> None:
        """The response to a request this core sent, or None when it failed (connection error,
        timeout). Responses to requests the core no longer expects are ignored."""
        entry = self.requests.complete(request_id)
        if entry is None:
            return
        if response is None:
            self.requests.failed(entry.destination, now_ms)
            return
        kind = entry.kind
        if kind == "fetch":
            ok = self._handle_fetch_response(entry, response, now_ms)
        elif kind == "vote":
            ok = self._handle_vote_response(entry, response, now_ms)
        elif kind == "begin":
            ok = self._handle_simple_response(entry, response, now_ms)
        elif kind == "end":
            ok = self._handle_simple_response(entry, response, now_ms)
        elif kind == "fetch_snapshot":
            ok = self._handle_fetch_snapshot_response(entry, response, now_ms)
        else:
            raise AssertionError(kind)
        if not ok:
            self.requests.failed(entry.destination, now_ms)

    def _common_response(self, error: int, leader_id: int, epoch: int, now_ms: int) -> bool | None:
        """Kafka ``maybeHandleCommonResponse``: None to go on with the API's own handling, else
        whether the response counts as handled (False backs the connection off)."""
        q = self.quorum
        if epoch < q.epoch or error == UNKNOWN_LEADER_EPOCH:
            return True
        if epoch > q.epoch or error in (FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER):
            self._maybe_transition(leader_id, epoch, now_ms)
            return True
        if leader_id >= 0 and q.state.leader_id < 0:
            self._maybe_transition(leader_id, epoch, now_ms)
            return None if error == NONE else True
        if error == BROKER_NOT_AVAILABLE:
            return False
        if error == INVALID_REQUEST:
            raise RaftInvariantError("a peer answered INVALID_REQUEST to a request of this core")
        return None

    # ==================================================================================== commits
    def _set_high_watermark(self, hw: int) -> None:
        if self._hw is not None and hw < self._hw:
            raise RaftInvariantError(f"node {self.node_id} ({self.quorum.state!r}): high watermark "
                                     f"would go back {self._hw} -> {hw}")
        if hw != self._hw:
            self._hw = hw
            self.log.update_high_watermark(hw)

    def _update_listener(self) -> None:
        """Hand the application everything committed since its position (Kafka ``ListenerContext``)."""
        log_ = self.log
        mark = (self._hw, log_.start_offset, self.quorum.transitions)
        if mark == self._listener_mark:
            return
        self._listener_mark = mark
        if self._next_offset is None or self._next_offset < log_.start_offset:
            latest = log_.latest_snapshot_id()
            if latest is not None and (self._next_offset is None or self._next_offset < latest.offset):
                data = log_.read_snapshot(latest)
                self._events.append(SnapshotLoaded(latest, data))
                self._next_offset = latest.offset
            elif self._next_offset is None:
                self._next_offset = 0
        self._maybe_fire_leader_change()
        hw = self._hw
        while hw is not None and self._next_offset < hw:
            data = log_.read(self._next_offset, self.config.fetch_max_bytes)
            view = memoryview(data)
            progressed = False
            for pos, h in rb.iter_batches(view):
                if h.base_offset != self._next_offset:
                    raise RaftInvariantError(f"batch at {h.base_offset}, expected {self._next_offset}")
                if h.last_offset >= hw:
                    break
                if not self._leader_fired:
                    self._maybe_fire_leader_change()
                self._events.append(CommittedBatch(h.base_offset, h.last_offset, h.partition_leader_epoch,
                                                   h.is_control, bytes(view[pos:pos + h.size])))
                self._next_offset = h.last_offset + 1
                progressed = True
            if not progressed:
                break
        self._maybe_fire_leader_change()

    def _maybe_fire_leader_change(self) -> None:
        """Tell the application about a new leader or epoch; the local replica's own leadership
        only once the application holds every record before the epoch start offset, i.e. just
        before the first batch of the epoch is handed over."""
        q = self.quorum
        current = q.leader_and_epoch
        if current == self._fired_leader or q.role is Role.RESIGNED:
            self._leader_fired = True
            return
        if q.role is Role.LEADER:
            start = q.state.epoch_start_offset
            if self._next_offset is None or self._next_offset < start:
                self._leader_fired = False
                return
            self._events.append(LeaderChanged(current, start))
        else:
            self._events.append(LeaderChanged(current))
        self._fired_leader = current
        self._leader_fired = True
