"""The REST Proxy's Kafka client: requests to the cluster over the Kafka protocol from inside the
broker process, so that a REST produce, fetch or commit works whatever node leads the partition or
coordinates the group (the REST Proxy is a Kafka client too).

Connections go to the inter-broker listener of each node (:class:`kcompat.broker.node_client.NodeClients`:
one connection per node, many requests in flight, answered in order). Partition leaders are read
from this node's metadata image, the broker's own metadata cache (what a Metadata request to this
node would answer), instead of a Metadata round trip; group coordinators are found with
FindCoordinator, which also creates ``__consumer_offsets`` on first use as Kafka does.

Limits: no idempotent producer (a produce is retried only when the broker refused it before
writing: not the leader, no leader, NOT_ENOUGH_REPLICAS, or the connection could not be opened;
a request that times out after being sent is reported, not retried, so nothing is written twice);
the inter-broker listener must be PLAINTEXT, as for the replica fetchers.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING

from aiohttp import web

from kcompat.broker.http.rest_common import RestError, kafka_error, topic_not_found, unavailable
from kcompat.broker.node_client import NodeClients, NodeConnectionError
from kcompat.broker.tls import inter_broker_ssl
from kcompat.security.sasl_client import inter_broker_sasl
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.fetch import FetchRequest
from kcompat.protocol.messages.find_coordinator import FindCoordinatorRequest
from kcompat.protocol.messages.list_offsets import ListOffsetsRequest
from kcompat.protocol.messages.offset_commit import OffsetCommitRequest
from kcompat.protocol.messages.offset_fetch import OffsetFetchRequest
from kcompat.protocol.messages.produce import ProduceRequest

if TYPE_CHECKING:   # types only: built by kcompat.broker.broker
    from kcompat.broker.http.services import HttpServices

log = logging.getLogger("kcompat.http.rest")

PRODUCE_VERSION = 9
FETCH_VERSION = 12          # topics by name
LIST_OFFSETS_VERSION = 7
OFFSET_COMMIT_VERSION = 9   # member id + member epoch (KIP-848)
OFFSET_FETCH_VERSION = 8    # batched by group
FIND_COORDINATOR_VERSION = 4
HEARTBEAT_VERSION = 1       # client-generated member id (KIP-1082)

EARLIEST, LATEST = -2, -1
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
REQUEST_TIMEOUT_S = 30.0
RETRY_BACKOFF_S = 0.1
COORDINATOR_ERRORS = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})
# refused before anything was appended: safe to send again to the (new) leader
PRODUCE_RETRY = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
                           ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                           ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH})
LEADER_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
                           ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.FENCED_LEADER_EPOCH,
                           ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.REPLICA_NOT_AVAILABLE})

TP = tuple[str, int]


class ClusterClient:
    """Kafka requests of the REST Proxy. ``services``: what it reads of its node (the config, the
    metadata image, leaders, live brokers: :class:`~kcompat.broker.http.services.HttpServices`);
    ``client_id`` is what the brokers see (request logs, group member descriptions)."""

    def __init__(self, services: HttpServices, client_id: str) -> None:
        self.services = services
        self.client_id = client_id
        self.listener = services.config.inter_broker_listener_name
        self.clients = NodeClients(self._endpoint_of, client_id, ssl_context=inter_broker_ssl(services.config),
                                   sasl=inter_broker_sasl(services.config))
        self._coordinators: dict[str, int] = {}

    def _endpoint_of(self, node_id: int):
        b = self.services.image.brokers.get(node_id)
        ep = b.endpoints.get(self.listener) if b is not None else None
        return (ep.host, ep.port) if ep is not None else None

    def close(self) -> None:
        """Close the connections (a later request opens them again)."""
        self.clients.close()

    # -- metadata from the image -----------------------------------------------------------------

    def partition_count(self, topic: str) -> int | None:
        """Partitions of ``topic`` in this node's image; None if it does not know the topic."""
        t = self.services.image.topics.get(topic)
        return None if t is None else len(t.partitions)

    def leader(self, topic: str, partition: int) -> int | None:
        """Leader of a partition: its node id, -1 while it has none, None if there is no such
        partition."""
        return self.services.leader_of(topic, partition)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with id ``topic_id`` (None if unknown here)."""
        t = self.services.image.topics_by_id.get(topic_id)
        return None if t is None else t.name

    def topic_id(self, topic: str) -> uuid.UUID | None:
        """The id of ``topic`` (None if unknown here)."""
        t = self.services.image.topics.get(topic)
        return None if t is None else t.topic_id

    def _any_broker(self) -> int:
        live = self.services.live_broker_ids()
        if self.services.node_id in live or not live:
            return self.services.node_id
        return live[0]

    # -- sending ---------------------------------------------------------------------------------

    async def send(self, node: int, request, version: int, timeout_s: float = REQUEST_TIMEOUT_S):
        """Send and await the response; RestError 50003 if the node cannot be reached or does not
        answer in time (the connection is then dropped, to be opened again next time)."""
        try:
            return await self.clients.send(node, request, version, timeout_s)
        except (NodeConnectionError, OSError, asyncio.TimeoutError) as e:
            self.clients.close_node(node)
            raise unavailable(f"node {node} did not answer {type(request).NAME}: {e or 'timed out'}") from None

    # -- coordinators ------------------------------------------------------------------------------

    async def find_coordinator(self, group: str, timeout_s: float = 10.0) -> int:
        """The node coordinating ``group`` (cached until :meth:`forget_coordinator`)."""
        node = self._coordinators.get(group)
        if node is not None:
            return node
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            req = FindCoordinatorRequest(key_type=0, coordinator_keys=[group])
            resp = await self.send(self._any_broker(), req, FIND_COORDINATOR_VERSION, timeout_s)
            c = resp.coordinators[0]
            if c.error_code == ErrorCode.NONE:
                self._coordinators[group] = c.node_id
                return c.node_id
            if c.error_code not in COORDINATOR_ERRORS:
                raise kafka_error(c.error_code, c.error_message)
            if loop.time() >= deadline:
                raise kafka_error(c.error_code, f"no coordinator for group {group}")
            await asyncio.sleep(RETRY_BACKOFF_S)

    def forget_coordinator(self, group: str) -> None:
        """Look the coordinator of ``group`` up again next time."""
        self._coordinators.pop(group, None)

    async def to_coordinator(self, group: str, request, version: int, error_of, timeout_s: float = 10.0):
        """Send ``request`` to the coordinator of ``group``, finding it again and retrying while
        the answer (``error_of(response)``) is NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE or
        COORDINATOR_LOAD_IN_PROGRESS or the node cannot be reached, up to ``timeout_s``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            try:
                node = await self.find_coordinator(group, max(0.1, deadline - loop.time()))
                resp = await self.send(node, request, version, max(1.0, deadline - loop.time()))
            except RestError:
                self.forget_coordinator(group)
                if loop.time() >= deadline:
                    raise
                await asyncio.sleep(RETRY_BACKOFF_S)
                continue
            code = error_of(resp)
            if code in COORDINATOR_ERRORS and loop.time() < deadline:
                self.forget_coordinator(group)
                await asyncio.sleep(RETRY_BACKOFF_S)
                continue
            return resp

    # -- produce -----------------------------------------------------------------------------------

    async def produce(self, topic: str, batches: dict[int, list[bytes]], *, acks: int = -1,
                      timeout_ms: int = 30000, delivery_timeout_s: float = 30.0) -> dict[int, list[tuple]]:
        """Append ``batches`` (partition -> record batches, in order) with Produce requests to the
        leaders: the n-th batches of all partitions go out together, one request per leader, and
        the next ones after them, so each partition keeps its order. Returns partition -> one
        ``(error code, base offset, log append time ms, error message)`` per batch."""
        out: dict[int, list[tuple]] = {p: [] for p in batches}
        rounds = max((len(b) for b in batches.values()), default=0)
        for i in range(rounds):
            pending = {p: bs[i] for p, bs in batches.items() if i < len(bs)}
            done = await self._produce_round(topic, pending, acks, timeout_ms, delivery_timeout_s)
            for p, result in done.items():
                out[p].append(result)
        return out

    async def _produce_round(self, topic: str, pending: dict[int, bytes], acks: int, timeout_ms: int,
                             delivery_timeout_s: float) -> dict[int, tuple]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + delivery_timeout_s
        out: dict[int, tuple] = {}
        last: dict[int, tuple] = {}
        while pending:
            by_leader: dict[int, dict[int, bytes]] = {}
            for p, batch in list(pending.items()):
                leader = self.leader(topic, p)
                if leader is None:
                    out[p] = (int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), -1, -1, None)
                    del pending[p]
                elif leader < 0:
                    last[p] = (int(ErrorCode.LEADER_NOT_AVAILABLE), -1, -1, None)
                else:
                    by_leader.setdefault(leader, {})[p] = batch
            results = await asyncio.gather(*(self._produce_to(node, topic, parts, acks, timeout_ms)
                                             for node, parts in by_leader.items()))
            for part_results in results:
                for p, result in part_results.items():
                    if result[0] in PRODUCE_RETRY and loop.time() < deadline:
                        last[p] = result
                        continue
                    out[p] = result
                    pending.pop(p, None)
            if pending:
                if loop.time() >= deadline:
                    for p in pending:
                        out[p] = last.get(p, (int(ErrorCode.REQUEST_TIMED_OUT), -1, -1, None))
                    break
                await asyncio.sleep(RETRY_BACKOFF_S)
        return out

    async def _produce_to(self, node: int, topic: str, parts: dict[int, bytes], acks: int,
                          timeout_ms: int) -> dict[int, tuple]:
        req = ProduceRequest(transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[
            ProduceRequest.TopicProduceData(name=topic, partition_data=[
                ProduceRequest.PartitionProduceData(index=p, records=b) for p, b in sorted(parts.items())])])
        try:
            conn = await self.clients.get(node)
        except (NodeConnectionError, OSError, asyncio.TimeoutError):
            # never sent: as NOT_LEADER, the round tries again (the image may name a new leader)
            return {p: (int(ErrorCode.NOT_LEADER_OR_FOLLOWER), -1, -1, f"node {node} unreachable") for p in parts}
        try:
            resp = await conn.send(req, PRODUCE_VERSION, timeout_ms / 1000.0 + 5.0)
        except (NodeConnectionError, OSError, asyncio.TimeoutError) as e:
            self.clients.close_node(node)
            return {p: (int(ErrorCode.NETWORK_EXCEPTION), -1, -1, str(e) or "timed out") for p in parts}
        out = {}
        for t in resp.responses:
            for pr in t.partition_responses:
                if pr.index in parts:
                    out[pr.index] = (pr.error_code, pr.base_offset, pr.log_append_time_ms, pr.error_message)
        for p in parts:
            out.setdefault(p, (int(ErrorCode.UNKNOWN_SERVER_ERROR), -1, -1, "no answer for the partition"))
        return out

    # -- offsets -----------------------------------------------------------------------------------

    async def list_offsets(self, specs: dict[TP, int], isolation: int = READ_UNCOMMITTED,
                           timeout_s: float = 10.0) -> dict[TP, int]:
        """ListOffsets: ``{(topic, partition): timestamp}`` (EARLIEST, LATEST or epoch ms) ->
        ``{(topic, partition): offset}`` (-1 when no record is that recent). RestError 40401 /
        40402 for a partition that does not exist, the Kafka error otherwise."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        out: dict[TP, int] = {}
        pending = dict(specs)
        while pending:
            by_leader: dict[int, dict[TP, int]] = {}
            for tp, ts in pending.items():
                leader = self.leader(*tp)
                if leader is None:
                    raise topic_not_found() if self.partition_count(tp[0]) is None else \
                        RestError(404, 40402, "Partition not found.")
                if leader >= 0:
                    by_leader.setdefault(leader, {})[tp] = ts
            failed: dict[TP, int] = {}
            for node, parts in by_leader.items():
                by_topic: dict[str, list] = {}
                for (t, p), ts in parts.items():
                    by_topic.setdefault(t, []).append(ListOffsetsRequest.ListOffsetsPartition(
                        partition_index=p, current_leader_epoch=-1, timestamp=ts))
                req = ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=[
                    ListOffsetsRequest.ListOffsetsTopic(name=t, partitions=ps) for t, ps in by_topic.items()])
                try:
                    resp = await self.send(node, req, LIST_OFFSETS_VERSION, max(1.0, deadline - loop.time()))
                except RestError:
                    if loop.time() >= deadline:
                        raise
                    continue
                for t in resp.topics:
                    for pr in t.partitions:
                        tp = (t.name, pr.partition_index)
                        if pr.error_code == ErrorCode.NONE:
                            out[tp] = pr.offset
                            pending.pop(tp, None)
                        else:
                            failed[tp] = pr.error_code
            for tp, code in failed.items():
                if code not in LEADER_ERRORS and code != ErrorCode.OFFSET_NOT_AVAILABLE:
                    raise kafka_error(code, f"ListOffsets of {tp[0]}-{tp[1]}")
            if pending:
                if loop.time() >= deadline:
                    code = next(iter(failed.values()), int(ErrorCode.LEADER_NOT_AVAILABLE))
                    raise kafka_error(code, "ListOffsets")
                await asyncio.sleep(RETRY_BACKOFF_S)
        return out

    async def offset_fetch(self, group: str, partitions: list[TP] | None) -> dict[TP, tuple[int, str | None]]:
        """Committed offsets of ``group`` (``partitions`` None: all of them): ``{(topic,
        partition): (offset, metadata)}`` for those with a committed offset."""
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for t, p in partitions:
                by_topic.setdefault(t, []).append(p)
            topics = [OffsetFetchRequest.OffsetFetchRequestTopics(name=t, partition_indexes=sorted(set(ps)))
                      for t, ps in by_topic.items()]
        req = OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=topics)],
                                 require_stable=True)
        resp = await self.to_coordinator(group, req, OFFSET_FETCH_VERSION, lambda r: r.groups[0].error_code)
        g = resp.groups[0]
        if g.error_code != ErrorCode.NONE:
            raise kafka_error(g.error_code, f"OffsetFetch of group {group}")
        out = {}
        for t in g.topics:
            for pr in t.partitions:
                if pr.error_code != ErrorCode.NONE:
                    raise kafka_error(pr.error_code, f"OffsetFetch of {t.name}-{pr.partition_index}")
                if pr.committed_offset >= 0:
                    out[(t.name, pr.partition_index)] = (pr.committed_offset, pr.metadata)
        return out

    async def offset_commit(self, group: str, member_id: str, member_epoch: int,
                            offsets: dict[TP, tuple[int, str | None]]) -> dict[TP, int]:
        """OffsetCommit v9 of ``{(topic, partition): (offset, metadata)}`` as member ``member_id``
        at ``member_epoch`` (``""``/-1: not a member, allowed while the group has no members);
        returns the error code of each partition."""
        by_topic: dict[str, list] = {}
        for (t, p), (off, meta) in offsets.items():
            by_topic.setdefault(t, []).append(OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=p, committed_offset=off, committed_leader_epoch=-1,
                committed_metadata=meta if meta is not None else ""))
        req = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=member_epoch, member_id=member_id,
                                  group_instance_id=None, topics=[
                                      OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=ps)
                                      for t, ps in by_topic.items()])

        def first_error(r) -> int:
            codes = [pr.error_code for t in r.topics for pr in t.partitions if pr.error_code]
            return codes[0] if codes else 0
        resp = await self.to_coordinator(group, req, OFFSET_COMMIT_VERSION, first_error)
        return {(t.name, pr.partition_index): pr.error_code for t in resp.topics for pr in t.partitions}

    # -- fetch -------------------------------------------------------------------------------------

    async def fetch(self, node: int, positions: dict[TP, int], *, max_wait_ms: int, max_bytes: int,
                    partition_max_bytes: int, isolation: int = READ_UNCOMMITTED):
        """One consumer Fetch (no fetch session) of ``positions`` from ``node``; the response."""
        by_topic: dict[str, list] = {}
        for (t, p), off in positions.items():
            by_topic.setdefault(t, []).append(FetchRequest.FetchPartition(
                partition=p, current_leader_epoch=-1, fetch_offset=off, last_fetched_epoch=-1,
                log_start_offset=-1, partition_max_bytes=partition_max_bytes))
        req = FetchRequest(replica_id=-1, max_wait_ms=max(0, max_wait_ms), min_bytes=1, max_bytes=max_bytes,
                           isolation_level=isolation, session_id=0, session_epoch=-1,
                           topics=[FetchRequest.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
                           forgotten_topics_data=[], rack_id="")
        return await self.send(node, req, FETCH_VERSION, max_wait_ms / 1000.0 + REQUEST_TIMEOUT_S)


_CLIENT_KEY = web.AppKey("kcompat.rest.cluster_client", ClusterClient)


def shared_client(app: web.Application, services: HttpServices) -> ClusterClient:
    """The :class:`ClusterClient` of ``app`` (the REST Proxy's produce and lag requests), made on
    first use and closed with the application."""
    client = app.get(_CLIENT_KEY)
    if client is None:
        client = app[_CLIENT_KEY] = ClusterClient(services, f"kcompat-rest-proxy-{services.node_id}")

        async def close(_app) -> None:
            client.close()
        app.on_cleanup.append(close)
    return client
