"""The state of a KIP-848 consumer group (``group.protocol=consumer``) and the reconciliation of a
member towards its target assignment (Kafka's ``ConsumerGroup``, ``ConsumerGroupMember`` and
``CurrentAssignmentBuilder`` in org.apache.kafka.coordinator.group.modern.consumer).

Epochs, as KIP-848 defines them:

- the *group epoch* is bumped whenever the group's subscriptions or the metadata of the topics
  it subscribes to change (a member joins, leaves, changes its subscription; a subscribed topic
  gets partitions or is created or deleted);
- the *assignment epoch* is the group epoch the target assignment was computed for;
- a *member epoch* is the assignment epoch the member has reconciled to. A partition is given to
  a member only once its previous owner has revoked it (it is "unreleased" until then), so no two
  members ever own one partition at the same member-facing moment.

Assignments are ``{topic id (uuid.UUID): frozenset of partitions}``.

A member also keeps the epoch each of its partitions was assigned at (KIP-1251, Kafka 4.3): a
partition kept through reconciliations keeps its epoch, a new one gets the target assignment's.
An offset commit with a member epoch older than the member's current one is accepted for the
partitions assigned at or before that epoch, which still belong to the member; the member cannot
have lost them in between, so the commit cannot come from a zombie.
"""

from __future__ import annotations

import hashlib

import enum
import uuid
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Protocol

from kcompat.group import consumer_records as crec
from kcompat.group.consumer_records import Assignment, AssignmentEpochs
from kcompat.protocol.errors import ErrorCode

# the assignor class names Kafka's group.consumer.assignors accepts besides the short names
_ASSIGNOR_CLASSES = {"org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
                     "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range"}


@dataclass(frozen=True)
class TopicInfo:
    """A topic as the assignors see it: id, partition count, racks of each partition's replicas."""

    topic_id: uuid.UUID
    name: str
    num_partitions: int
    racks: dict[int, frozenset[str]]


class TopicsView(Protocol):
    """The metadata image, as far as consumer groups need it."""

    def version(self) -> int:
        """Changes whenever topics change (the image's metadata offset)."""

    def topic_names(self) -> Iterable[str]: ...

    def topic(self, name: str) -> TopicInfo | None: ...

    def name_of(self, topic_id: uuid.UUID) -> str | None: ...


def subscribed_topic_infos(topics: TopicsView, names) -> dict[str, TopicInfo]:
    """The existing topics among ``names``, sorted by name: what a modern group (consumer or
    share) assigns from."""
    out = {}
    for name in sorted(names):
        info = topics.topic(name)
        if info is not None:
            out[name] = info
    return out


def described_assignment(topics: TopicsView, assignment: Assignment, topic_cls, assignment_cls):
    """``assignment_cls(topic_partitions=[topic_cls(topic_id, topic_name, partitions)])`` of
    ``assignment`` for ConsumerGroupDescribe / ShareGroupDescribe, sorted, topics that no longer
    exist left out."""
    tps = []
    for tid, ps in sorted(assignment.items(), key=lambda i: str(i[0])):
        name = topics.name_of(tid)
        if name is not None:
            tps.append(topic_cls(topic_id=tid, topic_name=name, partitions=sorted(ps)))
    return assignment_cls(topic_partitions=tps)


def metadata_hash(infos: dict[str, TopicInfo]) -> int:
    """A 63-bit digest of subscribed topics (id, name, partitions, racks): kcompat's group
    metadata hash (ConsumerGroupMetadataValue / ShareGroupMetadataValue.MetadataHash; Kafka hashes
    the same facts with Murmur3). A change means a new group epoch and assignment."""
    h = hashlib.blake2b(digest_size=8)
    for name, info in infos.items():
        h.update(f"{info.topic_id}|{name}|{info.num_partitions}|".encode())
        for p in sorted(info.racks):
            h.update(f"{p}:{','.join(sorted(info.racks[p]))};".encode())
    return int.from_bytes(h.digest(), "big") >> 1


@dataclass(frozen=True)
class ConsumerProtocolConfig:
    """Broker configs of the same names (Kafka 4.3 defaults)."""

    enabled: bool = True                          # "consumer" in group.coordinator.rebalance.protocols
    heartbeat_interval_ms: int = 5000             # group.consumer.heartbeat.interval.ms
    session_timeout_ms: int = 45000               # group.consumer.session.timeout.ms
    max_size: int = 2**31 - 1                     # group.consumer.max.size
    assignors: tuple[str, ...] = ("uniform", "range")  # group.consumer.assignors
    migration_policy: str = "bidirectional"       # group.consumer.migration.policy (KIP-848 online migration)
    classic_max_size: int = 2**31 - 1             # group.max.size

    @property
    def upgrade_enabled(self) -> bool:
        return self.migration_policy in ("upgrade", "bidirectional")

    @property
    def downgrade_enabled(self) -> bool:
        return self.migration_policy in ("downgrade", "bidirectional")

    @staticmethod
    def assignor_names(values: Iterable[str]) -> tuple[str, ...]:
        """``group.consumer.assignors`` entries (short names or Kafka's class names) -> names."""
        return tuple(_ASSIGNOR_CLASSES.get(v.strip(), v.strip()) for v in values if v.strip())


class ClassicGroups(Protocol):
    """What the consumer group manager needs from the classic group coordinator when a group
    changes protocol online (KIP-848's upgrade and downgrade)."""

    def abandon_classic_members(self, group, error) -> None:
        """Answer the waiting JoinGroup/SyncGroup requests of ``group``'s classic members with
        ``error`` and drop its classic membership and timers (it becomes a consumer group)."""

    def adopt_classic_members(self, group, generation: int, members: list) -> None:
        """Make ``group`` a classic group again at ``generation`` with ``members``
        (``[(ConsumerMember, assignment bytes)]``, all classic members), store it and rebalance."""


class _NoTopics:
    """A :class:`TopicsView` without topics."""

    def version(self) -> int:
        return 0

    def topic_names(self) -> Iterable[str]:
        return ()

    def topic(self, name: str) -> TopicInfo | None:
        return None

    def name_of(self, topic_id: uuid.UUID) -> str | None:
        return None


NO_TOPICS = _NoTopics()


LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(enum.IntEnum):
    """Kafka's MemberState (the ``State`` byte of ConsumerGroupCurrentMemberAssignmentValue)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


class ConsumerGroupState(str, enum.Enum):
    """Kafka's ConsumerGroup.ConsumerGroupState: the names ListGroups and the describe APIs show."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class ClassicMetadata:
    """A classic member of a consumer group (it speaks JoinGroup/SyncGroup/Heartbeat during an
    online migration): its session timeout and JoinGroup protocols (ClassicMemberMetadata)."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class ConsumerMember:
    """One member (Kafka's ConsumerGroupMember); immutable, replaced on every change. ``classic``
    is set for a member that uses the classic protocol."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    # the epoch each partition of assigned and pending_revocation was assigned at (KIP-1251)
    assignment_epochs: AssignmentEpochs = field(default_factory=dict)
    classic: ClassicMetadata | None = None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def metadata_fields(self) -> tuple:
        """What ConsumerGroupMemberMetadataValue stores: a change writes a new record."""
        return (self.instance_id, self.rack_id, self.client_id, self.client_host, self.subscribed_topic_names,
                self.subscribed_topic_regex, self.rebalance_timeout_ms, self.server_assignor, self.classic)

    def assignment_fields(self) -> tuple:
        """What ConsumerGroupCurrentMemberAssignmentValue stores."""
        return (self.member_epoch, self.previous_member_epoch, self.state, self.assigned, self.pending_revocation,
                self.assignment_epochs)

    def assignment_epoch(self, topic_id: uuid.UUID, partition: int) -> int | None:
        """The epoch the partition was assigned to this member at, whether still assigned or
        pending revocation; None if the member has not got it (ConsumerGroupMember.assignmentEpoch
        and pendingRevocationEpoch)."""
        if partition in self.assigned.get(topic_id, ()) or partition in self.pending_revocation.get(topic_id, ()):
            return self.assignment_epochs.get((topic_id, partition), max(self.member_epoch, 0))
        return None

    def is_reconciled_to(self, assignment_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == assignment_epoch


class ConsumerGroup:
    """A consumer group's membership; committed offsets stay on the owning
    :class:`kcompat.group.model.Group`, which is shared with classic groups (one group id space)."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}          # instance id -> member id
        self.target: dict[str, Assignment] = {}           # member id -> target assignment
        self.metadata_hash = 0
        self.metadata_version = -1                        # metadata image offset it was computed at
        self.resolved_regexes: dict[str, tuple[str, ...]] = {}  # regex -> topic names it matches
        self.owners: dict[tuple[uuid.UUID, int], str] = {}      # partition -> member owning it

    @property
    def state(self) -> ConsumerGroupState:
        """ConsumerGroup.maybeUpdateGroupState."""
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def put(self, member: ConsumerMember) -> None:
        """Add or replace ``member``, keeping the partition owners and static ids in step."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        for tid, parts in list(member.assigned.items()) + list(member.pending_revocation.items()):
            for p in parts:
                self.owners[(tid, p)] = member.member_id

    def remove(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._release(member)
            if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
                del self.static_members[member.instance_id]
        self.target.pop(member_id, None)
        return member

    def _release(self, member: ConsumerMember) -> None:
        for tid, parts in list(member.assigned.items()) + list(member.pending_revocation.items()):
            for p in parts:
                if self.owners.get((tid, p)) == member.member_id:
                    del self.owners[(tid, p)]

    def current_partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        """The epoch of the member owning the partition, -1 if none does (Kafka's
        currentPartitionEpoch)."""
        owner = self.owners.get((topic_id, partition))
        return -1 if owner is None else self.members[owner].member_epoch

    def static_member(self, instance_id: str) -> ConsumerMember | None:
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def subscribed_names(self) -> set[str]:
        """Topic names the members subscribe to by name or through a resolved regex."""
        names: set[str] = set()
        for m in self.members.values():
            names.update(m.subscribed_topic_names)
            if m.subscribed_topic_regex is not None:
                names.update(self.resolved_regexes.get(m.subscribed_topic_regex, ()))
        return names

    def validate_offset_commit(self, member_id: str, member_epoch: int, version: int, *, transactional: bool,
                               partitions: Iterable[tuple[uuid.UUID | None, int]] = ()) -> ErrorCode | None:
        """Kafka 4.3's ConsumerGroup.validateOffsetCommit with its per-partition validator
        (KIP-1251), for the committed ``partitions`` ``[(topic id, or None for a topic unknown
        here, partition)]``. A commit without a member epoch is taken only while the group has
        no members; a member commits with OffsetCommit v9+ (unless transactional, or a classic
        member) and with its current epoch, or an older one that is not older than the epoch
        each committed partition was assigned to it at (a partition it no longer has fails).
        Errors: UNKNOWN_MEMBER_ID, UNSUPPORTED_VERSION, and for an epoch that fails
        STALE_MEMBER_EPOCH, or ILLEGAL_GENERATION for a classic member (it commits with its
        generation). The whole commit fails if one partition does, as in Kafka."""
        if member_epoch < 0 and not self.members:
            return None
        if transactional and member_epoch < 0 and not member_id:
            return None
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not transactional and member.classic is None and version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        if member_epoch == member.member_epoch:
            return None
        stale = ErrorCode.ILLEGAL_GENERATION if member.classic is not None else ErrorCode.STALE_MEMBER_EPOCH
        if member_epoch > member.member_epoch:
            return stale
        for topic_id, partition in partitions:
            assigned_at = None if topic_id is None else member.assignment_epoch(topic_id, partition)
            if assigned_at is None or member_epoch < assigned_at:
                return stale
        return None

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode | None:
        """ConsumerGroup.validateOffsetFetch (OffsetFetch v9+ with a member id and epoch)."""
        if member_id is None or member_epoch < 0:
            return None
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION if member.classic is not None else ErrorCode.STALE_MEMBER_EPOCH
        return None


def _owns_any(owned: Assignment | None, partitions: Assignment) -> bool:
    """Whether the member's reported owned partitions (None: not reported) include any of
    ``partitions`` (CurrentAssignmentBuilder.ownsRevokedPartitions)."""
    if owned is None:
        return True
    return any(owned.get(tid, frozenset()) & ps for tid, ps in partitions.items())


def reconcile(member: ConsumerMember, target_epoch: int, target: Assignment, owned: Assignment | None,
              partition_epoch: Callable[[uuid.UUID, int], int]) -> ConsumerMember:
    """The member's next state towards ``target`` at ``target_epoch`` (Kafka's
    CurrentAssignmentBuilder.build): partitions no longer targeted are revoked first (the member
    stays in its epoch, UNREVOKED_PARTITIONS, until its heartbeat's ``owned`` no longer lists
    them); new partitions are given only once no other member owns them (else
    UNRELEASED_PARTITIONS). ``partition_epoch`` is :meth:`ConsumerGroup.current_partition_epoch`."""
    if member.state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next(member, member.member_epoch, target_epoch, target, owned, partition_epoch)
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, owned, partition_epoch)
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, owned, partition_epoch)
    return _next(member, target_epoch, target_epoch, target, owned, partition_epoch)


def _next(member: ConsumerMember, member_epoch: int, target_epoch: int, target: Assignment,
          owned: Assignment | None, partition_epoch: Callable[[uuid.UUID, int], int]) -> ConsumerMember:
    """CurrentAssignmentBuilder.computeNextAssignment: kept and revoked partitions keep their
    assignment epochs, new ones get ``target_epoch``."""
    unreleased = False
    assigned: dict[uuid.UUID, frozenset[int]] = {}
    revoking: dict[uuid.UUID, frozenset[int]] = {}
    adding: dict[uuid.UUID, frozenset[int]] = {}
    for tid in sorted(set(target) | set(member.assigned), key=str):
        want = target.get(tid, frozenset())
        have = member.assigned.get(tid, frozenset())
        keep = have & want
        if keep:
            assigned[tid] = keep
        if have - keep:
            revoking[tid] = have - keep
        new = want - keep
        free = frozenset(p for p in new if partition_epoch(tid, p) == -1)
        unreleased = unreleased or free != new
        if free:
            adding[tid] = free
    if revoking and _owns_any(owned, revoking):
        return replace(member, state=MemberState.UNREVOKED_PARTITIONS, member_epoch=member_epoch,
                       previous_member_epoch=_previous(member, member_epoch),
                       assigned=assigned, pending_revocation=revoking,
                       assignment_epochs=_kept_epochs(member, assigned, revoking))
    epochs = _kept_epochs(member, assigned)
    for tid, ps in adding.items():
        assigned[tid] = assigned.get(tid, frozenset()) | ps
        epochs.update(((tid, p), target_epoch) for p in ps)
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return replace(member, state=state, member_epoch=target_epoch,
                   previous_member_epoch=_previous(member, target_epoch), assigned=assigned, pending_revocation={},
                   assignment_epochs=epochs)


def _kept_epochs(member: ConsumerMember, *assignments: Assignment) -> AssignmentEpochs:
    """The member's assignment epochs of the partitions in ``assignments`` (all of them its own)."""
    return {(tid, p): member.assignment_epoch(tid, p) for a in assignments for tid, ps in a.items() for p in ps}


def _previous(member: ConsumerMember, new_epoch: int) -> int:
    """ConsumerGroupMember.Builder.updateMemberEpoch: the previous epoch moves only on a change."""
    return member.member_epoch if new_epoch != member.member_epoch else member.previous_member_epoch


def restore(group_id: str, records: dict[tuple[int, str | None], bytes]) -> ConsumerGroup | None:
    """A consumer group rebuilt from the latest value of each of its KIP-848 records
    (``(record type, member id or regex) -> value``, tombstones already applied), as Kafka's
    replay of them; None without a group metadata record. Raises
    :class:`kcompat.group.consumer_records.ConsumerRecordError` for a record it cannot read."""
    metadata = records.get((crec.GROUP_METADATA, None))
    if metadata is None:
        return None
    cg = ConsumerGroup(group_id)
    value = crec.parse_value(crec.GROUP_METADATA, metadata)
    cg.group_epoch, cg.metadata_hash = value.epoch, value.metadata_hash
    target_meta = records.get((crec.TARGET_METADATA, None))
    if target_meta is not None:
        cg.assignment_epoch = crec.parse_value(crec.TARGET_METADATA, target_meta).assignment_epoch
    for (record_type, sub), data in sorted(records.items(), key=lambda i: (i[0][0], i[0][1] or "")):
        if record_type == crec.REGULAR_EXPRESSION:
            cg.resolved_regexes[sub] = tuple(crec.parse_value(record_type, data).topics)
        elif record_type == crec.TARGET_MEMBER:
            cg.target[sub] = crec.to_assignment(crec.parse_value(record_type, data).topic_partitions)
        elif record_type == crec.MEMBER_METADATA:
            v = crec.parse_value(record_type, data)
            member = ConsumerMember(
                sub, instance_id=v.instance_id, rack_id=v.rack_id, client_id=v.client_id,
                client_host=v.client_host, subscribed_topic_names=tuple(v.subscribed_topic_names),
                subscribed_topic_regex=v.subscribed_topic_regex, rebalance_timeout_ms=v.rebalance_timeout_ms,
                server_assignor=v.server_assignor)
            if v.classic_member_metadata is not None:
                member = replace(member, classic=ClassicMetadata(
                    v.classic_member_metadata.session_timeout_ms,
                    tuple((p.name, bytes(p.metadata)) for p in v.classic_member_metadata.supported_protocols)))
            current = records.get((crec.CURRENT_ASSIGNMENT, sub))
            if current is not None:
                c = crec.parse_value(crec.CURRENT_ASSIGNMENT, current)
                state = MemberState(c.state) if c.state in MemberState._value2member_map_ else MemberState.UNKNOWN
                epochs = crec.to_assignment_epochs(c.assigned_partitions, c.member_epoch)
                epochs.update(crec.to_assignment_epochs(c.partitions_pending_revocation, c.member_epoch))
                member = replace(member, member_epoch=c.member_epoch, previous_member_epoch=c.previous_member_epoch,
                                 state=state, assigned=crec.to_assignment(c.assigned_partitions),
                                 pending_revocation=crec.to_assignment(c.partitions_pending_revocation),
                                 assignment_epochs=epochs)
            cg.put(member)
    for member_id in [m for m in cg.target if m not in cg.members]:
        del cg.target[member_id]
    return cg
