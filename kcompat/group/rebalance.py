"""Rebalances of classic groups (Kafka's GroupMetadataManager classic half / ClassicGroup): the
join phase and its timers, the generation's completion, propagating the leader's assignment,
member removal and session expiry, the group metadata record, and the classic side of a group
changing protocol (:class:`kcompat.group.consumer_group.ClassicGroups`). Composed into
:class:`kcompat.group.membership.ClassicGroupManager`, which decodes the APIs; the other parts use
:meth:`ClassicRebalancer.schedule_heartbeat` and :meth:`ClassicRebalancer.on_group_loaded`."""

from __future__ import annotations

from kcompat.group import records as rec
from kcompat.group.classic_replies import join_success, reply_join_error, sync_response
from kcompat.group.coordinator_types import log, EMPTY, PREPARING, COMPLETING, STABLE, DEAD, UNKNOWN_MEMBER_ID, Record
from kcompat.group.model import CONSUMER_PROTOCOL_TYPE, Group, Member
from kcompat.group.records import GroupKey, RecordFormatError
from kcompat.group.shard import GroupShardContext
from kcompat.group.state import GroupEvent, can_rebalance
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.group_records.group_metadata_value import GroupMetadataValue


class ClassicRebalancer:
    """Rebalances of the classic groups of :class:`GroupShardContext`."""

    def __init__(self, ctx: GroupShardContext) -> None:
        self.ctx = ctx

    def schedule_heartbeat(self, group: Group, member: Member, timeout_ms: int | None = None) -> None:
        """Kafka's completeAndScheduleNextHeartbeatExpiration."""
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        self.ctx.timers.schedule(("hb", group.group_id, member.member_id), self.ctx.now + timeout)

    def maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if can_rebalance(group.state):
            self.prepare_rebalance(group, reason)

    def prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(COMPLETING):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self.ctx.timers.cancel(("sync", group.group_id))
        initial = group.is_(EMPTY)
        if initial:
            # InitialDelayedJoin: wait group.initial.rebalance.delay.ms, longer while members keep
            # arriving, but no longer in total than the rebalance timeout
            delay = self.ctx.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self.ctx.timers.schedule(("join", group.group_id), self.ctx.now + delay, ("initial", delay, remaining))
        else:
            self.ctx.timers.schedule(("join", group.group_id), self.ctx.now + group.rebalance_timeout_ms(), ("join",))
        old_state = group.state
        group.transition(GroupEvent.PREPARE_REBALANCE, self.ctx.now)
        log.info("group %s: preparing to rebalance in state %s with old generation %d (__consumer_offsets-%d) "
                 "(reason: %s)", group.group_id, old_state, group.generation_id, group.partition, reason)
        if not initial:
            self.maybe_complete_join(group)

    def maybe_complete_join(self, group: Group) -> None:
        """DelayedJoin.tryComplete: end the join phase once every member rejoined (never early for
        the initial delayed join)."""
        if not group.is_(PREPARING) or not group.has_all_members_joined():
            return
        timer = self.ctx.timers.get(("join", group.group_id))
        if timer is None or timer[1][0] == "join":
            self._complete_join(group)

    def on_join_timer(self, group_id: str, payload: tuple) -> None:
        group = self.ctx.groups.get(group_id)
        if group is None or not group.is_(PREPARING):
            return
        if payload[0] == "initial":
            _, delay, remaining = payload
            if group.new_member_added and remaining != 0:
                group.new_member_added = False
                new_delay = min(self.ctx.config.initial_rebalance_delay_ms, remaining)
                new_remaining = max(remaining - delay, 0)
                self.ctx.timers.schedule(("join", group_id), self.ctx.now + new_delay, ("initial", new_delay, new_remaining))
                return
        self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        """Kafka's onCompleteJoin: drop dynamic members that did not rejoin, start the next
        generation and answer every waiting JoinGroup (the leader gets all members' metadata)."""
        self.ctx.timers.cancel(("join", group.group_id))
        gone = [m for m in group.not_yet_rejoined() if not m.is_static]
        if gone:
            log.info("group %s: removing members that did not rejoin: %s", group.group_id,
                     [m.member_id for m in gone])
            for m in gone:
                self.answer_removed_member(group, m)
                self.remove_member(group, m.member_id)
        if group.is_(DEAD):
            return
        self.ctx.rebalances["classic"] += 1
        if not group.maybe_elect_new_joined_leader() and group.members:
            # only static members that did not rejoin remain: wait for them (or their session expiry)
            log.error("group %s: cannot complete the rebalance because no members rejoined", group.group_id)
            self.ctx.timers.schedule(("join", group.group_id), self.ctx.now + group.rebalance_timeout_ms(), ("join",))
            return
        group.init_next_generation(self.ctx.now)
        if group.is_(EMPTY):
            log.info("group %s with generation %d is now empty (__consumer_offsets-%d)", group.group_id,
                     group.generation_id, group.partition)
            self.store_group(group, {})
            return
        log.info("group %s: stabilized generation %d (__consumer_offsets-%d) with %d members, protocol %s",
                 group.group_id, group.generation_id, group.partition, group.size, group.protocol_name)
        for member in group.members.values():
            waiter = group.take_join_waiter(member)
            if waiter is not None:
                self.ctx.reply(waiter, join_success(group, member, waiter[1],
                                                       with_members=group.is_leader(member.member_id)))
            self.schedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        self.ctx.timers.schedule(("sync", group.group_id), self.ctx.now + group.rebalance_timeout_ms(), group.generation_id)

    def _reset_and_propagate_assignment_error(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self.propagate_assignment(group, error)

    def propagate_assignment(self, group: Group, error: ErrorCode) -> None:
        ok = error == ErrorCode.NONE
        for member in group.members.values():
            waiter = group.take_sync_waiter(member)
            if waiter is not None:
                self.ctx.reply(waiter, sync_response(error, group.protocol_type if ok else None,
                                                        group.protocol_name if ok else None, member.assignment))
                # the session restarts once the member has its assignment
                self.schedule_heartbeat(group, member)

    def store_group(self, group: Group, assignment: dict[str, bytes]) -> None:
        """Write the group metadata record (GroupMetadataManager.storeGroup)."""
        members = [GroupMetadataValue.MemberMetadata(
            member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
            client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms, session_timeout=m.session_timeout_ms,
            subscription=m.metadata(group.protocol_name), assignment=assignment[m.member_id])
            for m in group.members.values()]
        value = GroupMetadataValue(
            protocol_type=group.protocol_type or "", generation=group.generation_id, protocol=group.protocol_name,
            leader=group.leader_id,
            current_state_timestamp=-1 if group.state_timestamp is None else group.state_timestamp,
            members=members)
        self.ctx.emit(group.partition, rec.group_metadata_key(group.group_id), rec.group_metadata_value(value),
                   applied=True)

    def remove_member(self, group: Group, member_id: str) -> None:
        group.remove(member_id)
        self.ctx.timers.cancel(("hb", group.group_id, member_id))

    def answer_removed_member(self, group: Group, member: Member) -> None:
        """A member leaving the group while a JoinGroup or SyncGroup of it waits: answer it with
        UNKNOWN_MEMBER_ID (Kafka does so for the JoinGroup, which a new member may have pending)."""
        waiter = group.take_join_waiter(member)
        if waiter is not None:
            reply_join_error(self.ctx, waiter, ErrorCode.UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID)
        waiter = group.take_sync_waiter(member)
        if waiter is not None:
            self.ctx.reply(waiter, sync_response(ErrorCode.UNKNOWN_MEMBER_ID))

    def remove_member_and_update_group(self, group: Group, member: Member, reason: str) -> None:
        self.answer_removed_member(group, member)
        self.remove_member(group, member.member_id)
        if group.state in (STABLE, COMPLETING):
            self.maybe_prepare_rebalance(group, reason)
        elif group.is_(PREPARING):
            self.maybe_complete_join(group)

    def remove_pending_member_and_update_group(self, group: Group, member_id: str) -> None:
        group.pending_members.discard(member_id)
        self.ctx.timers.cancel(("pending", group.group_id, member_id))
        if group.is_(PREPARING):
            self.maybe_complete_join(group)

    def on_heartbeat_expired(self, group_id: str, member_id: str) -> None:
        group = self.ctx.groups.get(group_id)
        if group is None or group.is_(DEAD):
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        log.info("group %s: member %s failed (session timeout), removing it", group_id, member_id)
        self.remove_member_and_update_group(group, member, f"removing member {member_id} on heartbeat expiration")

    def on_pending_member_expired(self, group_id: str, member_id: str) -> None:
        group = self.ctx.groups.get(group_id)
        if group is not None and member_id in group.pending_members:
            log.info("group %s: pending member %s removed after session timeout", group_id, member_id)
            self.remove_pending_member_and_update_group(group, member_id)

    def on_sync_expired(self, group_id: str, generation: int) -> None:
        group = self.ctx.groups.get(group_id)
        if group is None or generation != group.generation_id:
            return
        if group.state in (COMPLETING, STABLE) and group.pending_sync:
            missing = sorted(group.pending_sync)
            for member_id in missing:
                self.remove_member(group, member_id)
            self.prepare_rebalance(group, f"removing {missing} on pending sync request expiration")

    def on_group_loaded(self, group: Group) -> None:
        if group.size > self.ctx.config.max_size:
            self.prepare_rebalance(group, f"freshly-loaded group is over capacity ({self.ctx.config.max_size}); "
                                           "rebalancing to give consumers a chance to commit offsets")
        for member in group.members.values():
            self.schedule_heartbeat(group, member)

    def on_metadata_not_stored(self, record: Record, error: ErrorCode) -> None:
        try:
            key = rec.parse_key(record.key)
            value = rec.parse_group_value(record.value) if isinstance(key, GroupKey) else None
        except RecordFormatError:
            return
        group = self.ctx.groups.get(key.group) if value is not None else None
        if (group is None or group.partition != record.partition or group.generation_id != value.generation
                or group.state not in (STABLE, COMPLETING) or not group.members):
            return
        log.warning("group %s: could not store generation %d (%s); rebalancing", group.group_id,
                    group.generation_id, error.name)
        for member in group.members.values():
            member.assignment = b""
        self.maybe_prepare_rebalance(group, f"error {error.name} when storing the group metadata")

    def abandon_classic_members(self, group: Group, error: ErrorCode) -> None:
        """Answer ``group``'s waiting JoinGroup/SyncGroup requests with ``error`` (Kafka's
        completeAllJoinFutures/completeAllSyncFutures) and drop its classic membership and
        timers; its offsets stay (it becomes a consumer group)."""
        for member in list(group.members.values()):
            waiter = group.take_join_waiter(member)
            if waiter is not None:
                reply_join_error(self.ctx, waiter, error, member.member_id)
            waiter = group.take_sync_waiter(member)
            if waiter is not None:
                self.ctx.reply(waiter, sync_response(error))
            self.ctx.timers.cancel(("hb", group.group_id, member.member_id))
        for member_id in group.pending_members:
            self.ctx.timers.cancel(("pending", group.group_id, member_id))
        self.ctx.timers.cancel(("join", group.group_id))
        self.ctx.timers.cancel(("sync", group.group_id))
        group.reset_classic(EMPTY, self.ctx.now)

    def adopt_classic_members(self, group: Group, generation: int, members: list) -> None:
        """``group`` becomes a classic group (ClassicGroup.fromConsumerGroup): Stable at
        ``generation`` with ``members`` (``[(ConsumerMember, assignment bytes)]``), stored, then
        rebalancing so that its members rejoin as a classic group."""
        group.reset_classic(STABLE, self.ctx.now)
        group.generation_id = generation
        for cm, assignment in members:
            member = Member(cm.member_id, cm.instance_id, cm.client_id, cm.client_host, cm.rebalance_timeout_ms,
                            cm.classic.session_timeout_ms, CONSUMER_PROTOCOL_TYPE, list(cm.classic.protocols),
                            assignment)
            group.add(member, None)
        group.protocol_name = group.select_protocol()
        group.leader_id = next(iter(group.members))
        group.subscribed_topics = group.compute_subscribed_topics()
        self.store_group(group, {m.member_id: m.assignment for m in group.members.values()})
        for member in group.members.values():
            self.schedule_heartbeat(group, member)
        self.prepare_rebalance(group, f"Downgrade group {group.group_id} from consumer to classic.")
