"""KIP-1071 streams groups in the group coordinator: StreamsGroupHeartbeat and
StreamsGroupDescribe (Kafka 4.3.1's ``GroupMetadataManager.streamsGroupHeartbeat`` /
``streamsGroupLeave`` / ``streamsGroupDescribe``).

A streams group is a :class:`kcompat.group.model.Group` whose ``streams`` holds its membership
(:class:`kcompat.group.streams_group.StreamsGroup`), so committed offsets, their expiry and
transactional offsets work as for any group. One heartbeat:

1. gets or creates the group (an Empty classic group with only offsets becomes a streams group)
   and the member, checking its epoch (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID);
2. updates the member's metadata; a change bumps the group epoch;
3. takes the topology of the first member (a later one must be equal: "Topology updates are not
   supported yet."), configures it against the metadata image (:mod:`.streams_topology`) whenever
   the image changed, bumping the group epoch when the topics' metadata or the validated topology
   changed; missing internal topics are handed to the broker to create (:meth:`take_topics_to_create`);
4. computes a new target assignment with the sticky assignor (:mod:`.streams_assignor`) when the
   group epoch moved past the assignment epoch, unless the new group's initial rebalance delay
   (``streams.initial.rebalance.delay.ms``) or the assignment interval
   (``streams.assignment.interval.ms``) holds it back (status ASSIGNMENT_DELAYED);
5. reconciles the member towards its target (:func:`kcompat.group.streams_group.reconcile`).

The group is written to ``__consumer_offsets`` as Kafka 4.3.1's ``StreamsGroup*`` records
(:mod:`.streams_records`) and rebuilt when a coordinator loads the partition, so a restarted
broker keeps its members and epochs.

Not implemented: static membership (Kafka 4.3.1 refuses it too), warm-up tasks, task offsets,
IQ endpoint-to-partition maps beyond the active and standby source partitions of each endpoint.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Callable

from kcompat.group import streams_records as strec
from kcompat.group.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH, TopicsView, subscribed_topic_infos,
)
from kcompat.group.consumer_group import metadata_hash as topics_metadata_hash
from kcompat.group.coordinator_types import EMPTY as EMPTY_CLASSIC
from kcompat.group.model import Group, existing_or_new, group_int_config
from kcompat.group.streams_assignor import AssignmentMember, StickyTaskAssignor
from kcompat.group.streams_group import (
    STREAMS_PROTOCOL_TYPE, MemberState, StreamsGroup, StreamsMember, Tasks, epoch_valid, reconcile,
)
from kcompat.group.streams_topology import (
    ASSIGNMENT_DELAYED, SHUTDOWN_APPLICATION, STALE_TOPOLOGY, TopologyError, configure, from_request,
)
from kcompat.group.streams_views import describe_group, endpoint_partitions, task_ids
from kcompat.group.timers import Timers
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.streams_group_heartbeat import StreamsGroupHeartbeatResponse as HeartbeatResponse

log = logging.getLogger("kcompat.group")

SESSION_TIMER = "stg-session"
REVOKE_TIMER = "stg-revoke"
INITIAL_DELAY_TIMER = "stg-initial"
TIMERS = (SESSION_TIMER, REVOKE_TIMER, INITIAL_DELAY_TIMER)


@dataclass(frozen=True)
class StreamsProtocolConfig:
    """The ``group.streams.*`` broker configs (Kafka 4.3.1 defaults); a group's own ``streams.*``
    GROUP configs override the per-group ones through ``group_overrides``."""

    enabled: bool = True                   # "streams" in group.coordinator.rebalance.protocols
    heartbeat_interval_ms: int = 5000      # group.streams.heartbeat.interval.ms
    session_timeout_ms: int = 45000        # group.streams.session.timeout.ms
    max_size: int = 2**31 - 1              # group.streams.max.size
    num_standby_replicas: int = 0          # group.streams.num.standby.replicas
    initial_rebalance_delay_ms: int = 3000  # group.streams.initial.rebalance.delay.ms
    assignment_interval_ms: int = 1000     # group.streams.assignment.interval.ms


class HeartbeatError(Exception):
    def __init__(self, code: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _tasks(task_ids) -> Tasks | None:
    """``[TaskIds]`` of a request -> ``{subtopology: partitions}``; None stays None."""
    if task_ids is None:
        return None
    out: dict[str, frozenset[int]] = {}
    for t in task_ids:
        out[t.subtopology_id] = out.get(t.subtopology_id, frozenset()) | frozenset(t.partitions)
    return out


def _malformed_topology(topology) -> str | None:
    """What no Kafka Streams client sends and Kafka 4.3.1 answers UNKNOWN_SERVER_ERROR for, or
    None: two subtopologies with one id, a copartition group indexing past (or before) its
    subtopology's topic lists, a repartition source topic with a negative partition count."""
    seen: set[str] = set()
    for s in topology.subtopologies or ():
        if s.subtopology_id in seen:
            return f"subtopology {s.subtopology_id!r} is given twice"
        seen.add(s.subtopology_id)
        sources, repartitions = s.source_topics or (), s.repartition_source_topics or ()
        for g in s.copartition_groups or ():
            for indexes, listed in ((g.source_topics, sources), (g.repartition_source_topics, repartitions),
                                    (g.source_topic_regex, s.source_topic_regex or ())):
                if any(not 0 <= i < len(listed) for i in indexes or ()):
                    return f"a copartition group of subtopology {s.subtopology_id!r} indexes past its topics"
        for t in repartitions:
            if t.partitions < 0:
                return f"repartition topic {t.name!r} has {t.partitions} partitions"
    return None


def _error_response(e: HeartbeatError) -> HeartbeatResponse:
    return HeartbeatResponse(error_code=int(e.code), error_message=e.message, member_id="", member_epoch=0,
                             heartbeat_interval_ms=0, status=[])


class StreamsGroupManager:
    """Streams groups of the coordinator's ``__consumer_offsets`` partitions."""

    def __init__(self, config: StreamsProtocolConfig, topics: TopicsView, groups: dict[str, Group], *,
                 emit: Callable[[int, bytes, bytes | None], None], timers: Timers,
                 new_group: Callable[[str], Group], now: Callable[[], int], end_classic: Callable[[Group, str], None],
                 group_overrides: Callable[[str], dict[str, str]] = lambda group_id: {}) -> None:
        """``emit(partition, key, value)`` writes a record whose effect is already applied;
        ``new_group(group_id)`` registers a new Empty group; ``end_classic(group, "streams")``
        ends the classic record of an empty classic group becoming a streams group;
        ``group_overrides(group_id)``: the group's dynamic configs (name -> value string)."""
        self.config, self.assignor = config, StickyTaskAssignor()
        self.topics, self.groups = topics, groups
        self._emit, self._timers, self._now = emit, timers, now
        self._new_group, self._end_classic, self._overrides = new_group, end_classic, group_overrides
        self._to_create: dict[str, tuple[int, int, dict[str, str]]] = {}

    def _group_int(self, group_id: str, name: str) -> int:
        """The group's ``streams.<name>`` GROUP config, else the broker's ``group.streams.<name>``."""
        default = getattr(self.config, name.replace(".", "_"))
        return group_int_config(self._overrides(group_id), f"streams.{name}", default)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self._group_int(group_id, "heartbeat.interval.ms")

    def session_timeout_ms(self, group_id: str) -> int:
        return self._group_int(group_id, "session.timeout.ms")

    def assignment_configs(self, group_id: str) -> dict[str, str]:
        """What the assignor is configured with (GroupMetadataManager.streamsGroupAssignmentConfigs)."""
        return {"num.standby.replicas": str(self._group_int(group_id, "num.standby.replicas"))}

    def take_topics_to_create(self) -> dict[str, tuple[int, int, dict[str, str]]]:
        """The internal topics the last heartbeat found missing (name -> (partitions, replication
        factor or -1, configs)), for the broker to create as Kafka's AutoTopicCreationManager."""
        out, self._to_create = self._to_create, {}
        return out

    # ------------------------------------------------------------------------------------------
    # StreamsGroupHeartbeat
    # ------------------------------------------------------------------------------------------

    def invalid(self, req) -> HeartbeatResponse | None:
        """The error answer of a request Kafka's GroupCoordinatorService refuses before it reaches
        the group's coordinator (even one that is loading or elsewhere), else None."""
        try:
            self._validate(req)
            return None
        except HeartbeatError as e:
            return _error_response(e)

    def heartbeat(self, req, client_id: str, client_host: str) -> HeartbeatResponse:
        """One StreamsGroupHeartbeat v0. Errors are in the response: INVALID_REQUEST,
        STREAMS_INVALID_TOPOLOGY, GROUP_ID_NOT_FOUND, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH,
        GROUP_MAX_SIZE_REACHED."""
        self._to_create = {}
        try:
            self._validate(req)
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(req)
            return self._heartbeat(req, client_id, client_host)
        except HeartbeatError as e:
            return _error_response(e)

    @staticmethod
    def _validate(req) -> None:
        """GroupCoordinatorService.throwIfStreamsGroupHeartbeatRequestIsUsingUnsupportedFeatures and
        throwIfStreamsGroupHeartbeatRequestIsInvalid, in Kafka 4.3.1's order and words."""
        bad = ErrorCode.INVALID_REQUEST
        checks = [
            (req.instance_id is not None, "Static membership is not yet supported."),
            (req.task_offsets is not None, "TaskOffsets are not supported yet."),
            (req.task_end_offsets is not None, "TaskEndOffsets are not supported yet."),
            (bool(req.warmup_tasks), "WarmupTasks are not supported yet."),
            (req.topology is not None and any(s.source_topic_regex for s in req.topology.subtopologies or ()),
             "Regular expressions for source topics are not supported yet."),
            (req.member_id == "", "MemberId can't be empty."),
            (req.group_id == "", "GroupId can't be empty."),
            (req.rack_id == "", "RackId can't be empty."),
        ]
        for failed, message in checks:
            if failed:
                raise HeartbeatError(bad, message)
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                raise HeartbeatError(bad, "RebalanceTimeoutMs must be provided in first request.")
            for tasks, name in ((req.active_tasks, "ActiveTasks"), (req.standby_tasks, "StandbyTasks"),
                                (req.warmup_tasks, "WarmupTasks")):
                if tasks is None or tasks:   # Utils.throwIfNotEmptyCollection: null is not empty
                    raise HeartbeatError(bad, f"{name} must be empty when (re-)joining.")
            if req.topology is None:
                raise HeartbeatError(bad, "Topology must be non-null when (re-)joining.")
            malformed = _malformed_topology(req.topology)
            if malformed:
                # Kafka 4.3.1 fails these inside its topology code (an index or argument exception)
                # and answers UNKNOWN_SERVER_ERROR with no message; kcompat answers the same, on purpose
                log.warning("group %s: StreamsGroupHeartbeat from member %s refused: %s", req.group_id,
                            req.member_id, malformed)
                raise HeartbeatError(ErrorCode.UNKNOWN_SERVER_ERROR, None)
            for s in req.topology.subtopologies or ():
                for t in s.state_changelog_topics or ():
                    if t.partitions != 0:
                        raise HeartbeatError(ErrorCode.STREAMS_INVALID_TOPOLOGY,
                                             f"Changelog topic {t.name} must have an undefined partition count, "
                                             f"but it is set to {t.partitions}.")
        elif req.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise HeartbeatError(bad, f"MemberEpoch is {req.member_epoch}, but must be greater than or equal to -2.")
        given = [t is not None for t in (req.active_tasks, req.standby_tasks, req.warmup_tasks)]
        if any(given) and not all(given):
            raise HeartbeatError(bad, "If one task-type is non-null, all must be non-null.")
        if req.member_epoch != 0 and req.topology is not None:
            raise HeartbeatError(bad, "Topology can only be provided when (re-)joining.")

    def _group_for(self, group_id: str, create: bool) -> tuple[Group, StreamsGroup]:
        """getOrCreateStreamsGroup / getStreamsGroupOrThrow."""
        group = existing_or_new(self.groups, self._new_group, group_id, create)
        if group is None:
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Streams group {group_id} not found.")
        if group.streams is None:
            classic_empty = (group.consumer is None and group.share is None and not group.members
                             and not group.pending_members and group.is_(EMPTY_CLASSIC))
            if not create or not classic_empty:
                raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a streams group.")
            self._end_classic(group, "streams")
            group.streams = StreamsGroup(group_id)
            group.protocol_type = STREAMS_PROTOCOL_TYPE
        return group, group.streams

    def _heartbeat(self, req, client_id: str, client_host: str) -> HeartbeatResponse:
        epoch = req.member_epoch
        created = req.group_id not in self.groups
        group, sg = self._group_for(req.group_id, epoch == 0)
        was_empty = not sg.members
        member_id = req.member_id
        if epoch == 0:
            max_size = self.config.max_size
            if len(sg.members) >= max_size:
                raise HeartbeatError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                     f"The streams group has reached its maximum capacity of {max_size} members.")
            member = sg.members.get(member_id) or StreamsMember(member_id)
        else:
            member = sg.members.get(member_id)
            if member is None:
                raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                     f"Member {member_id} is not a member of group {req.group_id}.")
        owned_a, owned_s, owned_w = _tasks(req.active_tasks), _tasks(req.standby_tasks), _tasks(req.warmup_tasks)
        fenced = epoch_valid(member, epoch, owned_a, owned_s, owned_w)
        if fenced is not None:
            raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH, fenced)
        if epoch == 0 and member_id not in sg.members:
            log.info("group %s: member %s joins the streams group", group.group_id, member_id)
        updated = replace(
            member,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms,
            topology_epoch=req.topology.epoch if req.topology is not None else member.topology_epoch,
            client_id=client_id, client_host=client_host,
            process_id=req.process_id if req.process_id is not None else member.process_id,
            client_tags=(tuple(sorted((kv.key, kv.value) for kv in req.client_tags)) if req.client_tags is not None
                         else member.client_tags),
            user_endpoint=((req.user_endpoint.host, req.user_endpoint.port) if req.user_endpoint is not None
                           else member.user_endpoint))
        bump = member_id not in sg.members or updated.metadata_fields() != member.metadata_fields()
        saved = (sg.topology, sg.configured, sg.metadata_version, sg.metadata_hash, sg.validated_topology_epoch)
        had_topology = sg.topology is not None
        try:
            self._update_topology(sg, req, member_id)
            bump |= self._configure(group, sg)
        except HeartbeatError:
            # nothing of a failed heartbeat stays (Kafka writes none of its records)
            sg.topology, sg.configured, sg.metadata_version, sg.metadata_hash, sg.validated_topology_epoch = saved
            if created and self.groups.get(group.group_id) is group:
                del self.groups[group.group_id]
            raise
        sg.members[member_id] = updated
        if bump:
            self._emit_record(group, strec.MEMBER_METADATA, member_id, strec.member_metadata_value(updated))
        if not had_topology and sg.topology is not None:
            self._emit_record(group, strec.TOPOLOGY, None, strec.topology_value(sg))
        status: list[tuple[int, str]] = []
        if sg.topology is not None and updated.topology_epoch < sg.topology.epoch:
            status.append((STALE_TOPOLOGY, f"The member's topology epoch {updated.topology_epoch} is behind the "
                                           f"group's topology epoch {sg.topology.epoch}."))
        configs = self.assignment_configs(group.group_id)
        if not bump and configs != sg.assignment_configs:
            bump = True
        if bump:
            sg.group_epoch += 1
            sg.assignment_configs = configs
            self._emit_record(group, strec.GROUP_METADATA, None, strec.group_metadata_value(sg))
            log.info("group %s: streams group epoch %d", group.group_id, sg.group_epoch)
        if was_empty:   # a group starting: wait for more members (KIP-1071 initial rebalance delay)
            delay = self._group_int(group.group_id, "initial.rebalance.delay.ms")
            key = (INITIAL_DELAY_TIMER, group.group_id, "")
            if delay > 0 and key not in self._timers:
                self._timers.schedule(key, self._now() + delay)
        self._maybe_assign(group, sg, status)
        after = self._reconcile(group, sg, sg.members[member_id], (owned_a, owned_s, owned_w))
        self.schedule_session(group, member_id)
        if req.shutdown_application and sg.shutdown_requested_by is None:
            sg.shutdown_requested_by = member_id
        R = HeartbeatResponse
        response = R(error_code=0, member_id=member_id, member_epoch=after.member_epoch,
                     heartbeat_interval_ms=self.heartbeat_interval_ms(group.group_id))
        if epoch == 0 or after.assigned != member.assigned:
            response.active_tasks = task_ids(R.TaskIds, after.assigned.active)
            response.standby_tasks = task_ids(R.TaskIds, after.assigned.standby)
            response.warmup_tasks = task_ids(R.TaskIds, after.assigned.warmup)
            if after.user_endpoint is not None:
                sg.endpoint_epoch += 1
        if sg.endpoint_epoch != req.endpoint_information_epoch:
            response.partitions_by_user_endpoint = endpoint_partitions(sg)
        response.endpoint_information_epoch = sg.endpoint_epoch
        configured = sg.configured
        if configured is not None and configured.status is not None:
            status.append(configured.status)
            self._to_create = dict(configured.to_create)
        if sg.shutdown_requested_by is not None:
            status.append((SHUTDOWN_APPLICATION, f"Streams group member {sg.shutdown_requested_by} encountered a "
                                                 f"fatal error and requested a shutdown for the entire application."))
        response.status = [R.Status(status_code=c, status_detail=d) for c, d in status]
        return response

    def _update_topology(self, sg: StreamsGroup, req, member_id: str) -> None:
        """GroupMetadataManager.maybeUpdateTopology."""
        if req.topology is None:
            return
        topology = from_request(req.topology)
        if sg.topology is None:
            log.info("group %s: member %s initialized the topology with epoch %d", sg.group_id, member_id,
                     topology.epoch)
            sg.topology = topology
            sg.configured = None
        elif sg.topology.epoch > topology.epoch:
            return
        elif sg.topology != topology:
            raise HeartbeatError(ErrorCode.INVALID_REQUEST, "Topology updates are not supported yet.")

    def _configure(self, group: Group, sg: StreamsGroup) -> bool:
        """(Re)configure the topology when it is new or the image changed; True if the group
        epoch must move (the topics' metadata changed, or a topology became valid)."""
        version = self.topics.version()
        if sg.configured is not None and sg.metadata_version == version:
            return False
        sg.metadata_version = version
        infos = subscribed_topic_infos(self.topics, sg.topology.required_topics())
        counts = {name: info.num_partitions for name, info in infos.items()}
        metadata_hash = topics_metadata_hash(infos)
        bump = False
        if metadata_hash != sg.metadata_hash or sg.configured is None:
            bump = metadata_hash != sg.metadata_hash
            sg.metadata_hash = metadata_hash
            try:
                sg.configured = configure(sg.topology, counts.get)
            except TopologyError as e:
                raise HeartbeatError(ErrorCode.STREAMS_INVALID_TOPOLOGY, e.message) from None
        validated = sg.topology.epoch if sg.configured.ready else -1
        if validated != sg.validated_topology_epoch:
            sg.validated_topology_epoch = validated
            bump = True
        return bump

    def _maybe_assign(self, group: Group, sg: StreamsGroup, status: list) -> None:
        """GroupMetadataManager.maybeUpdateStreamsTargetAssignment."""
        if (INITIAL_DELAY_TIMER, group.group_id, "") in self._timers:
            status.append((ASSIGNMENT_DELAYED, "Assignment delayed due to the configured initial rebalance delay."))
            return
        if sg.assignment_epoch >= sg.group_epoch:
            return
        interval = self._group_int(group.group_id, "assignment.interval.ms")
        if sg.assignment_timestamp and self._now() < sg.assignment_timestamp + interval:
            status.append((ASSIGNMENT_DELAYED, "Assignment delayed due to the configured assignment interval."))
            return
        self.assign(group, sg)

    def assign(self, group: Group, sg: StreamsGroup) -> None:
        """A new target assignment for the group epoch (streams.TargetAssignmentBuilder): nothing
        while the topology is not ready."""
        configured = sg.configured
        if configured is not None and configured.ready:
            members = {m.member_id: AssignmentMember(m.process_id, *sg.target.get(m.member_id, ({}, {})))
                       for m in sg.members.values()}
            stateful = {s.subtopology_id for s in sg.topology.subtopologies if s.stateful}
            standby = int(sg.assignment_configs.get("num.standby.replicas", "0"))
            target = self.assignor.assign(members, configured.tasks, stateful, standby)
        else:
            target = {m: ({}, {}) for m in sg.members}
        for member_id in sorted(target):
            if target[member_id] != sg.target.get(member_id):
                self._emit_record(group, strec.TARGET_MEMBER, member_id, strec.target_member_value(target[member_id]))
        sg.target = target
        sg.assignment_epoch = sg.group_epoch
        sg.assignment_timestamp = self._now()
        self._emit_record(group, strec.TARGET_METADATA, None, strec.target_metadata_value(sg))
        log.info("group %s: target assignment for epoch %d", sg.group_id, sg.group_epoch)

    def _reconcile(self, group: Group, sg: StreamsGroup, member: StreamsMember, owned) -> StreamsMember:
        """GroupMetadataManager.maybeReconcile, with the revocation deadline of UNREVOKED_TASKS."""
        if member.is_reconciled_to(sg.assignment_epoch):
            return member
        owned = None if any(t is None for t in owned) else owned
        after = reconcile(sg, member, sg.assignment_epoch, sg.target.get(member.member_id, ({}, {})), owned)
        if after != member:
            sg.members[member.member_id] = after
            self._emit_record(group, strec.CURRENT_ASSIGNMENT, member.member_id, strec.current_assignment_value(after))
            self._revocation_deadline(group, after)
        return after

    def _revocation_deadline(self, group: Group, member: StreamsMember) -> None:
        """A member revoking tasks (UNREVOKED_TASKS) is fenced unless it moves on within its
        rebalance timeout (scheduleStreamsGroupRebalanceTimeout); other states cancel it."""
        key = (REVOKE_TIMER, group.group_id, member.member_id)
        if member.state is MemberState.UNREVOKED_TASKS:
            self._timers.schedule(key, self._now() + max(member.rebalance_timeout_ms, 0), member.member_epoch)
        else:
            self._timers.cancel(key)

    # ------------------------------------------------------------------------------------------
    # leaving, fencing and timers
    # ------------------------------------------------------------------------------------------

    def _leave(self, req) -> HeartbeatResponse:
        """GroupMetadataManager.streamsGroupLeave."""
        group, sg = self._group_for(req.group_id, False)
        if req.shutdown_application and sg.shutdown_requested_by is None:
            sg.shutdown_requested_by = req.member_id
        if req.member_id not in sg.members:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {req.member_id} is not a member of group {req.group_id}.")
        log.info("group %s: member %s left the streams group", group.group_id, req.member_id)
        self.fence(group, req.member_id)
        return HeartbeatResponse(error_code=0, member_id=req.member_id, member_epoch=req.member_epoch,
                                 heartbeat_interval_ms=0, status=[])

    def fence(self, group: Group, member_id: str) -> None:
        """Remove a member and bump the group epoch (streamsGroupFenceMember); the next heartbeat
        of another member computes the new target assignment."""
        sg = group.streams
        sg.members.pop(member_id, None)
        sg.target.pop(member_id, None)
        for kind in (SESSION_TIMER, REVOKE_TIMER):
            self._timers.cancel((kind, group.group_id, member_id))
        for record_type in strec.MEMBER_RECORD_TYPES:
            self._emit_record(group, record_type, member_id, None)
        sg.group_epoch += 1
        self._emit_record(group, strec.GROUP_METADATA, None, strec.group_metadata_value(sg))
        if not sg.members:
            sg.shutdown_requested_by = None
            group.state_timestamp = self._now()   # offsets' retention counts from now (KIP-211)

    def schedule_session(self, group: Group, member_id: str) -> None:
        self._timers.schedule((SESSION_TIMER, group.group_id, member_id),
                              self._now() + self.session_timeout_ms(group.group_id))

    def on_timer(self, kind: str, group_id: str, member_id: str, payload) -> None:
        """A session or revocation deadline of a member passed (it is fenced), or the initial
        rebalance delay of a new group ended (its first target assignment is computed)."""
        group = self.groups.get(group_id)
        sg = group.streams if group is not None else None
        if sg is None:
            return
        if kind == INITIAL_DELAY_TIMER:
            # computeDelayedTargetAssignment: Kafka 4.3.1 leaves a group whose topology is not
            # ready at its assignment epoch (its members get their target at their next heartbeat)
            ready = sg.configured is not None and sg.configured.ready
            if sg.members and sg.group_epoch > sg.assignment_epoch and ready:
                self.assign(group, sg)
            return
        member = sg.members.get(member_id)
        if member is None:
            return
        if kind == REVOKE_TIMER:
            if member.state is not MemberState.UNREVOKED_TASKS or member.member_epoch != payload:
                return
            log.info("group %s: member %s did not revoke its tasks within %d ms; fenced", group_id, member_id,
                     member.rebalance_timeout_ms)
        else:
            log.info("group %s: member %s session timed out; fenced", group_id, member_id)
        self.fence(group, member_id)

    # ------------------------------------------------------------------------------------------
    # records and loading
    # ------------------------------------------------------------------------------------------

    def _emit_record(self, group: Group, record_type: int, member_id: str | None, value: bytes | None) -> None:
        self._emit(group.partition, strec.key(record_type, group.group_id, member_id), value)

    def delete_records(self, group: Group) -> None:
        """Tombstones for everything a streams group wrote (DeleteGroups, or the group expiring
        once empty and without offsets)."""
        sg = group.streams
        for member_id in sorted(set(sg.members) | set(sg.target)):
            for record_type in strec.MEMBER_RECORD_TYPES:
                self._emit_record(group, record_type, member_id, None)
        for record_type in (strec.TARGET_METADATA, strec.TOPOLOGY, strec.GROUP_METADATA):
            self._emit_record(group, record_type, None, None)

    def restore(self, group: Group, records: dict[tuple[int, str | None], bytes]) -> bool:
        """Rebuild ``group``'s streams membership from the latest value of each of its records
        (tombstones applied), as Kafka's replay; its members' sessions start again. False if there
        is no group metadata record. The topology is configured again at the next heartbeat."""
        sg = strec.restore(group.group_id, records)
        if sg is not None:
            group.streams, group.protocol_type = sg, STREAMS_PROTOCOL_TYPE
            for member in sg.members.values():
                self.schedule_session(group, member.member_id)
                self._revocation_deadline(group, member)
        return sg is not None

    # ------------------------------------------------------------------------------------------
    # StreamsGroupDescribe
    # ------------------------------------------------------------------------------------------

    def describe(self, group_id: str, include_authorized_operations: bool, operations: int):
        """One DescribedGroup of StreamsGroupDescribe (:func:`.streams_views.describe_group`)."""
        return describe_group(self.groups.get(group_id), group_id, include_authorized_operations, operations)
