"""Online migration between the classic and the consumer group protocols (KIP-848's upgrade
path, ``group.consumer.migration.policy``), and the classic members of a consumer group in
between (Kafka's GroupMetadataManager: convertToConsumerGroup, convertToClassicGroup,
classicGroupJoinToConsumerGroup, classicGroupSyncToConsumerGroup,
classicGroupHeartbeatToConsumerGroup, classicGroupLeaveToConsumerGroup).

- **Upgrade**: a ConsumerGroupHeartbeat joining a classic group that has members (all using the
  embedded ``consumer`` protocol) turns it into a consumer group. Each classic member becomes a
  member of the consumer group that still speaks the classic protocol, at the classic generation as
  its member epoch, with its current assignment as its target; the joining member then triggers a
  new group epoch and assignment as any join does. Committed offsets stay.
- **Classic members of a consumer group** keep using JoinGroup/SyncGroup/Heartbeat: a Heartbeat
  answers REBALANCE_IN_PROGRESS when the member must rejoin to catch up with the group epoch or to
  revoke; its JoinGroup reconciles it like a ConsumerGroupHeartbeat (owned partitions from its
  subscription) and answers at once with its member epoch as the generation (it is never the
  leader); its SyncGroup returns its assigned partitions as a ConsumerProtocolAssignment. It must
  rejoin within its rebalance timeout after being told to, and sync within it after joining, or it
  is fenced; its session timeout is its own.
- **Downgrade**: when the last member using the consumer protocol leaves and only classic members
  remain, the group becomes a classic group of them at the group epoch as generation, their target
  assignments as their assignments, and rebalances.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace

from kcompat.group.consumer_group import ClassicMetadata, ConsumerGroup, ConsumerMember, MemberState
from kcompat.group.consumer_protocol import EmbeddedProtocolError, assignment_bytes, parse_assignment, parse_subscription
from kcompat.group.consumer_text import new_member_id
from kcompat.group.model import CONSUMER_PROTOCOL_TYPE, Group
from kcompat.protocol.errors import ErrorCode

log = logging.getLogger("kcompat.group")


class ClassicRequestError(Exception):
    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code


class Migration:
    """Protocol changes of groups and the classic members of consumer groups, on behalf of a
    :class:`kcompat.group.consumer_groups.ConsumerGroupManager` (``manager``)."""

    def __init__(self, manager) -> None:
        self.m = manager

    # ------------------------------------------------------------------------------------------
    # upgrade and downgrade
    # ------------------------------------------------------------------------------------------

    def can_upgrade(self, group: Group) -> bool:
        """GroupMetadataManager.validateOnlineUpgrade."""
        cfg = self.m.config
        if not cfg.upgrade_enabled:
            log.info("group %s: cannot become a consumer group: online upgrade is disabled", group.group_id)
            return False
        if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            log.info("group %s: cannot become a consumer group: it does not use the consumer embedded protocol",
                     group.group_id)
            return False
        if len(group.members) > cfg.max_size:
            log.info("group %s: cannot become a consumer group: more members than group.consumer.max.size",
                     group.group_id)
            return False
        return True

    def upgrade(self, group: Group) -> ConsumerGroup:
        """ConsumerGroup.fromClassicGroup; raises ClassicRequestError(GROUP_ID_NOT_FOUND) if a
        member's subscription or assignment cannot be read."""
        generation = group.generation_id
        members = []
        for cm in group.members.values():
            metadata = cm.metadata(group.protocol_name) if group.protocol_name else cm.protocols[0][1]
            try:
                sub = parse_subscription(metadata)
                assigned = self._ids(parse_assignment(cm.assignment))
            except EmbeddedProtocolError as e:
                raise ClassicRequestError(ErrorCode.GROUP_ID_NOT_FOUND,
                                          f"Cannot upgrade the classic group {group.group_id}: {e}.") from None
            members.append(ConsumerMember(
                cm.member_id, instance_id=cm.group_instance_id, rack_id=sub.rack_id, client_id=cm.client_id,
                client_host=cm.client_host, subscribed_topic_names=sub.topics,
                rebalance_timeout_ms=cm.rebalance_timeout_ms, member_epoch=generation,
                previous_member_epoch=generation, state=MemberState.STABLE, assigned=assigned,
                assignment_epochs={(tid, p): generation for tid, ps in assigned.items() for p in ps},
                classic=ClassicMetadata(cm.session_timeout_ms, tuple(cm.protocols))))
        log.info("group %s: the classic group (generation %d, %d members) becomes a consumer group",
                 group.group_id, generation, len(members))
        self.m.classic.abandon_classic_members(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self.m.classic_tombstone(group)
        cg = ConsumerGroup(group.group_id)
        cg.group_epoch = cg.assignment_epoch = generation
        for member in members:
            cg.put(member)
            cg.target[member.member_id] = member.assigned
        group.consumer = cg
        group.protocol_type = CONSUMER_PROTOCOL_TYPE
        cg.metadata_version = self.m.topics.version()
        cg.metadata_hash = self.m.metadata_hash(cg)
        self.m.emit_group_epoch(group)
        for member in members:
            self.m.emit_member_metadata(group, member)
            self.m.emit_target(group, member.member_id)
        self.m.emit_target_metadata(group)
        for member in members:
            self.m.emit_current_assignment(group, member)
            self.m.schedule_session(group, member.member_id)
        return cg

    def _ids(self, by_name: dict[str, frozenset[int]]) -> dict[uuid.UUID, frozenset[int]]:
        out = {}
        for name, parts in by_name.items():
            info = self.m.topics.topic(name)
            if info is not None and parts:
                out[info.topic_id] = frozenset(p for p in parts if p < info.num_partitions)
        return {t: ps for t, ps in out.items() if ps}

    def _names(self, by_id: dict[uuid.UUID, frozenset[int]]) -> dict[str, frozenset[int]]:
        out = {}
        for tid, parts in by_id.items():
            name = self.m.topics.name_of(tid)
            if name is not None:
                out[name] = parts
        return out

    def maybe_downgrade(self, group: Group, leaving_member_id: str) -> bool:
        """If ``leaving_member_id`` is the last member using the consumer protocol and classic
        members remain, make the group classic again (validateOnlineDowngradeWithFencedMember,
        convertToClassicGroup). True if it did."""
        cg = group.consumer
        rest = [m for m in cg.members.values() if m.member_id != leaving_member_id]
        if not rest or any(m.classic is None for m in rest):
            return False
        if not self.m.config.downgrade_enabled:
            log.info("group %s: cannot become a classic group: online downgrade is disabled", group.group_id)
            return False
        if len(rest) > self.m.config.classic_max_size:
            log.info("group %s: cannot become a classic group: more members than group.max.size", group.group_id)
            return False
        log.info("group %s: the last consumer-protocol member left; it becomes a classic group of %d members",
                 group.group_id, len(rest))
        generation = cg.group_epoch
        members = []
        for m in rest:
            version = parse_subscription(m.classic.protocols[0][1]).version if m.classic.protocols else 0
            members.append((m, assignment_bytes(version, self._names(cg.target.get(m.member_id, {})))))
        for member_id in list(cg.members):
            self.m.cancel_timers(group, member_id)
        self.m.delete_records(group)
        group.consumer = None
        self.m.classic.adopt_classic_members(group, generation, members)
        return True

    # ------------------------------------------------------------------------------------------
    # classic members of a consumer group
    # ------------------------------------------------------------------------------------------

    def _classic_member(self, cg: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember:
        """validateConsumerGroupMember + throwIfMemberDoesNotUseClassicProtocol."""
        if instance_id is None:
            member = cg.members.get(member_id)
            if member is None:
                raise ClassicRequestError(ErrorCode.UNKNOWN_MEMBER_ID)
        else:
            member = cg.static_member(instance_id)
            if member is None:
                raise ClassicRequestError(ErrorCode.UNKNOWN_MEMBER_ID)
            if member.member_id != member_id:
                raise ClassicRequestError(ErrorCode.FENCED_INSTANCE_ID)
        if member.classic is None:
            raise ClassicRequestError(ErrorCode.UNKNOWN_MEMBER_ID,
                                      f"Member {member.member_id} does not use the classic protocol.")
        return member

    def join(self, group: Group, member_id: str, instance_id: str | None, client_id: str, client_host: str,
             rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
             protocols: list[tuple[str, bytes]], requires_known_member_id: bool) -> tuple[str, int, str]:
        """A classic JoinGroup to a consumer group: ``(member id, generation, protocol name)``, or
        ClassicRequestError (MEMBER_ID_REQUIRED carries the new member id in its message)."""
        cg = group.consumer
        unknown = not member_id
        if unknown:
            member_id = new_member_id()
        if member_id not in cg.members and len(cg.members) >= self.m.config.max_size:
            raise ClassicRequestError(ErrorCode.GROUP_MAX_SIZE_REACHED)
        if protocol_type != CONSUMER_PROTOCOL_TYPE or not protocols:
            raise ClassicRequestError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if unknown and requires_known_member_id and instance_id is None:
            raise ClassicRequestError(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        try:
            sub = parse_subscription(protocols[0][1])
        except EmbeddedProtocolError:
            raise ClassicRequestError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL) from None
        if instance_id is None:
            member = cg.members.get(member_id) or ConsumerMember(member_id)
        else:
            existing = cg.static_member(instance_id)
            if existing is None:
                member = ConsumerMember(member_id)
            elif existing.member_id == member_id or not unknown:
                if existing.member_id != member_id:
                    raise ClassicRequestError(ErrorCode.FENCED_INSTANCE_ID)
                member = existing
            else:
                member = self.m.replace_static_member(group, existing, member_id)
        updated = replace(member, instance_id=instance_id, rack_id=sub.rack_id, rebalance_timeout_ms=rebalance_timeout_ms,
                          server_assignor=None, subscribed_topic_names=sub.topics, subscribed_topic_regex=None,
                          client_id=client_id, client_host=client_host,
                          classic=ClassicMetadata(session_timeout_ms, tuple(protocols)))
        after = self.m.update_member(group, cg, member, updated, self._ids(sub.owned))
        self.m.cancel_timer(group, "cg-join", member_id)
        self.m.schedule_session(group, member_id)
        self.m.schedule_timer(group, "cg-sync", member_id, rebalance_timeout_ms)
        return member_id, after.member_epoch, protocols[0][0]

    def sync(self, group: Group, member_id: str, instance_id: str | None, generation: int,
             protocol_type: str | None, protocol_name: str | None) -> tuple[str, str, bytes]:
        """A classic SyncGroup to a consumer group: ``(protocol type, name, assignment bytes)``."""
        cg = group.consumer
        member = self._classic_member(cg, member_id, instance_id)
        if generation != member.member_epoch:
            raise ClassicRequestError(ErrorCode.ILLEGAL_GENERATION)
        names = {n for n, _ in member.classic.protocols}
        if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or \
                (protocol_name is not None and protocol_name not in names):
            raise ClassicRequestError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        self._raise_if_rebalancing(group, cg, member)
        self.m.cancel_timer(group, "cg-sync", member.member_id)
        self.m.schedule_session(group, member.member_id)
        version = parse_subscription(member.classic.protocols[0][1]).version
        name = protocol_name if protocol_name is not None else member.classic.protocols[0][0]
        return CONSUMER_PROTOCOL_TYPE, name, assignment_bytes(version, self._names(member.assigned))

    def _raise_if_rebalancing(self, group: Group, cg: ConsumerGroup, member: ConsumerMember) -> None:
        if cg.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            self.m.schedule_timer(group, "cg-join", member.member_id, member.rebalance_timeout_ms, if_absent=True)
            raise ClassicRequestError(ErrorCode.REBALANCE_IN_PROGRESS)

    def heartbeat(self, group: Group, member_id: str, instance_id: str | None, generation: int) -> ErrorCode:
        """A classic Heartbeat to a consumer group: NONE, or REBALANCE_IN_PROGRESS when the member
        must rejoin (a newer group epoch, partitions to revoke, or released partitions to take)."""
        cg = group.consumer
        member = self._classic_member(cg, member_id, instance_id)
        if generation != member.member_epoch:
            raise ClassicRequestError(ErrorCode.ILLEGAL_GENERATION)
        self.m.schedule_session(group, member.member_id)
        waiting = member.state is MemberState.UNRELEASED_PARTITIONS and not self._released(cg, member)
        if member.member_epoch < cg.group_epoch or member.state is MemberState.UNREVOKED_PARTITIONS or (
                member.state is MemberState.UNRELEASED_PARTITIONS and not waiting):
            self.m.schedule_timer(group, "cg-join", member.member_id, member.rebalance_timeout_ms, if_absent=True)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    @staticmethod
    def _released(cg: ConsumerGroup, member: ConsumerMember) -> bool:
        """Whether some partition the member waits for is free now (ConsumerGroup.waitingOnUnreleasedPartition
        negated)."""
        for tid, parts in cg.target.get(member.member_id, {}).items():
            have = member.assigned.get(tid, frozenset())
            if any(p not in have and cg.current_partition_epoch(tid, p) == -1 for p in parts):
                return True
        return False

    def leave(self, group: Group, leaving: list[tuple[str, str | None]]) -> list[ErrorCode]:
        """A classic LeaveGroup to a consumer group: the error of each ``(member id, instance id)``.
        As GroupMetadataManager.classicGroupLeaveToConsumerGroup (Kafka 4.3.1), any member leaves,
        a consumer-protocol one too (no throwIfMemberDoesNotUseClassicProtocol there): an unknown
        member or instance id is UNKNOWN_MEMBER_ID, a static member under another member id
        FENCED_INSTANCE_ID. Every entry is checked before the members found are fenced together
        (consumerGroupFenceMembers), so a later entry still sees a member an earlier one removes."""
        cg = group.consumer
        codes: list[ErrorCode] = []
        fenced: list[str] = []
        for member_id, instance_id in leaving:
            if instance_id is None:
                member = cg.members.get(member_id)
            else:
                member = cg.static_member(instance_id)
                if member is not None and member_id and member.member_id != member_id:
                    codes.append(ErrorCode.FENCED_INSTANCE_ID)
                    continue
            if member is None:
                codes.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            codes.append(ErrorCode.NONE)
            if member.member_id not in fenced:
                fenced.append(member.member_id)
        for member_id in fenced:
            if group.consumer is None or member_id not in group.consumer.members:
                continue   # an earlier fence turned the group back into a classic one
            log.info("group %s: member %s left the consumer group by LeaveGroup", group.group_id, member_id)
            self.m.fence(group, member_id)
        return codes
