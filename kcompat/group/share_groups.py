"""KIP-932 share groups in the group coordinator: ShareGroupHeartbeat and ShareGroupDescribe,
server-side assignment by the ``simple`` assignor, session timeouts, and the records of these
groups in ``__consumer_offsets`` (Kafka's GroupMetadataManager, share group half).

Share groups live in the same group id space as classic and consumer groups (a
:class:`kcompat.group.model.Group` whose ``share`` holds the membership). A heartbeat for a group
of another type gets GROUP_ID_NOT_FOUND ("Group X is not a share group."), as Kafka's
getOrMaybeCreateShareGroup answers; other group types' APIs answer for a share group as Kafka
does (see :mod:`kcompat.group.offsets` and :mod:`kcompat.group.membership`). Changes are applied in
memory when decided and written as records that describe them (their replay is a no-op);
:meth:`ShareGroupManager.restore` rebuilds a group from them when a partition is loaded.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Callable

from kcompat.group import share_group_records as srec
from kcompat.group.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH, TopicInfo, TopicsView, described_assignment, subscribed_topic_infos,
)
from kcompat.group.consumer_group import metadata_hash as group_metadata_hash
from kcompat.group.consumer_records import Assignment
from kcompat.group.model import Group, existing_or_new, group_int_config
from kcompat.group.share_group import (
    SHARE_PROTOCOL_TYPE, ShareGroup, ShareMember, restore, simple_assign,
)
from kcompat.group.timers import Timers
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.share_group_describe import ShareGroupDescribeResponse as DescribeResponse
from kcompat.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatResponse as HeartbeatResponse

log = logging.getLogger("kcompat.group")

SESSION_TIMER = "sg-session"


@dataclass(frozen=True)
class ShareProtocolConfig:
    """Broker configs of the same names (Kafka 4.3 defaults); a group's own
    ``share.session.timeout.ms`` / ``share.heartbeat.interval.ms`` (GROUP configs) override the
    first two through ``group_overrides``."""

    enabled: bool = True                 # "share" in group.coordinator.rebalance.protocols / share.version
    heartbeat_interval_ms: int = 5000    # group.share.heartbeat.interval.ms
    session_timeout_ms: int = 45000      # group.share.session.timeout.ms
    max_size: int = 200                  # group.share.max.size


class _Error(Exception):
    def __init__(self, code: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ShareGroupManager:
    """Share groups of the coordinator's ``__consumer_offsets`` partitions."""

    def __init__(self, config: ShareProtocolConfig, topics: TopicsView, groups: dict[str, Group], *,
                 emit: Callable[[int, bytes, bytes | None], None], timers: Timers,
                 new_group: Callable[[str], Group], now: Callable[[], int],
                 group_overrides: Callable[[str], dict[str, str]] = lambda group_id: {}) -> None:
        """``emit(partition, key, value)`` writes a record whose effect is already applied;
        ``new_group(group_id)`` registers a new Empty group; ``group_overrides(group_id)`` gives
        a group's dynamic configs (name -> value string)."""
        self.config = config
        self.topics = topics
        self.groups = groups
        self._emit = emit
        self._timers = timers
        self._new_group = new_group
        self._now = now
        self._overrides = group_overrides

    # ------------------------------------------------------------------------------------------
    # per-group configs
    # ------------------------------------------------------------------------------------------

    def _group_int(self, group_id: str, name: str, default: int) -> int:
        return group_int_config(self._overrides(group_id), name, default)

    def session_timeout_ms(self, group_id: str) -> int:
        return self._group_int(group_id, "share.session.timeout.ms", self.config.session_timeout_ms)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self._group_int(group_id, "share.heartbeat.interval.ms", self.config.heartbeat_interval_ms)

    # ------------------------------------------------------------------------------------------
    # ShareGroupHeartbeat
    # ------------------------------------------------------------------------------------------

    def heartbeat(self, req, version: int, client_id: str, client_host: str) -> HeartbeatResponse:
        """One ShareGroupHeartbeat v1 (KIP-932). Errors are in the response: INVALID_REQUEST,
        GROUP_ID_NOT_FOUND (unknown group on a rejoin, or a group of another
        type), UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, GROUP_MAX_SIZE_REACHED."""
        try:
            self._validate(req)
            if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                return self._leave(req)
            return self._heartbeat(req, client_id, client_host)
        except _Error as e:
            return HeartbeatResponse(throttle_time_ms=0, error_code=int(e.code), error_message=e.message,
                                     member_id=None, member_epoch=0, heartbeat_interval_ms=0, assignment=None)

    @staticmethod
    def _validate(req) -> None:
        """Kafka 4.3.1's checks, all INVALID_REQUEST: KafkaApis.isMemberIdValid (a member id of
        1-36 characters; the answer has no message) and then
        GroupCoordinatorService.throwIfShareGroupHeartbeatRequestIsInvalid, with its texts."""
        bad = ErrorCode.INVALID_REQUEST
        if not req.member_id or len(req.member_id) > 36:
            raise _Error(bad, None)
        if not req.group_id:
            raise _Error(bad, "GroupId can't be empty.")
        if req.rack_id == "":
            raise _Error(bad, "RackId can't be empty.")
        epoch = req.member_epoch
        if epoch == 0:
            if not req.subscribed_topic_names:
                raise _Error(bad, "SubscribedTopicNames must be set in first request.")
        elif epoch < LEAVE_GROUP_MEMBER_EPOCH:
            raise _Error(bad, "MemberEpoch is invalid.")

    def _group_for(self, group_id: str, create: bool) -> tuple[Group, ShareGroup]:
        """GroupMetadataManager.getOrMaybeCreateShareGroup."""
        group = existing_or_new(self.groups, self._new_group, group_id, create)
        if group is None:
            raise _Error(ErrorCode.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
        if group.share is None:
            if group.consumer is not None or group.members or group.pending_members or group.offsets \
                    or group.pending_txn or group.protocol_type is not None or not create:
                raise _Error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
            group.share = ShareGroup(group_id)
            group.protocol_type = SHARE_PROTOCOL_TYPE
        return group, group.share

    def get_or_create(self, group_id: str, create: bool) -> tuple[Group | None, str | None]:
        """getOrMaybeCreateShareGroup for the admin APIs (:mod:`kcompat.group.share_admin`):
        ``(group, None)``, or ``(None, message)`` for GROUP_ID_NOT_FOUND (a group of another
        type, or none and ``create`` false)."""
        try:
            return self._group_for(group_id, create)[0], None
        except _Error as e:
            return None, e.message

    def _heartbeat(self, req, client_id: str, client_host: str) -> HeartbeatResponse:
        epoch = req.member_epoch
        group, sg = self._group_for(req.group_id, epoch == 0)
        member = sg.members.get(req.member_id)
        if member is None:
            if epoch != 0:
                raise _Error(ErrorCode.UNKNOWN_MEMBER_ID,
                             f"Member {req.member_id} is not a member of group {req.group_id}.")
            if len(sg.members) >= self.config.max_size:
                raise _Error(ErrorCode.GROUP_MAX_SIZE_REACHED,
                             f"The share group has reached its maximum capacity of {self.config.max_size} members.")
            member = ShareMember(member_id=req.member_id)
        elif epoch != member.member_epoch and epoch != 0:
            raise _Error(ErrorCode.FENCED_MEMBER_EPOCH,
                         f"The share group member has a smaller member epoch ({epoch}) than the one known by "
                         f"the group coordinator ({member.member_epoch}). The member must abandon all its "
                         f"partitions and rejoin." if epoch < member.member_epoch else
                         f"The share group member has a greater member epoch ({epoch}) than the one known by "
                         f"the group coordinator ({member.member_epoch}). The member must abandon all its "
                         f"partitions and rejoin.")
        is_new = req.member_id not in sg.members
        updated = replace(
            member, rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            client_id=client_id, client_host=client_host,
            subscribed_topic_names=(tuple(req.subscribed_topic_names) if req.subscribed_topic_names is not None
                                    else member.subscribed_topic_names))
        if is_new or updated.metadata_fields() != member.metadata_fields():
            self._emit_member_metadata(group, updated)
        subscription_changed = is_new or set(updated.subscribed_topic_names) != set(member.subscribed_topic_names)
        sg.members[updated.member_id] = updated
        self._maybe_bump_epoch(group, sg, subscription_changed)
        if sg.group_epoch > sg.assignment_epoch:
            self._update_target_assignment(group, sg)
        after = self._reconcile(group, sg, sg.members[updated.member_id])
        self._schedule_session(group, after.member_id)
        assignment = None
        if epoch == 0 or after.assigned != member.assigned or after.member_epoch != member.member_epoch:
            assignment = HeartbeatResponse.Assignment(topic_partitions=[
                HeartbeatResponse.TopicPartitions(topic_id=t, partitions=sorted(ps))
                for t, ps in sorted(after.assigned.items(), key=lambda i: str(i[0])) if ps])
        return HeartbeatResponse(throttle_time_ms=0, error_code=0, error_message=None, member_id=after.member_id,
                                 member_epoch=after.member_epoch,
                                 heartbeat_interval_ms=self.heartbeat_interval_ms(group.group_id),
                                 assignment=assignment)

    def _reconcile(self, group: Group, sg: ShareGroup, member: ShareMember) -> ShareMember:
        """ShareGroupAssignmentBuilder: the member takes its target assignment and epoch at once."""
        target = sg.target.get(member.member_id, {})
        if member.member_epoch == sg.assignment_epoch and member.assigned == target:
            return member
        after = replace(member, previous_member_epoch=member.member_epoch, member_epoch=sg.assignment_epoch,
                        assigned=target)
        sg.members[member.member_id] = after
        self._emit(group.partition, srec.key(srec.CURRENT_ASSIGNMENT, group.group_id, member.member_id),
                   srec.current_assignment_value(after.member_epoch, after.previous_member_epoch, after.assigned))
        return after

    def _subscribed_topics(self, sg: ShareGroup) -> dict[str, TopicInfo]:
        return subscribed_topic_infos(self.topics, sg.subscribed_names())

    def _maybe_bump_epoch(self, group: Group, sg: ShareGroup, subscription_changed: bool) -> None:
        metadata_hash = group_metadata_hash(self._subscribed_topics(sg))
        if subscription_changed or metadata_hash != sg.metadata_hash:
            sg.group_epoch += 1
            sg.metadata_hash = metadata_hash
            self._emit(group.partition, srec.key(srec.GROUP_METADATA, group.group_id),
                       srec.group_metadata_value(sg.group_epoch, sg.metadata_hash))

    def _update_target_assignment(self, group: Group, sg: ShareGroup) -> None:
        topics = self._subscribed_topics(sg)
        target = simple_assign({m.member_id: m.subscribed_topic_names for m in sg.members.values()}, topics,
                               sg.target)
        for member_id, assignment in target.items():
            if sg.target.get(member_id) != assignment:
                self._emit(group.partition, srec.key(srec.TARGET_MEMBER, group.group_id, member_id),
                           srec.target_member_value(assignment))
        sg.target = target
        sg.assignment_epoch = sg.group_epoch
        self._emit(group.partition, srec.key(srec.TARGET_METADATA, group.group_id),
                   srec.target_metadata_value(sg.assignment_epoch, self._now()))
        self._note_initialized(group, sg, topics)

    def _note_initialized(self, group: Group, sg: ShareGroup, topics: dict[str, TopicInfo]) -> None:
        """ShareGroupStatePartitionMetadata: the subscribed topic partitions whose share-partition
        state exists. The partition leader initializes a share partition's state on its first
        fetch (from ``share.auto.offset.reset``), so every assigned partition counts."""
        initialized = dict(sg.initialized)
        for name, info in topics.items():
            _, have = initialized.get(info.topic_id, (name, frozenset()))
            initialized[info.topic_id] = (name, have | frozenset(range(info.num_partitions)))
        if initialized != sg.initialized:
            sg.initialized = initialized
            self._emit(group.partition, srec.key(srec.STATE_PARTITION_METADATA, group.group_id),
                       srec.state_partition_metadata_value(sg.initialized, sg.deleting))

    def _emit_member_metadata(self, group: Group, m: ShareMember) -> None:
        self._emit(group.partition, srec.key(srec.MEMBER_METADATA, group.group_id, m.member_id),
                   srec.member_metadata_value(rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
                                              subscribed_topic_names=list(m.subscribed_topic_names)))

    # ------------------------------------------------------------------------------------------
    # leaving and session timeouts
    # ------------------------------------------------------------------------------------------

    def _leave(self, req) -> HeartbeatResponse:
        group, sg = self._group_for(req.group_id, False)
        if req.member_id not in sg.members:
            raise _Error(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {req.group_id}.")
        log.info("share group %s: member %s left", group.group_id, req.member_id)
        self.fence(group, req.member_id)
        return HeartbeatResponse(throttle_time_ms=0, error_code=0, error_message=None, member_id=req.member_id,
                                 member_epoch=LEAVE_GROUP_MEMBER_EPOCH, heartbeat_interval_ms=0, assignment=None)

    def fence(self, group: Group, member_id: str) -> None:
        """Remove a member: tombstones for its records, a new group epoch and target assignment."""
        sg = group.share
        for record_type in (srec.CURRENT_ASSIGNMENT, srec.TARGET_MEMBER, srec.MEMBER_METADATA):
            self._emit(group.partition, srec.key(record_type, group.group_id, member_id), None)
        sg.members.pop(member_id, None)
        sg.target.pop(member_id, None)
        self._timers.cancel((SESSION_TIMER, group.group_id, member_id))
        self._maybe_bump_epoch(group, sg, True)
        self._update_target_assignment(group, sg)
        if not sg.members:
            group.state_timestamp = self._now()

    def _schedule_session(self, group: Group, member_id: str) -> None:
        self._timers.schedule((SESSION_TIMER, group.group_id, member_id),
                              self._now() + self.session_timeout_ms(group.group_id))

    def on_timer(self, group_id: str, member_id: str) -> None:
        """A member's session timed out: it is fenced."""
        group = self.groups.get(group_id)
        if group is None or group.share is None or member_id not in group.share.members:
            return
        log.info("share group %s: member %s session timed out; fenced", group_id, member_id)
        self.fence(group, member_id)

    # ------------------------------------------------------------------------------------------
    # ShareGroupDescribe, deletion, loading
    # ------------------------------------------------------------------------------------------

    def describe(self, group_id: str, include_authorized_operations: bool, operations: int):
        """One DescribedGroup of ShareGroupDescribe: GROUP_ID_NOT_FOUND for a missing group or one
        of another type."""
        D = DescribeResponse.DescribedGroup
        group = self.groups.get(group_id)
        if group is None or group.share is None:
            what = f"Group {group_id} not found." if group is None else f"Group {group_id} is not a share group."
            return D(error_code=int(ErrorCode.GROUP_ID_NOT_FOUND), error_message=what, group_id=group_id,
                     group_state="", members=[], authorized_operations=-(2**31))   # no state, as Kafka 4.3.1
        sg = group.share
        members = [DescribeResponse.Member(
            member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch, client_id=m.client_id,
            client_host=m.client_host, subscribed_topic_names=sorted(m.subscribed_topic_names),
            assignment=self._described(m.assigned)) for m in sg.members.values()]
        return D(error_code=0, error_message=None, group_id=group_id, group_state=sg.state.value,
                 group_epoch=sg.group_epoch, assignment_epoch=sg.assignment_epoch, assignor_name="simple",
                 members=members, authorized_operations=operations if include_authorized_operations else -(2**31))

    def _described(self, assignment: Assignment):
        return described_assignment(self.topics, assignment, DescribeResponse.TopicPartitions,
                                    DescribeResponse.Assignment)

    def delete_records(self, group: Group) -> None:
        """Tombstones for everything a share group wrote (DeleteGroups of an empty share group)."""
        sg = group.share
        for member_id in list(sg.members):
            for record_type in (srec.CURRENT_ASSIGNMENT, srec.TARGET_MEMBER, srec.MEMBER_METADATA):
                self._emit(group.partition, srec.key(record_type, group.group_id, member_id), None)
        for record_type in (srec.STATE_PARTITION_METADATA, srec.TARGET_METADATA, srec.GROUP_METADATA):
            self._emit(group.partition, srec.key(record_type, group.group_id), None)

    def restore(self, group: Group, records: dict[tuple[int, str | None], bytes]) -> bool:
        """Rebuild ``group``'s share membership from the latest value of each of its records
        (tombstones applied); False without a group metadata record. Every member gets a fresh
        session (as Kafka's replay schedules one)."""
        sg = restore(group.group_id, records)
        if sg is None:
            return False
        group.share = sg
        group.protocol_type = SHARE_PROTOCOL_TYPE
        for member_id in sg.members:
            self._schedule_session(group, member_id)
        return True
