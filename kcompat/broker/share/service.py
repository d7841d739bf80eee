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

    def close_session(self, group_id: str, member_id: str) -> None:
        """A member's final ShareFetch/ShareAcknowledge: its session goes and the records it
        holds here are released at once."""
        closed = self.sessions.close(group_id, member_id)
        if closed is not None:
            self.partitions.release_member(group_id, member_id, list(closed.partitions))
            self._maybe_idle(group_id)

    def connection_closed(self, connection) -> None:
        """The sessions of a closed connection go (their records stay locked until the locks
        run out)."""
        for group_id in {s.group_id for s in self.sessions.evict_connection(connection)}:
            self._maybe_idle(group_id)

    def _maybe_idle(self, group_id: str) -> None:
        """No member of ``group_id`` has a session here any more: its share partitions are
        dropped once nothing in them is acquired (Kafka's onGroupEmpty), so the next fetch loads
        the state afresh -- after AlterShareGroupOffsets, DeleteShareGroupOffsets or DeleteGroups
        on the empty group it reads what those wrote."""
        if not self.sessions.has_group(group_id):
            self.partitions.drop_group(group_id, lambda: self.sessions.has_group(group_id))

    def stop(self) -> None:
        self.partitions.close()
