"""A KIP-1071 streams group's membership and the reconciliation of its members' tasks (Kafka
4.3.1's ``StreamsGroup``, ``StreamsGroupMember`` and ``streams.CurrentAssignmentBuilder``).

Tasks are kept per subtopology id: ``{subtopology_id: frozenset(partitions)}``; a member's active
tasks also carry the epoch at which each was assigned to it (``{subtopology_id: {partition:
epoch}}``), so an offset commit with an older member epoch is accepted for a task the member held
since then (StreamsGroup.createAssignmentEpochValidator).

Reconciliation follows the consumer protocol's: a member first revokes the tasks it must give up
(UNREVOKED_TASKS, at its current epoch), then moves to the target epoch and receives the tasks of
its target that no other member still holds (an active task held by another member, or a task
of any kind whose process still runs it as another kind, stays pending: UNRELEASED_TASKS).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from kcompat.group.streams_topology import ConfiguredTopology, Topology
from kcompat.protocol.errors import ErrorCode

Tasks = dict[str, frozenset[int]]
EpochTasks = dict[str, dict[int, int]]

STREAMS_PROTOCOL_TYPE = "streams"


class MemberState(enum.IntEnum):
    """streams.MemberState, with the values of StreamsGroupCurrentMemberAssignmentValue.State."""

    STABLE = 1
    UNREVOKED_TASKS = 2
    UNRELEASED_TASKS = 3
    UNKNOWN = 127


class StreamsGroupState(str, enum.Enum):
    """StreamsGroupDescribe's and ListGroups' states (StreamsGroup.StreamsGroupState)."""

    EMPTY = "Empty"
    NOT_READY = "NotReady"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class TaskTuple:
    """Active (with assignment epochs), standby and warm-up tasks (TasksTupleWithEpochs)."""

    active: EpochTasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not (self.active or self.standby or self.warmup)

    def active_ids(self) -> Tasks:
        return {s: frozenset(ps) for s, ps in self.active.items()}

    def owns_any(self, active: Tasks, standby: Tasks, warmup: Tasks) -> bool:
        return (_overlaps(active, self.active_ids()) or _overlaps(standby, self.standby)
                or _overlaps(warmup, self.warmup))


EMPTY = TaskTuple()


def _overlaps(a: Tasks, b: Tasks) -> bool:
    return any(a.get(s, frozenset()) & ps for s, ps in b.items())


def _contained(a: Tasks | None, b: Tasks) -> bool:
    return a is None or all(ps <= b.get(s, frozenset()) for s, ps in a.items())


@dataclass(frozen=True)
class StreamsMember:
    """One member (a stream thread of a Kafka Streams instance, ``process_id``)."""

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = -1
    process_id: str = ""
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] = ()
    assigned: TaskTuple = EMPTY
    pending_revocation: TaskTuple = EMPTY

    def metadata_fields(self) -> tuple:
        """What a StreamsGroupMemberMetadata record holds (a change bumps the group epoch)."""
        return (self.instance_id, self.rack_id, self.client_id, self.client_host, self.rebalance_timeout_ms,
                self.topology_epoch, self.process_id, self.user_endpoint, self.client_tags)

    def is_reconciled_to(self, assignment_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == assignment_epoch


class StreamsGroup:
    """The membership of one streams group: group epoch, topology (the first member's) and its
    configuration, target assignment and its epoch, members."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        # a new StreamsGroup starts at group epoch 1 and assignment epoch 1 (TargetAssignmentMetadata.INITIAL),
        # validated topology epoch 0: the first member's join bumps the group epoch to 2
        self.group_epoch = 1
        self.assignment_epoch = 1
        self.assignment_timestamp = 0
        self.metadata_hash = 0
        self.metadata_version = -1
        self.validated_topology_epoch = 0
        self.topology: Topology | None = None
        self.configured: ConfiguredTopology | None = None
        self.members: dict[str, StreamsMember] = {}
        self.target: dict[str, tuple[Tasks, Tasks]] = {}     # member id -> (active, standby)
        self.shutdown_requested_by: str | None = None
        self.endpoint_epoch = 0
        self.assignment_configs: dict[str, str] = {}

    @property
    def state(self) -> StreamsGroupState:
        """StreamsGroup.maybeUpdateGroupState."""
        if not self.members:
            return StreamsGroupState.EMPTY
        if self.topology is None or self.topology.epoch != self.validated_topology_epoch:
            return StreamsGroupState.NOT_READY
        if self.group_epoch > self.assignment_epoch:
            return StreamsGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return StreamsGroupState.RECONCILING
        return StreamsGroupState.STABLE

    def subscribed_names(self) -> set[str]:
        """Source topics while the group has members (StreamsGroup.isSubscribedToTopic)."""
        if not self.members or self.topology is None:
            return set()
        return set(self.topology.source_topic_subtopology())

    def task_owners(self, exclude: str) -> tuple[dict, dict]:
        """Who holds each task now, other than member ``exclude``: (active task -> process id,
        task -> process ids holding it as standby or warm-up)."""
        active: dict[tuple[str, int], str] = {}
        other: dict[tuple[str, int], set[str]] = {}
        for m in self.members.values():
            if m.member_id == exclude:
                continue
            for tt in (m.assigned, m.pending_revocation):
                for s, ps in tt.active.items():
                    for p in ps:
                        active[(s, p)] = m.process_id
                for kind in (tt.standby, tt.warmup):
                    for s, ps in kind.items():
                        for p in ps:
                            other.setdefault((s, p), set()).add(m.process_id)
        return active, other

    # -- offsets --------------------------------------------------------------------------------

    def validate_offset_commit(self, member_id: str, member_epoch: int, version: int, *, transactional: bool,
                               topics=()) -> ErrorCode | None:
        """StreamsGroup.validateOffsetCommit: a commit without a member epoch only while the group
        has no members; a member commits with OffsetCommit v9+ (unless transactional) and its
        current epoch, or an older one not older than the epoch each committed task was assigned
        at: UNKNOWN_MEMBER_ID, UNSUPPORTED_VERSION, STALE_MEMBER_EPOCH. ``topics``: the
        committed topic names (for the per-task check)."""
        if member_epoch < 0 and not self.members:
            return None
        if transactional and member_epoch < 0 and not member_id:
            return None
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not transactional and version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        if member_epoch == member.member_epoch:
            return None
        if member_epoch > member.member_epoch or self.topology is None:
            return ErrorCode.STALE_MEMBER_EPOCH
        by_topic = self.topology.source_topic_subtopology()
        for topic, partition in topics:
            sub = by_topic.get(topic)
            if sub is None:
                return ErrorCode.STALE_MEMBER_EPOCH
            epoch = member.assigned.active.get(sub, {}).get(partition)
            if epoch is None:
                epoch = member.pending_revocation.active.get(sub, {}).get(partition)
            if epoch is None or member_epoch < epoch:
                return ErrorCode.STALE_MEMBER_EPOCH
        return None

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode | None:
        """StreamsGroup.validateOffsetFetch."""
        if member_id is None and member_epoch < 0:
            return None
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return None


def epoch_valid(member: StreamsMember, epoch: int, owned_active: Tasks | None, owned_standby: Tasks | None,
                owned_warmup: Tasks | None) -> str | None:
    """throwIfStreamsGroupMemberEpochIsInvalid: None, or FENCED_MEMBER_EPOCH's message. An
    older epoch is accepted when it is the previous one and the owned tasks are a subset of
    the assignment (the answer with the new epoch may have been lost)."""
    if epoch == 0 or epoch == member.member_epoch:
        return None
    if epoch > member.member_epoch:
        return (f"The streams group member has a greater member epoch ({epoch}) than the one known by the group "
                f"coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.")
    if (epoch != member.previous_member_epoch or not _contained(owned_active, member.assigned.active_ids())
            or not _contained(owned_standby, member.assigned.standby)
            or not _contained(owned_warmup, member.assigned.warmup)):
        return (f"The streams group member has a smaller member epoch ({epoch}) than the one known by the group "
                f"coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.")
    return None


def reconcile(group: StreamsGroup, member: StreamsMember, target_epoch: int, target: tuple[Tasks, Tasks],
              owned: tuple[Tasks, Tasks, Tasks] | None) -> StreamsMember:
    """The member's next state towards ``target`` at ``target_epoch`` (CurrentAssignmentBuilder);
    ``owned``: the (active, standby, warm-up) tasks it reported, None if it did not say."""
    if member.state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next(group, member, member.member_epoch, target_epoch, target, owned)
    if member.state is MemberState.UNREVOKED_TASKS:
        if owned is None or member.pending_revocation.owns_any(*owned):
            return member
        return _next(group, member, member.member_epoch + 1, target_epoch, target, owned)
    return _next(group, member, member.member_epoch, target_epoch, target, owned)


def _next(group: StreamsGroup, member: StreamsMember, epoch: int, target_epoch: int, target: tuple[Tasks, Tasks],
          owned: tuple[Tasks, Tasks, Tasks] | None) -> StreamsMember:
    active_owner, other_owners = group.task_owners(member.member_id)
    pid = member.process_id

    def active_unreleased(s: str, p: int) -> bool:
        return (s, p) in active_owner or pid in other_owners.get((s, p), ())

    def other_unreleased(s: str, p: int) -> bool:
        return active_owner.get((s, p)) == pid or pid in other_owners.get((s, p), ())

    kept_a, revoke_a, add_a, unreleased = {}, {}, {}, False
    for s in set(target[0]) | set(member.assigned.active):
        current = member.assigned.active.get(s, {})
        wanted = target[0].get(s, frozenset())
        keep = {p: e for p, e in current.items() if p in wanted}
        gone = {p: e for p, e in current.items() if p not in keep}
        new = {p: target_epoch for p in wanted if p not in keep}
        held = {p for p in new if active_unreleased(s, p)}
        unreleased |= bool(held)
        new = {p: e for p, e in new.items() if p not in held}
        for d, v in ((kept_a, keep), (revoke_a, gone), (add_a, new)):
            if v:
                d[s] = v
    kept_s, revoke_s, add_s = {}, {}, {}
    for s in set(target[1]) | set(member.assigned.standby):
        current = member.assigned.standby.get(s, frozenset())
        wanted = target[1].get(s, frozenset())
        new = frozenset(p for p in wanted - current if not other_unreleased(s, p))
        unreleased |= len(new) != len(wanted - current)
        for d, v in ((kept_s, current & wanted), (revoke_s, current - wanted), (add_s, new)):
            if v:
                d[s] = v
    revoke_w = dict(member.assigned.warmup)   # kcompat assigns no warm-up tasks
    revoking = TaskTuple(revoke_a, revoke_s, revoke_w)
    kept = TaskTuple(kept_a, kept_s, {})
    if not revoking.is_empty() and (owned is None or revoking.owns_any(*owned)):
        return replace(member, state=MemberState.UNREVOKED_TASKS, member_epoch=epoch,
                       previous_member_epoch=_previous(member, epoch), assigned=kept, pending_revocation=revoking)
    merged = TaskTuple({s: {**kept_a.get(s, {}), **add_a.get(s, {})} for s in set(kept_a) | set(add_a)},
                       {s: kept_s.get(s, frozenset()) | add_s.get(s, frozenset()) for s in set(kept_s) | set(add_s)})
    state = MemberState.UNRELEASED_TASKS if unreleased else MemberState.STABLE
    return replace(member, state=state, member_epoch=target_epoch,
                   previous_member_epoch=_previous(member, target_epoch), assigned=merged, pending_revocation=EMPTY)


def _previous(member: StreamsMember, new_epoch: int) -> int:
    """StreamsGroupMember.Builder.updateMemberEpoch: the previous epoch is the one it had."""
    return member.member_epoch
