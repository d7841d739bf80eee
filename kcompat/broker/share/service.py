"""The broker's share-group data path (KIP-932): the share sessions and the share partitions it
leads, composed from the broker's narrow parts (partitions by topic id, the share coordinator
client, group configs). Handlers reach it as ``broker.share``."""

from __future__ import annotations

import uuid

from kcompat.broker.share.partitions import SharePartitionManager
from kcompat.broker.share.sessions import ShareSessionCache

SHARE_DEFAULTS = ("group.share.record.lock.duration.ms", "group.share.delivery.count.limit",
                  "group.share.partition.max.record.locks")


class ShareService:
    """``sessions``: :class:`ShareSessionCache`; ``partitions``: :class:`SharePartitionManager`."""

    def __init__(self, *, image, replica_manager, persister, group_config, config, now_ms) -> None:
        self._image = image
        self._replica_manager = replica_manager
        self.sessions = ShareSessionCache()
        self.partitions = SharePartitionManager(
            partition_of=self._partition_of, persister=persister, group_config=group_config,
            defaults={name: config.get(name) for name in SHARE_DEFAULTS}, now_ms=now_ms)

    def _partition_of(self, topic_id: uuid.UUID, partition: int):
        t = self._image.topics_by_id.get(topic_id)
        return None if t is None else self._replica_manager.get(t.name, partition)

    def stop(self) -> None:
        self.partitions.close()
