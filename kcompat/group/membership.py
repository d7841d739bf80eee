"""Membership of classic groups: JoinGroup, rebalances, SyncGroup, Heartbeat and LeaveGroup
(Kafka's GroupMetadataManager classic half / ClassicGroup), and the classic side of a group
changing protocol (:class:`kcompat.group.consumer_group.ClassicGroups`). A part of
:class:`kcompat.group.coordinator.GroupCoordinator`, composed with the shared
:class:`kcompat.group.shard.GroupShardContext`; requests for a group using the consumer protocol
go to the consumer group manager's migration (classic members of a consumer group)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kcompat.group.coordinator_types import (
    log, EMPTY, PREPARING, COMPLETING, STABLE, DEAD, NEW_MEMBER_JOIN_TIMEOUT_MS, UNKNOWN_MEMBER_ID, Result, _Api,
)
from kcompat.group.classic_replies import (
    join_response, join_success, reply_join_error, sync_response, validate_member,
)
from kcompat.group.consumer_migration import ClassicRequestError
from kcompat.group.model import CONSUMER_PROTOCOL_TYPE, Group, Member, Waiter
from kcompat.group.rebalance import ClassicRebalancer
from kcompat.group.shard import GroupShardContext
from kcompat.group.state import GroupEvent
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.heartbeat import HeartbeatResponse
from kcompat.protocol.messages.leave_group import LeaveGroupResponse

if TYPE_CHECKING:  # pragma: no cover
    from kcompat.group.consumer_groups import ConsumerGroupManager


class ClassicGroupManager:
    """JoinGroup, rebalance, SyncGroup, Heartbeat, LeaveGroup of the groups of
    :class:`GroupShardContext`. ``consumer_groups`` (set once the coordinator is composed) takes
    the classic requests to groups that use the consumer protocol."""

    def __init__(self, ctx: GroupShardContext) -> None:
        self.ctx = ctx
        self.rebalance = ClassicRebalancer(ctx)
        self.consumer_groups: "ConsumerGroupManager | None" = None

    def schedule_heartbeat(self, group: Group, member: Member) -> None:
        """Restart ``member``'s session (an OffsetCommit counts as a heartbeat)."""
        self.rebalance.schedule_heartbeat(group, member)

    @staticmethod
    def validate_member(group: Group, member_id: str, instance_id: str | None) -> ErrorCode | None:
        return validate_member(group, member_id, instance_id)

    # ------------------------------------------------------------------------------------------
    # JoinGroup
    # ------------------------------------------------------------------------------------------

    def join_group(self, reply_to, req, version: int, client_id: str, client_host: str, now_ms: int) -> Result:
        self.ctx.begin(now_ms)
        waiter = (reply_to, version)
        member_id = req.member_id or UNKNOWN_MEMBER_ID
        instance_id = req.group_instance_id if version >= 5 else None
        # JoinGroup v0 has no rebalance timeout: Kafka uses the session timeout
        rebalance_timeout = req.session_timeout_ms if version == 0 else req.rebalance_timeout_ms
        protocols = [(p.name, bytes(p.metadata)) for p in req.protocols]
        reason = req.reason if version >= 8 else None
        error = self.ctx.check_group(req.group_id, _Api.JOIN)
        if error is not None:
            # a partition not loaded here fails Kafka's write operation: an answer without the
            # member id (GroupCoordinatorService.joinGroup's handleOperationException)
            not_loaded = error in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
            reply_join_error(self.ctx, waiter, error, UNKNOWN_MEMBER_ID if not_loaded else member_id)
        elif not (self.ctx.config.min_session_timeout_ms <= req.session_timeout_ms <= self.ctx.config.max_session_timeout_ms):
            reply_join_error(self.ctx, waiter, ErrorCode.INVALID_SESSION_TIMEOUT, member_id)
        else:
            self._join(waiter, req.group_id, member_id, instance_id, client_id, client_host, rebalance_timeout,
                       req.session_timeout_ms, req.protocol_type, protocols, reason or "not provided")
        return self.ctx.end(now_ms)

    def _join(self, waiter: Waiter, group_id: str, member_id: str, instance_id: str | None, client_id: str,
              client_host: str, rebalance_timeout: int, session_timeout: int, protocol_type: str,
              protocols: list[tuple[str, bytes]], reason: str) -> None:
        unknown = member_id == UNKNOWN_MEMBER_ID
        group = self.ctx.groups.get(group_id)
        if group is not None and (group.share is not None or group.streams is not None):
            # Kafka's classicGroupJoin for a group of a type without classic members
            reply_join_error(self.ctx, waiter, ErrorCode.INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID)
            return
        if group is not None and group.consumer is not None:
            if group.consumer.members:
                # a classic member of a consumer group (KIP-848 online migration)
                self._join_consumer_group(group, waiter, member_id, instance_id, client_id, client_host,
                                          rebalance_timeout, session_timeout, protocol_type, protocols)
                return
            log.info("group %s: the empty consumer group becomes a classic group", group_id)
            self.consumer_groups.delete_records(group)
            group.consumer = None
            group.protocol_type = None
        if group is None:
            if not unknown:  # a member id for a group that does not exist
                reply_join_error(self.ctx, waiter, ErrorCode.UNKNOWN_MEMBER_ID, member_id)
                return
            group = self.ctx.new_group(group_id)
        if not self._accept_joining_member(group, member_id):
            if group.has(member_id):
                self.rebalance.remove_member(group, member_id)
            group.pending_members.discard(member_id)
            reply_join_error(self.ctx, waiter, ErrorCode.GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID)
        elif unknown:
            self._join_new_member(group, waiter, instance_id, client_id, client_host, rebalance_timeout,
                                  session_timeout, protocol_type, protocols, reason)
        else:
            self._join_existing_member(group, waiter, member_id, instance_id, client_id, client_host,
                                       rebalance_timeout, session_timeout, protocol_type, protocols, reason)
        if group.is_(PREPARING):
            self.rebalance.maybe_complete_join(group)

    def _join_consumer_group(self, group: Group, waiter: Waiter, member_id: str, instance_id: str | None,
                             client_id: str, client_host: str, rebalance_timeout: int, session_timeout: int,
                             protocol_type: str, protocols: list[tuple[str, bytes]]) -> None:
        """classicGroupJoinToConsumerGroup: answered at once, the member epoch as generation."""
        try:
            member_id, generation, protocol = self.consumer_groups.migration.join(
                group, member_id, instance_id, client_id, client_host, rebalance_timeout, session_timeout,
                protocol_type, protocols, requires_known_member_id=waiter[1] >= 4)
        except ClassicRequestError as e:
            new_id = str(e) if e.code == ErrorCode.MEMBER_ID_REQUIRED else member_id
            reply_join_error(self.ctx, waiter, e.code, new_id)
            return
        self.ctx.reply(waiter, join_response(waiter[1], ErrorCode.NONE, member_id, generation=generation,
                                                protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_name=protocol,
                                                leader=""))

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        """Kafka's acceptJoiningMember (group.max.size)."""
        max_size = self.ctx.config.max_size
        if group.state in (EMPTY, DEAD):
            return True
        if group.is_(PREPARING):
            member = group.members.get(member_id)
            return (member is not None and member.awaiting_join) or group.num_awaiting_join < max_size
        return group.has(member_id) or group.size < max_size

    def _join_new_member(self, group: Group, waiter: Waiter, instance_id: str | None, client_id: str,
                         client_host: str, rebalance_timeout: int, session_timeout: int, protocol_type: str,
                         protocols: list[tuple[str, bytes]], reason: str) -> None:
        names = list(dict.fromkeys(name for name, _ in protocols))
        if group.is_(DEAD):
            reply_join_error(self.ctx, waiter, ErrorCode.COORDINATOR_NOT_AVAILABLE, UNKNOWN_MEMBER_ID)
            return
        if not group.supports_protocols(protocol_type, names):
            reply_join_error(self.ctx, waiter, ErrorCode.INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID)
            return
        new_id = f"{instance_id if instance_id is not None else client_id}-{self.ctx.new_uuid()}"
        if instance_id is not None:
            old_id = group.static_members.get(instance_id)
            if old_id is not None:
                log.info("group %s: static member %s rejoins in state %s, member id %s replaces %s",
                         group.group_id, instance_id, group.state, new_id, old_id)
                self._update_static_member_and_rebalance(group, waiter, instance_id, old_id, new_id,
                                                         rebalance_timeout, session_timeout, protocols, reason)
            else:
                self._add_member_and_rebalance(group, waiter, new_id, instance_id, client_id, client_host,
                                               rebalance_timeout, session_timeout, protocol_type, protocols, reason)
        elif waiter[1] >= 4:
            # KIP-394: hand out a member id and ask the client to join again with it
            group.pending_members.add(new_id)
            self.ctx.timers.schedule(("pending", group.group_id, new_id), self.ctx.now + session_timeout)
            reply_join_error(self.ctx, waiter, ErrorCode.MEMBER_ID_REQUIRED, new_id)
        else:
            self._add_member_and_rebalance(group, waiter, new_id, None, client_id, client_host,
                                           rebalance_timeout, session_timeout, protocol_type, protocols, reason)

    def _join_existing_member(self, group: Group, waiter: Waiter, member_id: str, instance_id: str | None,
                              client_id: str, client_host: str, rebalance_timeout: int, session_timeout: int,
                              protocol_type: str, protocols: list[tuple[str, bytes]], reason: str) -> None:
        names = list(dict.fromkeys(name for name, _ in protocols))
        if group.is_(DEAD):
            reply_join_error(self.ctx, waiter, ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id)
            return
        if not group.supports_protocols(protocol_type, names):
            reply_join_error(self.ctx, waiter, ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
            return
        if member_id in group.pending_members:
            if instance_id is not None:
                # Kafka throws IllegalStateException: pending ids are only given to dynamic members
                reply_join_error(self.ctx, waiter, ErrorCode.UNKNOWN_MEMBER_ID, member_id)
                return
            self.ctx.timers.cancel(("pending", group.group_id, member_id))
            self._add_member_and_rebalance(group, waiter, member_id, None, client_id, client_host,
                                           rebalance_timeout, session_timeout, protocol_type, protocols, reason)
            return
        error = validate_member(group, member_id, instance_id)
        if error is not None:
            reply_join_error(self.ctx, waiter, error, member_id)
            return
        member = group.members[member_id]
        if group.is_(PREPARING):
            self._update_member_and_rebalance(group, member, waiter, rebalance_timeout, session_timeout, protocols,
                                              f"member {member_id} joining during PreparingRebalance; reason: {reason}")
        elif group.is_(COMPLETING):
            if member.matches(protocols):
                # the member lost the JoinGroup response: send the current generation again
                self.ctx.reply(waiter, join_success(group, member, waiter[1],
                                                       with_members=group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(
                    group, member, waiter, rebalance_timeout, session_timeout, protocols,
                    f"member {member_id} changed its metadata; reason: {reason}")
        elif group.is_(STABLE):
            if group.is_leader(member_id) or not member.matches(protocols):
                # a leader's JoinGroup always rebalances (e.g. topic metadata changed)
                self._update_member_and_rebalance(
                    group, member, waiter, rebalance_timeout, session_timeout, protocols,
                    f"member {member_id} rejoining Stable group; reason: {reason}")
            else:
                self.ctx.reply(waiter, join_success(group, member, waiter[1], with_members=False))
        else:
            log.warning("group %s: member %s rejoins in unexpected state %s", group.group_id, member_id, group.state)
            reply_join_error(self.ctx, waiter, ErrorCode.UNKNOWN_MEMBER_ID, member_id)

    def _add_member_and_rebalance(self, group: Group, waiter: Waiter, member_id: str, instance_id: str | None,
                                  client_id: str, client_host: str, rebalance_timeout: int, session_timeout: int,
                                  protocol_type: str, protocols: list[tuple[str, bytes]], reason: str) -> None:
        member = Member(member_id, instance_id, client_id, client_host, rebalance_timeout, session_timeout,
                        protocol_type, protocols)
        member.is_new = True
        if group.is_(PREPARING) and group.generation_id == 0:
            group.new_member_added = True  # extends the initial rebalance delay
        group.add(member, waiter)
        # New members cannot heartbeat before their join completes; expire a JoinGroup that never
        # completes after NewMemberJoinTimeoutMs so defunct members do not stall the rebalance.
        self.rebalance.schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self.rebalance.maybe_prepare_rebalance(group, f"adding new member {member_id} with group instance id "
                                             f"{instance_id}; reason: {reason}")

    def _update_member_and_rebalance(self, group: Group, member: Member, waiter: Waiter, rebalance_timeout: int,
                                     session_timeout: int, protocols: list[tuple[str, bytes]], reason: str) -> None:
        self._supersede_join_waiter(group, member)
        group.update_member(member, protocols, waiter)
        member.rebalance_timeout_ms = rebalance_timeout
        member.session_timeout_ms = session_timeout
        self.rebalance.maybe_prepare_rebalance(group, reason)

    def _supersede_join_waiter(self, group: Group, member: Member) -> None:
        """A member joining again while an earlier JoinGroup of it still waits: answer the earlier
        one (REBALANCE_IN_PROGRESS makes a client that still waits for it just join again) so no
        connection is left with a request that never completes."""
        old = group.take_join_waiter(member)
        if old is not None:
            reply_join_error(self.ctx, old, ErrorCode.REBALANCE_IN_PROGRESS, member.member_id)

    def _update_static_member_and_rebalance(self, group: Group, waiter: Waiter, instance_id: str, old_id: str,
                                            new_id: str, rebalance_timeout: int, session_timeout: int,
                                            protocols: list[tuple[str, bytes]], reason: str) -> None:
        """KIP-345: a static member restarted with an unknown member id takes over its instance."""
        current_leader = group.leader_id
        old = group.members[old_id]
        # fence whoever still waits under the old member id
        join_waiter = group.take_join_waiter(old)
        if join_waiter is not None:
            reply_join_error(self.ctx, join_waiter, ErrorCode.FENCED_INSTANCE_ID, old_id)
        sync_waiter = group.take_sync_waiter(old)
        if sync_waiter is not None:
            self.ctx.reply(sync_waiter, sync_response(ErrorCode.FENCED_INSTANCE_ID))
        self.ctx.timers.cancel(("hb", group.group_id, old_id))
        member = group.replace_static_member(instance_id, old_id, new_id)
        self.rebalance.schedule_heartbeat(group, member)
        group.update_member(member, protocols, waiter)
        member.rebalance_timeout_ms = rebalance_timeout
        member.session_timeout_ms = session_timeout
        if group.is_(STABLE):
            if group.protocol_name == group.select_protocol():
                # no rebalance: persist the new member id and hand back the current generation
                group.take_join_waiter(member)
                self.rebalance.store_group(group, {m.member_id: m.assignment for m in group.members.values()})
                if waiter[1] >= 9:
                    # KIP-814: tell a static leader it leads, but that it must skip the assignment
                    is_leader = group.is_leader(new_id)
                    self.ctx.reply(waiter, join_success(group, member, waiter[1], with_members=is_leader,
                                                           skip_assignment=is_leader))
                else:
                    # Older clients: return the old leader id so that a rejoining leader does not
                    # compute an assignment a Stable group would ignore.
                    self.ctx.reply(waiter, join_success(group, member, waiter[1], with_members=False,
                                                           leader=current_leader or ""))
            else:
                self.rebalance.maybe_prepare_rebalance(group, f"static member {instance_id} rejoined with other protocols; "
                                                     f"reason: {reason}")
        elif group.is_(COMPLETING):
            self.rebalance.maybe_prepare_rebalance(group, f"static member {instance_id} rejoined during CompletingRebalance; "
                                                 f"reason: {reason}")
        elif not group.is_(PREPARING):
            log.error("group %s: static member %s rejoined in state %s", group.group_id, instance_id, group.state)
            group.take_join_waiter(member)
            reply_join_error(self.ctx, waiter, ErrorCode.UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID)

    # ------------------------------------------------------------------------------------------
    # SyncGroup
    # ------------------------------------------------------------------------------------------

    def sync_group(self, reply_to, req, version: int, now_ms: int) -> Result:
        self.ctx.begin(now_ms)
        waiter = (reply_to, version)
        instance_id = req.group_instance_id if version >= 3 else None
        protocol_type = req.protocol_type if version >= 5 else None
        protocol_name = req.protocol_name if version >= 5 else None
        if version >= 5 and (protocol_type is None or protocol_name is None):
            # from v5 both are mandatory (SyncGroupRequest.areMandatoryProtocolTypeAndNamePresent)
            self.ctx.reply(waiter, sync_response(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return self.ctx.end(now_ms)
        error = self.ctx.check_group(req.group_id, _Api.SYNC)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # the rebalance was lost with the coordinator: make the member join again right here
            # (older clients do not expect COORDINATOR_LOAD_IN_PROGRESS from SyncGroup)
            error = ErrorCode.REBALANCE_IN_PROGRESS
        if error is None:
            group = self.ctx.groups.get(req.group_id)
            if group is None:
                error = ErrorCode.UNKNOWN_MEMBER_ID
            elif group.consumer is not None:
                try:
                    ptype, pname, assignment = self.consumer_groups.migration.sync(
                        group, req.member_id, instance_id, req.generation_id, protocol_type, protocol_name)
                    self.ctx.reply(waiter, sync_response(ErrorCode.NONE, ptype, pname, assignment))
                except ClassicRequestError as e:
                    error = e.code
            else:
                error = self._sync(group, waiter, req, instance_id, protocol_type, protocol_name)
        if error is not None:
            self.ctx.reply(waiter, sync_response(error))
        return self.ctx.end(now_ms)

    def _sync(self, group: Group, waiter: Waiter, req, instance_id: str | None, protocol_type: str | None,
              protocol_name: str | None) -> ErrorCode | None:
        member_id = req.member_id
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = validate_member(group, member_id, instance_id)
        if error is not None:
            return error
        if req.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if protocol_type is not None and protocol_type != group.protocol_type:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if protocol_name is not None and protocol_name != group.protocol_name:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if group.is_(EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(PREPARING):
            return ErrorCode.REBALANCE_IN_PROGRESS
        member = group.members[member_id]
        if group.is_(STABLE):
            self._mark_synced(group, member_id)
            self.ctx.reply(waiter, sync_response(ErrorCode.NONE, group.protocol_type, group.protocol_name,
                                                    member.assignment))
            self.rebalance.schedule_heartbeat(group, member)
            return None
        # CompletingRebalance: wait for the leader's assignment
        previous = group.take_sync_waiter(member)
        if previous is not None:
            self.ctx.reply(previous, sync_response(ErrorCode.REBALANCE_IN_PROGRESS))
        member.sync_waiter = waiter
        self._mark_synced(group, member_id)
        if group.is_leader(member_id):
            log.info("group %s: assignment received from leader %s for generation %d (%d members, %d static)",
                     group.group_id, member_id, group.generation_id, group.size, len(group.static_members))
            given = {a.member_id: bytes(a.assignment) if a.assignment is not None else b"" for a in req.assignments}
            missing = [m for m in group.members if m not in given]
            if missing:
                log.warning("group %s: empty assignment for members %s in generation %d", group.group_id, missing,
                            group.generation_id)
            assignment = {m: given.get(m, b"") for m in group.members}
            self.rebalance.store_group(group, assignment)
            for m in group.members.values():
                m.assignment = assignment[m.member_id]
            self.rebalance.propagate_assignment(group, ErrorCode.NONE)
            group.transition(GroupEvent.ASSIGNMENT_STORED, self.ctx.now)
        return None

    def _mark_synced(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self.ctx.timers.cancel(("sync", group.group_id))

    # ------------------------------------------------------------------------------------------
    # Heartbeat and LeaveGroup
    # ------------------------------------------------------------------------------------------

    def heartbeat(self, reply_to, req, version: int, now_ms: int) -> Result:
        self.ctx.begin(now_ms)
        instance_id = req.group_instance_id if version >= 3 else None
        error = self.ctx.check_group(req.group_id, _Api.HEARTBEAT)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            error = ErrorCode.NONE  # the group is still loading: answer blindly, as Kafka
        elif error is None:
            error = self._heartbeat(req.group_id, req.member_id, instance_id, req.generation_id)
        self.ctx.reply((reply_to, version), HeartbeatResponse(throttle_time_ms=0, error_code=int(error)))
        return self.ctx.end(now_ms)

    def _heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation: int) -> ErrorCode:
        group = self.ctx.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.consumer is not None:
            try:
                return self.consumer_groups.migration.heartbeat(group, member_id, instance_id, generation)
            except ClassicRequestError as e:
                return e.code
        error = validate_member(group, member_id, instance_id)
        if error is not None:
            return error
        if generation != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_(EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self.rebalance.schedule_heartbeat(group, group.members[member_id])
        return ErrorCode.REBALANCE_IN_PROGRESS if group.is_(PREPARING) else ErrorCode.NONE

    def leave_group(self, reply_to, req, version: int, now_ms: int) -> Result:
        self.ctx.begin(now_ms)
        if version >= 3:
            leaving = [(m.member_id, m.group_instance_id, m.reason if version >= 5 else None) for m in req.members]
        else:
            leaving = [(req.member_id, None, None)]
        top = ErrorCode.NONE
        results: list[tuple[str, str | None, ErrorCode]] = []
        error = self.ctx.check_group(req.group_id, _Api.LEAVE)
        group = self.ctx.groups.get(req.group_id) if error is None else None
        if error is not None:
            top = error
        elif group is None:
            results = [(mid, iid, ErrorCode.UNKNOWN_MEMBER_ID) for mid, iid, _ in leaving]
        elif group.is_(DEAD):
            top = ErrorCode.COORDINATOR_NOT_AVAILABLE
        elif group.consumer is not None:
            codes = self.consumer_groups.migration.leave(group, [(mid, iid) for mid, iid, _ in leaving])
            results = [(mid, iid, code) for (mid, iid, _), code in zip(leaving, codes)]
        else:
            for member_id, instance_id, reason in leaving:
                results.append((member_id, instance_id, self._leave_one(group, member_id, instance_id, reason)))
        if version >= 3:
            response = LeaveGroupResponse(throttle_time_ms=0, error_code=int(top), members=[
                LeaveGroupResponse.MemberResponse(member_id=mid, group_instance_id=iid, error_code=int(code))
                for mid, iid, code in results])
        else:
            # before v3 one member, one error: the group error, else the member's
            code = top if top != ErrorCode.NONE else next((c for _, _, c in results if c != ErrorCode.NONE),
                                                          ErrorCode.NONE)
            response = LeaveGroupResponse(throttle_time_ms=0, error_code=int(code))
        self.ctx.reply((reply_to, version), response)
        return self.ctx.end(now_ms)

    def _leave_one(self, group: Group, member_id: str, instance_id: str | None, reason: str | None) -> ErrorCode:
        reason = reason or "not provided"
        if member_id == UNKNOWN_MEMBER_ID:
            # administrative removal of a static member by its group instance id
            current = group.static_members.get(instance_id) if instance_id is not None else None
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            self._leave_member(group, current, reason)
            return ErrorCode.NONE
        if member_id in group.pending_members:
            self.rebalance.remove_pending_member_and_update_group(group, member_id)
            log.info("group %s: pending member %s left; reason: %s", group.group_id, member_id, reason)
            return ErrorCode.NONE
        error = validate_member(group, member_id, instance_id)
        if error is not None:
            return error
        self._leave_member(group, member_id, reason)
        return ErrorCode.NONE

    def _leave_member(self, group: Group, member_id: str, reason: str) -> None:
        log.info("group %s: member %s left through LeaveGroup; reason: %s", group.group_id, member_id, reason)
        self.rebalance.remove_member_and_update_group(group, group.members[member_id],
                                             f"removing member {member_id} on LeaveGroup; reason: {reason}")
