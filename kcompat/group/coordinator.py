"""The classic consumer-group coordinator: JoinGroup/SyncGroup/Heartbeat/LeaveGroup, committed
offsets and the group APIs, with its state in ``__consumer_offsets`` (Kafka's GroupCoordinator and
GroupMetadataManager; ``ClassicGroup`` in the KIP-848-era group-coordinator module).

The coordinator is a state machine without I/O (DESIGN.md sections 2 and 6). Each call takes the
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
from collections import Counter
from typing import Callable, Iterable

from kcompat.group import records as rec
from kcompat.group.coordinator_types import (
    log, EMPTY, COMPLETING, STABLE, UNKNOWN_MEMBER_ID, NO_GENERATION, GroupConfig, NO_PRODUCER_ID, Record,
    TxnMarker, Result, _Api, _EMPTY_GROUP_ID_ALLOWED, partition_for, _Positioned, _LoadState, GROUP_OPERATIONS,
)
from kcompat.group.coordinator_types import java_string_hash, java_string_length
from kcompat.group.consumer_group import NO_TOPICS, ConsumerProtocolConfig, TopicsView
from kcompat.group.consumer_groups import ConsumerGroupManager
from kcompat.group.membership import MembershipMixin
from kcompat.group.model import CONSUMER_PROTOCOL_TYPE, Group, Member, Waiter
from kcompat.group.offsets import OffsetsMixin
from kcompat.group.records import GroupKey, OffsetKey, RecordFormatError
from kcompat.group.storage import StorageMixin
from kcompat.group.timers import Timers
from kcompat.group.write_errors import coordinator_error, with_error
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.consumer_group_describe import ConsumerGroupDescribeResponse
from kcompat.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatResponse
from kcompat.protocol.messages.join_group import JoinGroupResponse
from kcompat.protocol.messages.sync_group import SyncGroupResponse

# what other modules import from here (the coordinator's public names)
__all__ = ["GroupConfig", "GroupCoordinator", "Record", "Result", "TxnMarker", "java_string_hash",
           "java_string_length", "partition_for"]


class GroupCoordinator(MembershipMixin, OffsetsMixin, StorageMixin):
    def __init__(self, config: GroupConfig, *, partition_exists: Callable[[str, int], bool],
                 new_uuid: Callable[[], str] | None = None,
                 txn_verifier: Callable[[str, int, int, int], int] | None = None,
                 topics: TopicsView | None = None,
                 consumer_config: ConsumerProtocolConfig | None = None) -> None:
        """``txn_verifier(transactional_id, producer_id, producer_epoch, partition)`` checks that
        the ``__consumer_offsets`` partition is in the producer's ongoing transaction before a
        TxnOffsetCommit is written (KIP-890 verification): 0, or the error a produce would get.
        ``topics`` is the metadata image as KIP-848 consumer groups see it (without one, there
        are no topics to assign), ``consumer_config`` their broker configs."""
        self.config = config
        self._partition_exists = partition_exists
        self._txn_verifier = txn_verifier
        self._new_uuid = new_uuid if new_uuid is not None else (lambda: str(uuid.uuid4()))
        self._groups: dict[str, Group] = {}
        self._owned: set[int] = set()
        self._loading: dict[int, _LoadState] = {}
        self._timers = Timers()
        self._self_applied: Counter[tuple[int, bytes, bytes | None]] = Counter()
        self._deferred_records: list[Record] = []
        self._deferred_replies: list[tuple[object, object]] = []
        self._active = True
        self._now = 0
        self._records: list[Record] = []
        self._replies: list[tuple[object, object]] = []
        # (partition, producer id) -> groups with transactional offsets of that producer there
        # (Kafka's openGroupsForProducer); a hint, the groups' pending_txn is the truth
        self._open_txns: dict[tuple[int, int], set[str]] = {}
        self._positions: dict[int, int] = {}  # last log offset replayed, per partition
        self.consumer_config = consumer_config or ConsumerProtocolConfig()
        self.consumer_groups = ConsumerGroupManager(
            self.consumer_config, topics or NO_TOPICS, self._groups,
            emit=lambda partition, key, value: self._emit(partition, key, value, applied=True),
            timers=self._timers, new_group=self._new_group, drop_group=self._remove_group, now=lambda: self._now,
            classic=self)

    # ------------------------------------------------------------------------------------------
    # partitions of __consumer_offsets
    # ------------------------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.num_partitions)

    def owns(self, partition: int) -> bool:
        return partition in self._owned

    def begin_loading(self, partition: int) -> None:
        """Requests for groups of ``partition`` get COORDINATOR_LOAD_IN_PROGRESS until :meth:`load`."""
        if partition in self._owned:
            self._defer(self.unload(partition))
        self._loading.setdefault(partition, _LoadState())

    def load(self, partition: int, records: Iterable, now_ms: int) -> None:
        """Replay the partition's log in order, then own the partition: groups come back Empty or
        Stable with their members (heartbeat deadlines from ``now_ms``).

        Each entry is one stored record: ``(offset, key, value)`` for a record of a
        non-transactional batch, ``(offset, key, value, producer_id)`` for one of a transactional
        batch (a TxnOffsetCommit), or a :class:`TxnMarker` for a COMMIT/ABORT control record. A
        transaction whose marker is not in the log stays pending (its coordinator sends the
        marker again)."""
        if partition in self._owned:
            self._defer(self.unload(partition))
        state = self._loading.setdefault(partition, _LoadState())
        for entry in records:
            if isinstance(entry, TxnMarker):
                state.position(entry.offset)
                self._apply_loading_marker(state, entry.producer_id, entry.commit)
            elif len(entry) == 4:
                offset, key, value, producer_id = entry
                self._apply_loading(state, key, value, state.position(offset), producer_id)
            else:
                offset, key, value = entry
                self._apply_loading(state, key, value, state.position(offset), NO_PRODUCER_ID)
        self._begin(None)
        self._now = now_ms
        del self._loading[partition]
        self._owned.add(partition)
        self._positions[partition] = state.last_offset
        self._ensure_expiry_timer(now_ms)
        pending_by_group: dict[str, dict[int, dict[tuple[str, int], _Positioned]]] = {}
        for producer_id, by_group in state.pending.items():
            for group_id, pending in by_group.items():
                if pending:
                    pending_by_group.setdefault(group_id, {})[producer_id] = pending
        n_groups = n_offsets = n_pending = 0
        loaded: list[Group] = []
        for group_id, value in state.groups.items():
            group = self._group_from_value(group_id, partition, value)
            self._set_loaded_offsets(group, state.offsets.pop(group_id, {}), pending_by_group.pop(group_id, {}))
            self._groups[group_id] = group
            self._on_group_loaded(group)
            loaded.append(group)
        # offsets without group metadata: groups using Kafka only for offsets
        for group_id in list(state.offsets) + [g for g in pending_by_group if g not in state.offsets]:
            offsets = state.offsets.get(group_id, {})
            pending = pending_by_group.get(group_id, {})
            if offsets or pending:
                group = Group(group_id, partition, EMPTY, now_ms)
                self._set_loaded_offsets(group, offsets, pending)
                self._groups[group_id] = group
                loaded.append(group)
        for group_id, records in state.consumer.items():
            group = self._groups.get(group_id)
            if group is not None and group.has_live_members():
                log.warning("group %s: both classic and consumer group records; keeping the classic group", group_id)
                continue
            fresh = group is None
            group = group if group is not None else Group(group_id, partition, EMPTY, now_ms)
            try:
                restored = self.consumer_groups.restore(group, records)
            except (ValueError, RecordFormatError) as e:
                log.warning("group %s: cannot restore its consumer group records: %s", group_id, e)
                restored = False
            if restored and fresh:
                self._groups[group_id] = group
                loaded.append(group)
        for group in loaded:
            n_groups += 1
            n_offsets += len(group.offsets)
            for producer_id, pending in group.pending_txn.items():
                self._open_txns.setdefault((partition, producer_id), set()).add(group.group_id)
                n_pending += len(pending)
        log.info("loaded __consumer_offsets-%d: %d groups, %d committed offsets, %d transactional offsets pending",
                 partition, n_groups, n_offsets, n_pending)
        self._defer(self._end(None))

    @staticmethod
    def _set_loaded_offsets(group: Group, offsets: dict[tuple[str, int], _Positioned],
                            pending: dict[int, dict[tuple[str, int], _Positioned]]) -> None:
        group.offsets = {tp: om for tp, (_, om) in offsets.items()}
        group.offset_positions = {tp: position for tp, (position, _) in offsets.items()}
        group.pending_txn = pending

    def unload(self, partition: int) -> Result:
        """Give the partition up: its groups are dropped and waiting requests get NOT_COORDINATOR."""
        self._begin(None)
        self._loading.pop(partition, None)
        self._owned.discard(partition)
        for group in [g for g in self._groups.values() if g.partition == partition]:
            self._unload_group(group)
        for k in [k for k in self._self_applied if k[0] == partition]:
            del self._self_applied[k]
        for k in [k for k in self._open_txns if k[0] == partition]:
            del self._open_txns[k]
        self._positions.pop(partition, None)
        return self._end(None)

    def write_failed(self, result: Result, failed: list[Record], error_code: int, now_ms: int) -> Result:
        """``failed``, records of ``result``, could not be appended or replicated (``error_code``:
        the append error, e.g. NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT,
        NOT_ENOUGH_REPLICAS_AFTER_APPEND); they will not be replayed. As Kafka's coordinator after
        a failed acks=-1 write: offset commits stop being pending (failPendingOffsetWrite; the
        committed offsets never changed); a group whose metadata record of its current generation
        was lost resets its assignment and rebalances (the SyncGroup store callback). Returns the
        replies to send instead of ``result``'s: each with the coordinator error for
        ``error_code`` where it said NONE (:mod:`kcompat.group.write_errors`)."""
        self._begin(now_ms)
        error = coordinator_error(error_code)
        for r in failed:
            ident = (r.partition, r.key, r.value)
            n = self._self_applied.get(ident)
            if n:
                if n == 1:
                    del self._self_applied[ident]
                else:
                    self._self_applied[ident] = n - 1
                if r.value is not None:
                    self._metadata_not_stored(r, error)
                continue
            try:
                key = rec.parse_key(r.key)
            except RecordFormatError:
                continue
            group = self._groups.get(key.group) if isinstance(key, OffsetKey) else None
            if group is not None and group.partition == r.partition:
                tp = (key.topic, key.partition)
                n = group.pending_commits.get(tp, 0)
                if n > 1:
                    group.pending_commits[tp] = n - 1
                elif n == 1:
                    del group.pending_commits[tp]
                self._maybe_drop_offsets_only_group(group)
        for reply_to, response in result.replies:
            self._replies.append((reply_to, with_error(response, error)))
        return self._end(now_ms)

    def _metadata_not_stored(self, record: Record, error: ErrorCode) -> None:
        try:
            key = rec.parse_key(record.key)
            value = rec.parse_group_value(record.value) if isinstance(key, GroupKey) else None
        except RecordFormatError:
            return
        group = self._groups.get(key.group) if value is not None else None
        if (group is None or group.partition != record.partition or group.generation_id != value.generation
                or group.state not in (STABLE, COMPLETING) or not group.members):
            return
        log.warning("group %s: could not store generation %d (%s); rebalancing", group.group_id,
                    group.generation_id, error.name)
        for member in group.members.values():
            member.assignment = b""
        self._maybe_prepare_rebalance(group, f"error {error.name} when storing the group metadata")

    def shutdown(self) -> Result:
        """Answer everything pending with NOT_COORDINATOR; later requests get COORDINATOR_NOT_AVAILABLE."""
        self._begin(None)
        for group in list(self._groups.values()):
            self._unload_group(group)
        self._owned.clear()
        self._loading.clear()
        self._self_applied.clear()
        self._open_txns.clear()
        self._positions.clear()
        self._timers.clear()
        self._active = False
        return self._end(None)

    # ------------------------------------------------------------------------------------------
    # KIP-848 consumer groups (kcompat.group.consumer_groups)
    # ------------------------------------------------------------------------------------------

    def consumer_group_heartbeat(self, reply_to, req, version: int, client_id: str, client_host: str,
                                 now_ms: int) -> Result:
        """ConsumerGroupHeartbeat 0-1 (KIP-848), answered once its records are committed."""
        self._begin(now_ms)
        error = self._check_group(req.group_id, _Api.CONSUMER_HEARTBEAT) if req.group_id else None
        if error is not None:
            response = ConsumerGroupHeartbeatResponse(error_code=int(error), member_epoch=0, heartbeat_interval_ms=0)
        elif not self.consumer_config.enabled:
            response = ConsumerGroupHeartbeatResponse(
                error_code=int(ErrorCode.UNSUPPORTED_VERSION), member_epoch=0, heartbeat_interval_ms=0,
                error_message="The consumer group protocol is not enabled (group.coordinator.rebalance.protocols).")
        else:
            response = self.consumer_groups.heartbeat(req, version, client_id, client_host)
        self._reply((reply_to, version), response)
        return self._end(now_ms)

    def consumer_group_describe(self, reply_to, req, version: int, now_ms: int) -> Result:
        """ConsumerGroupDescribe 0-1 (KIP-848): GROUP_ID_NOT_FOUND for classic or unknown groups."""
        self._begin(now_ms)
        groups = []
        for group_id in req.group_ids:
            error = self._check_group(group_id, _Api.CONSUMER_DESCRIBE)
            if error is not None:
                groups.append(ConsumerGroupDescribeResponse.DescribedGroup(error_code=int(error), group_id=group_id))
            else:
                groups.append(self.consumer_groups.describe(group_id, req.include_authorized_operations,
                                                            GROUP_OPERATIONS))
        self._reply((reply_to, version), ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=groups))
        return self._end(now_ms)

    # ------------------------------------------------------------------------------------------
    # classic groups changing protocol (the ClassicGroups side of kcompat.group.consumer_migration)
    # ------------------------------------------------------------------------------------------

    def abandon_classic_members(self, group: Group, error: ErrorCode) -> None:
        """Answer ``group``'s waiting JoinGroup/SyncGroup requests with ``error`` (Kafka's
        completeAllJoinFutures/completeAllSyncFutures) and drop its classic membership and
        timers; its offsets stay (it becomes a consumer group)."""
        for member in list(group.members.values()):
            waiter = group.take_join_waiter(member)
            if waiter is not None:
                self._reply_join_error(waiter, error, member.member_id)
            waiter = group.take_sync_waiter(member)
            if waiter is not None:
                self._reply(waiter, self._sync_response(error))
            self._timers.cancel(("hb", group.group_id, member.member_id))
        for member_id in group.pending_members:
            self._timers.cancel(("pending", group.group_id, member_id))
        self._timers.cancel(("join", group.group_id))
        self._timers.cancel(("sync", group.group_id))
        group.reset_classic(EMPTY, self._now)

    def adopt_classic_members(self, group: Group, generation: int, members: list) -> None:
        """``group`` becomes a classic group (ClassicGroup.fromConsumerGroup): Stable at
        ``generation`` with ``members`` (``[(ConsumerMember, assignment bytes)]``), stored, then
        rebalancing so that its members rejoin as a classic group."""
        group.reset_classic(STABLE, self._now)
        group.generation_id = generation
        for cm, assignment in members:
            member = Member(cm.member_id, cm.instance_id, cm.client_id, cm.client_host, cm.rebalance_timeout_ms,
                            cm.classic.session_timeout_ms, CONSUMER_PROTOCOL_TYPE, list(cm.classic.protocols),
                            assignment)
            group.add(member, None)
        group.protocol_name = group.select_protocol()
        group.leader_id = next(iter(group.members))
        group.subscribed_topics = group.compute_subscribed_topics()
        self._store_group(group, {m.member_id: m.assignment for m in group.members.values()})
        for member in group.members.values():
            self._schedule_heartbeat(group, member)
        self._prepare_rebalance(group, f"Downgrade group {group.group_id} from consumer to classic.")

    # ------------------------------------------------------------------------------------------
    # timers and results
    # ------------------------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        return self._timers.next_deadline()

    def poll(self, now_ms: int) -> Result:
        """Fire every timer due at ``now_ms``."""
        self._begin(now_ms)
        return self._end(now_ms)

    def _begin(self, now_ms: int | None) -> None:
        self._records = self._deferred_records
        self._replies = self._deferred_replies
        self._deferred_records = []
        self._deferred_replies = []
        if now_ms is not None:
            self._now = now_ms
            self._ensure_expiry_timer(now_ms)
            self._fire_due(now_ms)

    def _end(self, now_ms: int | None) -> Result:
        if now_ms is not None:
            self._fire_due(now_ms)  # timers scheduled with no delay while handling the request
        result = Result(self._records, self._replies)
        self._records = []
        self._replies = []
        return result

    def _defer(self, result: Result) -> None:
        self._deferred_records.extend(result.records)
        self._deferred_replies.extend(result.replies)

    def _ensure_expiry_timer(self, now_ms: int) -> None:
        if self._active and ("expire", None) not in self._timers:
            # Kafka schedules the first offset expiry check with no delay, then every interval
            self._timers.schedule(("expire", None), now_ms)

    def _fire_due(self, now_ms: int) -> None:
        while True:
            due = self._timers.pop_due(now_ms)
            if due is None:
                return
            key, payload = due
            kind = key[0]
            if kind == "hb":
                self._on_heartbeat_expired(key[1], key[2])
            elif kind == "pending":
                self._on_pending_member_expired(key[1], key[2])
            elif kind == "join":
                self._on_join_timer(key[1], payload)
            elif kind == "sync":
                self._on_sync_expired(key[1], payload)
            elif kind in ConsumerGroupManager.MEMBER_TIMERS:
                self.consumer_groups.on_timer(kind, key[1], key[2], payload)
            elif kind == "expire":
                self._expire_offsets(now_ms)
                interval = max(1, self.config.offsets_retention_check_interval_ms)
                self._timers.schedule(("expire", None), now_ms + interval)

    def _reply(self, waiter: Waiter | None, response: object) -> None:
        if waiter is not None:
            self._replies.append((waiter[0], response))

    def _emit(self, partition: int, key: bytes, value: bytes | None, *, applied: bool) -> None:
        """Add a record to the Result; ``applied`` marks one whose effect is already in memory."""
        self._records.append(Record(partition, key, value))
        if applied:
            self._self_applied[(partition, key, value)] += 1

    def _schedule_heartbeat(self, group: Group, member: Member, timeout_ms: int | None = None) -> None:
        """Kafka's completeAndScheduleNextHeartbeatExpiration."""
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        self._timers.schedule(("hb", group.group_id, member.member_id), self._now + timeout)

    # ------------------------------------------------------------------------------------------
    # request validation
    # ------------------------------------------------------------------------------------------

    def _check_group(self, group_id: str | None, api: _Api) -> ErrorCode | None:
        """Kafka's validateGroupStatus."""
        if group_id is None or (group_id == "" and api not in _EMPTY_GROUP_ID_ALLOWED):
            return ErrorCode.INVALID_GROUP_ID
        if not self._active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        partition = self.partition_for(group_id)
        if partition in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self._owned:
            return ErrorCode.NOT_COORDINATOR
        return None

    @staticmethod
    def _validate_member(group: Group, member_id: str, instance_id: str | None) -> ErrorCode | None:
        """Kafka's validateCurrentMember: a static instance must map to this member id, and the
        member must exist."""
        if instance_id is not None:
            current = group.static_members.get(instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                log.info("group %s: member %s of static instance %s is fenced by %s",
                         group.group_id, member_id, instance_id, current)
                return ErrorCode.FENCED_INSTANCE_ID
        if not group.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    def _new_group(self, group_id: str) -> Group:
        group = Group(group_id, self.partition_for(group_id), EMPTY, self._now)
        self._groups[group_id] = group
        return group

    # ------------------------------------------------------------------------------------------
    # responses
    # ------------------------------------------------------------------------------------------

    @staticmethod
    def _join_response(version: int, error: ErrorCode, member_id: str = UNKNOWN_MEMBER_ID, *,
                       generation: int = NO_GENERATION, protocol_type: str | None = None,
                       protocol_name: str | None = None, leader: str | None = None,
                       members: Iterable[tuple[str, str | None, bytes]] = (),
                       skip_assignment: bool = False) -> JoinGroupResponse:
        return JoinGroupResponse(
            throttle_time_ms=0, error_code=int(error), generation_id=generation,
            protocol_type=protocol_type,
            protocol_name=protocol_name if version >= 7 else (protocol_name or ""),
            leader=leader or "", skip_assignment=skip_assignment, member_id=member_id,
            members=[JoinGroupResponse.JoinGroupResponseMember(member_id=m, group_instance_id=i, metadata=md)
                     for m, i, md in members])

    def _join_success(self, group: Group, member: Member, version: int, *, with_members: bool,
                      leader: str | None = None, skip_assignment: bool = False) -> JoinGroupResponse:
        return self._join_response(
            version, ErrorCode.NONE, member.member_id, generation=group.generation_id,
            protocol_type=group.protocol_type, protocol_name=group.protocol_name,
            leader=group.leader_id if leader is None else leader,
            members=group.current_member_metadata() if with_members else (), skip_assignment=skip_assignment)

    @staticmethod
    def _sync_response(error: ErrorCode, protocol_type: str | None = None, protocol_name: str | None = None,
                       assignment: bytes = b"") -> SyncGroupResponse:
        return SyncGroupResponse(throttle_time_ms=0, error_code=int(error), protocol_type=protocol_type,
                                 protocol_name=protocol_name, assignment=assignment)

    def _reply_join_error(self, waiter: Waiter, error: ErrorCode, member_id: str) -> None:
        self._reply(waiter, self._join_response(waiter[1], error, member_id))
