"""Runs the group coordinator (:mod:`kcompat.group`) inside the broker over ``__consumer_offsets``.

See :mod:`kcompat.broker.coordinator_runtime` for the mechanics (topic creation on the first
FindCoordinator as Kafka does, chunked loading, records before replies, timers).

Transactional offsets (TxnOffsetCommit): records carrying a producer id are appended in a
transactional batch of that producer and epoch, and loading hands the coordinator their producer
id and the COMMIT/ABORT markers (:class:`kcompat.group.TxnMarker`) in log order.
"""

from __future__ import annotations

import itertools

from kcompat.broker.coordinator_runtime import CoordinatorRuntime
from kcompat.group import GroupConfig, GroupCoordinator, TxnMarker
from kcompat.protocol import records as rb

OFFSETS_TOPIC = "__consumer_offsets"


def group_config(cfg) -> GroupConfig:
    return GroupConfig(
        min_session_timeout_ms=cfg.get("group.min.session.timeout.ms"),
        max_session_timeout_ms=cfg.get("group.max.session.timeout.ms"),
        initial_rebalance_delay_ms=cfg.get("group.initial.rebalance.delay.ms"),
        max_size=cfg.get("group.max.size"),
        offsets_retention_ms=cfg.get("offsets.retention.minutes") * 60_000,
        offsets_retention_check_interval_ms=cfg.get("offsets.retention.check.interval.ms"),
        offset_metadata_max_bytes=cfg.get("offset.metadata.max.bytes"),
        num_partitions=cfg.get("offsets.topic.num.partitions"))


class GroupRuntime(CoordinatorRuntime):
    """The broker's group coordinator service. ``broker`` is the :class:`Broker`."""

    TOPIC = OFFSETS_TOPIC

    def __init__(self, broker) -> None:
        self.config = group_config(broker.config)
        super().__init__(broker, GroupCoordinator(self.config, partition_exists=self._partition_exists,
                                                  txn_verifier=self._verify_txn))

    def _partition_exists(self, topic: str, partition: int) -> bool:
        t = self.broker.image.topics.get(topic)
        return t is not None and partition in t.partitions

    def _verify_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, partition: int) -> int:
        """KIP-890 verification of a TxnOffsetCommit, as the produce path does it
        (``transaction.partition.verification.enable``)."""
        verifier = self.broker.replica_manager.txn_verifier
        if verifier is None:
            return 0
        return verifier(transactional_id, producer_id, producer_epoch, self.TOPIC, partition)

    def append_records(self, partition: int, records: list, now: int) -> None:
        """One batch per run of records of the same producer, in order: transactional offset
        commits in a transactional batch of their producer id and epoch (base sequence 0, as
        Kafka's GroupMetadataManager.storeOffsets). Each record learns its log offset."""
        target = self.broker.replica_manager.get(self.TOPIC, partition)
        for (producer_id, producer_epoch), run in itertools.groupby(
                records, key=lambda r: (r.producer_id, r.producer_epoch)):
            run = list(run)
            entries = [(now, r.key, r.value, ()) for r in run]
            if producer_id >= 0:
                batch = rb.build_batch(entries, producer_id=producer_id, producer_epoch=producer_epoch,
                                       base_sequence=0, transactional=True)
            else:
                batch = rb.build_batch(entries)
            base = target.append_internal(batch, now)
            for i, r in enumerate(run):
                r.offset = base + i

    def load_entry(self, rec: rb.Record, header: rb.BatchHeader):
        if rec.key is None:
            return None
        if header.is_transactional and header.producer_id >= 0:
            return (rec.offset, rec.key, rec.value, header.producer_id)
        return (rec.offset, rec.key, rec.value)

    def load_control(self, partition: int, header: rb.BatchHeader, rec: rb.Record, entries: list) -> None:
        try:
            kind = rb.control_type(rec)
        except rb.CorruptRecordError:
            return
        if kind in (rb.CONTROL_COMMIT, rb.CONTROL_ABORT):
            entries.append(TxnMarker(rec.offset, header.producer_id, kind == rb.CONTROL_COMMIT))

    def topic_spec(self) -> tuple[int, str, dict[str, str]]:
        return (self.config.num_partitions, "offsets.topic.replication.factor",
                {"cleanup.policy": "compact", "compression.type": "producer",
                 "segment.bytes": str(self.broker.config.get("offsets.topic.segment.bytes"))})

    def submit(self, method: str, ctx, req, *extra):
        if method == "join_group":
            host = ctx.peer.rsplit(":", 1)[0]
            extra = (ctx.client_id or "", f"/{host}")
        return super().submit(method, ctx, req, *extra)

    def on_partitions_deleted(self, partitions: list[tuple[str, int]]) -> None:
        self.apply(self.coordinator.on_partitions_deleted(partitions, self.broker.now_ms()))

    def write_txn_marker(self, partition: int, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                         commit: bool) -> None:
        """A transaction marker for ``__consumer_offsets``-``partition``: written to the log, then
        the producer's transactional offsets there become committed (COMMIT) or are dropped
        (ABORT). Raises KafkaError as :meth:`Partition.append_marker` does."""
        p = self.broker.replica_manager.get(self.TOPIC, partition)
        if p is None:
            from kcompat.protocol.errors import ErrorCode, KafkaError
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        p.append_marker(producer_id, producer_epoch, coordinator_epoch, commit, self.broker.now_ms())
        complete = getattr(self.coordinator, "complete_txn", None)
        if complete is not None:
            self.apply(complete(partition, producer_id, commit, self.broker.now_ms()))
