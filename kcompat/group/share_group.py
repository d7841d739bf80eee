"""A KIP-932 share group's membership and assignment (Kafka's ``ShareGroup``, ``ShareGroupMember``
and the ``simple`` share assignor).

A share group has no revocation: a member's assignment is its target assignment as soon as the
target is computed, and its member epoch becomes the assignment epoch at its next heartbeat
(Kafka's ShareGroupAssignmentBuilder). The assignment only says which partitions a member should
fetch from; the partition leaders hand out records one acquisition at a time whoever asks, so
several members may share a partition.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field

from kcompat.group import share_group_records as srec
from kcompat.group.consumer_group import TopicInfo
from kcompat.group.consumer_records import Assignment, to_assignment

SHARE_PROTOCOL_TYPE = "share"


class ShareGroupState(str, enum.Enum):
    """ShareGroupDescribe's and ListGroups' states (Kafka's ShareGroup.ShareGroupState)."""

    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class ShareMember:
    """One member: ids, what it subscribes to, and the partitions assigned at ``member_epoch``."""

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    assigned: Assignment = field(default_factory=dict)

    def metadata_fields(self) -> tuple:
        return self.rack_id, self.client_id, self.client_host, tuple(sorted(self.subscribed_topic_names))


class ShareGroup:
    """The membership of one share group: group epoch (bumped when members or the subscribed
    topics change), target assignment and its epoch, members, and the topic partitions whose
    share-partition state the share coordinator holds (ShareGroupStatePartitionMetadata)."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.metadata_hash = 0
        self.members: dict[str, ShareMember] = {}
        self.target: dict[str, Assignment] = {}
        self.initialized: dict[uuid.UUID, tuple[str, frozenset[int]]] = {}
        self.deleting: dict[uuid.UUID, str] = {}

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_names(self) -> set[str]:
        names: set[str] = set()
        for m in self.members.values():
            names.update(m.subscribed_topic_names)
        return names


def simple_assign(members: dict[str, tuple[str, ...]], topics: dict[str, TopicInfo],
                  current: dict[str, Assignment]) -> dict[str, Assignment]:
    """Kafka's ``simple`` share assignor: every subscribed partition goes to at least one
    subscribed member; with more partitions than members each partition goes to one member, with
    more members than partitions a partition goes to several. Members keep the partitions they
    have where balance allows (fewer moves between assignments).

    ``members``: member id -> subscribed topic names; ``topics``: name -> TopicInfo of existing
    topics; ``current``: member id -> its assignment now. Returns member id -> Assignment."""
    result: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
    # group members by identical subscriptions so that each topic's partitions spread over the
    # members subscribed to it
    by_topic: dict[str, list[str]] = {}
    for member_id in sorted(members):
        for name in members[member_id]:
            if name in topics:
                by_topic.setdefault(name, []).append(member_id)
    load: dict[str, int] = {m: 0 for m in members}
    for name in sorted(by_topic):
        info = topics[name]
        subscribers = by_topic[name]
        partitions = list(range(info.num_partitions))
        if not partitions:
            continue
        if len(subscribers) > len(partitions):
            # every member gets one partition, partitions shared round-robin
            for i, member_id in enumerate(subscribers):
                p = partitions[i % len(partitions)]
                result[member_id].setdefault(info.topic_id, set()).add(p)
                load[member_id] += 1
            continue
        quota_lo, extra = divmod(len(partitions), len(subscribers))
        quota = {m: quota_lo + (1 if i < extra else 0) for i, m in enumerate(subscribers)}
        unassigned = set(partitions)
        for member_id in subscribers:   # stickiness: keep current partitions up to the quota
            kept = sorted(current.get(member_id, {}).get(info.topic_id, frozenset()) & unassigned)
            for p in kept[:quota[member_id]]:
                result[member_id].setdefault(info.topic_id, set()).add(p)
                unassigned.discard(p)
        for member_id in subscribers:
            have = len(result[member_id].get(info.topic_id, ()))
            while have < quota[member_id] and unassigned:
                p = min(unassigned)
                unassigned.discard(p)
                result[member_id].setdefault(info.topic_id, set()).add(p)
                have += 1
            load[member_id] += have
    return {m: {t: frozenset(ps) for t, ps in a.items() if ps} for m, a in result.items()}


def restore(group_id: str, records: dict[tuple[int, str | None], bytes]) -> ShareGroup | None:
    """A share group from the latest value of each of its records (``(record type, member id)
    -> value bytes``); None without a group metadata record. Raises ConsumerRecordError for a
    value that cannot be read."""
    meta = records.get((srec.GROUP_METADATA, None))
    if meta is None:
        return None
    sg = ShareGroup(group_id)
    value = srec.parse_value(srec.GROUP_METADATA, meta)
    sg.group_epoch, sg.metadata_hash = value.epoch, value.metadata_hash
    target_meta = records.get((srec.TARGET_METADATA, None))
    if target_meta is not None:
        sg.assignment_epoch = srec.parse_value(srec.TARGET_METADATA, target_meta).assignment_epoch
    state = records.get((srec.STATE_PARTITION_METADATA, None))
    if state is not None:
        v = srec.parse_value(srec.STATE_PARTITION_METADATA, state)
        for t in list(v.initializing_topics) + list(v.initialized_topics):
            name, ps = sg.initialized.get(t.topic_id, (t.topic_name, frozenset()))
            sg.initialized[t.topic_id] = (name, ps | frozenset(t.partitions))
        sg.deleting = {t.topic_id: t.topic_name for t in v.deleting_topics}
    for (record_type, member_id), data in records.items():
        if record_type == srec.TARGET_MEMBER:
            sg.target[member_id] = to_assignment(srec.parse_value(record_type, data).topic_partitions)
    for (record_type, member_id), data in records.items():
        if record_type != srec.MEMBER_METADATA:
            continue
        v = srec.parse_value(record_type, data)
        member = ShareMember(member_id=member_id, rack_id=v.rack_id, client_id=v.client_id,
                             client_host=v.client_host, subscribed_topic_names=tuple(v.subscribed_topic_names))
        current = records.get((srec.CURRENT_ASSIGNMENT, member_id))
        if current is not None:
            c = srec.parse_value(srec.CURRENT_ASSIGNMENT, current)
            member = ShareMember(member_id=member_id, member_epoch=c.member_epoch,
                                 previous_member_epoch=c.previous_member_epoch, rack_id=member.rack_id,
                                 client_id=member.client_id, client_host=member.client_host,
                                 subscribed_topic_names=member.subscribed_topic_names,
                                 assigned=to_assignment(c.assigned_partitions))
        sg.members[member_id] = member
    return sg
