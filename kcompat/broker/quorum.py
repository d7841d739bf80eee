"""The metadata quorum of a node: the I/O-free Raft core (:mod:`kcompat.kraft.raft`) on the wire.

Every node runs one (DESIGN.md section 7): controllers are voters of ``controller.quorum.voters``,
broker-only nodes are observers that replicate ``__cluster_metadata`` from the leader. This
runtime

- drives ``RaftClient.poll`` at its deadlines and whenever something happens;
- sends the core's outbound requests to other voters' controller listeners (NodeClients) and
  hands responses (or failures) back; answers inbound Vote / BeginQuorumEpoch / EndQuorumEpoch /
  Fetch / FetchSnapshot / DescribeQuorum requests with the core's replies;
- delivers committed batches, snapshot loads and leader changes, in order, to ``on_event``;
- lets the active controller append metadata records and wait until they are committed and
  applied (:meth:`commit`).

A single voter with no controller listener needs no network: it elects itself and commits at
once, so one node and many nodes share this code path.

An I/O error writing ``__cluster_metadata-0`` or ``quorum-state`` (a full disk, EIO) halts the
process with a log line saying why, as Kafka halts a node whose metadata log dir fails
(``ReplicaManager.handleLogDirFailure`` -> ``Exit.halt``): the Raft core has acted on each write
when it returns, so it cannot go on after one failed. The next start recovers from what is on disk
(everything the core acted on was flushed).
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import sys
import uuid
from pathlib import Path
from typing import Callable

from kcompat.broker.node_client import NodeClients, NodeConnectionError
from kcompat.kraft.disk_log import DiskRaftLog
from kcompat.kraft.raft import (
    FileQuorumStateStore, NotLeaderError, RaftClient, RaftConfig, Reply, Send, SnapshotLoaded,
)
from kcompat.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("kcompat.kraft.quorum")

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID(int=1)  # Kafka's Uuid.METADATA_TOPIC_ID
RAFT_API_KEYS = {52, 53, 54, 55, 59}  # Vote, BeginQuorumEpoch, EndQuorumEpoch, DescribeQuorum, FetchSnapshot
WIRE_VERSIONS = {1: 16, 52: 1, 53: 1, 54: 1, 55: 2, 59: 1}  # versions we send to other kcompat nodes


class QuorumRuntime:
    """One node's replica of ``__cluster_metadata``. ``voters`` maps voter ids to the host and port
    of their controller listener; ``on_event(event)`` gets committed batches, snapshot loads and
    leader changes in log order; ``on_delivered()``, if given, is called after each run of events
    handed over together (all that was committed since the last run: on a restart, the whole
    log), before commit waiters are released."""

    def __init__(self, *, node_id: int, voters: dict[int, tuple[str, int]], cluster_id: str, directory: Path,
                 now_ms: Callable[[], int], on_event: Callable[[object], None],
                 on_delivered: Callable[[], None] | None = None,
                 election_timeout_ms: int = 1000, fetch_timeout_ms: int = 2000,
                 request_timeout_ms: int = 2000, retry_backoff_ms: int = 20,
                 segment_bytes: int = 1 << 30, clean_shutdown: bool = False) -> None:
        self.node_id = node_id
        self.voters = dict(voters)
        self._now = now_ms
        self._on_event = on_event
        self._on_delivered = on_delivered
        part_dir = Path(directory) / f"{METADATA_TOPIC}-0"
        self.log = DiskRaftLog(part_dir, now_ms(), segment_bytes=segment_bytes, check_snapshots=True,
                               clean_shutdown=clean_shutdown)
        self.store = FileQuorumStateStore(part_dir / FileQuorumStateStore.FILE_NAME)
        self.config = RaftConfig(node_id=node_id, voters=frozenset(voters), cluster_id=cluster_id,
                                 election_timeout_ms=election_timeout_ms, fetch_timeout_ms=fetch_timeout_ms,
                                 request_timeout_ms=request_timeout_ms, retry_backoff_ms=retry_backoff_ms,
                                 delete_log_on_snapshot=True)
        self.raft = RaftClient(self.config, self.log, self.store, now_ms=now_ms())
        self.clients = NodeClients(lambda n: self.voters.get(n), client_id=f"kcompat-raft-{node_id}")
        self._replies: dict[object, asyncio.Future] = {}
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._applied = -1          # last offset delivered to on_event
        self._waiters: list[tuple[int, asyncio.Future]] = []
        self.stopped = False
        # called with the OSError when the metadata log cannot be written; None: halt the process
        self.on_fatal: Callable[[OSError], None] | None = None

    @staticmethod
    def check_storage(directory: Path) -> None:
        """Refuse, before anything on disk is loaded or changed, metadata files that start-up
        could not use: a damaged snapshot, a malformed ``leader-epoch-checkpoint`` or
        ``quorum-state`` of ``<directory>/__cluster_metadata-0`` (LogDirError naming the file;
        Kafka's ``KafkaRaftManager`` loads them before the broker's logs and stops on them)."""
        part_dir = Path(directory) / f"{METADATA_TOPIC}-0"
        DiskRaftLog.check(part_dir)
        FileQuorumStateStore(part_dir / FileQuorumStateStore.FILE_NAME).read()

    # -- running ---------------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    def wake(self) -> None:
        self._wakeup.set()

    async def _run(self) -> None:
        while not self.stopped:
            try:
                deadline = self._poll()
            except OSError as e:
                self._fatal(e)
                deadline = self._now() + 100
            except Exception:
                log.exception("metadata quorum poll failed")
                deadline = self._now() + 100
            timeout = max(0.0, (deadline - self._now()) / 1000.0)
            try:
                await asyncio.wait_for(self._wakeup.wait(), timeout)
            except asyncio.TimeoutError:
                pass
            self._wakeup.clear()

    def _poll(self) -> int:
        now = self._now()
        self.log.set_clock(now)
        result = self.raft.poll(now)
        for out in result.outbound:
            if isinstance(out, Send):
                asyncio.ensure_future(self._send(out))
            elif isinstance(out, Reply):
                fut = self._replies.pop(out.reply_to, None)
                if fut is not None and not fut.done():
                    fut.set_result(out.response)
        events = self.raft.take_events()
        for event in events:
            self._on_event(event)
            last = getattr(event, "last_offset", None)
            if last is not None:
                self._applied = last
            elif isinstance(event, SnapshotLoaded):
                self._applied = event.snapshot_id.offset - 1
        if events and self._on_delivered is not None:
            self._on_delivered()
        self._release_waiters()
        return result.deadline_ms

    async def _send(self, send: Send) -> None:
        version = WIRE_VERSIONS[type(send.request).API_KEY]
        try:
            response = await self.clients.send(send.destination, send.request, version,
                                               timeout_s=self.config.request_timeout_ms / 1000.0)
        except (NodeConnectionError, asyncio.TimeoutError, OSError) as e:
            log.debug("raft request to %d failed: %s", send.destination, e)
            response = None
        if not self.stopped:
            try:
                self.raft.handle_response(send.request_id, response, self._now())
            except OSError as e:   # a follower's append or a snapshot download could not be written
                self._fatal(e)
            self.wake()

    # -- inbound requests ------------------------------------------------------------------------

    def handle_request(self, request) -> asyncio.Future:
        """Give an inbound quorum request to the core; the future resolves to its response."""
        fut = asyncio.get_running_loop().create_future()
        token = object()
        self._replies[token] = fut
        try:
            self.raft.handle_request(request, token, self._now())
        except OSError as e:   # a vote or an epoch change could not be written to quorum-state
            self._fatal(e)
        self.wake()
        return fut

    def _fatal(self, e: OSError) -> None:
        """The metadata log dir failed: halt (Kafka ``Exit.halt(1)``), or hand the error to
        :attr:`on_fatal`."""
        self.stopped = True
        if self.on_fatal is not None:
            self.on_fatal(e)
            return
        log.critical("the metadata log dir %s failed: %s. Halting, as Kafka does when its metadata log "
                     "dir fails; start the node again once the disk is writable (it recovers from what "
                     "is on disk)", self.log.directory.parent, e)
        for handler in logging.getLogger().handlers:
            try:
                handler.flush()
            except Exception:
                pass
        sys.stderr.flush()
        for child in multiprocessing.active_children():   # the log cleaner's workers: not orphaned
            try:
                child.kill()
            except Exception:
                pass
        os._exit(1)

    # -- appends ---------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.raft.is_leader

    @property
    def leader_id(self) -> int | None:
        leader = self.raft.leader_and_epoch.leader_id
        return leader if leader is not None and leader >= 0 else None

    def commit(self, batch: bytes) -> asyncio.Future:
        """Append a metadata batch as the leader; the future resolves to its last offset once it is
        committed and delivered to ``on_event``. Raises KafkaError(NOT_CONTROLLER) if this node is
        not the leader."""
        try:
            last = self.raft.append(batch, self._now())
        except NotLeaderError:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "This node is not the active controller") from None
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append((last, fut))
        self.wake()
        return fut

    def _release_waiters(self) -> None:
        if not self._waiters:
            return
        keep = []
        for last, fut in self._waiters:
            if fut.done():
                continue
            if last <= self._applied:
                fut.set_result(last)
            elif not self.raft.is_leader:
                fut.set_exception(KafkaError(ErrorCode.NOT_CONTROLLER, "Lost leadership before the commit"))
            else:
                keep.append((last, fut))
        self._waiters = keep

    @property
    def applied_offset(self) -> int:
        return self._applied

    def caught_up(self) -> bool:
        """A leader is known and every record below the known high watermark has been delivered."""
        hw = self.raft.high_watermark
        return self.leader_id is not None and hw is not None and self._applied >= hw - 1

    def describe(self):
        """DescribeQuorum partition data (None unless this node leads the quorum)."""
        return self.raft.describe_quorum(self._now())

    async def stop(self) -> None:
        if self.stopped:
            return
        if self.raft.is_leader and len(self.voters) > 1:
            try:  # hand leadership over quickly instead of waiting for election timeouts (EndQuorumEpoch)
                self.raft.resign(self._now())
                self._poll()
                await asyncio.sleep(0.05)
            except Exception:
                log.exception("resigning the metadata quorum leadership failed")
        self.stopped = True
        self.wake()
        if self._task is not None:
            self._task.cancel()
        for _last, fut in self._waiters:
            if not fut.done():
                fut.set_exception(KafkaError(ErrorCode.NOT_CONTROLLER, "shutting down"))
        self.clients.close()
        try:
            self.log.flush()
            self.log.close()
        except OSError as e:   # everything the core acted on is durable already
            log.error("closing the metadata log failed: %s", e)
