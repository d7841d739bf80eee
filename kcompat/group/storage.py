"""How the group coordinator keeps its state in ``__consumer_offsets``: offset expiry, deleted
topics and group removal, replay of records, loading and unloading a partition, and failed writes
(Kafka's GroupMetadataManager / OffsetMetadataManager replay and the coordinator shard's load).
A part of :class:`kcompat.group.coordinator.GroupCoordinator`, composed with the shared
:class:`kcompat.group.shard.GroupShardContext`, the classic membership (to rebuild and answer
classic groups), the consumer group manager (to restore and delete KIP-848 groups) and the share
group manager (KIP-932 groups; they hold no offsets and are removed only by DeleteGroups)."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Iterable

from kcompat.group import records as rec
from kcompat.group.coordinator_types import (
    log, EMPTY, STABLE, NO_PRODUCER_ID, Record, Result, TxnMarker, _LoadState, _Positioned,
)
from kcompat.group.write_errors import coordinator_error, with_error
from kcompat.group.model import CONSUMER_PROTOCOL_TYPE, Group, Member
from kcompat.group.consumer_records import ConsumerKey
from kcompat.group.share_group_records import ShareKey
from kcompat.group.streams_records import StreamsKey
from kcompat.group.records import GroupKey, OffsetAndMetadata, OffsetKey, RecordFormatError
from kcompat.group.classic_replies import answer_waiters
from kcompat.group.shard import GroupShardContext
from kcompat.group.state import GroupEvent

if TYPE_CHECKING:  # pragma: no cover
    from kcompat.group.consumer_groups import ConsumerGroupManager
    from kcompat.group.streams_groups import StreamsGroupManager
    from kcompat.group.membership import ClassicGroupManager
    from kcompat.group.share_groups import ShareGroupManager
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.group_records.group_metadata_value import GroupMetadataValue


class GroupStore:
    """Expiry, replay, loading and unloading of the groups of :class:`GroupShardContext`."""

    def __init__(self, ctx: GroupShardContext, classic: "ClassicGroupManager",
                 consumer_groups: "ConsumerGroupManager", share_groups: "ShareGroupManager | None" = None,
                 streams_groups: "StreamsGroupManager | None" = None) -> None:
        self.ctx = ctx
        self.classic = classic
        self.consumer_groups = consumer_groups
        self.share_groups = share_groups
        self.streams_groups = streams_groups

    # ------------------------------------------------------------------------------------------
    # offset expiry, deleted topics, group removal
    # ------------------------------------------------------------------------------------------

    def on_partitions_deleted(self, partitions: list[tuple[str, int]], now_ms: int) -> Result:
        """Delete the committed offsets of deleted topic partitions in every group (Kafka 4.3's
        OffsetMetadataManager.onPartitionsDeleted). A group left empty without offsets stays until
        the periodic cleanup (:meth:`expire_offsets`), as on Kafka 4.3.1."""
        self.ctx.begin(now_ms)
        deleted = set(partitions)
        for group in list(self.ctx.groups.values()):
            removed = group.offset_partitions() & deleted
            if removed:
                self.delete_offsets(group, removed)
        return self.ctx.end(now_ms)

    def expire_offsets(self, now_ms: int) -> None:
        n = 0
        for group in list(self.ctx.groups.values()):
            expired = self._expired_offsets(group, now_ms)
            n += len(expired)
            if expired or group.is_(EMPTY):
                self.cleanup_group(group, set(expired))
        if n:
            log.info("expired %d committed offsets", n)

    def _expired_offsets(self, group: Group, now_ms: int) -> list[tuple[str, int]]:
        """GroupMetadata.removeExpiredOffsets (KIP-211)."""
        retention = self.ctx.config.offsets_retention_ms
        exclude: set[str] = set()
        if group.epoch_membership is not None:
            # ConsumerGroup's (and StreamsGroup's) expiration: from each commit, for topics the
            # group does not subscribe to (all of them once it is empty)
            exclude = group.epoch_membership.subscribed_names()

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

    def delete_offsets(self, group: Group, removed: set[tuple[str, int]]) -> None:
        """Write tombstones for ``removed`` offsets (memory follows on replay); the group stays."""
        for topic, partition in sorted(removed):
            self.ctx.emit(group.partition, rec.offset_commit_key(group.group_id, topic, partition), None, applied=False)

    def cleanup_group(self, group: Group, removed: set[tuple[str, int]], *, force_dead: bool = False) -> None:
        """Write tombstones for ``removed`` offsets; an Empty group left without offsets becomes
        Dead, with a group tombstone if it ever had a generation (the periodic
        GroupMetadataManager.cleanupGroupMetadata, and DeleteGroups with ``force_dead``)."""
        self.delete_offsets(group, removed)
        remaining = group.offset_partitions() - removed
        if group.share is not None and not force_dead:
            return   # a share group stays until DeleteGroups (it never had offsets to expire)
        if force_dead or (group.is_(EMPTY) and not remaining and not group.pending_members
                          and not group.has_live_members()):
            self.remove_group(group)

    def remove_group(self, group: Group) -> None:
        log.info("group %s transitioned to Dead in generation %d", group.group_id, group.generation_id)
        group.transition(GroupEvent.REMOVE, self.ctx.now)
        del self.ctx.groups[group.group_id]
        self.ctx.timers.cancel_group(group.group_id)
        if group.consumer is not None:
            self.consumer_groups.delete_records(group)
        elif group.share is not None:
            self.share_groups.delete_records(group)
        elif group.streams is not None:
            self.streams_groups.delete_records(group)
        else:
            # also for a group that only stored offsets (generation 0, no metadata record), as
            # ClassicGroup.createGroupTombstoneRecords: its commit records would otherwise bring
            # it back, empty, when the partition is loaded again
            self.ctx.emit(group.partition, rec.group_metadata_key(group.group_id), None, applied=True)

    def unload_group(self, group: Group) -> None:
        previous = group.state
        group.transition(GroupEvent.REMOVE, self.ctx.now)
        answer_waiters(self.ctx, group, ErrorCode.NOT_COORDINATOR)
        del self.ctx.groups[group.group_id]
        self.ctx.timers.cancel_group(group.group_id)
        log.info("unloaded group %s (was %s, generation %d)", group.group_id, previous, group.generation_id)

    # ------------------------------------------------------------------------------------------
    # replay of __consumer_offsets records
    # ------------------------------------------------------------------------------------------

    def replay(self, record: Record) -> None:
        """Apply a record after the broker appended it, or one of a partition being loaded."""
        partition = record.partition
        state = self.ctx.loading.get(partition)
        if state is not None:
            self.apply_loading(state, record.key, record.value, state.position(record.offset), record.producer_id)
            return
        if partition not in self.ctx.owned:
            return
        last = self.ctx.positions.get(partition, -1)
        position = record.offset if record.offset >= 0 else last + 1
        self.ctx.positions[partition] = max(last, position)
        ident = (partition, record.key, record.value)
        n = self.ctx.self_applied.get(ident)
        if n:
            if n == 1:
                del self.ctx.self_applied[ident]
            else:
                self.ctx.self_applied[ident] = n - 1
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
        group = self.ctx.groups.get(key.group)
        tp = (key.topic, key.partition)
        if value is None:
            if group is not None:   # the group stays, as on Kafka 4.3.1, until the periodic cleanup
                group.remove_offset(tp)  # with the partition's pending transactional offsets
            return
        om = rec.parse_offset_value(value)
        if group is None:
            group = Group(key.group, partition, EMPTY, self.ctx.now)
            self.ctx.groups[key.group] = group
        if producer_id >= 0:
            # a TxnOffsetCommit: visible once the producer's transaction commits
            group.pending_txn.setdefault(producer_id, {})[tp] = (position, om)
            self.ctx.open_txns.setdefault((partition, producer_id), set()).add(key.group)
        else:
            group.put_offset(tp, om, position)
        n = group.pending_commits.get(tp, 0)
        if n > 1:
            group.pending_commits[tp] = n - 1
        elif n == 1:
            del group.pending_commits[tp]

    def maybe_drop_offsets_only_group(self, group: Group) -> None:
        """A group that exists only through offsets (no generation, no protocol, nobody waiting)
        and has none left disappears, as it would after a reload."""
        if (group.is_(EMPTY) and group.generation_id == 0 and group.protocol_type is None and not group.members
                and not group.pending_members and not group.has_offsets()):
            group.transition(GroupEvent.REMOVE, self.ctx.now)
            del self.ctx.groups[group.group_id]
            self.ctx.timers.cancel_group(group.group_id)

    def _replay_group(self, partition: int, group_id: str, value: bytes | None) -> None:
        """A group metadata record this coordinator did not write while owning the partition: take
        it as loading would, unless live members say otherwise."""
        group = self.ctx.groups.get(group_id)
        if group is not None and (group.members or not group.is_(EMPTY)):
            log.warning("group %s: ignoring a foreign group metadata record for a live group", group_id)
            return
        offsets = group.offsets if group is not None else {}
        positions = group.offset_positions if group is not None else {}
        pending = group.pending_commits if group is not None else Counter()
        pending_txn = group.pending_txn if group is not None else {}
        if group is not None:
            del self.ctx.groups[group_id]
            self.ctx.timers.cancel_group(group_id)
        if value is None:
            if offsets or pending or pending_txn:
                group = Group(group_id, partition, EMPTY, self.ctx.now)
            else:
                return
        else:
            group = self.group_from_value(group_id, partition, rec.parse_group_value(value))
        group.offsets = offsets
        group.offset_positions = positions
        group.pending_commits = pending
        group.pending_txn = pending_txn
        self.ctx.groups[group_id] = group
        self.classic.rebalance.on_group_loaded(group)

    # ------------------------------------------------------------------------------------------
    # loading
    # ------------------------------------------------------------------------------------------

    @staticmethod
    def apply_loading(state: _LoadState, key_bytes: bytes | None, value: bytes | None, position: int,
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
            elif isinstance(key, (ConsumerKey, ShareKey, StreamsKey)):
                by_group = (state.consumer if isinstance(key, ConsumerKey)
                            else state.share if isinstance(key, ShareKey) else state.streams)
                records = by_group.setdefault(key.group, {})
                if value is None:
                    records.pop((key.record_type, key.sub), None)
                else:
                    records[(key.record_type, key.sub)] = value
        except RecordFormatError as e:
            log.warning("skipping a __consumer_offsets record that cannot be read: %s", e)

    def _restore_modern(self, partition: int, group_id: str, records: dict, now_ms: int, loaded: list, kind: str,
                        manager, conflicts, outcome: str) -> None:
        """A ``kind`` group ("consumer", KIP-848; "streams", KIP-1071) from its records through
        ``manager.restore``, over the offsets-only group its offsets made; not over a group that
        ``conflicts(group)`` says is of another type (then ``outcome`` is logged)."""
        group = self.ctx.groups.get(group_id)
        if manager is None or (group is not None and conflicts(group)):
            log.warning("group %s: both %s group records and another group type's; %s", group_id, kind, outcome)
            return
        fresh = group is None
        group = group if group is not None else Group(group_id, partition, EMPTY, now_ms)
        try:
            restored = manager.restore(group, records)
        except (ValueError, RecordFormatError) as e:
            log.warning("group %s: cannot restore its %s group records: %s", group_id, kind, e)
            restored = False
        if restored and fresh:
            self.ctx.groups[group_id] = group
            loaded.append(group)

    @staticmethod
    def apply_loading_marker(state: _LoadState, producer_id: int, commit: bool) -> None:
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
    def group_from_value(group_id: str, partition: int, value: GroupMetadataValue) -> Group:
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

    # ------------------------------------------------------------------------------------------
    # loading, unloading, failed writes
    # ------------------------------------------------------------------------------------------

    def begin_loading(self, partition: int) -> None:
        """Requests for groups of ``partition`` get COORDINATOR_LOAD_IN_PROGRESS until :meth:`load`."""
        if partition in self.ctx.owned:
            self.ctx.defer(self.unload(partition))
        self.ctx.loading.setdefault(partition, _LoadState())

    def load(self, partition: int, records: Iterable, now_ms: int) -> None:
        """Replay the partition's log in order, then own the partition: groups come back Empty or
        Stable with their members (heartbeat deadlines from ``now_ms``).

        Each entry is one stored record: ``(offset, key, value)`` for a record of a
        non-transactional batch, ``(offset, key, value, producer_id)`` for one of a transactional
        batch (a TxnOffsetCommit), or a :class:`TxnMarker` for a COMMIT/ABORT control record. A
        transaction whose marker is not in the log stays pending (its coordinator sends the
        marker again)."""
        if partition in self.ctx.owned:
            self.ctx.defer(self.unload(partition))
        state = self.ctx.loading.setdefault(partition, _LoadState())
        for entry in records:
            if isinstance(entry, TxnMarker):
                state.position(entry.offset)
                self.apply_loading_marker(state, entry.producer_id, entry.commit)
            elif len(entry) == 4:
                offset, key, value, producer_id = entry
                self.apply_loading(state, key, value, state.position(offset), producer_id)
            else:
                offset, key, value = entry
                self.apply_loading(state, key, value, state.position(offset), NO_PRODUCER_ID)
        self.ctx.begin(None)
        self.ctx.now = now_ms
        del self.ctx.loading[partition]
        self.ctx.owned.add(partition)
        self.ctx.positions[partition] = state.last_offset
        self.ensure_expiry_timer(now_ms)
        pending_by_group: dict[str, dict[int, dict[tuple[str, int], _Positioned]]] = {}
        for producer_id, by_group in state.pending.items():
            for group_id, pending in by_group.items():
                if pending:
                    pending_by_group.setdefault(group_id, {})[producer_id] = pending
        n_groups = n_offsets = n_pending = 0
        loaded: list[Group] = []
        for group_id, value in state.groups.items():
            group = self.group_from_value(group_id, partition, value)
            self._set_loaded_offsets(group, state.offsets.pop(group_id, {}), pending_by_group.pop(group_id, {}))
            self.ctx.groups[group_id] = group
            self.classic.rebalance.on_group_loaded(group)
            loaded.append(group)
        # offsets without group metadata: groups using Kafka only for offsets
        for group_id in list(state.offsets) + [g for g in pending_by_group if g not in state.offsets]:
            offsets = state.offsets.get(group_id, {})
            pending = pending_by_group.get(group_id, {})
            if offsets or pending:
                group = Group(group_id, partition, EMPTY, now_ms)
                self._set_loaded_offsets(group, offsets, pending)
                self.ctx.groups[group_id] = group
                loaded.append(group)
        for group_id, records in state.consumer.items():
            self._restore_modern(partition, group_id, records, now_ms, loaded, "consumer", self.consumer_groups,
                                 lambda g: g.has_live_members(), "keeping the classic group")
        for group_id, records in state.share.items():
            if group_id in self.ctx.groups or self.share_groups is None:
                log.warning("group %s: both share group records and another group type's; skipping them", group_id)
                continue
            group = Group(group_id, partition, EMPTY, now_ms)
            try:
                restored = self.share_groups.restore(group, records)
            except (ValueError, RecordFormatError) as e:
                log.warning("group %s: cannot restore its share group records: %s", group_id, e)
                restored = False
            if restored:
                self.ctx.groups[group_id] = group
                loaded.append(group)
        for group_id, records in state.streams.items():
            self._restore_modern(partition, group_id, records, now_ms, loaded, "streams", self.streams_groups,
                                 lambda g: g.has_live_members() or g.protocol_type is not None, "skipping them")
        for group in loaded:
            n_groups += 1
            n_offsets += len(group.offsets)
            for producer_id, pending in group.pending_txn.items():
                self.ctx.open_txns.setdefault((partition, producer_id), set()).add(group.group_id)
                n_pending += len(pending)
        log.info("loaded __consumer_offsets-%d: %d groups, %d committed offsets, %d transactional offsets pending",
                 partition, n_groups, n_offsets, n_pending)
        self.ctx.defer(self.ctx.end(None))

    @staticmethod
    def _set_loaded_offsets(group: Group, offsets: dict[tuple[str, int], _Positioned],
                            pending: dict[int, dict[tuple[str, int], _Positioned]]) -> None:
        group.offsets = {tp: om for tp, (_, om) in offsets.items()}
        group.offset_positions = {tp: position for tp, (position, _) in offsets.items()}
        group.pending_txn = pending

    def unload(self, partition: int) -> Result:
        """Give the partition up: its groups are dropped and waiting requests get NOT_COORDINATOR."""
        self.ctx.begin(None)
        self.ctx.loading.pop(partition, None)
        self.ctx.owned.discard(partition)
        for group in [g for g in self.ctx.groups.values() if g.partition == partition]:
            self.unload_group(group)
        for k in [k for k in self.ctx.self_applied if k[0] == partition]:
            del self.ctx.self_applied[k]
        for k in [k for k in self.ctx.open_txns if k[0] == partition]:
            del self.ctx.open_txns[k]
        self.ctx.positions.pop(partition, None)
        return self.ctx.end(None)

    def write_failed(self, result: Result, failed: list[Record], error_code: int, now_ms: int) -> Result:
        """``failed``, records of ``result``, could not be appended or replicated (``error_code``:
        the append error, e.g. NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT,
        NOT_ENOUGH_REPLICAS_AFTER_APPEND); they will not be replayed. As Kafka's coordinator after
        a failed acks=-1 write: offset commits stop being pending (failPendingOffsetWrite; the
        committed offsets never changed); a group whose metadata record of its current generation
        was lost resets its assignment and rebalances (the SyncGroup store callback). Returns the
        replies to send instead of ``result``'s: each with the coordinator error for
        ``error_code`` where it said NONE (:mod:`kcompat.group.write_errors`)."""
        self.ctx.begin(now_ms)
        error = coordinator_error(error_code)
        for r in failed:
            ident = (r.partition, r.key, r.value)
            n = self.ctx.self_applied.get(ident)
            if n:
                if n == 1:
                    del self.ctx.self_applied[ident]
                else:
                    self.ctx.self_applied[ident] = n - 1
                if r.value is not None:
                    self.classic.rebalance.on_metadata_not_stored(r, error)
                continue
            try:
                key = rec.parse_key(r.key)
            except RecordFormatError:
                continue
            group = self.ctx.groups.get(key.group) if isinstance(key, OffsetKey) else None
            if group is not None and group.partition == r.partition:
                tp = (key.topic, key.partition)
                n = group.pending_commits.get(tp, 0)
                if n > 1:
                    group.pending_commits[tp] = n - 1
                elif n == 1:
                    del group.pending_commits[tp]
                self.maybe_drop_offsets_only_group(group)
        for reply_to, response in result.replies:
            self.ctx.extend_replies([(reply_to, with_error(response, error))])
        return self.ctx.end(now_ms)

    def shutdown(self) -> Result:
        """Answer everything pending with NOT_COORDINATOR; later requests get COORDINATOR_NOT_AVAILABLE."""
        self.ctx.begin(None)
        for group in list(self.ctx.groups.values()):
            self.unload_group(group)
        self.ctx.owned.clear()
        self.ctx.loading.clear()
        self.ctx.self_applied.clear()
        self.ctx.open_txns.clear()
        self.ctx.positions.clear()
        self.ctx.timers.clear()
        self.ctx.active = False
        return self.ctx.end(None)

    def ensure_expiry_timer(self, now_ms: int) -> None:
        if self.ctx.active and ("expire", None) not in self.ctx.timers:
            # Kafka schedules the first offset expiry check with no delay, then every interval
            self.ctx.timers.schedule(("expire", None), now_ms)
