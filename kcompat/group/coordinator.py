"""The classic consumer-group coordinator: JoinGroup/SyncGroup/Heartbeat/LeaveGroup, committed
offsets and the group APIs, with its state in ``__consumer_offsets`` (Kafka's GroupCoordinator and
GroupMetadataManager; ``ClassicGroup`` in the KIP-848-era group-coordinator module).

The coordinator is a state machine without I/O (DESIGN.md sections 2 and 6), composed as Kafka's
GroupCoordinatorShard is: a shared :class:`kcompat.group.shard.GroupShardContext` (groups, timers,
clock, the Result being built) and parts with narrow interfaces -- classic membership
(:class:`kcompat.group.membership.ClassicGroupManager`), offsets and the group admin APIs
(:class:`kcompat.group.offsets.OffsetManager`), storage and loading
(:class:`kcompat.group.storage.GroupStore`), KIP-848 consumer groups
(:class:`kcompat.group.consumer_groups.ConsumerGroupManager`) and KIP-932 share groups
(:class:`kcompat.group.share_groups.ShareGroupManager`, their admin steps in
:class:`kcompat.group.share_admin.ShareAdmin`) and KIP-1071 streams groups
(:class:`kcompat.group.streams_groups.StreamsGroupManager`). :class:`GroupCoordinator` is the
facade the broker's runtime calls; it routes each API to its part and fires timers. Each call takes the
current time and returns a :class:`Result`: records to append to ``__consumer_offsets`` and replies
to send after they are appended. A JoinGroup or SyncGroup may wait: its reply comes in the Result of
a later call or of :meth:`GroupCoordinator.poll`, which fires due timers (session expiry, end of the
join phase, sync timeout, offset expiry).

What changes how, mirroring Kafka's CoordinatorResult with and without record replay:

- Committed offsets change only through :meth:`GroupCoordinator.replay` of offset commit records and
  tombstones, so the offsets in memory are always the fold of the log, the same after
  :meth:`GroupCoordinator.load`. A commit written but not replayed yet is "pending": it is never
  expired, and deleting a group or its offsets writes tombstones for it too.
- Transactional offsets (TxnOffsetCommit, KIP-98/KIP-447) are offset commit records in a
  transactional batch of the producer (:attr:`Record.producer_id`). Replayed, they wait for their
  transaction per producer, invisible to OffsetFetch (which answers UNSTABLE_OFFSET_COMMIT for
  them when asked for stable offsets). The COMMIT or ABORT marker the transaction coordinator
  writes to the partition is the record that ends them: :meth:`GroupCoordinator.complete_txn` live,
  a :class:`TxnMarker` entry when loading. On commit an offset becomes committed unless the
  partition already has a commit from a later record (Kafka compares record offsets); on abort it
  is dropped. A tombstone drops the pending transactional offsets of its partition too, so
  deleting a group or its offsets cannot be undone by a transaction committing later, and pending
  transactional offsets neither expire nor let their group be removed.
- Membership (who waits in a join, heartbeat deadlines, pending member ids) is transient and changes
  directly. The group metadata record (generation, protocol, leader, members with subscription and
  assignment) is written when the leader's SyncGroup completes a rebalance, when a static member
  replaces its member id, and when a group becomes Empty; a group tombstone when it becomes Dead.
  These records describe the state the coordinator already holds, so their replay is a no-op
  (they are recognised by their bytes); loading restores groups from them.
"""

from __future__ import annotations

import uuid
from typing import Callable, Iterable

from kcompat.group.consumer_group import NO_TOPICS, ConsumerProtocolConfig, TopicsView
from kcompat.group.consumer_groups import ConsumerGroupManager
from kcompat.group.coordinator_types import (
    GROUP_OPERATIONS, GroupConfig, Record, Result, TxnMarker, _Api, partition_for,
)
from kcompat.coordinator.java_strings import java_string_hash, java_string_length
from kcompat.group.membership import ClassicGroupManager
from kcompat.group.offsets import OffsetManager
from kcompat.group.shard import GroupShardContext
from kcompat.group.share_admin import ShareAdmin
from kcompat.group.share_groups import SESSION_TIMER as SHARE_SESSION_TIMER, ShareGroupManager, ShareProtocolConfig
from kcompat.group.storage import GroupStore
from kcompat.group.streams_groups import TIMERS as STREAMS_TIMERS, StreamsGroupManager, StreamsProtocolConfig
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.consumer_group_describe import ConsumerGroupDescribeResponse
from kcompat.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatResponse
from kcompat.protocol.messages.share_group_describe import ShareGroupDescribeResponse
from kcompat.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatResponse
from kcompat.protocol.messages.streams_group_describe import StreamsGroupDescribeResponse
from kcompat.protocol.messages.streams_group_heartbeat import StreamsGroupHeartbeatResponse

# what other modules import from here (the coordinator's public names)
__all__ = ["GroupConfig", "GroupCoordinator", "Record", "Result", "TxnMarker", "java_string_hash",
           "java_string_length", "partition_for"]


class GroupCoordinator:
    """The group coordinator of the ``__consumer_offsets`` partitions this broker leads. Every
    API method takes ``(reply_to, request, version, ..., now_ms)`` and returns a :class:`Result`."""

    def __init__(self, config: GroupConfig, *, partition_exists: Callable[[str, int], bool],
                 new_uuid: Callable[[], str] | None = None,
                 txn_verifier: Callable[[str, int, int, int], int] | None = None,
                 topics: TopicsView | None = None,
                 consumer_config: ConsumerProtocolConfig | None = None,
                 share_config: ShareProtocolConfig | None = None,
                 streams_config: StreamsProtocolConfig | None = None,
                 group_overrides: Callable[[str], dict[str, str]] | None = None) -> None:
        """``partition_exists(topic, partition)``: whether offsets may be committed for it;
        ``txn_verifier``: KIP-890 verification of TxnOffsetCommit (see :class:`OffsetManager`);
        ``topics``: the metadata image as KIP-848 consumer groups see it (without one, there are
        no topics to assign); ``consumer_config``: their broker configs; ``share_config``: share
        groups' broker configs; ``streams_config``: streams groups' (KIP-1071);
        ``group_overrides(group_id)``: a group's dynamic GROUP configs."""
        self.config = config
        self.consumer_config = consumer_config or ConsumerProtocolConfig()
        ctx = self.ctx = GroupShardContext(config, partition_exists,
                                           new_uuid if new_uuid is not None else (lambda: str(uuid.uuid4())))
        self.classic = ClassicGroupManager(ctx)
        self.consumer_groups = ConsumerGroupManager(
            self.consumer_config, topics or NO_TOPICS, ctx.groups,
            emit=lambda partition, key, value: ctx.emit(partition, key, value, applied=True),
            timers=ctx.timers, new_group=ctx.new_group, drop_group=lambda group: self.store.remove_group(group),
            now=lambda: ctx.now, classic=self.classic.rebalance)
        self.classic.consumer_groups = self.consumer_groups
        self.consumer_groups.rebalances = ctx.rebalances
        self.share_config = share_config or ShareProtocolConfig()
        self.share_groups = ShareGroupManager(
            self.share_config, topics or NO_TOPICS, ctx.groups,
            emit=lambda partition, key, value: ctx.emit(partition, key, value, applied=True),
            timers=ctx.timers, new_group=ctx.new_group, now=lambda: ctx.now,
            group_overrides=group_overrides or (lambda group_id: {}))
        self.share_admin = ShareAdmin(ctx, self.share_groups, topics or NO_TOPICS)
        self.streams_config = streams_config or StreamsProtocolConfig()
        self.streams_groups = StreamsGroupManager(
            self.streams_config, topics or NO_TOPICS, ctx.groups,
            emit=lambda partition, key, value: ctx.emit(partition, key, value, applied=True),
            timers=ctx.timers, new_group=ctx.new_group,
            now=lambda: ctx.now, end_classic=self.consumer_groups.end_classic,
            group_overrides=group_overrides or (lambda group_id: {}))
        self.store = GroupStore(ctx, self.classic, self.consumer_groups, self.share_groups, self.streams_groups)
        self.offsets = OffsetManager(ctx, self.store, self.classic, self.consumer_groups, txn_verifier)
        ctx.on_begin = self._on_begin
        ctx.on_end = self._fire_due

    # views for tests and diagnostics
    @property
    def _groups(self):
        return self.ctx.groups

    @property
    def _timers(self):
        return self.ctx.timers

    @property
    def _self_applied(self):
        return self.ctx.self_applied

    # ------------------------------------------------------------------------------------------
    # partitions of __consumer_offsets
    # ------------------------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return self.ctx.partition_for(group_id)

    def owns(self, partition: int) -> bool:
        return partition in self.ctx.owned

    def begin_loading(self, partition: int) -> None:
        """Requests for groups of ``partition`` get COORDINATOR_LOAD_IN_PROGRESS until :meth:`load`."""
        self.store.begin_loading(partition)

    def load(self, partition: int, records: Iterable, now_ms: int) -> None:
        """Replay the partition's log and own it (:meth:`GroupStore.load`)."""
        self.store.load(partition, records, now_ms)

    def unload(self, partition: int) -> Result:
        """Give the partition up: its groups are dropped and waiting requests get NOT_COORDINATOR."""
        return self.store.unload(partition)

    def replay(self, record: Record) -> None:
        """Apply a record after the broker appended it, or one of a partition being loaded."""
        self.store.replay(record)

    def write_failed(self, result: Result, failed: list[Record], error_code: int, now_ms: int) -> Result:
        """Records of ``result`` could not be written (:meth:`GroupStore.write_failed`)."""
        return self.store.write_failed(result, failed, error_code, now_ms)

    def shutdown(self) -> Result:
        """Answer everything pending with NOT_COORDINATOR; later requests get COORDINATOR_NOT_AVAILABLE."""
        return self.store.shutdown()

    def on_partitions_deleted(self, partitions: list[tuple[str, int]], now_ms: int) -> Result:
        return self.store.on_partitions_deleted(partitions, now_ms)

    # ------------------------------------------------------------------------------------------
    # the APIs
    # ------------------------------------------------------------------------------------------

    def join_group(self, reply_to, req, version: int, client_id: str, client_host: str, now_ms: int) -> Result:
        return self.classic.join_group(reply_to, req, version, client_id, client_host, now_ms)

    def sync_group(self, reply_to, req, version: int, now_ms: int) -> Result:
        return self.classic.sync_group(reply_to, req, version, now_ms)

    def heartbeat(self, reply_to, req, version: int, now_ms: int) -> Result:
        return self.classic.heartbeat(reply_to, req, version, now_ms)

    def leave_group(self, reply_to, req, version: int, now_ms: int) -> Result:
        return self.classic.leave_group(reply_to, req, version, now_ms)

    def offset_commit(self, reply_to, req, version: int, now_ms: int) -> Result:
        return self.offsets.offset_commit(reply_to, req, version, now_ms)

    def txn_offset_commit(self, reply_to, req, version: int, now_ms: int) -> Result:
        return self.offsets.txn_offset_commit(reply_to, req, version, now_ms)

    def complete_txn(self, partition: int, producer_id: int, commit: bool, now_ms: int) -> Result:
        return self.offsets.complete_txn(partition, producer_id, commit, now_ms)

    def offset_fetch(self, reply_to, req, version: int, now_ms: int) -> Result:
        return self.offsets.offset_fetch(reply_to, req, version, now_ms)

    def describe_groups(self, reply_to, req, version: int, now_ms: int) -> Result:
        return self.offsets.describe_groups(reply_to, req, version, now_ms)

    def list_groups(self, reply_to, req, version: int, now_ms: int) -> Result:
        return self.offsets.list_groups(reply_to, req, version, now_ms)

    def delete_groups(self, reply_to, req, version: int, now_ms: int) -> Result:
        return self.offsets.delete_groups(reply_to, req, version, now_ms)

    def offset_delete(self, reply_to, req, version: int, now_ms: int) -> Result:
        return self.offsets.offset_delete(reply_to, req, version, now_ms)

    def consumer_group_heartbeat(self, reply_to, req, version: int, client_id: str, client_host: str,
                                 now_ms: int) -> Result:
        """ConsumerGroupHeartbeat 0-1 (KIP-848), answered once its records are committed."""
        self.ctx.begin(now_ms)
        error = self.ctx.check_group(req.group_id, _Api.CONSUMER_HEARTBEAT) if req.group_id else None
        if error is not None:
            response = ConsumerGroupHeartbeatResponse(error_code=int(error), member_epoch=0, heartbeat_interval_ms=0)
        elif not self.consumer_config.enabled:
            response = ConsumerGroupHeartbeatResponse(
                error_code=int(ErrorCode.UNSUPPORTED_VERSION), member_epoch=0, heartbeat_interval_ms=0,
                error_message="The consumer group protocol is not enabled (group.coordinator.rebalance.protocols).")
        else:
            response = self.consumer_groups.heartbeat(req, version, client_id, client_host)
        self.ctx.reply((reply_to, version), response)
        return self.ctx.end(now_ms)

    def consumer_group_describe(self, reply_to, req, version: int, now_ms: int) -> Result:
        """ConsumerGroupDescribe 0-1 (KIP-848): GROUP_ID_NOT_FOUND for classic or unknown groups."""
        return self._describe(reply_to, req, version, now_ms, _Api.CONSUMER_DESCRIBE, self.consumer_groups,
                              ConsumerGroupDescribeResponse,
                              lambda group_id, error: dict(error_code=int(error), group_id=group_id))

    def _describe(self, reply_to, req, version: int, now_ms: int, api: _Api, manager, response_cls,
                  error_fields) -> Result:
        """A ConsumerGroupDescribe / ShareGroupDescribe / StreamsGroupDescribe: each group from
        ``manager.describe``, or a DescribedGroup of ``error_fields(group_id, error)`` when this
        coordinator cannot answer for it (loading, not the coordinator)."""
        self.ctx.begin(now_ms)
        groups = []
        for group_id in req.group_ids:
            error = self.ctx.check_group(group_id, api)
            if error is not None:
                groups.append(response_cls.DescribedGroup(**error_fields(group_id, error)))
            else:
                groups.append(manager.describe(group_id, req.include_authorized_operations, GROUP_OPERATIONS))
        self.ctx.reply((reply_to, version), response_cls(throttle_time_ms=0, groups=groups))
        return self.ctx.end(now_ms)

    def share_group_heartbeat(self, reply_to, req, version: int, client_id: str, client_host: str,
                              now_ms: int) -> Result:
        """ShareGroupHeartbeat v1 (KIP-932), answered once its records are committed."""
        self.ctx.begin(now_ms)
        error = self.ctx.check_group(req.group_id, _Api.SHARE_HEARTBEAT) if req.group_id else None
        if error is not None:
            response = ShareGroupHeartbeatResponse(error_code=int(error), member_epoch=0, heartbeat_interval_ms=0)
        elif not self.share_config.enabled:
            response = ShareGroupHeartbeatResponse(
                error_code=int(ErrorCode.UNSUPPORTED_VERSION), member_epoch=0, heartbeat_interval_ms=0,
                error_message="Share groups are not enabled.")
        else:
            response = self.share_groups.heartbeat(req, version, client_id, client_host)
        self.ctx.reply((reply_to, version), response)
        return self.ctx.end(now_ms)

    def share_group_describe(self, reply_to, req, version: int, now_ms: int) -> Result:
        """ShareGroupDescribe v1 (KIP-932): GROUP_ID_NOT_FOUND for unknown groups or other types."""
        return self._describe(reply_to, req, version, now_ms, _Api.SHARE_DESCRIBE, self.share_groups,
                              ShareGroupDescribeResponse,
                              lambda group_id, error: dict(error_code=int(error), group_id=group_id, group_state="",
                                                           members=[], authorized_operations=-(2**31)))

    def streams_group_heartbeat(self, reply_to, req, version: int, client_id: str, client_host: str,
                                now_ms: int) -> Result:
        """StreamsGroupHeartbeat v0 (KIP-1071). The internal topics it found missing are then in
        :meth:`StreamsGroupManager.take_topics_to_create`."""
        self.ctx.begin(now_ms)
        error = self.ctx.check_group(req.group_id, _Api.STREAMS_HEARTBEAT) if req.group_id else None
        invalid = self.streams_groups.invalid(req)
        if invalid is not None:
            response = invalid
        elif error is not None:
            response = StreamsGroupHeartbeatResponse(error_code=int(error), member_id="", member_epoch=0,
                                                     heartbeat_interval_ms=0, status=[])
        else:
            response = self.streams_groups.heartbeat(req, client_id, client_host)
        self.ctx.reply((reply_to, version), response)
        return self.ctx.end(now_ms)

    def streams_group_describe(self, reply_to, req, version: int, now_ms: int) -> Result:
        """StreamsGroupDescribe v0 (KIP-1071): GROUP_ID_NOT_FOUND for unknown groups or other types."""
        return self._describe(reply_to, req, version, now_ms, _Api.STREAMS_DESCRIBE, self.streams_groups,
                              StreamsGroupDescribeResponse,
                              lambda group_id, error: dict(error_code=int(error), group_id=group_id, group_state="",
                                                           members=[]))

    # the share-group admin steps (KIP-932), chained with the share coordinator by the broker's
    # kcompat.broker.share_group_admin; see kcompat.group.share_admin

    def share_initialized_partitions(self, reply_to, group_id: str, now_ms: int) -> Result:
        return self.share_admin.initialized_partitions(reply_to, group_id, now_ms)

    def alter_share_group_offsets(self, reply_to, req, now_ms: int) -> Result:
        return self.share_admin.alter_offsets(reply_to, req, now_ms)

    def complete_alter_share_group_offsets(self, reply_to, group_id: str, initialized: dict, now_ms: int) -> Result:
        return self.share_admin.complete_alter(reply_to, group_id, initialized, now_ms)

    def delete_share_group_offsets(self, reply_to, req, now_ms: int) -> Result:
        return self.share_admin.delete_offsets(reply_to, req, now_ms)

    def complete_delete_share_group_offsets(self, reply_to, group_id: str, deleted: dict, now_ms: int) -> Result:
        return self.share_admin.complete_delete_offsets(reply_to, group_id, deleted, now_ms)

    def share_group_deletions(self, reply_to, group_ids: list[str], now_ms: int) -> Result:
        return self.share_admin.share_group_deletions(reply_to, group_ids, now_ms)

    def share_group_partitions(self, group_id: str) -> dict | None:
        """The topic partitions whose share-partition state a share group has (topic id -> (name,
        partitions)), for deleting its state; None if ``group_id`` is not a share group here."""
        group = self.ctx.groups.get(group_id)
        if group is None or group.share is None:
            return None
        return dict(group.share.initialized)

    # ------------------------------------------------------------------------------------------
    # timers
    # ------------------------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        return self.ctx.timers.next_deadline()

    def poll(self, now_ms: int) -> Result:
        """Fire every timer due at ``now_ms``."""
        self.ctx.begin(now_ms)
        return self.ctx.end(now_ms)

    def _on_begin(self, now_ms: int) -> None:
        self.store.ensure_expiry_timer(now_ms)
        self._fire_due(now_ms)

    def _fire_due(self, now_ms: int) -> None:
        """Fire the due timers, each to the part that scheduled it."""
        timers = self.ctx.timers
        while True:
            due = timers.pop_due(now_ms)
            if due is None:
                return
            key, payload = due
            kind = key[0]
            if kind == "hb":
                self.classic.rebalance.on_heartbeat_expired(key[1], key[2])
            elif kind == "pending":
                self.classic.rebalance.on_pending_member_expired(key[1], key[2])
            elif kind == "join":
                self.classic.rebalance.on_join_timer(key[1], payload)
            elif kind == "sync":
                self.classic.rebalance.on_sync_expired(key[1], payload)
            elif kind == SHARE_SESSION_TIMER:
                self.share_groups.on_timer(key[1], key[2])
            elif kind in STREAMS_TIMERS:
                self.streams_groups.on_timer(kind, key[1], key[2], payload)
            elif kind in ConsumerGroupManager.MEMBER_TIMERS:
                self.consumer_groups.on_timer(kind, key[1], key[2], payload)
            elif kind == "expire":
                self.store.expire_offsets(now_ms)
                interval = max(1, self.config.offsets_retention_check_interval_ms)
                timers.schedule(("expire", None), now_ms + interval)
