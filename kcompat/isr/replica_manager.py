"""The partitions this broker hosts, kept in step with the metadata image.

Kafka's ``ReplicaManager`` applied to a metadata delta (``applyDelta``): partitions assigned to
this broker get a log (created or loaded) and a :class:`Partition`; removed topics lose theirs;
topic config changes reach the log and the append policy.
"""

from __future__ import annotations

import logging
from typing import Callable

from kcompat.isr.partition import AppendPolicy, Partition
from kcompat.log import LogConfig

log = logging.getLogger("kcompat.isr")


class ReplicaManager:
    """``(topic, partition) -> Partition`` for partitions whose replicas include ``node_id``.

    ``log_manager`` is a :class:`kcompat.log.LogManager`; ``log_config_for(topic)`` and
    ``policy_for(topic)`` give the effective LogConfig and AppendPolicy of a topic; ``now_ms()``
    is the clock.
    """

    def __init__(self, log_manager, node_id: int, *, log_config_for: Callable[[str], LogConfig],
                 policy_for: Callable[[str], AppendPolicy], now_ms: Callable[[], int]) -> None:
        self.log_manager = log_manager
        self.node_id = node_id
        self._log_config_for = log_config_for
        self._policy_for = policy_for
        self._now_ms = now_ms
        self.partitions: dict[tuple[str, int], Partition] = {}
        # KIP-890 verification of transactional produce, given to every partition (None: off)
        self.txn_verifier = None

    def get(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    def ensure_partition(self, topic: str, partition: int, topic_id, leader_epoch: int) -> Partition:
        """Host ``topic``-``partition``: load its log if present, else create it."""
        p = self.partitions.get((topic, partition))
        if p is not None:
            p.leader_epoch = leader_epoch
            return p
        config = self._log_config_for(topic)
        lg = self.log_manager.get(topic, partition)
        if lg is None:
            lg = self.log_manager.create(topic, partition, config, topic_id, self._now_ms())
        else:
            lg.update_config(config)
        p = Partition(topic, partition, topic_id, lg, leader_epoch=leader_epoch, policy=self._policy_for(topic))
        p.txn_verifier = self.txn_verifier
        self.partitions[(topic, partition)] = p
        return p

    def remove_topic(self, topic: str) -> int:
        """Stop hosting every partition of ``topic`` and delete their logs; returns how many."""
        keys = [k for k in self.partitions if k[0] == topic]
        for key in keys:
            p = self.partitions.pop(key)
            p._wake()  # waiting fetches re-check and see the topic is gone
            self.log_manager.delete(topic, key[1])
        return len(keys)

    def update_topic_config(self, topic: str) -> None:
        """Re-read the effective config of ``topic`` into its logs and append policy."""
        config = self._log_config_for(topic)
        policy = self._policy_for(topic)
        for (t, _), p in self.partitions.items():
            if t == topic:
                p.log.update_config(config)
                p.policy = policy

    def topic_partitions(self, topic: str) -> list[Partition]:
        return [p for (t, _), p in sorted(self.partitions.items()) if t == topic]

    def shutdown(self) -> None:
        """Write producer-state snapshots at the LEO of every partition (clean shutdown)."""
        for p in self.partitions.values():
            try:
                p.write_snapshot()
            except OSError as e:
                log.warning("could not write the producer snapshot of %s: %s", p, e)
