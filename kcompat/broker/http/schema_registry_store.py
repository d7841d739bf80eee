"""The schema registry's storage: the compacted ``_schemas`` topic, read continuously by every node
into its :class:`~kcompat.schema_registry.state.RegistryState`, and written by one writer.

Single writer. The writer is the leader of ``_schemas`` partition 0 (the topic has one partition,
``cleanup.policy=compact``, replication factor min(3, live brokers); it is created by the first
write). Every write (register, delete, config, mode) runs on the writer under one lock: the state
is first brought up to date, then the operation plans its records from that state and appends
them with ``acks=all`` to the writer's own partition. Ids are therefore unique and increasing
cluster-wide:

- on each new leader epoch the writer first appends a NOOP record (carrying its HTTP URL, see
  :mod:`kcompat.schema_registry.records`) and reads the topic up to it, so its state holds every
  record acknowledged under any earlier leader before it allocates an id (Confluent's registry
  does the same with its NOOP marker after an election);
- the records are produced to this node only (never re-routed to another leader): the partition
  accepts them only while this node leads it, and with acks=all only the true leader's appends
  are acknowledged, so a node deposed without knowing it cannot write an id twice.

Other nodes forward a write over HTTP to the URL the writer's last NOOP announced (retrying while
the leadership moves, up to ``WRITE_TIMEOUT_S``), then wait until their own reader has consumed
the offset the writer reports (header ``X-Kcompat-Schemas-Offset``): a client that wrote through
any node reads its write back from that node. Reads are served from the local state once it has
caught up with the end of the topic seen at its first request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from kcompat.broker.http.kafka_client import LATEST, PRODUCE_VERSION, ClusterClient
from kcompat.broker.http.rest_common import RestError
from kcompat.kraft.controller import NewTopic
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.produce import ProduceRequest
from kcompat.protocol.records import CorruptRecordError, build_batch, iter_batches, iter_records
from kcompat.schema_registry import errors, records
from kcompat.schema_registry.state import RegistryState

if TYPE_CHECKING:   # types only: built by kcompat.broker.broker
    from kcompat.broker.http.services import HttpServices

log = logging.getLogger("kcompat.http.schema_registry")

TOPIC = "_schemas"
WRITE_TIMEOUT_S = 30.0
FETCH_WAIT_MS = 500
FETCH_MAX_BYTES = 8 << 20
IDLE_S = 0.2


class NotWriter(Exception):
    """This node is not (or no longer) the writer: the write goes to the one that is."""


class SchemaStore:
    """The registry of one node: ``state`` (read it after :meth:`ready`), :meth:`write`.

    ``services``: what it reads of its node (:class:`~kcompat.broker.http.services.HttpServices`);
    ``http_bound()``: the ``(host, port)`` addresses the HTTP listener is bound to (empty until it
    is), the first of which the writer announces to the other nodes.
    """

    def __init__(self, services: HttpServices, http_bound: Callable[[], list[tuple[str, int]]]) -> None:
        self.services = services
        self.http_bound = http_bound
        self.state = RegistryState()
        self.client = ClusterClient(services, f"kcompat-schema-registry-{services.node_id}")
        self.next_offset = 0          # next offset of _schemas-0 the reader applies
        self._waiters: list[tuple[int, asyncio.Future]] = []
        self._lock = asyncio.Lock()
        self._synced_epoch: int | None = None
        self._ready = False
        self._task: asyncio.Task | None = None
        self._announcing: asyncio.Task | None = None

    # -- life cycle ------------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._read_loop())

    async def stop(self) -> None:
        for t in (self._task, self._announcing):
            if t is not None:
                t.cancel()
        self.client.close()

    # -- the partition -----------------------------------------------------------------------------

    def leader(self) -> tuple[int | None, int]:
        """``(leader node id or None/-1, leader epoch)`` of ``_schemas``-0 in this node's image."""
        t = self.services.image.topics.get(TOPIC)
        if t is None or 0 not in t.partitions:
            return None, -1
        p = t.partitions[0]
        return p.leader, p.leader_epoch

    def own_url(self) -> str | None:
        """This node's HTTP URL as other nodes reach it (a wildcard bind is replaced by the host of
        the inter-broker listener)."""
        bound = self.http_bound()
        if not bound:
            return None
        host, port = bound[0]
        if host in ("0.0.0.0", "::", ""):
            b = self.services.image.brokers.get(self.services.node_id)
            ep = b.endpoints.get(self.services.config.inter_broker_listener_name) if b is not None else None
            host = ep.host if ep is not None else "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{port}"

    def has_topic(self) -> bool:
        return TOPIC in self.services.image.topics

    async def ensure_topic(self) -> None:
        """Create ``_schemas`` if missing and wait until it has a leader (50001 otherwise)."""
        if TOPIC not in self.services.image.topics:
            rf = max(1, min(3, len(self.services.live_broker_ids())))
            results = await self.services.create_topics(
                [NewTopic(TOPIC, 1, rf, configs={"cleanup.policy": "compact"})])
            for r in results:
                if r.error not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                    raise errors.store_error(f"cannot create {TOPIC}: {r.error.name} {r.message or ''}")
            await self.services.wait_for_topics([TOPIC], 10.0)
        deadline = time.monotonic() + WRITE_TIMEOUT_S
        while True:
            leader = self.leader()[0]
            if leader is not None and leader >= 0:
                return
            if time.monotonic() > deadline:
                raise errors.store_error(f"{TOPIC} has no leader")
            await asyncio.sleep(IDLE_S)

    # -- reading -------------------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        while True:
            try:
                leader, epoch = self.leader()
                if leader is None or leader < 0:
                    await asyncio.sleep(IDLE_S)
                    continue
                if leader == self.services.node_id and self._synced_epoch != epoch and \
                        (self._announcing is None or self._announcing.done()):
                    self._announcing = asyncio.ensure_future(self._announce())
                await self._fetch_once(leader)
            except asyncio.CancelledError:
                raise
            except RestError:
                await asyncio.sleep(IDLE_S)
            except Exception:   # a reader that dies silently would freeze the registry
                log.exception("schema registry reader of %s", TOPIC)
                await asyncio.sleep(1.0)

    async def _fetch_once(self, leader: int) -> None:
        tp = (TOPIC, 0)
        resp = await self.client.fetch(leader, {tp: self.next_offset}, max_wait_ms=FETCH_WAIT_MS,
                                       max_bytes=FETCH_MAX_BYTES, partition_max_bytes=FETCH_MAX_BYTES)
        pd = next((p for t in resp.responses for p in t.partitions), None)
        if pd is None:
            await asyncio.sleep(IDLE_S)
            return
        if pd.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            log.warning("%s offset %d out of range; reading from %d", TOPIC, self.next_offset, pd.log_start_offset)
            self.next_offset = max(self.next_offset, pd.log_start_offset)
            return
        if pd.error_code != ErrorCode.NONE:
            await asyncio.sleep(IDLE_S)
            return
        if pd.records:
            self._apply(pd.records)
        self._wake()

    def _apply(self, data) -> None:
        for off, h in iter_batches(data):
            if h.last_offset < self.next_offset:
                continue
            if not h.is_control:
                try:
                    for rec in iter_records(data[off:off + h.size]):
                        if rec.offset >= self.next_offset:
                            self.state.apply(rec.key, rec.value)
                except CorruptRecordError as e:
                    log.warning("%s: skipping a corrupt batch at offset %d: %s", TOPIC, h.base_offset, e)
            self.next_offset = h.next_offset

    def _wake(self) -> None:
        keep = []
        for offset, fut in self._waiters:
            if self.next_offset > offset:
                if not fut.done():
                    fut.set_result(None)
            else:
                keep.append((offset, fut))
        self._waiters = keep

    async def wait_for(self, offset: int, timeout_s: float = WRITE_TIMEOUT_S) -> None:
        """Until the reader has applied ``offset``; 50002 after ``timeout_s``."""
        if self.next_offset > offset:
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append((offset, fut))
        try:
            await asyncio.wait_for(fut, timeout_s)
        except asyncio.TimeoutError:
            raise errors.store_timeout(f"{TOPIC} not read up to offset {offset}") from None

    async def ready(self) -> None:
        """Until the state includes everything in the topic when first called (start-up)."""
        if self._ready:
            return
        if TOPIC in self.services.image.topics:
            try:
                end = (await self.client.list_offsets({(TOPIC, 0): LATEST}))[(TOPIC, 0)]
            except RestError as e:
                raise errors.store_error(e.message) from None
            await self.wait_for(end - 1)
        self._ready = True

    # -- writing -------------------------------------------------------------------------------------

    async def _append(self, recs: list[tuple[bytes, bytes | None]], epoch: int) -> int:
        """Append ``recs`` as one batch to this node's ``_schemas``-0; the last offset. NotWriter
        when this node does not lead the partition at ``epoch`` (any more)."""
        leader, now_epoch = self.leader()
        if leader != self.services.node_id or now_epoch != epoch:
            raise NotWriter()
        now = int(time.time() * 1000)
        batch = build_batch([(now, k, v, ()) for k, v in recs])
        req = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=int(WRITE_TIMEOUT_S * 1000), topic_data=[
            ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[
                ProduceRequest.PartitionProduceData(index=0, records=batch)])])
        try:
            resp = await self.client.send(self.services.node_id, req, PRODUCE_VERSION, WRITE_TIMEOUT_S + 5.0)
        except RestError as e:
            raise errors.store_error(e.message) from None
        pr = resp.responses[0].partition_responses[0]
        if pr.error_code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH,
                             ErrorCode.LEADER_NOT_AVAILABLE):
            raise NotWriter()
        if pr.error_code != ErrorCode.NONE:
            raise errors.store_error(f"produce to {TOPIC}: {ErrorCode(pr.error_code).name}")
        return pr.base_offset + len(recs) - 1

    async def _sync(self, epoch: int) -> None:
        if self._synced_epoch == epoch:
            return
        url = self.own_url() or ""
        noop = records.noop_value(self.services.node_id, url, epoch)
        offset = await self._append([(records.noop_key(), noop)], epoch)
        await self.wait_for(offset)
        self._synced_epoch = epoch
        log.info("schema registry writer: node %d at leader epoch %d of %s (%s)", self.services.node_id, epoch,
                 TOPIC, url)

    async def _announce(self) -> None:
        try:
            async with self._lock:
                _, epoch = self.leader()
                await self._sync(epoch)
        except (NotWriter, errors.RegistryError, RestError) as e:
            log.info("schema registry writer announcement failed: %s", e)

    async def write_here(self, plan) -> tuple[object, int]:
        """Run ``plan(state) -> (records, result)`` as the writer; ``(result, offset)`` with the
        offset to read up to (-1 when nothing was written). NotWriter if this node is not the
        writer; RegistryError from the plan or the store."""
        leader, epoch = self.leader()
        if leader != self.services.node_id:
            raise NotWriter()
        async with self._lock:
            await self._sync(epoch)
            recs, result = plan(self.state)
            if not recs:
                return result, -1
            offset = await self._append(recs, epoch)
        await self.wait_for(offset)
        return result, offset
