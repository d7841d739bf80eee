"""The topic-based remote log metadata manager (KIP-405; Kafka
``TopicBasedRemoteLogMetadataManager``): remote segment metadata lives in the internal
``__remote_log_metadata`` topic, one partition per user partition by
:func:`kcompat.tiered.metadata.metadata_partition`, records with a null key and the framed value of
:mod:`kcompat.tiered.metadata`.

A leader publishes with Produce (acks=all) to the metadata partition's leader and applies the
record to its own view once acknowledged; every broker reads the metadata partitions of the
partitions it replicates with Fetch (from where it left off, up to the high watermark) before it
acts on them, so a new leader after a failover sees everything the old one published. Replaying
a record twice is harmless (:class:`~kcompat.tiered.metadata.RemotePartitionState`).

The topic is created on first use with ``rlmm.config.remote.log.metadata.topic.num.partitions``
(50), ``...replication.factor`` (3, capped at the live brokers in a single-controller cluster, as
kcompat's other internal topics) and ``...retention.ms`` (-1).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from kcompat.broker.inter_broker import inter_broker_clients
from kcompat.config.remote_defs import RLMM_DEFAULTS
from kcompat.kraft.controller import NewTopic
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.fetch import FetchRequest
from kcompat.protocol.messages.produce import ProduceRequest
from kcompat.protocol.primitives import DecodeError
from kcompat.protocol.records import build_batch, iter_batches, iter_records
from kcompat.tiered.metadata import REMOTE_LOG_METADATA_TOPIC, RemotePartitionState, decode, encode, \
    metadata_partition, record_partition

if TYPE_CHECKING:   # types only: the objects are built by kcompat.broker.broker
    from kcompat.broker.broker_context import BrokerContext
    from kcompat.kraft.controller import TopicResult

log = logging.getLogger("kcompat.broker.remote_log")

PRODUCE_VERSION = 9
FETCH_VERSION = 12
FETCH_MAX_BYTES = 4 * 1024 * 1024


class RemoteLogMetadataError(Exception):
    """The metadata topic could not be written or read now (no leader, a timeout, an error
    code); the caller retries later."""


class RemoteLogMetadataManager:
    """The metadata of this broker's remote segments, kept in ``__remote_log_metadata``.

    - ``context``: this node's id, config (the ``rlmm.config.`` settings), metadata image (the
      metadata partitions' leaders and their inter-broker endpoints) and clock (ms, the records'
      timestamps);
    - ``live_broker_ids()``: ids of the registered, unfenced brokers (the topic's replication
      factor is capped at their number with a single controller);
    - ``voter_count()``: voters of the KRaft quorum;
    - ``create_topics(new_topics)``: CreateTopics through the active controller, one
      ``TopicResult`` per topic.
    """

    def __init__(self, context: BrokerContext, *, live_broker_ids: Callable[[], list[int]],
                 voter_count: Callable[[], int],
                 create_topics: Callable[[list[NewTopic]], Awaitable[list[TopicResult]]]) -> None:
        self.context = context
        self.live_broker_ids = live_broker_ids
        self.voter_count = voter_count
        self.create_topics = create_topics
        cfg = context.config
        prefix = cfg.get("remote.log.metadata.manager.impl.prefix") or ""

        def setting(name: str) -> int:
            raw = cfg.get(prefix + name) if prefix else None
            return int(raw) if raw is not None else RLMM_DEFAULTS[name]
        self.num_partitions = setting("remote.log.metadata.topic.num.partitions")
        self.replication_factor = setting("remote.log.metadata.topic.replication.factor")
        self.retention_ms = setting("remote.log.metadata.topic.retention.ms")
        self.consume_wait_ms = setting("remote.log.metadata.consume.wait.ms")
        self.clients = inter_broker_clients(cfg, context.image, f"kcompat-rlmm-{context.node_id}")
        self._states: dict[tuple[uuid.UUID, int], RemotePartitionState] = {}
        self._positions: dict[int, int] = {}          # metadata partition -> next offset to read
        self._sync_locks: dict[int, asyncio.Lock] = {}

    # -- the topic ------------------------------------------------------------------------------

    async def ensure_topic(self) -> None:
        """Create ``__remote_log_metadata`` if missing. Raises RemoteLogMetadataError if it
        cannot be created now."""
        if REMOTE_LOG_METADATA_TOPIC in self.context.image.topics:
            return
        rf = min(self.replication_factor, max(1, len(self.live_broker_ids())))
        if rf < self.replication_factor and self.voter_count() > 1:
            raise RemoteLogMetadataError(
                f"not creating {REMOTE_LOG_METADATA_TOPIC}: replication factor {self.replication_factor} but only "
                f"{len(self.live_broker_ids())} broker(s) are registered")
        topic = NewTopic(REMOTE_LOG_METADATA_TOPIC, num_partitions=self.num_partitions, replication_factor=rf,
                         configs={"retention.ms": str(self.retention_ms), "cleanup.policy": "delete"})
        result = (await self.create_topics([topic]))[0]
        if result.error not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            raise RemoteLogMetadataError(f"creating {REMOTE_LOG_METADATA_TOPIC}: {result.error.name} {result.message}")
        if result.error == ErrorCode.NONE:
            log.info("created %s with %d partitions", REMOTE_LOG_METADATA_TOPIC, self.num_partitions)

    def _leader_of(self, mp: int) -> int:
        topic = self.context.image.topics.get(REMOTE_LOG_METADATA_TOPIC)
        if topic is None or mp not in topic.partitions:
            raise RemoteLogMetadataError(f"{REMOTE_LOG_METADATA_TOPIC} does not exist yet")
        leader = topic.partitions[mp].leader
        if leader is None or leader < 0:
            raise RemoteLogMetadataError(f"{REMOTE_LOG_METADATA_TOPIC}-{mp} has no leader")
        return leader

    def partition_of(self, topic_id: uuid.UUID, partition: int) -> int:
        """The metadata partition of a user partition."""
        return metadata_partition(topic_id, partition, self.num_partitions)

    # -- state ------------------------------------------------------------------------------------

    def state(self, topic_id: uuid.UUID, partition: int) -> RemotePartitionState:
        """What has been read and published so far about one user partition."""
        return self._states.setdefault((topic_id, partition), RemotePartitionState())

    def forget(self, topic_id: uuid.UUID, partition: int) -> None:
        """Drop the in-memory state of a deleted partition."""
        self._states.pop((topic_id, partition), None)

    def _apply(self, record) -> None:
        self.state(*record_partition(record)).apply(record)

    # -- writing and reading ----------------------------------------------------------------------

    async def publish(self, record) -> None:
        """Append one record to its metadata partition (acks=all) and apply it. Raises
        RemoteLogMetadataError if the write was not acknowledged."""
        topic_id, partition = record_partition(record)
        mp = self.partition_of(topic_id, partition)
        leader = self._leader_of(mp)
        batch = build_batch([(self.context.now_ms(), None, encode(record), ())])
        req = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=self.consume_wait_ms, topic_data=[
            ProduceRequest.TopicProduceData(name=REMOTE_LOG_METADATA_TOPIC, partition_data=[
                ProduceRequest.PartitionProduceData(index=mp, records=batch)])])
        try:
            resp = await self.clients.send(leader, req, PRODUCE_VERSION, timeout_s=self.consume_wait_ms / 1000)
        except (ConnectionError, OSError, asyncio.TimeoutError) as e:
            self.clients.close_node(leader)
            raise RemoteLogMetadataError(f"publishing to {REMOTE_LOG_METADATA_TOPIC}-{mp} on node {leader}: {e}") from e
        code = resp.responses[0].partition_responses[0].error_code
        if code != 0:
            raise RemoteLogMetadataError(f"publishing to {REMOTE_LOG_METADATA_TOPIC}-{mp}: {ErrorCode(code).name}")
        self._apply(record)

    async def sync(self, topic_id: uuid.UUID, partition: int) -> RemotePartitionState:
        """Read the metadata partition of a user partition up to its high watermark, applying
        every record; returns the partition's state. Raises RemoteLogMetadataError."""
        mp = self.partition_of(topic_id, partition)
        lock = self._sync_locks.setdefault(mp, asyncio.Lock())
        async with lock:
            await self._read_to_end(mp)
        return self.state(topic_id, partition)

    async def _read_to_end(self, mp: int) -> None:
        while True:
            leader = self._leader_of(mp)
            position = self._positions.get(mp, 0)
            req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=FETCH_MAX_BYTES,
                               isolation_level=0, session_id=0, session_epoch=-1, topics=[
                                   FetchRequest.FetchTopic(topic=REMOTE_LOG_METADATA_TOPIC, partitions=[
                                       FetchRequest.FetchPartition(partition=mp, current_leader_epoch=-1,
                                                                   fetch_offset=position, log_start_offset=-1,
                                                                   partition_max_bytes=FETCH_MAX_BYTES)])],
                               forgotten_topics_data=[], rack_id="")
            try:
                resp = await self.clients.send(leader, req, FETCH_VERSION, timeout_s=30)
            except (ConnectionError, OSError, asyncio.TimeoutError) as e:
                self.clients.close_node(leader)
                raise RemoteLogMetadataError(f"reading {REMOTE_LOG_METADATA_TOPIC}-{mp} from node {leader}: {e}") from e
            pd = resp.responses[0].partitions[0]
            if pd.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and pd.log_start_offset > position:
                self._positions[mp] = pd.log_start_offset   # retention.ms set on the topic: start over there
                continue
            if pd.error_code != 0:
                raise RemoteLogMetadataError(f"reading {REMOTE_LOG_METADATA_TOPIC}-{mp}: {ErrorCode(pd.error_code).name}")
            data = pd.records or b""
            for pos, h in iter_batches(data):
                if pos + h.size > len(data):
                    break
                for r in iter_records(data[pos:pos + h.size]):
                    if r.offset < position or r.value is None:
                        continue
                    try:
                        self._apply(decode(r.value))
                    except (DecodeError, ValueError) as e:
                        log.warning("%s-%d offset %d: skipping an undecodable record: %s",
                                    REMOTE_LOG_METADATA_TOPIC, mp, r.offset, e)
                position = max(position, h.last_offset + 1)
            self._positions[mp] = position
            if position >= pd.high_watermark or not data:
                return

    def close(self) -> None:
        """Close the connections."""
        self.clients.close()
