"""Follower replication: one fetcher per leader broker, copying the leader's log byte for byte.

Kafka's ``ReplicaFetcherManager`` / ``ReplicaFetcherThread`` (``num.replica.fetchers`` = 1): each
partition this broker follows belongs to the fetcher of its leader. A fetcher loops: one Fetch
request (v16, topic ids, ``replica_state`` = this broker's id and broker epoch, KIP-903) for all its
partitions, sent over the leader's ``inter.broker.listener.name`` endpoint, long-polling
``replica.fetch.wait.max.ms`` for ``replica.fetch.min.bytes``; each partition's answer goes through
:class:`kcompat.isr.follower.FollowerFetch` (truncation on diverging epochs, KIP-320), whose
actions are applied to the local :class:`~kcompat.isr.partition.Partition`. Connection errors back
off ``replica.fetch.backoff.ms``. A partition throttled by ``follower.replication.throttled.*``
(:mod:`kcompat.broker.quota.replication`) is left out of the Fetch while this broker is not in its ISR
and the measured rate is over the bound. The leader learns each follower's position from these fetches.

Fetches go through an incremental fetch session (KIP-227, Kafka's ``FetchSessionHandler`` in
``AbstractFetcherThread``; :class:`kcompat.isr.fetch_session_client.FetchSessionHandler`): the first
is full (epoch 0, asking for a session), later ones carry only the partitions whose fetch fields
changed (or that joined) and forget those not fetched this round; the leader answers only the
partitions with news (records, a moved high watermark or log start offset, an error, a diverging
epoch). A leader without room for sessions (``max.incremental.fetch.session.cache.slots=0``) answers
session id 0 and every fetch stays full.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from kcompat.broker.inter_broker import inter_broker_clients
from kcompat.broker.node_client import NodeConnectionError
from kcompat.isr.fetch_session_client import FetchSessionHandler
from kcompat.isr.follower import (
    AppendRecords, Backoff, Fenced, FollowerFetch, IncrementLogStartOffset, ListLeaderOffsets, SetHighWatermark,
    Truncate, TruncateFullyAndStartAt,
)
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.messages.fetch import FetchRequest
from kcompat.protocol.messages.list_offsets import ListOffsetsRequest

if TYPE_CHECKING:   # types only: the objects are built by kcompat.broker.broker
    from kcompat.broker.broker_context import BrokerContext
    from kcompat.broker.quota.replication import ReplicationQuota
    from kcompat.broker.remote_log import RemoteLogManager

log = logging.getLogger("kcompat.isr.fetcher")

FETCH_VERSION = 16
LIST_OFFSETS_VERSION = 8   # EARLIEST_LOCAL (-4) needs v8
# The leader answered as if it had not yet seen the metadata that made it leader at our epoch
# (it is a follower or has an older leader epoch): right after an election every replica learns
# the change within a metadata round trip, so such a partition is retried after this many ms
# instead of replica.fetch.backoff.ms (Kafka waits the full backoff, which after a failover
# holds acks=all produces on the new leader for up to a second).
METADATA_LAG_ERRORS = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_LEADER_EPOCH)
METADATA_LAG_BACKOFF_MS = 50
EARLIEST, LATEST, EARLIEST_LOCAL = -2, -1, -4
# Top-level errors about the session itself: the next fetch is full, sent at once (Kafka retries
# without replica.fetch.backoff.ms: the fetcher thread's next round rebuilds a full request).
SESSION_ERRORS = (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                  ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)


class ReplicaFetcherManager:
    """The fetchers of one broker, keyed by leader id.

    - ``context``: this node's id, config, metadata image (the leaders' inter-broker endpoints,
      topic ids and ISRs), clock (ms) and shutdown flag;
    - ``broker_epoch()``: this broker's epoch from its registration with the controller, -1 while
      unregistered (no fetch is sent then; Fetch carries it in ``replica_state``, KIP-903);
    - ``follower_quota``: the ``follower.replication.throttled.*`` quota
      (:class:`kcompat.broker.quota.replication.ReplicationQuota`, KIP-73).

    ``remote_log`` (the :class:`~kcompat.broker.remote_log.RemoteLogManager`, None without tiered
    storage) is set by the broker once it exists: a follower restarting from a tiered leader's
    local log start reads the producer snapshot and leader epochs from it (KIP-405).
    """

    def __init__(self, context: BrokerContext, *, broker_epoch: Callable[[], int],
                 follower_quota: ReplicationQuota) -> None:
        self.context = context
        self.broker_epoch = broker_epoch
        self.follower_quota = follower_quota
        self.remote_log: RemoteLogManager | None = None
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.clients = inter_broker_clients(context.config, context.image,
                                            f"kcompat-replica-fetcher-{context.node_id}")
        self.closed = False

    def on_partition_role(self, partition, leader_id: int, leader_epoch: int) -> None:
        """The ReplicaManager's ``follower_listener``: follow ``leader_id`` at ``leader_epoch``, or
        stop fetching (leader -1 or this broker)."""
        key = (partition.topic, partition.partition_id)
        for lid, f in list(self.fetchers.items()):
            if key in f.partitions and lid != leader_id:
                f.remove(key)
        if leader_id < 0 or leader_id == self.context.node_id or self.closed:
            return
        f = self.fetchers.get(leader_id)
        if f is None:
            f = self.fetchers[leader_id] = ReplicaFetcher(self, leader_id)
        f.add(partition, leader_epoch)

    def is_following(self, topic: str, partition: int) -> bool:
        return any((topic, partition) in f.partitions for f in self.fetchers.values())

    def close(self) -> None:
        self.closed = True
        for f in self.fetchers.values():
            f.stop()
        self.fetchers.clear()
        self.clients.close()


class ReplicaFetcher:
    """Fetches every partition this broker follows from leader ``leader_id``, in one incremental
    fetch session (``session``) with that leader."""

    def __init__(self, manager: ReplicaFetcherManager, leader_id: int) -> None:
        self.manager = manager
        self.context = manager.context
        self.leader_id = leader_id
        # (topic, partition) -> (Partition, FollowerFetch, retry-not-before ms)
        self.partitions: dict[tuple[str, int], list] = {}
        self.session = FetchSessionHandler()
        self._changed = asyncio.Event()
        self._task = asyncio.ensure_future(self._run())

    def add(self, partition, leader_epoch: int) -> None:
        key = (partition.topic, partition.partition_id)
        entry = self.partitions.get(key)
        now = self.context.now_ms()
        if entry is not None and entry[0] is partition:
            actions = entry[1].on_leader_change(self.leader_id, leader_epoch, partition.log, partition.high_watermark)
        else:
            ff = FollowerFetch(partition.topic, partition.partition_id, leader_id=self.leader_id,
                               leader_epoch=leader_epoch)
            entry = [partition, ff, 0]
            self.partitions[key] = entry
            actions = ff.start(partition.log, partition.high_watermark)
        self._apply(entry, actions, now)
        self._changed.set()

    def remove(self, key) -> None:
        self.partitions.pop(key, None)
        self._changed.set()

    def stop(self) -> None:
        self._task.cancel()

    # -- the loop --------------------------------------------------------------------------------

    async def _run(self) -> None:
        cfg = self.context.config
        backoff_s = cfg.get("replica.fetch.backoff.ms") / 1000.0
        while not self.context.is_shutting_down() and not self.manager.closed:
            try:
                epoch = self.manager.broker_epoch()
                if epoch < 0:
                    await asyncio.sleep(0.1)
                    continue
                req, sent = self._build_request(epoch)
                if not sent:
                    if not self.partitions and self.manager.fetchers.get(self.leader_id) is self:
                        await self._wait_changed(5.0)
                    else:
                        await self._wait_changed(min(0.1, backoff_s))
                    continue
                timeout = (req.max_wait_ms + cfg.get("replica.socket.timeout.ms")) / 1000.0
                try:
                    resp = await self.manager.clients.send(self.leader_id, req, FETCH_VERSION, timeout_s=timeout)
                except BaseException:
                    self.session.handle_error()
                    raise
                usable = self.session.handle_response(
                    resp.error_code, resp.session_id,
                    [(tr.topic_id, pd.partition_index) for tr in resp.responses for pd in tr.partitions])
                if resp.error_code in SESSION_ERRORS:
                    log.info("fetch session %d with leader %d: %s; the next fetch is full", req.session_id,
                             self.leader_id, ErrorCode(resp.error_code).name)
                    continue
                if resp.error_code != ErrorCode.NONE:
                    log.warning("fetch from leader %d failed: %s", self.leader_id, ErrorCode(resp.error_code).name)
                    await asyncio.sleep(backoff_s)
                    continue
                if not usable:
                    log.warning("fetch session %d with leader %d answered partitions it does not hold; the next "
                                "fetch is full", req.session_id, self.leader_id)
                    continue
                try:
                    await self._handle_response(resp, sent)
                except BaseException:
                    self.session.handle_error()   # partly applied: resynchronise with a full fetch
                    raise
            except asyncio.CancelledError:
                raise
            except (NodeConnectionError, ConnectionError, OSError, asyncio.TimeoutError) as e:
                log.info("fetching from leader %d: %s; retrying in %.0f ms", self.leader_id, e or type(e).__name__,
                         backoff_s * 1000)
                self.manager.clients.close_node(self.leader_id)
                await asyncio.sleep(backoff_s)
            except Exception:
                log.exception("replica fetcher for leader %d failed; retrying", self.leader_id)
                await asyncio.sleep(backoff_s)

    async def _wait_changed(self, timeout_s: float) -> None:
        self._changed.clear()
        try:
            await asyncio.wait_for(self._changed.wait(), timeout_s)
        except asyncio.TimeoutError:
            pass

    def _build_request(self, broker_epoch: int):
        """``(FetchRequest, sent)``: the request the session handler plans for every partition
        fetchable now (not backing off, not fenced nor waiting for the leader's offsets, its topic
        known, not throttled), and ``sent`` ``{(topic id, partition): ((topic, partition), entry,
        fetch offset, leader epoch)}`` for EVERY such partition, also those an incremental request
        leaves out: the leader may answer any of them (e.g. its high watermark moved)."""
        cfg = self.context.config
        now = self.context.now_ms()
        image = self.context.image
        quota = self.manager.follower_quota
        desired = {}
        sent = {}
        for key, entry in self.partitions.items():
            partition, ff, not_before = entry
            if not_before > now:
                continue
            pos = ff.fetch_position(partition.log)
            t = image.topics.get(key[0])
            if pos is None or t is None:
                continue
            ip = t.partitions.get(key[1])
            if quota.should_throttle(key[0], key[1], ip is not None and self.context.node_id in ip.isr, now):
                continue   # follower.replication.throttled.*: not fetched while over the rate
            desired[(t.topic_id, key[1])] = FetchRequest.FetchPartition(
                partition=key[1], current_leader_epoch=pos.current_leader_epoch, fetch_offset=pos.fetch_offset,
                last_fetched_epoch=pos.last_fetched_epoch, log_start_offset=pos.log_start_offset,
                partition_max_bytes=cfg.get("replica.fetch.max.bytes"))
            sent[(t.topic_id, key[1])] = (key, entry, pos.fetch_offset, pos.current_leader_epoch)
        plan = self.session.build(desired)
        by_topic: dict = {}
        for (topic_id, _p), fp in plan.partitions.items():
            by_topic.setdefault(topic_id, []).append(fp)
        forgotten: dict = {}
        for topic_id, p in plan.forgotten:
            forgotten.setdefault(topic_id, []).append(p)
        req = FetchRequest(
            replica_state=FetchRequest.ReplicaState(replica_id=self.context.node_id, replica_epoch=broker_epoch),
            max_wait_ms=cfg.get("replica.fetch.wait.max.ms"), min_bytes=cfg.get("replica.fetch.min.bytes"),
            max_bytes=cfg.get("replica.fetch.response.max.bytes"), isolation_level=0,
            session_id=plan.session_id, session_epoch=plan.session_epoch,
            topics=[FetchRequest.FetchTopic(topic_id=tid, partitions=parts) for tid, parts in by_topic.items()],
            forgotten_topics_data=[FetchRequest.ForgottenTopic(topic_id=tid, partitions=parts)
                                   for tid, parts in forgotten.items()], rack_id="")
        return req, sent

    async def _handle_response(self, resp, sent: dict) -> None:
        """Apply each partition of ``resp`` (those absent from an incremental response had no
        news). A partition still followed whose error-free answer did not set its high watermark
        (an answer to an older request or leader epoch, a truncation for a diverging epoch) makes
        the next fetch a full one: the leader's session counts that high watermark as sent and
        would not repeat it until it moves again, so a full fetch brings the exact value back
        (Kafka leaves the follower behind until the next change; this is kcompat's addition)."""
        now = self.context.now_ms()
        quota = self.manager.follower_quota
        resync = False
        for tr in resp.responses:
            for pd in tr.partitions:
                found = sent.get((tr.topic_id, pd.partition_index))
                if found is None:
                    continue
                key, entry, fetch_offset, leader_epoch = found
                if self.partitions.get(key) is not entry:
                    resync = resync or key in self.partitions
                    continue   # removed or re-added meanwhile
                partition, ff, _ = entry
                if ff.leader_epoch != leader_epoch:
                    resync = True
                    continue   # asked at an older epoch of the same leader (a reassignment bumps it): stale
                if pd.records and quota.is_throttled(*key):
                    quota.record(len(pd.records), now)
                de = pd.diverging_epoch
                diverging = (de.epoch, de.end_offset) if de is not None and (de.epoch >= 0 or de.end_offset >= 0) \
                    else None
                actions = ff.on_fetch_response(partition.log, error_code=pd.error_code,
                                               high_watermark=pd.high_watermark, log_start_offset=pd.log_start_offset,
                                               records=pd.records, diverging_epoch=diverging,
                                               fetch_offset=fetch_offset)
                if pd.error_code == ErrorCode.NONE and not any(isinstance(a, SetHighWatermark) for a in actions):
                    resync = True
                await self._apply_async(entry, actions, now)
        if resync and not self.session.full:
            self.session.handle_error()

    async def _apply_async(self, entry, actions, now: int) -> None:
        for action in actions:
            if isinstance(action, ListLeaderOffsets):
                partition, ff, _ = entry
                try:
                    earliest, latest, local = await self._leader_offsets(partition, action.tiered)
                except (KafkaError, NodeConnectionError, ConnectionError, OSError, asyncio.TimeoutError) as e:
                    log.info("%s: could not list the leader's offsets: %s", partition, e)
                    ff.state = "fetching"
                    entry[2] = now + self.context.config.get("replica.fetch.backoff.ms")
                    return
                more = ff.on_leader_offsets(partition.log, leader_log_start_offset=earliest,
                                            leader_log_end_offset=latest, leader_local_log_start_offset=local)
                aux = None
                remote = self.manager.remote_log
                if remote is not None and any(isinstance(a, TruncateFullyAndStartAt) and a.log_start_offset is not None
                                              for a in more):
                    try:   # what the missing segments leave behind: producer state, leader epochs (KIP-405)
                        aux = await remote.aux_state(partition, local)
                    except Exception as e:
                        log.info("%s: could not read the remote producer snapshot and epochs: %s", partition, e)
                        ff.state = "fetching"
                        entry[2] = now + self.context.config.get("replica.fetch.backoff.ms")
                        return
                self._apply(entry, more, now, aux)
            elif not self._apply(entry, [action], now):
                return

    def _apply(self, entry, actions, now: int, aux: tuple | None = None) -> bool:
        """Apply FollowerFetch actions in order; False at the first that fails. ``aux``:
        ``(producer snapshot, epochs)`` from remote storage for a tiered restart."""
        partition, ff, _ = entry
        for action in actions:
            try:
                if isinstance(action, AppendRecords):
                    partition.append_as_follower(action.records, now)
                elif isinstance(action, SetHighWatermark):
                    partition.set_follower_high_watermark(action.high_watermark)
                elif isinstance(action, Truncate):
                    partition.truncate_to(action.offset, now)
                elif isinstance(action, TruncateFullyAndStartAt):
                    snapshot, epochs = aux if aux is not None else (None, ())
                    partition.truncate_fully_and_start_at(action.offset, now, log_start_offset=action.log_start_offset,
                                                          producer_snapshot=snapshot, epochs=epochs)
                elif isinstance(action, IncrementLogStartOffset):
                    if action.offset > partition.log.log_start_offset:
                        partition.log.delete_records_before(action.offset)
                elif isinstance(action, Backoff):
                    backoff_ms = self.context.config.get("replica.fetch.backoff.ms")
                    if action.error in METADATA_LAG_ERRORS:
                        backoff_ms = min(backoff_ms, METADATA_LAG_BACKOFF_MS)
                    else:
                        log.info("%s: fetch from leader %d: %s", partition, self.leader_id, action.error.name)
                    entry[2] = now + backoff_ms
                    return False
                elif isinstance(action, Fenced):
                    log.info("%s: leader %d has a newer leader epoch; waiting for metadata", partition, self.leader_id)
                    return False
            except (KafkaError, ValueError, OSError) as e:
                log.error("%s: replicating from leader %d failed at %s: %s", partition, self.leader_id, action, e)
                entry[2] = now + self.context.config.get("replica.fetch.backoff.ms")
                return False
        return True

    async def _leader_offsets(self, partition, tiered: bool = False) -> tuple[int, int, int | None]:
        """The leader's (log start offset, log end offset, local log start offset if ``tiered``
        else None) through ListOffsets as a replica."""
        out = []
        for ts in (EARLIEST, LATEST, EARLIEST_LOCAL) if tiered else (EARLIEST, LATEST):
            req = ListOffsetsRequest(replica_id=self.context.node_id, isolation_level=0, topics=[
                ListOffsetsRequest.ListOffsetsTopic(name=partition.topic, partitions=[
                    ListOffsetsRequest.ListOffsetsPartition(partition_index=partition.partition_id,
                                                            current_leader_epoch=partition.leader_epoch,
                                                            timestamp=ts)])])
            resp = await self.manager.clients.send(self.leader_id, req, LIST_OFFSETS_VERSION, timeout_s=10)
            p = resp.topics[0].partitions[0]
            if p.error_code != ErrorCode.NONE:
                raise KafkaError(ErrorCode(p.error_code), "ListOffsets from the leader failed")
            out.append(p.offset)
        return out[0], out[1], out[2] if tiered else None
