"""Runs the transaction coordinator (:mod:`kcompat.txn.coordinator`) inside the broker over
``__transaction_state``, and writes its transaction markers.

Mechanics are :class:`kcompat.broker.coordinator_runtime.CoordinatorRuntime`'s. In addition, after
a result's records are durable, its :class:`MarkerRequest`\\ s are carried out — Kafka's
WriteTxnMarkers to each partition leader, here a local append of the COMMIT/ABORT control batch
(``__consumer_offsets`` partitions go through the group runtime so that transactional offsets
become visible or are dropped) — and the outcome is reported with ``markers_written``, which
completes the transaction. A coordinator restart resumes transactions found in Prepare* states,
so no partition stays blocked behind an open transaction.
"""

from __future__ import annotations

import logging

from kcompat.broker.coordinator_runtime import CoordinatorRuntime
from kcompat.broker.group_runtime import OFFSETS_TOPIC
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.txn.coordinator import TransactionCoordinator, TxnConfig

log = logging.getLogger("kcompat.txn")

TRANSACTION_STATE_TOPIC = "__transaction_state"


def txn_config(cfg) -> TxnConfig:
    return TxnConfig(
        max_timeout_ms=cfg.get("transaction.max.timeout.ms"),
        transactional_id_expiration_ms=cfg.get("transactional.id.expiration.ms"),
        abort_timed_out_interval_ms=cfg.get("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
        remove_expired_interval_ms=cfg.get("transaction.remove.expired.transaction.cleanup.interval.ms"),
        num_partitions=cfg.get("transaction.state.log.num.partitions"))


class TxnRuntime(CoordinatorRuntime):
    """The broker's transaction coordinator service. ``broker`` is the :class:`Broker`."""

    TOPIC = TRANSACTION_STATE_TOPIC

    def __init__(self, broker) -> None:
        self.config = txn_config(broker.config)
        coordinator = TransactionCoordinator(
            self.config, allocate_producer_id=lambda: broker.producer_id_manager.generate(),
            partition_exists=self._partition_exists,
            group_partition_for=lambda group_id: broker.groups.coordinator.partition_for(group_id))
        super().__init__(broker, coordinator)

    def _partition_exists(self, topic: str, partition: int) -> bool:
        t = self.broker.image.topics.get(topic)
        return t is not None and partition in t.partitions

    def topic_spec(self) -> tuple[int, str, dict[str, str]]:
        cfg = self.broker.config
        rf = min(cfg.get("transaction.state.log.replication.factor"), len(self.broker.live_broker_ids()))
        return (self.config.num_partitions, "transaction.state.log.replication.factor",
                {"cleanup.policy": "compact", "compression.type": "uncompressed",
                 "min.insync.replicas": str(max(1, min(cfg.get("transaction.state.log.min.isr"), rf))),
                 "segment.bytes": str(cfg.get("transaction.state.log.segment.bytes"))})

    def _leader_epoch(self, partition: int) -> int:
        return self.broker.image.topics[self.TOPIC].partitions[partition].leader_epoch

    def load_coordinator(self, partition: int, entries: list):
        # markers carry the coordinator epoch: the leader epoch of the __transaction_state partition
        return self.coordinator.load(partition, entries, self.broker.now_ms(),
                                     coordinator_epoch=self._leader_epoch(partition))

    def after_append(self, result) -> None:
        for marker in result.markers:
            self._write_markers(marker)

    def on_append_failure(self, result, error: Exception) -> None:
        code = error.code if isinstance(error, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR
        self.apply(self.coordinator.append_failed(result, int(code), self.broker.now_ms()))

    def _write_markers(self, m) -> None:
        """WriteTxnMarkers for one transaction, to partitions this broker leads."""
        now = self.broker.now_ms()
        errors: dict[tuple[str, int], int] = {}
        for topic, partition in m.partitions:
            try:
                if topic == OFFSETS_TOPIC:
                    self.broker.groups.write_txn_marker(partition, m.producer_id, m.producer_epoch,
                                                        m.coordinator_epoch, m.commit)
                else:
                    p = self.broker.replica_manager.get(topic, partition)
                    if p is None:
                        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    p.append_marker(m.producer_id, m.producer_epoch, m.coordinator_epoch, m.commit, now)
                errors[(topic, partition)] = 0
            except KafkaError as e:
                errors[(topic, partition)] = int(e.code)
            except Exception:
                log.exception("writing the %s marker of %s to %s-%d failed",
                              "COMMIT" if m.commit else "ABORT", m.transactional_id, topic, partition)
                errors[(topic, partition)] = int(ErrorCode.UNKNOWN_SERVER_ERROR)
        self.apply(self.coordinator.markers_written(m.transactional_id, m.producer_id, m.producer_epoch, errors,
                                                    self.broker.now_ms(), coordinator_epoch=m.coordinator_epoch))

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str,
               partition: int) -> int:
        """KIP-890 produce-path check that the partition is in the producer's open transaction."""
        return self.coordinator.verify(transactional_id, producer_id, producer_epoch, topic, partition)
