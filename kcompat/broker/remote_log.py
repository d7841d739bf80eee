"""The remote log manager (KIP-405; Kafka ``RemoteLogManager``'s copier and expiration tasks):
every ``remote.log.manager.task.interval.ms``, for each hosted partition of a topic with
``remote.storage.enable=true``:

- as its leader: delete what an interrupted copy left (``COPY_SEGMENT_STARTED`` segments without
  a ``COPY_SEGMENT_FINISHED``; a deposed leader's, or this broker's before a crash), then copy each
  closed segment wholly below the last stable offset (hence the high watermark) and above the
  highest copied offset, oldest first, once: ``COPY_SEGMENT_STARTED`` (fresh segment id) ->
  upload -> ``COPY_SEGMENT_FINISHED``; then apply the total retention (``retention.ms``,
  ``retention.bytes``, the log start offset) to remote segments and raise the log start offset
  past those deleted;
- as a follower: learn the highest copied offset, so that local retention may delete what is
  in remote storage.

The partition's log applies local retention itself (:meth:`kcompat.log.log.Log.apply_retention`).
A failure of the store or the metadata topic backs that partition off exponentially
(``remote.log.manager.task.retry.backoff.ms`` .. ``.max.ms``, ``...jitter``); produce and fetch of
local data never wait for any of this. When a tiered topic is deleted, its former leader deletes
its remote segments (``RemotePartitionDeleteMetadataRecord`` MARKED -> ... -> FINISHED).
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from typing import TYPE_CHECKING

from kcompat.broker.remote_log_metadata import RemoteLogMetadataError, RemoteLogMetadataManager
from kcompat.log.leader_epoch import EpochEntry, format_leader_epoch_checkpoint, parse_leader_epoch_checkpoint
from kcompat.log.snapshots import snapshot_path
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.tiered.metadata import PartitionDeleteState, RemoteSegment, SegmentState, partition_delete_record
from kcompat.tiered.reader import RemoteLogReader
from kcompat.tiered.storage import IndexType, RemoteStorageError, RemoteStorageManager, SegmentData, SegmentKey

if TYPE_CHECKING:   # types only: the objects are built by kcompat.broker.broker
    from kcompat.broker.broker_context import BrokerContext
    from kcompat.isr.replica_manager import ReplicaManager

log = logging.getLogger("kcompat.broker.remote_log")

RETRYABLE = (RemoteStorageError, RemoteLogMetadataError)


def segment_leader_epochs(entries: list[EpochEntry], start: int, end: int) -> dict[int, int]:
    """Epoch -> first offset within ``[start, end]`` of each epoch covering part of it (Kafka's
    ``RemoteLogSegmentMetadata.segmentLeaderEpochs``)."""
    out: dict[int, int] = {}
    for i, e in enumerate(entries):
        nxt = entries[i + 1].start_offset if i + 1 < len(entries) else None
        if e.start_offset > end or (nxt is not None and nxt <= start):
            continue
        out[e.epoch] = max(e.start_offset, start)
    return out


class RemoteLogManager:
    """Tiered storage of this broker's partitions (Kafka's ``RemoteLogManager``).

    - ``context``: this node's id (the broker id in segment metadata), config
      (``remote.log.manager.*``, ``remote.fetch.max.wait.ms``), clock (ms) and shutdown flag
      (the periodic task ends with it);
    - ``replica_manager``: the partitions whose topics have ``remote.storage.enable``;
    - ``storage``: the backend; ``metadata``: the metadata manager.
    """

    def __init__(self, context: BrokerContext, replica_manager: ReplicaManager, storage: RemoteStorageManager,
                 metadata: RemoteLogMetadataManager) -> None:
        self.context = context
        self.replica_manager = replica_manager
        self.storage = storage
        self.metadata = metadata
        self.reader = RemoteLogReader(storage)
        cfg = context.config
        self.interval_ms = cfg.get("remote.log.manager.task.interval.ms")
        self.backoff_ms = cfg.get("remote.log.manager.task.retry.backoff.ms")
        self.backoff_max_ms = cfg.get("remote.log.manager.task.retry.backoff.max.ms")
        self.jitter = cfg.get("remote.log.manager.task.retry.jitter")
        self.fetch_max_wait_ms = cfg.get("remote.fetch.max.wait.ms")
        self._failures: dict[tuple[str, int], tuple[int, int]] = {}   # -> (attempts, next attempt ms)
        self._task: asyncio.Task | None = None
        self._deletions: set[asyncio.Task] = set()
        self._wake = asyncio.Event()

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the periodic task."""
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        """Cancel the task and pending deletions; close the store and the metadata clients."""
        for t in [self._task, *self._deletions]:
            if t is not None:
                t.cancel()
        for t in [self._task, *self._deletions]:
            if t is not None:
                try:
                    await t
                except (asyncio.CancelledError, Exception):
                    pass
        self.metadata.close()
        await self.storage.close()

    def wake(self) -> None:
        """Run a round now (tests, and after a leadership change)."""
        self._wake.set()

    async def _run(self) -> None:
        while not self.context.is_shutting_down():
            try:
                await asyncio.wait_for(self._wake.wait(), self.interval_ms / 1000)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()
            try:
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("remote log manager round failed")

    def _tiered_partitions(self) -> list:
        return [p for p in list(self.replica_manager.partitions.values())
                if p.log.config.remote_storage_enable and not p.log.closed]

    async def run_once(self) -> None:
        """One round over every tiered partition hosted here."""
        partitions = self._tiered_partitions()
        if not partitions:
            return
        try:
            await self.metadata.ensure_topic()
        except RemoteLogMetadataError as e:
            log.warning("remote log metadata topic not ready: %s", e)
            return
        now = self.context.now_ms()
        for p in partitions:
            key = (p.topic, p.partition_id)
            attempts, due = self._failures.get(key, (0, 0))
            if now < due or p.log.closed:
                continue
            try:
                state = await self.metadata.sync(p.topic_id, p.partition_id)
                if p.is_leader:
                    await self._copy(p)
                    await self._expire(p)
                else:
                    p.log.update_highest_offset_in_remote_storage(state.highest_copied_offset())
                self._failures.pop(key, None)
            except RETRYABLE as e:
                attempts += 1
                delay = min(self.backoff_max_ms, self.backoff_ms * 2 ** (attempts - 1))
                delay = int(delay * (1 + random.uniform(-self.jitter, self.jitter)))
                self._failures[key] = (attempts, self.context.now_ms() + delay)
                log.warning("%s-%d: remote log task failed (attempt %d, retrying in %d ms): %s", p.topic,
                            p.partition_id, attempts, delay, e)

    # -- reading ----------------------------------------------------------------------------------

    def is_remote_offset(self, p, offset: int) -> bool:
        """True if a consumer's fetch at ``offset`` must read remote segments: the partition is
        tiered and ``offset`` is in ``[log start offset, local log start offset)``."""
        return p.log.config.remote_storage_enable and p.log.log_start_offset <= offset < p.log.local_log_start_offset

    async def read(self, p, offset: int, max_bytes: int, *, min_one_batch: bool, read_committed: bool
                   ) -> tuple[bytes, list[tuple[int, int]] | None]:
        """A consumer's read below the local log start offset (Kafka ``RemoteLogManager.read``):
        ``(whole batches of one remote segment, aborted transactions as (producer id, first
        offset) for read_committed else None)``. Raises KafkaError(OFFSET_OUT_OF_RANGE) if no
        remote segment holds ``offset`` or anything after it, RemoteStorageError if the store
        fails."""
        state = self.metadata.state(p.topic_id, p.partition_id)
        seg = state.segment_for(offset)
        if seg is None or seg.end_offset < p.log.log_start_offset:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"Offset {offset} of {p.topic}-{p.partition_id} is in no remote segment")
        data = await self.reader.read(seg, max(offset, seg.start_offset), max_bytes, min_one_batch=min_one_batch)
        if not read_committed:
            return data, None
        upper = p.last_stable_offset
        aborted = await self.reader.aborted_transactions(seg, offset, upper)
        aborted += p.log.collect_aborted_txns(p.log.local_log_start_offset, upper)
        return data, [(a.producer_id, a.first_offset) for a in aborted]

    async def aux_state(self, p, offset: int) -> tuple[bytes | None, list[EpochEntry]]:
        """What a follower restarting its log at the leader's local log start ``offset`` needs of
        the remote segment ending just below it (Kafka ``buildRemoteLogAuxState``): its producer
        snapshot (None if empty) and leader-epoch checkpoint entries. ``(None, [])`` when no
        remote segment ends there. Raises RemoteStorageError / RemoteLogMetadataError."""
        state = await self.metadata.sync(p.topic_id, p.partition_id)
        seg = next((s for s in reversed(state.copied()) if s.end_offset == offset - 1), None)
        if seg is None:
            return None, []
        snapshot = await self.storage.fetch_index(seg.key, IndexType.PRODUCER_SNAPSHOT)
        epochs = parse_leader_epoch_checkpoint(await self.storage.fetch_index(seg.key, IndexType.LEADER_EPOCH))
        return snapshot or None, epochs

    async def offset_for_timestamp(self, p, timestamp_ms: int) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record at or after the log start offset in a
        remote segment with a timestamp >= ``timestamp_ms``, None if the remote segments have
        none (Kafka ``RemoteLogManager.findOffsetByTimestamp``)."""
        state = self.metadata.state(p.topic_id, p.partition_id)
        start = p.log.log_start_offset
        for seg in state.copied():
            if seg.max_timestamp_ms < timestamp_ms or seg.end_offset < start:
                continue
            found = await self.reader.offset_for_timestamp(seg, timestamp_ms, start)
            if found is not None:
                return found
        return None

    def remote_size_in_bytes(self, p) -> int:
        """Bytes of the partition's readable remote segments (Kafka's RemoteLogSizeBytes)."""
        return self.metadata.state(p.topic_id, p.partition_id).size_in_bytes()

    # -- copying ----------------------------------------------------------------------------------

    async def _delete_segment(self, seg: RemoteSegment) -> None:
        node, now_ms = self.context.node_id, self.context.now_ms
        if seg.state != SegmentState.DELETE_SEGMENT_STARTED:
            await self.metadata.publish(seg.update_record(SegmentState.DELETE_SEGMENT_STARTED, node, now_ms()))
        await self.storage.delete_log_segment_data(seg.key)
        await self.metadata.publish(seg.update_record(SegmentState.DELETE_SEGMENT_FINISHED, node, now_ms()))

    async def _clean_unfinished(self, p) -> None:
        """Delete segments an interrupted copy or deletion left, and the later of two finished
        copies of the same segment (two brokers that both believed they led)."""
        state = self.metadata.state(p.topic_id, p.partition_id)
        for seg in state.in_state(SegmentState.COPY_SEGMENT_STARTED, SegmentState.DELETE_SEGMENT_STARTED):
            log.info("%s-%d: deleting remote segment %s at offset %d left %s", p.topic, p.partition_id,
                     seg.key.segment_id, seg.start_offset,
                     "half copied" if seg.state == SegmentState.COPY_SEGMENT_STARTED else "half deleted")
            await self._delete_segment(seg)
        seen: dict[tuple[int, int], RemoteSegment] = {}
        for seg in sorted(state.copied(), key=lambda s: (s.event_timestamp_ms, str(s.key.segment_id))):
            first = seen.setdefault((seg.start_offset, seg.end_offset), seg)
            if first is not seg:
                log.warning("%s-%d: deleting duplicate remote segment %s (offsets %d-%d, also in %s)", p.topic,
                            p.partition_id, seg.key.segment_id, seg.start_offset, seg.end_offset, first.key.segment_id)
                await self._delete_segment(seg)

    async def _copy(self, p) -> None:
        await self._clean_unfinished(p)
        state = self.metadata.state(p.topic_id, p.partition_id)
        highest = state.highest_copied_offset()
        p.log.update_highest_offset_in_remote_storage(highest)
        while p.is_leader and not p.log.closed:
            segs = p.log.segments
            upper = p.last_stable_offset
            todo = None
            for seg, nxt in zip(segs, segs[1:]):
                if nxt.base_offset - 1 > highest and seg.size > 0:
                    if nxt.base_offset <= upper:
                        todo = (seg, nxt.base_offset)
                    break
            if todo is None:
                return
            seg, end = todo
            await self._copy_segment(p, seg, end)
            highest = end - 1
            p.log.update_highest_offset_in_remote_storage(highest)

    async def _copy_segment(self, p, seg, end: int) -> None:
        log_ = p.log
        entries = [e for e in log_.leader_epoch_cache.entries if e.start_offset < end]
        key = SegmentKey(p.topic, p.topic_id, p.partition_id, seg.base_offset, uuid.uuid4())
        now = self.context.now_ms()
        meta = RemoteSegment(key, end - 1, self.context.node_id, seg.largest_timestamp(), now,
                             segment_leader_epochs(entries, seg.base_offset, end - 1), seg.size)
        txn = seg.txn_index.path if seg.txn_index.exists() else None
        snap = snapshot_path(log_.directory, end)
        data = SegmentData(seg.log_path, seg.offset_index.path, seg.time_index.path, txn,
                           snap if snap.exists() else None, format_leader_epoch_checkpoint(entries))
        await self.metadata.publish(meta.to_record())
        await self.storage.copy_log_segment_data(key, data)
        await self.metadata.publish(meta.update_record(SegmentState.COPY_SEGMENT_FINISHED, self.context.node_id,
                                                       self.context.now_ms()))
        log.info("%s-%d: copied segment %d-%d (%d bytes) to remote storage as %s", p.topic, p.partition_id,
                 seg.base_offset, end - 1, seg.size, key.segment_id)

    # -- total retention --------------------------------------------------------------------------

    async def _expire(self, p) -> None:
        """Kafka ``RLMExpirationTask``: remote segments below the log start offset, older than
        ``retention.ms`` or beyond ``retention.bytes`` (counting the local segments not yet
        copied) are deleted oldest first; the log start offset then moves past them."""
        cfg = p.log.config
        state = self.metadata.state(p.topic_id, p.partition_id)
        copied = state.copied()
        if not copied:
            return
        now = self.context.now_ms()
        highest = state.highest_copied_offset()
        local_only = sum(s.size for s in p.log.segments if s.base_offset > highest)
        excess = (sum(s.size for s in copied) + local_only - cfg.retention_bytes) if cfg.retention_bytes >= 0 else -1
        start = p.log.log_start_offset
        doomed = []
        for seg in copied:
            if seg.end_offset < start:
                doomed.append(seg)
            elif cfg.retention_ms >= 0 and \
                    (seg.max_timestamp_ms if seg.max_timestamp_ms >= 0 else seg.event_timestamp_ms) <= now - cfg.retention_ms:
                # a segment without record timestamps ages from its copy (Kafka falls back to the
                # file's modification time for local segments)
                doomed.append(seg)
            elif excess >= seg.size:
                doomed.append(seg)
            else:
                break
            excess -= seg.size
        if not doomed:
            return
        new_start = max(s.end_offset for s in doomed) + 1
        for seg in doomed:
            await self._delete_segment(seg)
        if new_start > p.log.log_start_offset and not p.log.closed:
            p.log.delete_records_before(min(new_start, p.high_watermark))
        log.info("%s-%d: deleted %d remote segment(s) by retention; log start offset %d", p.topic, p.partition_id,
                 len(doomed), p.log.log_start_offset)

    # -- topic deletion ---------------------------------------------------------------------------

    def on_partitions_deleted(self, partitions: list) -> None:
        """Tiered partitions this broker led were deleted with their topic: delete their remote
        segments in the background (retried with back-off until done or the broker stops)."""
        for p in partitions:
            if p.log.config.remote_storage_enable and p.is_leader:
                task = asyncio.ensure_future(self._delete_partition(p.topic, p.topic_id, p.partition_id))
                self._deletions.add(task)
                task.add_done_callback(self._deletions.discard)

    async def _delete_partition(self, topic: str, topic_id: uuid.UUID, partition: int) -> None:
        attempts = 0
        node, now_ms = self.context.node_id, self.context.now_ms
        while not self.context.is_shutting_down():
            try:
                state = await self.metadata.sync(topic_id, partition)
                await self.metadata.publish(partition_delete_record(
                    topic, topic_id, partition, PartitionDeleteState.DELETE_PARTITION_MARKED, node, now_ms()))
                await self.metadata.publish(partition_delete_record(
                    topic, topic_id, partition, PartitionDeleteState.DELETE_PARTITION_STARTED, node, now_ms()))
                for seg in state.in_state(*SegmentState):
                    await self._delete_segment(seg)
                await self.metadata.publish(partition_delete_record(
                    topic, topic_id, partition, PartitionDeleteState.DELETE_PARTITION_FINISHED, node, now_ms()))
                self.metadata.forget(topic_id, partition)
                log.info("%s-%d: deleted the remote segments of the deleted partition", topic, partition)
                return
            except RETRYABLE as e:
                attempts += 1
                delay = min(self.backoff_max_ms, self.backoff_ms * 2 ** (attempts - 1))
                log.warning("%s-%d: deleting remote segments failed (attempt %d): %s", topic, partition, attempts, e)
                await asyncio.sleep(delay / 1000)
