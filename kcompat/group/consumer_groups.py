"""KIP-848 consumer groups in the group coordinator: ConsumerGroupHeartbeat and
ConsumerGroupDescribe, server-side assignment, member and rebalance timeouts, and the records of
these groups in ``__consumer_offsets`` (Kafka's GroupMetadataManager, consumer group half).

:class:`ConsumerGroupManager` is composed into :class:`kcompat.group.coordinator.GroupCoordinator`
with narrow dependencies: the coordinator's group registry (one group id space with classic
groups; a consumer group is a :class:`kcompat.group.model.Group` whose ``consumer`` holds its
membership, so committed offsets, their expiry and transactional offsets work as for any group),
a function that writes a record, its timers, the clock, and a :class:`TopicsView` of the metadata
image. Changes are applied in memory when decided and written as records that describe them
(the coordinator marks them as applied: their replay is a no-op); :meth:`ConsumerGroupManager.load`
rebuilds the groups from those records.

Not implemented (see the issue's note): mixed groups, i.e. classic members inside a consumer group
during an online migration with members still running. An empty group (only offsets) converts
both ways, keeping its committed offsets.
"""

from __future__ import annotations

from collections import Counter
import logging
import uuid
from dataclasses import replace
from typing import Callable

import re2

from kcompat.group import consumer_records as crec
from kcompat.group import records as rec
from kcompat.group.coordinator_types import EMPTY
from kcompat.group.consumer_assignors import ASSIGNORS, MemberSpec, TopicSpec
from kcompat.group.consumer_migration import ClassicRequestError, Migration
from kcompat.group.consumer_group import (
    ClassicGroups, ConsumerProtocolConfig, TopicInfo, TopicsView, described_assignment, restore, subscribed_topic_infos, LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH, ConsumerGroup, ConsumerMember,
    MemberState, reconcile,
)
from kcompat.group.consumer_group import metadata_hash as topics_metadata_hash
from kcompat.group.consumer_records import Assignment
from kcompat.group.consumer_text import new_member_id, regex_error_description
from kcompat.group.model import CONSUMER_PROTOCOL_TYPE, Group
from kcompat.group.timers import Timers
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.consumer_group_describe import ConsumerGroupDescribeResponse as DescribeResponse
from kcompat.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatResponse as HeartbeatResponse
from kcompat.protocol.topic_names import INTERNAL_TOPICS

log = logging.getLogger("kcompat.group")


class HeartbeatError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _error(code: ErrorCode, message: str) -> HeartbeatError:
    return HeartbeatError(code, message)


class ConsumerGroupManager:
    def __init__(self, config: ConsumerProtocolConfig, topics: TopicsView, groups: dict[str, Group], *,
                 emit: Callable[[int, bytes, bytes | None], None], timers: Timers,
                 new_group: Callable[[str], Group], drop_group: Callable[[Group], None],
                 now: Callable[[], int], classic: ClassicGroups | None = None) -> None:
        """``emit(partition, key, value)`` writes a record whose effect is already applied;
        ``new_group(group_id)`` registers a new Empty group; ``drop_group(group)`` removes one
        (classic tombstone included, as the classic coordinator removes groups); ``classic`` is the
        classic coordinator, for groups changing protocol (:mod:`kcompat.group.consumer_migration`)."""
        self.config = config
        self.topics = topics
        self.groups = groups
        self._emit = emit
        self._timers = timers
        self._new_group = new_group
        self._drop_group = drop_group
        self._now = now
        self.classic = classic
        self.migration = Migration(self)
        self.rebalances: Counter[str] = Counter()   # replaced by the shard's when composed
        for name in config.assignors:
            if name not in ASSIGNORS:
                raise ValueError(f"group.consumer.assignors: unknown assignor {name!r}")

    # ------------------------------------------------------------------------------------------
    # ConsumerGroupHeartbeat
    # ------------------------------------------------------------------------------------------

    def heartbeat(self, req, version: int, client_id: str, client_host: str) -> HeartbeatResponse:
        """One ConsumerGroupHeartbeat (KIP-848; v1: the client generates its member id, KIP-1082,
        and may subscribe by RE2 regex). Errors are in the response: INVALID_REQUEST,
        UNSUPPORTED_ASSIGNOR, GROUP_ID_NOT_FOUND (a classic group with members), UNKNOWN_MEMBER_ID,
        FENCED_MEMBER_EPOCH, UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED,
        INVALID_REGULAR_EXPRESSION."""
        try:
            self._validate(req, version)
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(req)
            return self._heartbeat(req, client_id, client_host)
        except HeartbeatError as e:
            return HeartbeatResponse(throttle_time_ms=0, error_code=int(e.code), error_message=e.message,
                                     member_id=None, member_epoch=0, heartbeat_interval_ms=0, assignment=None)

    def _validate(self, req, version: int) -> None:
        """GroupMetadataManager.throwIfConsumerGroupHeartbeatRequestIsInvalid."""
        bad = ErrorCode.INVALID_REQUEST
        if not req.group_id:
            raise _error(bad, "GroupId can't be empty.")
        if req.instance_id == "":
            raise _error(bad, "InstanceId can't be empty.")
        if req.rack_id == "":
            raise _error(bad, "RackId can't be empty.")
        if version >= 1 and not req.member_id:
            raise _error(bad, "MemberId can't be empty.")
        epoch = req.member_epoch
        if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not req.member_id:
                raise _error(bad, "MemberId can't be empty.")
        elif epoch == 0:
            if req.rebalance_timeout_ms == -1:
                raise _error(bad, "RebalanceTimeoutMs must be provided in first request.")
            if req.topic_partitions is None or req.topic_partitions:
                raise _error(bad, "TopicPartitions must be empty when (re-)joining.")
            if not req.subscribed_topic_names and req.subscribed_topic_regex is None:
                raise _error(bad, "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if not req.member_id:
                raise _error(bad, "MemberId can't be empty.")
            if req.instance_id is None:
                raise _error(bad, "InstanceId can't be null.")
        else:
            raise _error(bad, "MemberEpoch is invalid.")
        if req.server_assignor is not None and req.server_assignor not in self.config.assignors:
            raise _error(ErrorCode.UNSUPPORTED_ASSIGNOR,
                         f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
                         f"{', '.join(self.config.assignors)}.")
        if req.subscribed_topic_regex is not None:
            try:
                re2.compile(req.subscribed_topic_regex)
            except re2.error as e:
                raise _error(ErrorCode.INVALID_REGULAR_EXPRESSION,
                             f"SubscribedTopicRegex `{req.subscribed_topic_regex}` is not a valid regular "
                             f"expression: {regex_error_description(e)}.") from None

    def _group_for(self, group_id: str, create: bool, member_id: str) -> tuple[Group, ConsumerGroup]:
        """GroupMetadataManager.getOrMaybeCreateConsumerGroup: an Empty classic group (offsets
        only, or members all gone) becomes a consumer group keeping its offsets."""
        group = self.groups.get(group_id)
        if group is None:
            if not create:
                raise _error(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
            group = self._new_group(group_id)
        if group.share is not None or group.streams is not None:
            raise _error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        if group.consumer is None and create and group.members and self.classic is not None \
                and self.migration.can_upgrade(group):
            try:
                self.migration.upgrade(group)
            except ClassicRequestError as e:
                raise _error(e.code, str(e)) from None
        if group.consumer is None:
            if not create or group.members or group.pending_members or not group.is_(EMPTY):
                raise _error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
            self.end_classic(group, "consumer")
            group.consumer = ConsumerGroup(group_id)
            group.protocol_type = CONSUMER_PROTOCOL_TYPE
        cg = group.consumer
        if member_id not in cg.members and len(cg.members) >= self.config.max_size:
            raise _error(ErrorCode.GROUP_MAX_SIZE_REACHED,
                         f"The consumer group has reached its maximum capacity of {self.config.max_size} members.")
        return group, cg

    def end_classic(self, group: Group, kind: str) -> None:
        """An empty classic group (offsets only) becomes a ``kind`` group ("consumer", "streams"):
        its classic record, if it had one, is tombstoned (Kafka's maybeDeleteEmptyClassicGroup)."""
        if group.generation_id > 0 or group.protocol_type is not None:
            log.info("group %s: the empty classic group becomes a %s group", group.group_id, kind)
            self.classic_tombstone(group)

    def classic_tombstone(self, group: Group) -> None:
        """Tombstone the classic group record of a group becoming a consumer group."""
        self._emit(group.partition, rec.group_metadata_key(group.group_id), None)
        group.generation_id = 0
        group.protocol_name = None
        group.leader_id = None

    def _heartbeat(self, req, client_id: str, client_host: str) -> HeartbeatResponse:
        epoch = req.member_epoch
        group, cg = self._group_for(req.group_id, epoch == 0, req.member_id)
        member_id = req.member_id or new_member_id()
        owned = None if req.topic_partitions is None else crec.to_assignment(req.topic_partitions)
        member = self._member(group, cg, member_id, epoch, req.instance_id, owned)
        updated = replace(
            member,
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
                                  else member.rebalance_timeout_ms),
            server_assignor=req.server_assignor if req.server_assignor is not None else member.server_assignor,
            subscribed_topic_names=(tuple(req.subscribed_topic_names) if req.subscribed_topic_names is not None
                                    else member.subscribed_topic_names),
            subscribed_topic_regex=(req.subscribed_topic_regex if req.subscribed_topic_regex is not None
                                    else member.subscribed_topic_regex),
            client_id=client_id, client_host=client_host, classic=None)
        if req.subscribed_topic_regex == "":
            updated = replace(updated, subscribed_topic_regex=None)
        after = self.update_member(group, cg, member, updated, owned)
        self.schedule_session(group, member_id)
        full = epoch == 0 or (req.rebalance_timeout_ms != -1 and req.subscribed_topic_names is not None
                              and req.topic_partitions is not None)
        assignment = None
        if full or after.assigned != member.assigned or after.member_epoch != member.member_epoch:
            assignment = HeartbeatResponse.Assignment(
                topic_partitions=crec.topic_partitions(HeartbeatResponse.TopicPartitions, after.assigned))
        return HeartbeatResponse(throttle_time_ms=0, error_code=0, error_message=None, member_id=member_id,
                                 member_epoch=after.member_epoch,
                                 heartbeat_interval_ms=self.config.heartbeat_interval_ms, assignment=assignment)

    def update_member(self, group: Group, cg: ConsumerGroup, member: ConsumerMember, updated: ConsumerMember,
                      owned: Assignment | None) -> ConsumerMember:
        """Store ``updated`` (the member as its request describes it), bump the group epoch if its
        subscription changed, recompute the target assignment if the epoch moved, and reconcile
        the member towards its target (steps 1-3 of Kafka's consumerGroupHeartbeat); records for
        what changed. Returns the member as reconciled."""
        member_id = updated.member_id
        subscription_changed = (member.subscribed_topic_names != updated.subscribed_topic_names
                                or member.subscribed_topic_regex != updated.subscribed_topic_regex
                                or member_id not in cg.members)
        if member.metadata_fields() != updated.metadata_fields() or member_id not in cg.members:
            self.emit_member_metadata(group, updated)
        cg.put(updated)
        self._maybe_bump_epoch(group, cg, subscription_changed)
        if cg.group_epoch > cg.assignment_epoch:
            self._update_target_assignment(group, cg)
        before = cg.members[member_id]
        after = reconcile(before, cg.assignment_epoch, cg.target.get(member_id, {}), owned,
                          cg.current_partition_epoch)
        if after.assignment_fields() != before.assignment_fields():
            cg.put(after)
            self.emit_current_assignment(group, after)
            if after.state is MemberState.UNREVOKED_PARTITIONS:
                self._schedule_revocation(group, after)
            else:
                self._timers.cancel(("cg-revoke", group.group_id, member_id))
        return after

    def _member(self, group: Group, cg: ConsumerGroup, member_id: str, epoch: int, instance_id: str | None,
                owned: Assignment | None) -> ConsumerMember:
        """getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember with the epoch checks."""
        if instance_id is not None:
            existing = cg.static_member(instance_id)
            if epoch == 0:
                if existing is None:
                    return cg.members.get(member_id) or ConsumerMember(member_id)
                if existing.member_id == member_id:
                    return self._rejoin(group, cg, existing)
                if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                    raise _error(ErrorCode.UNRELEASED_INSTANCE_ID,
                                 f"Static member {member_id} with instance id {instance_id} cannot join the group "
                                 f"because the instance id is owned by {existing.member_id} member.")
                return self.replace_static_member(group, existing, member_id)
            if existing is None:
                raise _error(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
            if existing.member_id != member_id:
                raise _error(ErrorCode.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                             f"{instance_id} was fenced by member {existing.member_id}.")
            member = existing
        else:
            member = cg.members.get(member_id)
            if member is None:
                if epoch != 0:
                    raise _error(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {member_id} is not a member of group {group.group_id}.")
                log.info("group %s: member %s joins with the consumer protocol", group.group_id, member_id)
                return ConsumerMember(member_id)
            if epoch == 0:
                return self._rejoin(group, cg, member)
        if epoch > member.member_epoch:
            raise _error(ErrorCode.FENCED_MEMBER_EPOCH,
                         f"The consumer group member has a greater member epoch ({epoch}) than the one known by "
                         f"the group coordinator ({member.member_epoch}). The member must abandon all its "
                         f"partitions and rejoin.")
        if epoch < member.member_epoch and (epoch != member.previous_member_epoch or owned is None or any(
                not ps <= member.assigned.get(t, frozenset()) for t, ps in owned.items())):
            raise _error(ErrorCode.FENCED_MEMBER_EPOCH,
                         f"The consumer group member has a smaller member epoch ({epoch}) than the one known by "
                         f"the group coordinator ({member.member_epoch}). The member must abandon all its "
                         f"partitions and rejoin.")
        return member

    def replace_static_member(self, group: Group, existing: ConsumerMember, member_id: str) -> ConsumerMember:
        """The static member ``existing`` comes back under ``member_id``: the new member takes over
        its assignment and target (Kafka's replaceMember)."""
        cg = group.consumer
        target = cg.target.get(existing.member_id, {})
        self._remove_member_records(group, existing.member_id)
        self.cancel_timers(group, existing.member_id)
        cg.remove(existing.member_id)
        new = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
        cg.put(new)
        cg.target[member_id] = target
        self.emit_member_metadata(group, new)
        self.emit_target(group, member_id)
        self.emit_current_assignment(group, new)
        log.info("group %s: static member %s rejoins as %s", group.group_id, existing.instance_id, member_id)
        return new

    def _rejoin(self, group: Group, cg: ConsumerGroup, member: ConsumerMember) -> ConsumerMember:
        """A known member joins again with epoch 0 (after being fenced, or a restart keeping its
        id): it has given up its partitions, so it starts from nothing."""
        fresh = replace(member, member_epoch=0, previous_member_epoch=0, state=MemberState.STABLE, assigned={},
                        pending_revocation={}, assignment_epochs={})
        cg.put(fresh)
        self.emit_current_assignment(group, fresh)
        return fresh

    # ------------------------------------------------------------------------------------------
    # group epoch, subscription metadata and the target assignment
    # ------------------------------------------------------------------------------------------

    def _maybe_bump_epoch(self, group: Group, cg: ConsumerGroup, subscription_changed: bool) -> None:
        """Bump the group epoch when a subscription changed or the subscribed topics' metadata
        (ids, partition counts, racks, regex matches) differs from what the epoch was computed
        for; the metadata is rechecked whenever the metadata image changed."""
        version = self.topics.version()
        if not subscription_changed and cg.metadata_version == version:
            return
        cg.metadata_version = version
        self._resolve_regexes(group, cg)
        metadata_hash = self.metadata_hash(cg)
        if subscription_changed or metadata_hash != cg.metadata_hash or cg.group_epoch == 0:
            cg.metadata_hash = metadata_hash
            cg.group_epoch += 1
            self.rebalances["consumer"] += 1
            self.emit_group_epoch(group)
            log.info("group %s: group epoch %d", group.group_id, cg.group_epoch)

    def _resolve_regexes(self, group: Group, cg: ConsumerGroup) -> None:
        wanted = {m.subscribed_topic_regex for m in cg.members.values() if m.subscribed_topic_regex is not None}
        for regex in list(cg.resolved_regexes):
            if regex not in wanted:
                del cg.resolved_regexes[regex]
                self._emit(group.partition, crec.key(crec.REGULAR_EXPRESSION, group.group_id, regex), None)
        if not wanted:
            return
        names = sorted(n for n in self.topics.topic_names() if n not in INTERNAL_TOPICS)
        for regex in sorted(wanted):
            pattern = re2.compile(regex)
            matched = tuple(n for n in names if pattern.fullmatch(n))
            if cg.resolved_regexes.get(regex) != matched:
                cg.resolved_regexes[regex] = matched
                self._emit(group.partition, crec.key(crec.REGULAR_EXPRESSION, group.group_id, regex),
                           crec.regular_expression_value(list(matched), self.topics.version(), self._now()))

    def _subscribed_topics(self, cg: ConsumerGroup) -> dict[str, TopicInfo]:
        return subscribed_topic_infos(self.topics, cg.subscribed_names())

    def metadata_hash(self, cg: ConsumerGroup) -> int:
        return topics_metadata_hash(self._subscribed_topics(cg))

    def _assignor_name(self, cg: ConsumerGroup) -> str:
        """The assignor most members ask for, else the first of group.consumer.assignors
        (ConsumerGroup.computePreferredServerAssignor)."""
        counts: dict[str, int] = {}
        for m in cg.members.values():
            if m.server_assignor is not None:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        if counts:
            return sorted(counts.items(), key=lambda i: (-i[1], i[0]))[0][0]
        return self.config.assignors[0]

    def _update_target_assignment(self, group: Group, cg: ConsumerGroup) -> None:
        """Compute the target assignment for the group epoch (TargetAssignmentBuilder) and write
        the members whose target changed, then the assignment epoch."""
        topics = self._subscribed_topics(cg)
        by_id = {info.topic_id: info for info in topics.values()}
        members = {}
        for m in cg.members.values():
            subscribed = set(m.subscribed_topic_names)
            if m.subscribed_topic_regex is not None:
                subscribed.update(cg.resolved_regexes.get(m.subscribed_topic_regex, ()))
            members[m.member_id] = MemberSpec(
                rack_id=m.rack_id,
                subscribed_topic_ids=frozenset(str(topics[n].topic_id) for n in subscribed if n in topics),
                current={str(t): ps for t, ps in cg.target.get(m.member_id, {}).items() if t in by_id})
        specs = {str(info.topic_id): TopicSpec(info.num_partitions, info.racks) for info in topics.values()}
        result = ASSIGNORS[self._assignor_name(cg)].assign(members, specs)
        for member_id in sorted(cg.members):
            new = {uuid.UUID(t): frozenset(ps) for t, ps in result.get(member_id, {}).items() if ps}
            if new != cg.target.get(member_id):
                cg.target[member_id] = new
                self.emit_target(group, member_id)
        cg.assignment_epoch = cg.group_epoch
        self.emit_target_metadata(group)

    # ------------------------------------------------------------------------------------------
    # leaving, fencing and timers
    # ------------------------------------------------------------------------------------------

    def _leave(self, req) -> HeartbeatResponse:
        group, cg = self._group_for(req.group_id, False, req.member_id)
        if req.instance_id is None:
            if req.member_id not in cg.members:
                raise _error(ErrorCode.UNKNOWN_MEMBER_ID,
                             f"Member {req.member_id} is not a member of group {req.group_id}.")
            log.info("group %s: member %s left", group.group_id, req.member_id)
            self.fence(group, req.member_id)
        else:
            member = cg.static_member(req.instance_id)
            if member is None:
                raise _error(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
            if member.member_id != req.member_id:
                raise _error(ErrorCode.FENCED_INSTANCE_ID, f"Static member {req.member_id} with instance id "
                             f"{req.instance_id} was fenced by member {member.member_id}.")
            if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # a static member going away for a while keeps its assignment for its session
                leaving = replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={})
                cg.put(leaving)
                self.emit_current_assignment(group, leaving)
                log.info("group %s: static member %s (%s) left temporarily", group.group_id, req.member_id,
                         req.instance_id)
            else:
                self.fence(group, req.member_id)
        return HeartbeatResponse(throttle_time_ms=0, error_code=0, error_message=None, member_id=req.member_id,
                                 member_epoch=req.member_epoch, heartbeat_interval_ms=0, assignment=None)

    def fence(self, group: Group, member_id: str) -> None:
        """Remove a member (it left, or its session, revocation, join or sync timed out):
        tombstones for its records, a new group epoch and target assignment without it
        (consumerGroupFenceMember) -- or, if it was the last member using the consumer protocol
        beside classic members, the group becomes classic (:mod:`kcompat.group.consumer_migration`)."""
        cg = group.consumer
        if self.classic is not None and self.migration.maybe_downgrade(group, member_id):
            return
        self._remove_member_records(group, member_id)
        cg.remove(member_id)
        self.cancel_timers(group, member_id)
        self._maybe_bump_epoch(group, cg, True)
        if cg.members:
            self._update_target_assignment(group, cg)
        else:
            cg.assignment_epoch = cg.group_epoch
            self.emit_target_metadata(group)
            group.state_timestamp = self._now()   # offsets' retention counts from now (KIP-211)

    MEMBER_TIMERS = ("cg-session", "cg-revoke", "cg-join", "cg-sync")

    def cancel_timers(self, group: Group, member_id: str) -> None:
        for kind in self.MEMBER_TIMERS:
            self._timers.cancel((kind, group.group_id, member_id))

    def cancel_timer(self, group: Group, kind: str, member_id: str) -> None:
        self._timers.cancel((kind, group.group_id, member_id))

    def schedule_timer(self, group: Group, kind: str, member_id: str, delay_ms: int, *, if_absent: bool = False) -> None:
        """A ``cg-join`` or ``cg-sync`` deadline of a classic member: fenced when it fires."""
        key = (kind, group.group_id, member_id)
        if not (if_absent and key in self._timers):
            self._timers.schedule(key, self._now() + max(delay_ms, 0))

    def _remove_member_records(self, group: Group, member_id: str) -> None:
        for record_type in (crec.CURRENT_ASSIGNMENT, crec.TARGET_MEMBER, crec.MEMBER_METADATA):
            self._emit(group.partition, crec.key(record_type, group.group_id, member_id), None)

    def schedule_session(self, group: Group, member_id: str) -> None:
        member = group.consumer.members.get(member_id)
        timeout = (member.classic.session_timeout_ms if member is not None and member.classic is not None
                   else self.config.session_timeout_ms)
        self._timers.schedule(("cg-session", group.group_id, member_id), self._now() + timeout)

    def _schedule_revocation(self, group: Group, member: ConsumerMember) -> None:
        key = ("cg-revoke", group.group_id, member.member_id)
        if key not in self._timers:
            self._timers.schedule(key, self._now() + max(member.rebalance_timeout_ms, 0), member.member_epoch)

    def on_timer(self, kind: str, group_id: str, member_id: str, payload) -> None:
        """A ``cg-session``, ``cg-revoke``, ``cg-join`` or ``cg-sync`` timer fired: the member is
        fenced."""
        group = self.groups.get(group_id)
        cg = group.consumer if group is not None else None
        member = cg.members.get(member_id) if cg is not None else None
        if member is None:
            return
        if kind == "cg-revoke":
            if member.state is not MemberState.UNREVOKED_PARTITIONS or member.member_epoch != payload:
                return
            log.info("group %s: member %s did not revoke its partitions within %d ms; fenced", group_id, member_id,
                     member.rebalance_timeout_ms)
        elif kind == "cg-join":
            log.info("group %s: classic member %s did not rejoin within its rebalance timeout; fenced", group_id,
                     member_id)
        elif kind == "cg-sync":
            log.info("group %s: classic member %s did not sync within its rebalance timeout; fenced", group_id,
                     member_id)
        else:
            log.info("group %s: member %s session timed out; fenced", group_id, member_id)
        self.fence(group, member_id)

    # ------------------------------------------------------------------------------------------
    # records
    # ------------------------------------------------------------------------------------------

    def emit_member_metadata(self, group: Group, m: ConsumerMember) -> None:
        self._emit(group.partition, crec.key(crec.MEMBER_METADATA, group.group_id, m.member_id),
                   crec.member_metadata_value(
                       instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id,
                       client_host=m.client_host, subscribed_topic_names=list(m.subscribed_topic_names),
                       subscribed_topic_regex=m.subscribed_topic_regex, rebalance_timeout_ms=m.rebalance_timeout_ms,
                       server_assignor=m.server_assignor,
                       classic=None if m.classic is None else (m.classic.session_timeout_ms, m.classic.protocols)))

    def emit_group_epoch(self, group: Group) -> None:
        cg = group.consumer
        self._emit(group.partition, crec.key(crec.GROUP_METADATA, group.group_id),
                   crec.group_metadata_value(cg.group_epoch, cg.metadata_hash))

    def emit_target(self, group: Group, member_id: str) -> None:
        self._emit(group.partition, crec.key(crec.TARGET_MEMBER, group.group_id, member_id),
                   crec.target_member_value(group.consumer.target.get(member_id, {})))

    def emit_target_metadata(self, group: Group) -> None:
        self._emit(group.partition, crec.key(crec.TARGET_METADATA, group.group_id),
                   crec.target_metadata_value(group.consumer.assignment_epoch, self._now()))

    def emit_current_assignment(self, group: Group, m: ConsumerMember) -> None:
        self._emit(group.partition, crec.key(crec.CURRENT_ASSIGNMENT, group.group_id, m.member_id),
                   crec.current_assignment_value(m.member_epoch, m.previous_member_epoch, int(m.state), m.assigned,
                                                 m.pending_revocation, m.assignment_epochs))

    def delete_records(self, group: Group) -> None:
        """Tombstones for everything a consumer group wrote (DeleteGroups, or the group expiring
        once empty and without offsets)."""
        cg = group.consumer
        for member_id in list(cg.members):
            self._remove_member_records(group, member_id)
        for regex in cg.resolved_regexes:
            self._emit(group.partition, crec.key(crec.REGULAR_EXPRESSION, group.group_id, regex), None)
        for record_type in (crec.TARGET_METADATA, crec.PARTITION_METADATA, crec.GROUP_METADATA):
            self._emit(group.partition, crec.key(record_type, group.group_id), None)

    # ------------------------------------------------------------------------------------------
    # ConsumerGroupDescribe
    # ------------------------------------------------------------------------------------------

    def describe(self, group_id: str, include_authorized_operations: bool, operations: int):
        """One DescribedGroup of ConsumerGroupDescribe: GROUP_ID_NOT_FOUND for a missing or
        classic group (the admin client then falls back to DescribeGroups)."""
        D = DescribeResponse.DescribedGroup
        group = self.groups.get(group_id)
        if group is None or group.consumer is None:
            what = "not found" if group is None else "is not a consumer group"
            return D(error_code=int(ErrorCode.GROUP_ID_NOT_FOUND), error_message=f"Group {group_id} {what}.",
                     group_id=group_id, group_state="", members=[])
        cg = group.consumer
        members = []
        for m in cg.members.values():
            members.append(DescribeResponse.Member(
                member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                client_id=m.client_id, client_host=m.client_host,
                subscribed_topic_names=list(m.subscribed_topic_names), subscribed_topic_regex=m.subscribed_topic_regex or "",
                assignment=self._described(m.assigned), target_assignment=self._described(cg.target.get(m.member_id, {})),
                member_type=0 if m.classic is not None else 1))
        return D(error_code=0, error_message=None, group_id=group_id, group_state=cg.state.value,
                 group_epoch=cg.group_epoch, assignment_epoch=cg.assignment_epoch, assignor_name=self._assignor_name(cg),
                 members=members, authorized_operations=operations if include_authorized_operations else -(2**31))

    def _described(self, assignment: Assignment):
        return described_assignment(self.topics, assignment, DescribeResponse.TopicPartitions,
                                    DescribeResponse.Assignment)

    # ------------------------------------------------------------------------------------------
    # loading
    # ------------------------------------------------------------------------------------------

    def restore(self, group: Group, records: dict[tuple[int, str | None], bytes]) -> bool:
        """Rebuild ``group``'s consumer membership from the latest value of each of its KIP-848
        records (``(record type, member id or regex) -> value``, tombstones already applied), as
        Kafka's replay of them. False if there is no group metadata record (not a consumer group)."""
        cg = restore(group.group_id, records)
        if cg is None:
            return False
        group.consumer = cg
        group.protocol_type = CONSUMER_PROTOCOL_TYPE
        for member_id, member in cg.members.items():
            self.schedule_session(group, member_id)
            if member.state is MemberState.UNREVOKED_PARTITIONS:
                self._schedule_revocation(group, member)
        return True
