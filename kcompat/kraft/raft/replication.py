"""Replication RPCs of the Raft core: Fetch and FetchSnapshot, leader and follower sides
(Kafka ``KafkaRaftClient.handleFetchRequest`` / ``tryCompleteFetchRequest`` /
``handleFetchResponse`` / ``handleFetchSnapshotRequest`` / ``handleFetchSnapshotResponse``;
KIP-595 replication with diverging epochs, KIP-630 snapshots).

The leader validates each follower's position (:func:`validate_fetch_position`), answers with
records, a diverging epoch or a snapshot id, records the follower's progress for the high
watermark, and parks a fetch with nothing to return for up to ``max_wait_ms`` (answered at once when
the log grows or the high watermark moves). The follower appends and flushes before it takes the
leader's high watermark, truncates exactly the divergent suffix, and downloads snapshots in chunks.

A mixin of :class:`kcompat.kraft.raft.client.RaftClient`, which owns the state it uses.
"""

from __future__ import annotations

from kcompat.kraft.raft import messages as m
from kcompat.kraft.raft.follower import FollowerState, SnapshotDownload, truncation_offset
from kcompat.kraft.raft.leader import LeaderState
from kcompat.kraft.raft.messages import (
    FENCED_LEADER_EPOCH, INCONSISTENT_CLUSTER_ID, INVALID_REQUEST, NONE, NOT_LEADER_OR_FOLLOWER,
    POSITION_OUT_OF_RANGE, SNAPSHOT_NOT_FOUND, UNKNOWN_LEADER_EPOCH,
)
from kcompat.kraft.raft.snapshot import validate_fetch_position
from kcompat.kraft.raft.types import OffsetAndEpoch, RaftInvariantError, Role, SnapshotId, ValidKind
from kcompat.protocol.messages.fetch import FetchRequest, FetchResponse
from kcompat.protocol.messages.fetch_snapshot import FetchSnapshotRequest, FetchSnapshotResponse


class ParkedFetch:
    """A Fetch the leader holds until it has something to say (Kafka fetch purgatory)."""

    __slots__ = ("reply_to", "replica_id", "fetch_offset", "last_fetched_epoch", "leader_epoch",
                 "max_bytes", "deadline_ms")

    def __init__(self, reply_to, replica_id, fetch_offset, last_fetched_epoch, leader_epoch,
                 max_bytes, deadline_ms) -> None:
        self.reply_to = reply_to
        self.replica_id = replica_id
        self.fetch_offset = fetch_offset
        self.last_fetched_epoch = last_fetched_epoch
        self.leader_epoch = leader_epoch
        self.max_bytes = max_bytes
        self.deadline_ms = deadline_ms




class Replication:
    """Fetch and FetchSnapshot handling for RaftClient."""

    def _send_fetch(self, s: FollowerState, now_ms: int) -> None:
        leader = s.leader_id
        if not self.requests.is_ready(leader, now_ms):
            return
        if s.snapshot is not None:
            dl = s.snapshot
            self._send(leader, "fetch_snapshot", m.fetch_snapshot_request(
                self.p, self.config.cluster_id, self.node_id, s.epoch, dl.snapshot_id, dl.position,
                self.config.fetch_snapshot_max_bytes), now_ms, snapshot_id=dl.snapshot_id,
                position=dl.position)
            return
        self._send_fetch_to(leader, s.epoch, now_ms)

    def _send_fetch_to(self, destination: int, epoch: int, now_ms: int) -> None:
        offset, last_epoch = self.log.end_offset, self.log.last_fetched_epoch
        self._send(destination, "fetch", m.fetch_request(
            self.p, self.config.cluster_id, self.node_id, epoch, offset, last_epoch,
            self.config.fetch_max_wait_ms, self.config.fetch_max_bytes), now_ms,
            fetch_offset=offset, last_fetched_epoch=last_epoch)

    def _send_discovery_fetch(self, now_ms: int) -> None:
        """An observer without a leader asks the voters in turn; a non-leader answers with the
        leader it knows (Kafka: fetch from any bootstrap server)."""
        if self.requests.inflight:
            return
        voters = sorted(self.config.voters)
        for i in range(len(voters)):
            voter = voters[(self._discovery + i) % len(voters)]
            if self.requests.is_ready(voter, now_ms):
                self._discovery = (self._discovery + i + 1) % len(voters)
                self._send_fetch_to(voter, self.quorum.epoch, now_ms)
                return

    def _validate_leader_only(self, request_epoch: int) -> int:
        if request_epoch < self.quorum.epoch:
            return FENCED_LEADER_EPOCH
        if request_epoch > self.quorum.epoch:
            return UNKNOWN_LEADER_EPOCH
        if self.quorum.role is not Role.LEADER:
            return NOT_LEADER_OR_FOLLOWER
        return NONE

    def _handle_fetch_request(self, req: FetchRequest, reply_to, now_ms: int) -> None:
        if not self._cluster_ok(req.cluster_id):
            self._reply(reply_to, m.fetch_response(self.p, NONE, -1, -1, top_error=INCONSISTENT_CLUSTER_ID))
            return
        part = self.p.fetch_partition(req.topics)
        if part is None:
            self._reply(reply_to, m.fetch_response(self.p, NONE, -1, -1, top_error=INVALID_REQUEST))
            return
        if (req.max_wait_ms < 0 or part.fetch_offset < 0 or part.last_fetched_epoch < 0
                or part.last_fetched_epoch > part.current_leader_epoch):
            self._reply(reply_to, m.fetch_response(self.p, INVALID_REQUEST, *self._leader_info()))
            return
        fetch = ParkedFetch(reply_to, m.fetch_replica_id(req), part.fetch_offset,
                             part.last_fetched_epoch, part.current_leader_epoch,
                             min(req.max_bytes, part.partition_max_bytes or req.max_bytes),
                             now_ms + req.max_wait_ms)
        response, complete = self._try_complete_fetch(fetch, now_ms)
        if complete or req.max_wait_ms == 0:
            self._reply(reply_to, response)
        else:
            self.metrics["fetches_parked"] += 1
            self._parked.append(fetch)

    def _try_complete_fetch(self, f: ParkedFetch, now_ms: int) -> tuple[FetchResponse, bool]:
        """The response to a Fetch and whether to send it now (errors, data, divergence, snapshot)."""
        error = self._validate_leader_only(f.leader_epoch)
        if error != NONE:
            return m.fetch_response(self.p, error, *self._leader_info()), True
        s: LeaderState = self.quorum.state
        s.record_fetch(f.replica_id, now_ms)
        valid = validate_fetch_position(self.log, f.fetch_offset, f.last_fetched_epoch)
        records = b""
        diverging = snapshot = None
        if valid.kind is ValidKind.VALID:
            if f.fetch_offset > self.log.end_offset:
                raise RaftInvariantError(f"fetch at {f.fetch_offset} beyond leader end {self.log.end_offset}")
            records = self.log.read(f.fetch_offset, max(f.max_bytes, 1))
            if s.update_replica(f.replica_id, now_ms, f.fetch_offset):
                self._set_high_watermark(s.high_watermark)
                self._complete_parked(now_ms)
        elif valid.kind is ValidKind.DIVERGING:
            self.metrics["fetches_diverging"] += 1
            diverging = valid.offset_and_epoch
        else:
            self.metrics["fetches_snapshot_id"] += 1
            snapshot = valid.offset_and_epoch
        hw = s.high_watermark if s.high_watermark is not None else -1
        response = m.fetch_response(self.p, NONE, self.node_id, s.epoch, hw, self.log.start_offset,
                                    records, diverging, snapshot)
        replica = s.replica(f.replica_id)
        hw_news = replica is not None and hw > replica.high_watermark_sent
        complete = bool(records) or valid.kind is not ValidKind.VALID or hw_news
        if complete and replica is not None:
            replica.high_watermark_sent = max(replica.high_watermark_sent, hw)
        return response, complete

    def _complete_parked(self, now_ms: int) -> None:
        """Answer every parked fetch: called when the leader's log grows, when its high watermark
        moves (followers learn commits without waiting out max_wait_ms) and on any transition."""
        while self._parked:
            parked, self._parked = self._parked, []
            for f in parked:
                self._reply(f.reply_to, self._try_complete_fetch(f, now_ms)[0])

    def _expire_parked(self, now_ms: int) -> None:
        if not self._parked:
            return
        due = [f for f in self._parked if f.deadline_ms <= now_ms]
        if not due:
            return
        self._parked = [f for f in self._parked if f.deadline_ms > now_ms]
        for f in due:
            self._reply(f.reply_to, self._try_complete_fetch(f, now_ms)[0])

    def _handle_fetch_snapshot_request(self, req: FetchSnapshotRequest, now_ms: int):
        if not self._cluster_ok(req.cluster_id):
            return m.fetch_snapshot_response(self.p, NONE, -1, -1, top_error=INCONSISTENT_CLUSTER_ID)
        part = self.p.single(req.topics, name_attr="name", index_attr="partition")
        if part is None:
            return m.fetch_snapshot_response(self.p, NONE, -1, -1, top_error=INVALID_REQUEST)
        error = self._validate_leader_only(part.current_leader_epoch)
        if error != NONE:
            return m.fetch_snapshot_response(self.p, error, *self._leader_info())
        s: LeaderState = self.quorum.state
        s.record_fetch(req.replica_id, now_ms)
        snapshot_id = SnapshotId(part.snapshot_id.end_offset, part.snapshot_id.epoch)
        size = self.log.snapshot_size(snapshot_id)
        if size is None:
            return m.fetch_snapshot_response(self.p, SNAPSHOT_NOT_FOUND, *self._leader_info())
        if part.position < 0 or part.position >= size:
            return m.fetch_snapshot_response(self.p, POSITION_OUT_OF_RANGE, *self._leader_info())
        chunk = self.log.read_snapshot(snapshot_id, part.position, max(1, req.max_bytes))
        self.metrics["snapshot_chunks_served"] += 1
        return m.fetch_snapshot_response(self.p, NONE, self.node_id, s.epoch, snapshot_id, size,
                                         part.position, chunk)

    def _handle_fetch_response(self, entry, resp: FetchResponse, now_ms: int) -> bool:
        if resp.error_code != NONE:
            return False
        part = self.p.fetch_response_partition(resp.responses)
        if part is None:
            return False
        leader = part.current_leader
        handled = self._common_response(part.error_code, leader.leader_id, leader.leader_epoch, now_ms)
        if handled is not None:
            return handled
        if part.error_code != NONE:
            return False
        s = self.quorum.state
        if s.role is not Role.FOLLOWER or s.leader_id != entry.destination:
            return True
        # the answer is about the log as it was when the fetch was sent
        if (entry.meta["fetch_offset"] != self.log.end_offset
                or entry.meta["last_fetched_epoch"] != self.log.last_fetched_epoch):
            return True
        if part.diverging_epoch.epoch >= 0:
            diverging = OffsetAndEpoch(part.diverging_epoch.end_offset, part.diverging_epoch.epoch)
            if self._hw is not None and diverging.offset < self._hw:
                raise RaftInvariantError(f"node {self.node_id}: leader asks truncation to "
                                         f"{diverging.offset}, below the high watermark {self._hw}")
            offset = truncation_offset(self.log, diverging)
            if self._hw is not None and offset < self._hw:
                raise RaftInvariantError(f"node {self.node_id}: truncation to {offset} below the "
                                         f"high watermark {self._hw}")
            if offset < self.log.end_offset:
                self.metrics["truncations"] += 1
                self.metrics["truncated_records"] += self.log.end_offset - offset
            self.log.truncate_to(offset)
            self.log.flush()
        elif part.snapshot_id.epoch >= 0 or part.snapshot_id.end_offset >= 0:
            sid = part.snapshot_id
            if sid.epoch < 0 or sid.end_offset < 0:
                return False
            snapshot_id = SnapshotId(sid.end_offset, sid.epoch)
            if self.log.snapshot_size(snapshot_id) is not None:
                self._install_snapshot(snapshot_id)
            else:
                self.metrics["snapshot_downloads"] += 1
                s.snapshot = SnapshotDownload(snapshot_id)
        else:
            records = part.records
            if records:
                self.log.append_as_follower(records)
                self.log.flush()
            if part.high_watermark >= 0:
                self._set_high_watermark(min(part.high_watermark, self.log.end_offset))
        s.reset_fetch_timeout(now_ms)
        return True

    def _handle_fetch_snapshot_response(self, entry, resp: FetchSnapshotResponse, now_ms: int) -> bool:
        if resp.error_code != NONE:
            return False
        part = self.p.single(resp.topics, name_attr="name", index_attr="index")
        if part is None:
            return False
        leader = part.current_leader
        handled = self._common_response(part.error_code, leader.leader_id, leader.leader_epoch, now_ms)
        if handled is not None:
            return handled
        s = self.quorum.state
        if s.role is not Role.FOLLOWER or s.snapshot is None or s.leader_id != entry.destination:
            return True
        dl = s.snapshot
        sid = SnapshotId(part.snapshot_id.end_offset, part.snapshot_id.epoch)
        if part.error_code == SNAPSHOT_NOT_FOUND or sid.offset < 0 or sid.epoch < 0:
            s.snapshot = None  # the leader moved on to a newer snapshot: fetch again
            s.reset_fetch_timeout(now_ms)
            return True
        if part.error_code != NONE:
            return False
        if sid != dl.snapshot_id or part.position != dl.position or entry.meta["position"] != dl.position:
            return True
        dl.data += part.unaligned_records
        dl.size = part.size
        if len(dl.data) >= part.size:
            self.log.create_snapshot(dl.snapshot_id, bytes(dl.data[:part.size]))
            s.snapshot = None
            self._install_snapshot(dl.snapshot_id)
        s.reset_fetch_timeout(now_ms)
        return True

    def _install_snapshot(self, snapshot_id: SnapshotId) -> None:
        """A downloaded snapshot replaces the whole log (Kafka ``truncateToLatestSnapshot``); it is
        committed, so it also raises the high watermark to its end."""
        self.metrics["snapshot_installs"] += 1
        self.log.truncate_fully_to_snapshot(snapshot_id)
        self.log.flush()
        if self._hw is None or self._hw < snapshot_id.offset:
            self._set_high_watermark(snapshot_id.offset)
