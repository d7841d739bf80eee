"""How the classic group coordinator keeps its state in ``__consumer_offsets``: offset expiry,
deleted topics and group removal, replay of records, and loading a partition (Kafka's
GroupMetadataManager). Mixed into :class:`kcompat.group.coordinator.GroupCoordinator`."""

from __future__ import annotations

from collections import Counter

from kcompat.group import records as rec
from kcompat.group.coordinator_types import log, EMPTY, STABLE, Record, Result, _LoadState
from kcompat.group.model import CONSUMER_PROTOCOL_TYPE, Group, Member
from kcompat.group.consumer_records import ConsumerKey
from kcompat.group.records import GroupKey, OffsetAndMetadata, OffsetKey, RecordFormatError
from kcompat.group.state import GroupEvent
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.group_records.group_metadata_value import GroupMetadataValue


class StorageMixin:
    """Expiry, replay and loading of :class:`GroupCoordinator`."""

    # ------------------------------------------------------------------------------------------
    # offset expiry, deleted topics, group removal
    # ------------------------------------------------------------------------------------------

    def on_partitions_deleted(self, partitions: list[tuple[str, int]], now_ms: int) -> Result:
        """Delete the committed offsets of deleted topic partitions in every group (Kafka's
        handleDeletedPartitions)."""
        self._begin(now_ms)
        deleted = set(partitions)
        for group in list(self._groups.values()):
            removed = group.offset_partitions() & deleted
            if removed:
                self._cleanup_group(group, removed)
        return self._end(now_ms)

    def _expire_offsets(self, now_ms: int) -> None:
        n = 0
        for group in list(self._groups.values()):
            expired = self._expired_offsets(group, now_ms)
            n += len(expired)
            if expired or group.is_(EMPTY):
                self._cleanup_group(group, set(expired))
        if n:
            log.info("expired %d committed offsets", n)

    def _expired_offsets(self, group: Group, now_ms: int) -> list[tuple[str, int]]:
        """GroupMetadata.removeExpiredOffsets (KIP-211)."""
        retention = self.config.offsets_retention_ms
        exclude: set[str] = set()
        if group.consumer is not None:
            # ConsumerGroup's expiration: from each commit, for topics the group does not
            # subscribe to (all of them once it is empty)
            exclude = group.consumer.subscribed_names()

            def base(om: OffsetAndMetadata) -> int:
                return om.commit_timestamp
        elif group.protocol_type is not None and group.is_(EMPTY):
            # no members: retention counts from when the group became Empty (from the commit for
            # group metadata without a state timestamp)
            def base(om: OffsetAndMetadata) -> int:
                return om.commit_timestamp if group.state_timestamp is None else group.state_timestamp
        elif (group.protocol_type == CONSUMER_PROTOCOL_TYPE and group.subscribed_topics is not None
              and group.is_(STABLE)):
            # a Stable consumer group expires offsets of topics it no longer subscribes to
            exclude = group.subscribed_topics

            def base(om: OffsetAndMetadata) -> int:
                return om.commit_timestamp
        elif group.protocol_type is None:
            # a group using Kafka only for offsets: from each commit
            def base(om: OffsetAndMetadata) -> int:
                return om.commit_timestamp
        else:
            return []
        expired = []
        for tp, om in group.offsets.items():
            # a partition with a transactional offset pending keeps its committed one (Kafka's
            # cleanupExpiredOffsets); the group stays while it has any (offset_partitions)
            if tp[0] in exclude or group.pending_commits.get(tp) or group.has_pending_txn(tp):
                continue
            if om.expire_timestamp is not None:
                if now_ms >= om.expire_timestamp:  # pre-KIP-211 commit with its own retention
                    expired.append(tp)
            elif now_ms - base(om) >= retention:
                expired.append(tp)
        return expired

    def _cleanup_group(self, group: Group, removed: set[tuple[str, int]], *, force_dead: bool = False) -> None:
        """Write tombstones for ``removed`` offsets (memory follows on replay); an Empty group left
        without offsets becomes Dead, with a group tombstone if it ever had a generation
        (GroupMetadataManager.cleanupGroupMetadata)."""
        for topic, partition in sorted(removed):
            self._emit(group.partition, rec.offset_commit_key(group.group_id, topic, partition), None, applied=False)
        remaining = group.offset_partitions() - removed
        if force_dead or (group.is_(EMPTY) and not remaining and not group.pending_members
                          and not group.has_live_members()):
            self._remove_group(group)

    def _remove_group(self, group: Group) -> None:
        log.info("group %s transitioned to Dead in generation %d", group.group_id, group.generation_id)
        group.transition(GroupEvent.REMOVE, self._now)
        del self._groups[group.group_id]
        self._timers.cancel_group(group.group_id)
        if group.consumer is not None:
            self.consumer_groups.delete_records(group)
        elif group.generation_id > 0:
            # generation 0: the group only stored offsets and never had a metadata record
            self._emit(group.partition, rec.group_metadata_key(group.group_id), None, applied=True)

    def _unload_group(self, group: Group) -> None:
        previous = group.state
        group.transition(GroupEvent.REMOVE, self._now)
        for member in group.members.values():
            waiter = group.take_join_waiter(member)
            if waiter is not None:
                self._reply_join_error(waiter, ErrorCode.NOT_COORDINATOR, member.member_id)
            waiter = group.take_sync_waiter(member)
            if waiter is not None:
                self._reply(waiter, self._sync_response(ErrorCode.NOT_COORDINATOR))
        del self._groups[group.group_id]
        self._timers.cancel_group(group.group_id)
        log.info("unloaded group %s (was %s, generation %d)", group.group_id, previous, group.generation_id)

    # ------------------------------------------------------------------------------------------
    # replay of __consumer_offsets records
    # ------------------------------------------------------------------------------------------

    def replay(self, record: Record) -> None:
        """Apply a record after the broker appended it, or one of a partition being loaded."""
        partition = record.partition
        state = self._loading.get(partition)
        if state is not None:
            self._apply_loading(state, record.key, record.value, state.position(record.offset), record.producer_id)
            return
        if partition not in self._owned:
            return
        last = self._positions.get(partition, -1)
        position = record.offset if record.offset >= 0 else last + 1
        self._positions[partition] = max(last, position)
        ident = (partition, record.key, record.value)
        n = self._self_applied.get(ident)
        if n:
            if n == 1:
                del self._self_applied[ident]
            else:
                self._self_applied[ident] = n - 1
            return
        try:
            key = rec.parse_key(record.key)
            if isinstance(key, OffsetKey):
                self._replay_offset(partition, key, record.value, position, record.producer_id)
            elif isinstance(key, GroupKey):
                self._replay_group(partition, key.group, record.value)
        except RecordFormatError as e:
            log.warning("__consumer_offsets-%d: skipping a record that cannot be read: %s", partition, e)

    def _replay_offset(self, partition: int, key: OffsetKey, value: bytes | None, position: int,
                       producer_id: int) -> None:
        group = self._groups.get(key.group)
        tp = (key.topic, key.partition)
        if value is None:
            if group is not None:
                group.remove_offset(tp)  # with the partition's pending transactional offsets
                self._maybe_drop_offsets_only_group(group)
            return
        om = rec.parse_offset_value(value)
        if group is None:
            group = Group(key.group, partition, EMPTY, self._now)
            self._groups[key.group] = group
        if producer_id >= 0:
            # a TxnOffsetCommit: visible once the producer's transaction commits
            group.pending_txn.setdefault(producer_id, {})[tp] = (position, om)
            self._open_txns.setdefault((partition, producer_id), set()).add(key.group)
        else:
            group.put_offset(tp, om, position)
        n = group.pending_commits.get(tp, 0)
        if n > 1:
            group.pending_commits[tp] = n - 1
        elif n == 1:
            del group.pending_commits[tp]

    def _maybe_drop_offsets_only_group(self, group: Group) -> None:
        """A group that exists only through offsets (no generation, no protocol, nobody waiting)
        and has none left disappears, as it would after a reload."""
        if (group.is_(EMPTY) and group.generation_id == 0 and group.protocol_type is None and not group.members
                and not group.pending_members and not group.has_offsets()):
            group.transition(GroupEvent.REMOVE, self._now)
            del self._groups[group.group_id]
            self._timers.cancel_group(group.group_id)

    def _replay_group(self, partition: int, group_id: str, value: bytes | None) -> None:
        """A group metadata record this coordinator did not write while owning the partition: take
        it as loading would, unless live members say otherwise."""
        group = self._groups.get(group_id)
        if group is not None and (group.members or not group.is_(EMPTY)):
            log.warning("group %s: ignoring a foreign group metadata record for a live group", group_id)
            return
        offsets = group.offsets if group is not None else {}
        positions = group.offset_positions if group is not None else {}
        pending = group.pending_commits if group is not None else Counter()
        pending_txn = group.pending_txn if group is not None else {}
        if group is not None:
            del self._groups[group_id]
            self._timers.cancel_group(group_id)
        if value is None:
            if offsets or pending or pending_txn:
                group = Group(group_id, partition, EMPTY, self._now)
            else:
                return
        else:
            group = self._group_from_value(group_id, partition, rec.parse_group_value(value))
        group.offsets = offsets
        group.offset_positions = positions
        group.pending_commits = pending
        group.pending_txn = pending_txn
        self._groups[group_id] = group
        self._on_group_loaded(group)

    # ------------------------------------------------------------------------------------------
    # loading
    # ------------------------------------------------------------------------------------------

    @staticmethod
    def _apply_loading(state: _LoadState, key_bytes: bytes | None, value: bytes | None, position: int,
                       producer_id: int) -> None:
        if key_bytes is None:
            return
        try:
            key = rec.parse_key(key_bytes)
            if isinstance(key, OffsetKey):
                tp = (key.topic, key.partition)
                if value is None:
                    # as live replay: the committed offset and any pending transactional ones
                    offsets = state.offsets.get(key.group)
                    if offsets is not None:
                        offsets.pop(tp, None)
                    for by_group in state.pending.values():
                        pending = by_group.get(key.group)
                        if pending is not None:
                            pending.pop(tp, None)
                elif producer_id >= 0:
                    pending = state.pending.setdefault(producer_id, {}).setdefault(key.group, {})
                    pending[tp] = (position, rec.parse_offset_value(value))
                else:
                    offsets = state.offsets.setdefault(key.group, {})
                    offsets.pop(tp, None)
                    offsets[tp] = (position, rec.parse_offset_value(value))
            elif isinstance(key, GroupKey):
                if value is None:
                    state.groups.pop(key.group, None)
                else:
                    state.groups[key.group] = rec.parse_group_value(value)
            elif isinstance(key, ConsumerKey):
                records = state.consumer.setdefault(key.group, {})
                if value is None:
                    records.pop((key.record_type, key.sub), None)
                else:
                    records[(key.record_type, key.sub)] = value
        except RecordFormatError as e:
            log.warning("skipping a __consumer_offsets record that cannot be read: %s", e)

    @staticmethod
    def _apply_loading_marker(state: _LoadState, producer_id: int, commit: bool) -> None:
        """A COMMIT/ABORT marker read while loading: the producer's pending offsets become
        committed unless a later record committed the partition already, or are dropped."""
        by_group = state.pending.pop(producer_id, None)
        if not by_group or not commit:
            return
        for group_id, pending in by_group.items():
            if not pending:
                continue
            offsets = state.offsets.setdefault(group_id, {})
            for tp, (position, om) in pending.items():
                current = offsets.get(tp)
                if current is None or current[0] < position:
                    offsets.pop(tp, None)
                    offsets[tp] = (position, om)

    @staticmethod
    def _group_from_value(group_id: str, partition: int, value: GroupMetadataValue) -> Group:
        """GroupMetadata.loadGroup: Empty without members, else Stable; each member supports just the
        group's protocol, with the subscription stored for it."""
        group = Group(group_id, partition, STABLE if value.members else EMPTY, None)
        group.state_timestamp = None if value.current_state_timestamp == -1 else value.current_state_timestamp
        group.generation_id = value.generation
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        for mm in value.members:
            if mm.member_id in group.members or (mm.group_instance_id is not None
                                                 and mm.group_instance_id in group.static_members):
                log.warning("group %s: skipping duplicate member %s in its metadata record", group_id, mm.member_id)
                continue
            rebalance_timeout = mm.rebalance_timeout if mm.rebalance_timeout >= 0 else mm.session_timeout  # v0
            member = Member(mm.member_id, mm.group_instance_id, mm.client_id, mm.client_host, rebalance_timeout,
                            mm.session_timeout, value.protocol_type, [(value.protocol or "", bytes(mm.subscription))],
                            bytes(mm.assignment))
            group.add(member, None)
        group.protocol_type = value.protocol_type or None
        if group.members and (group.leader_id is None or group.leader_id not in group.members):
            group.leader_id = next(iter(group.members))
        group.subscribed_topics = group.compute_subscribed_topics()
        return group
