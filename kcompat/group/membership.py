"""Group membership of the classic group coordinator: JoinGroup, rebalances, SyncGroup, Heartbeat
and LeaveGroup (Kafka's GroupCoordinator / ClassicGroup). Mixed into
:class:`kcompat.group.coordinator.GroupCoordinator`, whose state it uses."""

from __future__ import annotations

from kcompat.group import records as rec
from kcompat.group.coordinator_types import (
    log, EMPTY, PREPARING, COMPLETING, STABLE, DEAD, NEW_MEMBER_JOIN_TIMEOUT_MS, UNKNOWN_MEMBER_ID, Result,
    _Api,
)
from kcompat.group.consumer_migration import ClassicRequestError
from kcompat.group.model import CONSUMER_PROTOCOL_TYPE, Group, Member, Waiter
from kcompat.group.state import GroupEvent, can_rebalance
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.group_records.group_metadata_value import GroupMetadataValue
from kcompat.protocol.messages.heartbeat import HeartbeatResponse
from kcompat.protocol.messages.leave_group import LeaveGroupResponse


class MembershipMixin:
    """JoinGroup, rebalance, SyncGroup, Heartbeat, LeaveGroup of :class:`GroupCoordinator`."""

    # ------------------------------------------------------------------------------------------
    # JoinGroup
    # ------------------------------------------------------------------------------------------

    def join_group(self, reply_to, req, version: int, client_id: str, client_host: str, now_ms: int) -> Result:
        self._begin(now_ms)
        waiter = (reply_to, version)
        member_id = req.member_id or UNKNOWN_MEMBER_ID
        instance_id = req.group_instance_id if version >= 5 else None
        # JoinGroup v0 has no rebalance timeout: Kafka uses the session timeout
        rebalance_timeout = req.session_timeout_ms if version == 0 else req.rebalance_timeout_ms
        protocols = [(p.name, bytes(p.metadata)) for p in req.protocols]
        reason = req.reason if version >= 8 else None
        error = self._check_group(req.group_id, _Api.JOIN)
        if error is not None:
            self._reply_join_error(waiter, error, member_id)
        elif not (self.config.min_session_timeout_ms <= req.session_timeout_ms <= self.config.max_session_timeout_ms):
            self._reply_join_error(waiter, ErrorCode.INVALID_SESSION_TIMEOUT, member_id)
        else:
            self._join(waiter, req.group_id, member_id, instance_id, client_id, client_host, rebalance_timeout,
                       req.session_timeout_ms, req.protocol_type, protocols, reason or "not provided")
        return self._end(now_ms)

    def _join(self, waiter: Waiter, group_id: str, member_id: str, instance_id: str | None, client_id: str,
              client_host: str, rebalance_timeout: int, session_timeout: int, protocol_type: str,
              protocols: list[tuple[str, bytes]], reason: str) -> None:
        unknown = member_id == UNKNOWN_MEMBER_ID
        group = self._groups.get(group_id)
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
                self._reply_join_error(waiter, ErrorCode.UNKNOWN_MEMBER_ID, member_id)
                return
            group = self._new_group(group_id)
        if not self._accept_joining_member(group, member_id):
            if group.has(member_id):
                self._remove_member(group, member_id)
            group.pending_members.discard(member_id)
            self._reply_join_error(waiter, ErrorCode.GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID)
        elif unknown:
            self._join_new_member(group, waiter, instance_id, client_id, client_host, rebalance_timeout,
                                  session_timeout, protocol_type, protocols, reason)
        else:
            self._join_existing_member(group, waiter, member_id, instance_id, client_id, client_host,
                                       rebalance_timeout, session_timeout, protocol_type, protocols, reason)
        if group.is_(PREPARING):
            self._maybe_complete_join(group)

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
            self._reply_join_error(waiter, e.code, new_id)
            return
        self._reply(waiter, self._join_response(waiter[1], ErrorCode.NONE, member_id, generation=generation,
                                                protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_name=protocol,
                                                leader=""))

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        """Kafka's acceptJoiningMember (group.max.size)."""
        max_size = self.config.max_size
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
            self._reply_join_error(waiter, ErrorCode.COORDINATOR_NOT_AVAILABLE, UNKNOWN_MEMBER_ID)
            return
        if not group.supports_protocols(protocol_type, names):
            self._reply_join_error(waiter, ErrorCode.INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID)
            return
        new_id = f"{instance_id if instance_id is not None else client_id}-{self._new_uuid()}"
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
            self._timers.schedule(("pending", group.group_id, new_id), self._now + session_timeout)
            self._reply_join_error(waiter, ErrorCode.MEMBER_ID_REQUIRED, new_id)
        else:
            self._add_member_and_rebalance(group, waiter, new_id, None, client_id, client_host,
                                           rebalance_timeout, session_timeout, protocol_type, protocols, reason)

    def _join_existing_member(self, group: Group, waiter: Waiter, member_id: str, instance_id: str | None,
                              client_id: str, client_host: str, rebalance_timeout: int, session_timeout: int,
                              protocol_type: str, protocols: list[tuple[str, bytes]], reason: str) -> None:
        names = list(dict.fromkeys(name for name, _ in protocols))
        if group.is_(DEAD):
            self._reply_join_error(waiter, ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id)
            return
        if not group.supports_protocols(protocol_type, names):
            self._reply_join_error(waiter, ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
            return
        if member_id in group.pending_members:
            if instance_id is not None:
                # Kafka throws IllegalStateException: pending ids are only given to dynamic members
                self._reply_join_error(waiter, ErrorCode.UNKNOWN_MEMBER_ID, member_id)
                return
            self._timers.cancel(("pending", group.group_id, member_id))
            self._add_member_and_rebalance(group, waiter, member_id, None, client_id, client_host,
                                           rebalance_timeout, session_timeout, protocol_type, protocols, reason)
            return
        error = self._validate_member(group, member_id, instance_id)
        if error is not None:
            self._reply_join_error(waiter, error, member_id)
            return
        member = group.members[member_id]
        if group.is_(PREPARING):
            self._update_member_and_rebalance(group, member, waiter, rebalance_timeout, session_timeout, protocols,
                                              f"member {member_id} joining during PreparingRebalance; reason: {reason}")
        elif group.is_(COMPLETING):
            if member.matches(protocols):
                # the member lost the JoinGroup response: send the current generation again
                self._reply(waiter, self._join_success(group, member, waiter[1],
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
                self._reply(waiter, self._join_success(group, member, waiter[1], with_members=False))
        else:
            log.warning("group %s: member %s rejoins in unexpected state %s", group.group_id, member_id, group.state)
            self._reply_join_error(waiter, ErrorCode.UNKNOWN_MEMBER_ID, member_id)

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
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"adding new member {member_id} with group instance id "
                                             f"{instance_id}; reason: {reason}")

    def _update_member_and_rebalance(self, group: Group, member: Member, waiter: Waiter, rebalance_timeout: int,
                                     session_timeout: int, protocols: list[tuple[str, bytes]], reason: str) -> None:
        self._supersede_join_waiter(group, member)
        group.update_member(member, protocols, waiter)
        member.rebalance_timeout_ms = rebalance_timeout
        member.session_timeout_ms = session_timeout
        self._maybe_prepare_rebalance(group, reason)

    def _supersede_join_waiter(self, group: Group, member: Member) -> None:
        """A member joining again while an earlier JoinGroup of it still waits: answer the earlier
        one (REBALANCE_IN_PROGRESS makes a client that still waits for it just join again) so no
        connection is left with a request that never completes."""
        old = group.take_join_waiter(member)
        if old is not None:
            self._reply_join_error(old, ErrorCode.REBALANCE_IN_PROGRESS, member.member_id)

    def _update_static_member_and_rebalance(self, group: Group, waiter: Waiter, instance_id: str, old_id: str,
                                            new_id: str, rebalance_timeout: int, session_timeout: int,
                                            protocols: list[tuple[str, bytes]], reason: str) -> None:
        """KIP-345: a static member restarted with an unknown member id takes over its instance."""
        current_leader = group.leader_id
        old = group.members[old_id]
        # fence whoever still waits under the old member id
        join_waiter = group.take_join_waiter(old)
        if join_waiter is not None:
            self._reply_join_error(join_waiter, ErrorCode.FENCED_INSTANCE_ID, old_id)
        sync_waiter = group.take_sync_waiter(old)
        if sync_waiter is not None:
            self._reply(sync_waiter, self._sync_response(ErrorCode.FENCED_INSTANCE_ID))
        self._timers.cancel(("hb", group.group_id, old_id))
        member = group.replace_static_member(instance_id, old_id, new_id)
        self._schedule_heartbeat(group, member)
        group.update_member(member, protocols, waiter)
        member.rebalance_timeout_ms = rebalance_timeout
        member.session_timeout_ms = session_timeout
        if group.is_(STABLE):
            if group.protocol_name == group.select_protocol():
                # no rebalance: persist the new member id and hand back the current generation
                group.take_join_waiter(member)
                self._store_group(group, {m.member_id: m.assignment for m in group.members.values()})
                if waiter[1] >= 9:
                    # KIP-814: tell a static leader it leads, but that it must skip the assignment
                    is_leader = group.is_leader(new_id)
                    self._reply(waiter, self._join_success(group, member, waiter[1], with_members=is_leader,
                                                           skip_assignment=is_leader))
                else:
                    # Older clients: return the old leader id so that a rejoining leader does not
                    # compute an assignment a Stable group would ignore.
                    self._reply(waiter, self._join_success(group, member, waiter[1], with_members=False,
                                                           leader=current_leader or ""))
            else:
                self._maybe_prepare_rebalance(group, f"static member {instance_id} rejoined with other protocols; "
                                                     f"reason: {reason}")
        elif group.is_(COMPLETING):
            self._maybe_prepare_rebalance(group, f"static member {instance_id} rejoined during CompletingRebalance; "
                                                 f"reason: {reason}")
        elif not group.is_(PREPARING):
            log.error("group %s: static member %s rejoined in state %s", group.group_id, instance_id, group.state)
            group.take_join_waiter(member)
            self._reply_join_error(waiter, ErrorCode.UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID)

    # ------------------------------------------------------------------------------------------
    # rebalance
    # ------------------------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if can_rebalance(group.state):
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(COMPLETING):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._timers.cancel(("sync", group.group_id))
        initial = group.is_(EMPTY)
        if initial:
            # InitialDelayedJoin: wait group.initial.rebalance.delay.ms, longer while members keep
            # arriving, but no longer in total than the rebalance timeout
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._timers.schedule(("join", group.group_id), self._now + delay, ("initial", delay, remaining))
        else:
            self._timers.schedule(("join", group.group_id), self._now + group.rebalance_timeout_ms(), ("join",))
        old_state = group.state
        group.transition(GroupEvent.PREPARE_REBALANCE, self._now)
        log.info("group %s: preparing to rebalance in state %s with old generation %d (__consumer_offsets-%d) "
                 "(reason: %s)", group.group_id, old_state, group.generation_id, group.partition, reason)
        if not initial:
            self._maybe_complete_join(group)

    def _maybe_complete_join(self, group: Group) -> None:
        """DelayedJoin.tryComplete: end the join phase once every member rejoined (never early for
        the initial delayed join)."""
        if not group.is_(PREPARING) or not group.has_all_members_joined():
            return
        timer = self._timers.get(("join", group.group_id))
        if timer is None or timer[1][0] == "join":
            self._complete_join(group)

    def _on_join_timer(self, group_id: str, payload: tuple) -> None:
        group = self._groups.get(group_id)
        if group is None or not group.is_(PREPARING):
            return
        if payload[0] == "initial":
            _, delay, remaining = payload
            if group.new_member_added and remaining != 0:
                group.new_member_added = False
                new_delay = min(self.config.initial_rebalance_delay_ms, remaining)
                new_remaining = max(remaining - delay, 0)
                self._timers.schedule(("join", group_id), self._now + new_delay, ("initial", new_delay, new_remaining))
                return
        self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        """Kafka's onCompleteJoin: drop dynamic members that did not rejoin, start the next
        generation and answer every waiting JoinGroup (the leader gets all members' metadata)."""
        self._timers.cancel(("join", group.group_id))
        gone = [m for m in group.not_yet_rejoined() if not m.is_static]
        if gone:
            log.info("group %s: removing members that did not rejoin: %s", group.group_id,
                     [m.member_id for m in gone])
            for m in gone:
                self._answer_removed_member(group, m)
                self._remove_member(group, m.member_id)
        if group.is_(DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # only static members that did not rejoin remain: wait for them (or their session expiry)
            log.error("group %s: cannot complete the rebalance because no members rejoined", group.group_id)
            self._timers.schedule(("join", group.group_id), self._now + group.rebalance_timeout_ms(), ("join",))
            return
        group.init_next_generation(self._now)
        if group.is_(EMPTY):
            log.info("group %s with generation %d is now empty (__consumer_offsets-%d)", group.group_id,
                     group.generation_id, group.partition)
            self._store_group(group, {})
            return
        log.info("group %s: stabilized generation %d (__consumer_offsets-%d) with %d members, protocol %s",
                 group.group_id, group.generation_id, group.partition, group.size, group.protocol_name)
        for member in group.members.values():
            waiter = group.take_join_waiter(member)
            if waiter is not None:
                self._reply(waiter, self._join_success(group, member, waiter[1],
                                                       with_members=group.is_leader(member.member_id)))
            self._schedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        self._timers.schedule(("sync", group.group_id), self._now + group.rebalance_timeout_ms(), group.generation_id)

    def _reset_and_propagate_assignment_error(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: Group, error: ErrorCode) -> None:
        ok = error == ErrorCode.NONE
        for member in group.members.values():
            waiter = group.take_sync_waiter(member)
            if waiter is not None:
                self._reply(waiter, self._sync_response(error, group.protocol_type if ok else None,
                                                        group.protocol_name if ok else None, member.assignment))
                # the session restarts once the member has its assignment
                self._schedule_heartbeat(group, member)

    def _store_group(self, group: Group, assignment: dict[str, bytes]) -> None:
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
        self._emit(group.partition, rec.group_metadata_key(group.group_id), rec.group_metadata_value(value),
                   applied=True)

    def _remove_member(self, group: Group, member_id: str) -> None:
        group.remove(member_id)
        self._timers.cancel(("hb", group.group_id, member_id))

    def _answer_removed_member(self, group: Group, member: Member) -> None:
        """A member leaving the group while a JoinGroup or SyncGroup of it waits: answer it with
        UNKNOWN_MEMBER_ID (Kafka does so for the JoinGroup, which a new member may have pending)."""
        waiter = group.take_join_waiter(member)
        if waiter is not None:
            self._reply_join_error(waiter, ErrorCode.UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID)
        waiter = group.take_sync_waiter(member)
        if waiter is not None:
            self._reply(waiter, self._sync_response(ErrorCode.UNKNOWN_MEMBER_ID))

    def _remove_member_and_update_group(self, group: Group, member: Member, reason: str) -> None:
        self._answer_removed_member(group, member)
        self._remove_member(group, member.member_id)
        if group.state in (STABLE, COMPLETING):
            self._maybe_prepare_rebalance(group, reason)
        elif group.is_(PREPARING):
            self._maybe_complete_join(group)

    def _remove_pending_member_and_update_group(self, group: Group, member_id: str) -> None:
        group.pending_members.discard(member_id)
        self._timers.cancel(("pending", group.group_id, member_id))
        if group.is_(PREPARING):
            self._maybe_complete_join(group)

    def _on_heartbeat_expired(self, group_id: str, member_id: str) -> None:
        group = self._groups.get(group_id)
        if group is None or group.is_(DEAD):
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        log.info("group %s: member %s failed (session timeout), removing it", group_id, member_id)
        self._remove_member_and_update_group(group, member, f"removing member {member_id} on heartbeat expiration")

    def _on_pending_member_expired(self, group_id: str, member_id: str) -> None:
        group = self._groups.get(group_id)
        if group is not None and member_id in group.pending_members:
            log.info("group %s: pending member %s removed after session timeout", group_id, member_id)
            self._remove_pending_member_and_update_group(group, member_id)

    def _on_sync_expired(self, group_id: str, generation: int) -> None:
        group = self._groups.get(group_id)
        if group is None or generation != group.generation_id:
            return
        if group.state in (COMPLETING, STABLE) and group.pending_sync:
            missing = sorted(group.pending_sync)
            for member_id in missing:
                self._remove_member(group, member_id)
            self._prepare_rebalance(group, f"removing {missing} on pending sync request expiration")

    def _on_group_loaded(self, group: Group) -> None:
        if group.size > self.config.max_size:
            self._prepare_rebalance(group, f"freshly-loaded group is over capacity ({self.config.max_size}); "
                                           "rebalancing to give consumers a chance to commit offsets")
        for member in group.members.values():
            self._schedule_heartbeat(group, member)

    # ------------------------------------------------------------------------------------------
    # SyncGroup
    # ------------------------------------------------------------------------------------------

    def sync_group(self, reply_to, req, version: int, now_ms: int) -> Result:
        self._begin(now_ms)
        waiter = (reply_to, version)
        instance_id = req.group_instance_id if version >= 3 else None
        protocol_type = req.protocol_type if version >= 5 else None
        protocol_name = req.protocol_name if version >= 5 else None
        if version >= 5 and (protocol_type is None or protocol_name is None):
            # from v5 both are mandatory (SyncGroupRequest.areMandatoryProtocolTypeAndNamePresent)
            self._reply(waiter, self._sync_response(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return self._end(now_ms)
        error = self._check_group(req.group_id, _Api.SYNC)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # the rebalance was lost with the coordinator: make the member join again right here
            # (older clients do not expect COORDINATOR_LOAD_IN_PROGRESS from SyncGroup)
            error = ErrorCode.REBALANCE_IN_PROGRESS
        if error is None:
            group = self._groups.get(req.group_id)
            if group is None:
                error = ErrorCode.UNKNOWN_MEMBER_ID
            elif group.consumer is not None:
                try:
                    ptype, pname, assignment = self.consumer_groups.migration.sync(
                        group, req.member_id, instance_id, req.generation_id, protocol_type, protocol_name)
                    self._reply(waiter, self._sync_response(ErrorCode.NONE, ptype, pname, assignment))
                except ClassicRequestError as e:
                    error = e.code
            else:
                error = self._sync(group, waiter, req, instance_id, protocol_type, protocol_name)
        if error is not None:
            self._reply(waiter, self._sync_response(error))
        return self._end(now_ms)

    def _sync(self, group: Group, waiter: Waiter, req, instance_id: str | None, protocol_type: str | None,
              protocol_name: str | None) -> ErrorCode | None:
        member_id = req.member_id
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._validate_member(group, member_id, instance_id)
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
            self._reply(waiter, self._sync_response(ErrorCode.NONE, group.protocol_type, group.protocol_name,
                                                    member.assignment))
            self._schedule_heartbeat(group, member)
            return None
        # CompletingRebalance: wait for the leader's assignment
        previous = group.take_sync_waiter(member)
        if previous is not None:
            self._reply(previous, self._sync_response(ErrorCode.REBALANCE_IN_PROGRESS))
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
            self._store_group(group, assignment)
            for m in group.members.values():
                m.assignment = assignment[m.member_id]
            self._propagate_assignment(group, ErrorCode.NONE)
            group.transition(GroupEvent.ASSIGNMENT_STORED, self._now)
        return None

    def _mark_synced(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self._timers.cancel(("sync", group.group_id))

    # ------------------------------------------------------------------------------------------
    # Heartbeat and LeaveGroup
    # ------------------------------------------------------------------------------------------

    def heartbeat(self, reply_to, req, version: int, now_ms: int) -> Result:
        self._begin(now_ms)
        instance_id = req.group_instance_id if version >= 3 else None
        error = self._check_group(req.group_id, _Api.HEARTBEAT)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            error = ErrorCode.NONE  # the group is still loading: answer blindly, as Kafka
        elif error is None:
            error = self._heartbeat(req.group_id, req.member_id, instance_id, req.generation_id)
        self._reply((reply_to, version), HeartbeatResponse(throttle_time_ms=0, error_code=int(error)))
        return self._end(now_ms)

    def _heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation: int) -> ErrorCode:
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.consumer is not None:
            try:
                return self.consumer_groups.migration.heartbeat(group, member_id, instance_id, generation)
            except ClassicRequestError as e:
                return e.code
        error = self._validate_member(group, member_id, instance_id)
        if error is not None:
            return error
        if generation != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_(EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._schedule_heartbeat(group, group.members[member_id])
        return ErrorCode.REBALANCE_IN_PROGRESS if group.is_(PREPARING) else ErrorCode.NONE

    def leave_group(self, reply_to, req, version: int, now_ms: int) -> Result:
        self._begin(now_ms)
        if version >= 3:
            leaving = [(m.member_id, m.group_instance_id, m.reason if version >= 5 else None) for m in req.members]
        else:
            leaving = [(req.member_id, None, None)]
        top = ErrorCode.NONE
        results: list[tuple[str, str | None, ErrorCode]] = []
        error = self._check_group(req.group_id, _Api.LEAVE)
        group = self._groups.get(req.group_id) if error is None else None
        if error is not None:
            top = error
        elif group is None:
            results = [(mid, iid, ErrorCode.UNKNOWN_MEMBER_ID) for mid, iid, _ in leaving]
        elif group.is_(DEAD):
            top = ErrorCode.COORDINATOR_NOT_AVAILABLE
        elif group.consumer is not None:
            for member_id, instance_id, _ in leaving:
                left_id, code = self.consumer_groups.migration.leave(group, member_id, instance_id)
                results.append((left_id if version >= 3 else member_id, instance_id, code))
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
        self._reply((reply_to, version), response)
        return self._end(now_ms)

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
            self._remove_pending_member_and_update_group(group, member_id)
            log.info("group %s: pending member %s left; reason: %s", group.group_id, member_id, reason)
            return ErrorCode.NONE
        error = self._validate_member(group, member_id, instance_id)
        if error is not None:
            return error
        self._leave_member(group, member_id, reason)
        return ErrorCode.NONE

    def _leave_member(self, group: Group, member_id: str, reason: str) -> None:
        log.info("group %s: member %s left through LeaveGroup; reason: %s", group.group_id, member_id, reason)
        self._remove_member_and_update_group(group, group.members[member_id],
                                             f"removing member {member_id} on LeaveGroup; reason: {reason}")
