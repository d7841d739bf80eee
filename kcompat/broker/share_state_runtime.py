"""Runs the share coordinator (:mod:`kcompat.share.state_coordinator`) inside the broker over
``__share_group_state`` (Kafka's ShareCoordinatorService over its CoordinatorRuntime).

See :mod:`kcompat.broker.coordinator_runtime` for the mechanics (topic creation on the first
FindCoordinator of a SHARE key, chunked loading, records committed before replies, unloading when
leadership moves). Specific to the share coordinator, as in Kafka 4.3:

- the topic: ``share.coordinator.state.topic.num.partitions`` partitions,
  ``share.coordinator.state.topic.replication.factor`` replicas, ``cleanup.policy=delete``,
  ``compression.type=producer``, ``segment.bytes=share.coordinator.state.topic.segment.bytes``
  (ShareCoordinatorService.shareGroupStateTopicConfigs; no min.insync.replicas override);
- writes go with acks=-1 (NOT_ENOUGH_REPLICAS before the append when the ISR is below the topic's
  ``min.insync.replicas``) and wait up to ``share.coordinator.write.timeout.ms``; every reply,
  reads included, waits for the pending writes of its keys' partitions (Kafka runs reads as write
  operations: the answer may show state whose records are not committed yet);
- pruning instead of compaction: every ``share.coordinator.state.topic.prune.interval.ms`` each
  partition this broker leads gets its records below the coordinator's last redundant offset
  deleted (DeleteRecords on the leader; followers follow the log start offset), at most once per
  offset; a load skips records below the log start offset;
- cold keys are snapshotted again every ``share.coordinator.cold.partition.snapshot.interval.ms``
  (the coordinator's timer, :meth:`ShareStateCoordinator.poll`).

One method per API; the handlers and :class:`kcompat.broker.share_persister.SharePersister` (for
keys whose coordinator is this broker) call them with the decoded request and its version; each
returns a future of the response.
"""

from __future__ import annotations

import asyncio
import logging

from kcompat.broker.coordinator_runtime import CoordinatorRuntime, CoordinatorServices
from kcompat.protocol import records as rb
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.share.state_coordinator import (
    SHARE_GROUP_STATE_TOPIC, ShareKey, ShareStateConfig, ShareStateCoordinator,
)

log = logging.getLogger("kcompat.share")


def share_state_config(cfg) -> ShareStateConfig:
    return ShareStateConfig(
        num_partitions=cfg.get("share.coordinator.state.topic.num.partitions"),
        snapshot_update_records_per_snapshot=cfg.get("share.coordinator.snapshot.update.records.per.snapshot"),
        cold_partition_snapshot_interval_ms=cfg.get("share.coordinator.cold.partition.snapshot.interval.ms"))


class ShareStateRuntime(CoordinatorRuntime):
    """The broker's share coordinator service, over the broker's :class:`CoordinatorServices`."""

    TOPIC = SHARE_GROUP_STATE_TOPIC
    REPLIES_WAIT_FOR_WRITES = True

    def __init__(self, services: CoordinatorServices) -> None:
        self.config = share_state_config(services.config)
        image = services.image

        def exists(topic_id, partition: int) -> bool:
            t = image.topics_by_id.get(topic_id)
            return t is not None and partition in t.partitions

        super().__init__(services, ShareStateCoordinator(self.config, topic_partition_exists=exists))
        self._prune_task: asyncio.Task | None = None
        self._last_pruned: dict[int, int] = {}

    # -- the share-state APIs (one method per API) ------------------------------------------------

    def _call(self, op, req, version: int) -> asyncio.Future:
        partitions = set()
        for t in req.topics or ():
            for pd in t.partitions or ():
                partitions.add(self.coordinator.partition_for(ShareKey(req.group_id, t.topic_id, pd.partition)))
        return self.run(lambda reply_to, now: op(reply_to, req, version, now), partitions)

    def initialize_state(self, req, version: int) -> asyncio.Future:
        return self._call(self.coordinator.initialize_state, req, version)

    def read_state(self, req, version: int) -> asyncio.Future:
        return self._call(self.coordinator.read_state, req, version)

    def write_state(self, req, version: int) -> asyncio.Future:
        return self._call(self.coordinator.write_state, req, version)

    def delete_state(self, req, version: int) -> asyncio.Future:
        return self._call(self.coordinator.delete_state, req, version)

    def read_state_summary(self, req, version: int) -> asyncio.Future:
        return self._call(self.coordinator.read_state_summary, req, version)

    def on_topics_deleted(self, topic_ids) -> None:
        """Topics were deleted: tombstone their share state (Kafka's onTopicsDeleted)."""
        self.apply(self.coordinator.on_topics_deleted(topic_ids, self.services.now_ms()))

    # -- CoordinatorRuntime hooks -----------------------------------------------------------------

    def topic_spec(self) -> tuple[int, str, dict[str, str]]:
        return (self.config.num_partitions, "share.coordinator.state.topic.replication.factor",
                {"cleanup.policy": "delete", "compression.type": "producer",
                 "segment.bytes": str(self.services.config.get("share.coordinator.state.topic.segment.bytes"))})

    def write_timeout_ms(self, records) -> int:
        return self.services.config.get("share.coordinator.write.timeout.ms")

    def append_records(self, p, records: list, now: int) -> None:
        """acks=-1: NOT_ENOUGH_REPLICAS before appending if the ISR is below ``min.insync.replicas``;
        each record learns its offset (pruning tracks the offset of every snapshot)."""
        rs = p.replica_state
        if rs is not None:
            p.check_min_isr(-1, rs.min_insync_replicas)
        base = p.append_internal(rb.build_batch([(now, r.key, r.value, ()) for r in records]), now)
        for i, r in enumerate(records):
            r.offset = base + i

    def load_coordinator(self, partition: int, entries: list):
        """Records below the log start offset were pruned (a batch read may begin before it)."""
        p = self.leader_partition(partition)
        start = p.log_start_offset if p is not None else 0
        return self.coordinator.load(partition, [e for e in entries if e[0] >= start], self.services.now_ms())

    def on_write_failure(self, result, failed: list, error: ErrorCode):
        return self.coordinator.write_failed(result, failed, int(error), self.services.now_ms())

    def before_unload(self, partition: int) -> None:
        self._last_pruned.pop(partition, None)

    # -- lifecycle and pruning --------------------------------------------------------------------

    def start(self) -> None:
        super().start()
        self._prune_task = asyncio.ensure_future(self._prune_loop())

    def stop(self) -> None:
        if self._prune_task is not None:
            self._prune_task.cancel()
            self._prune_task = None
        super().stop()

    async def _prune_loop(self) -> None:
        while True:
            await asyncio.sleep(self.services.config.get("share.coordinator.state.topic.prune.interval.ms") / 1000.0)
            try:
                self.prune()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("pruning %s failed", self.TOPIC)

    def prune(self) -> dict[int, int]:
        """Delete the redundant records of every partition this broker leads (Kafka's
        performRecordPruning): ``{partition: new log start offset}`` of those pruned now."""
        pruned = {}
        for partition in sorted(self.coordinator.owned_partitions()):
            offset = self.coordinator.last_redundant_offset(partition)
            p = self.leader_partition(partition)
            if offset is None or p is None or self._last_pruned.get(partition) == offset:
                continue
            offset = min(offset, p.high_watermark)
            if offset <= p.log_start_offset:
                self._last_pruned[partition] = offset
                continue
            try:
                low = p.delete_records(offset)
            except KafkaError as e:
                log.info("pruning %s-%d below offset %d failed: %s", self.TOPIC, partition, offset, e)
                continue
            log.info("pruned %s-%d below offset %d", self.TOPIC, partition, low)
            self._last_pruned[partition] = offset
            pruned[partition] = low
        if pruned:
            self.services.log_manager.checkpoint(force=False)
        return pruned
