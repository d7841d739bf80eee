"""``__consumer_offsets`` records of KIP-1071 streams groups, in Kafka 4.3.1's formats
(kafka-specs-4.3.1/group-coordinator, ``StreamsCoordinatorRecordHelpers``), and the rebuilding of
a group from them.

Framed like every modern group's records (:mod:`kcompat.group.consumer_records`): the key's int16
prefix is the record type, the value's the version (0); a null value is a tombstone.

==== ============================================== =============================================
type key (group id, ...)                            value
==== ============================================== =============================================
17   StreamsGroupMetadataKey                        group epoch, metadata hash, validated topology
                                                    epoch, the assignor's configs
19   StreamsGroupMemberMetadataKey (+ member id)    client, process, topology epoch, endpoint, tags
20   StreamsGroupTargetAssignmentMetadataKey        assignment epoch, timestamp
21   StreamsGroupTargetAssignmentMemberKey (+ id)   the member's target active/standby/warm-up tasks
22   StreamsGroupCurrentMemberAssignmentKey (+ id)  member epoch, previous epoch, state, tasks (active
                                                    ones with their assignment epochs), pending revocation
23   StreamsGroupTopologyKey                        the topology the first member sent
==== ============================================== =============================================
"""

from __future__ import annotations

from dataclasses import replace

from kcompat.group.consumer_records import (
    ConsumerRecordError, GroupRecordKey, _prefixed, _read, key_codec,
)
from kcompat.group.streams_group import MemberState, StreamsGroup, StreamsMember, TaskTuple, Tasks
from kcompat.group.streams_topology import from_request
from kcompat.protocol.group_records.streams_group_current_member_assignment_key import (
    StreamsGroupCurrentMemberAssignmentKey as CurrentKey)
from kcompat.protocol.group_records.streams_group_current_member_assignment_value import (
    StreamsGroupCurrentMemberAssignmentValue as CurrentValue)
from kcompat.protocol.group_records.streams_group_member_metadata_key import StreamsGroupMemberMetadataKey as MemberKey
from kcompat.protocol.group_records.streams_group_member_metadata_value import (
    StreamsGroupMemberMetadataValue as MemberValue)
from kcompat.protocol.group_records.streams_group_metadata_key import StreamsGroupMetadataKey as MetadataKey
from kcompat.protocol.group_records.streams_group_metadata_value import StreamsGroupMetadataValue as MetadataValue
from kcompat.protocol.group_records.streams_group_target_assignment_member_key import (
    StreamsGroupTargetAssignmentMemberKey as TargetMemberKey)
from kcompat.protocol.group_records.streams_group_target_assignment_member_value import (
    StreamsGroupTargetAssignmentMemberValue as TargetMemberValue)
from kcompat.protocol.group_records.streams_group_target_assignment_metadata_key import (
    StreamsGroupTargetAssignmentMetadataKey as TargetMetadataKey)
from kcompat.protocol.group_records.streams_group_target_assignment_metadata_value import (
    StreamsGroupTargetAssignmentMetadataValue as TargetMetadataValue)
from kcompat.protocol.group_records.streams_group_topology_key import StreamsGroupTopologyKey as TopologyKey
from kcompat.protocol.group_records.streams_group_topology_value import StreamsGroupTopologyValue as TopologyValue

GROUP_METADATA, MEMBER_METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT, TOPOLOGY = 17, 19, 20, 21, 22, 23
STREAMS_RECORD_TYPES = frozenset({GROUP_METADATA, MEMBER_METADATA, TARGET_METADATA, TARGET_MEMBER,
                                  CURRENT_ASSIGNMENT, TOPOLOGY})
MEMBER_RECORD_TYPES = (CURRENT_ASSIGNMENT, TARGET_MEMBER, MEMBER_METADATA)   # tombstoned in this order
_MEMBER_TYPES = frozenset(MEMBER_RECORD_TYPES)

_KEYS = {GROUP_METADATA: MetadataKey, MEMBER_METADATA: MemberKey, TARGET_METADATA: TargetMetadataKey,
         TARGET_MEMBER: TargetMemberKey, CURRENT_ASSIGNMENT: CurrentKey, TOPOLOGY: TopologyKey}


class StreamsKey(GroupRecordKey):
    """A decoded streams-group key: ``record_type`` (17, 19-23), the group, the member id (19, 21, 22)."""


# key(record_type, group_id, member_id=None) -> bytes; parse_key(record_type, data) -> StreamsKey
key, parse_key = key_codec(_KEYS, _MEMBER_TYPES, StreamsKey)


# -- values -----------------------------------------------------------------------------------------

def group_metadata_value(sg: StreamsGroup) -> bytes:
    return _prefixed(0, MetadataValue(
        epoch=sg.group_epoch, metadata_hash=sg.metadata_hash, validated_topology_epoch=sg.validated_topology_epoch,
        last_assignment_configs=[MetadataValue.LastAssignmentConfig(key=k, value=v)
                                 for k, v in sorted(sg.assignment_configs.items())]))


def topology_value(sg: StreamsGroup) -> bytes:
    V = TopologyValue
    subs = []
    for s in sg.topology.subtopologies:
        def info(t):
            return V.TopicInfo(name=t.name, partitions=t.partitions, replication_factor=t.replication_factor,
                               topic_configs=[V.TopicConfig(key=k, value=v) for k, v in t.configs])
        subs.append(V.Subtopology(
            subtopology_id=s.subtopology_id, source_topics=list(s.source_topics), source_topic_regex=[],
            state_changelog_topics=[info(t) for t in s.state_changelog_topics],
            repartition_sink_topics=list(s.repartition_sink_topics),
            repartition_source_topics=[info(t) for t in s.repartition_source_topics],
            copartition_groups=[V.CopartitionGroup(source_topics=list(src), source_topic_regex=[],
                                                   repartition_source_topics=list(rep))
                                for src, rep in s.copartition_groups]))
    return _prefixed(0, V(epoch=sg.topology.epoch, subtopologies=subs))


def member_metadata_value(m: StreamsMember) -> bytes:
    V = MemberValue
    return _prefixed(0, V(
        instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
        rebalance_timeout_ms=m.rebalance_timeout_ms, topology_epoch=m.topology_epoch, process_id=m.process_id,
        user_endpoint=None if m.user_endpoint is None else V.Endpoint(host=m.user_endpoint[0], port=m.user_endpoint[1]),
        client_tags=[V.KeyValue(key=k, value=v) for k, v in m.client_tags]))


def target_metadata_value(sg: StreamsGroup) -> bytes:
    return _prefixed(0, TargetMetadataValue(assignment_epoch=sg.assignment_epoch,
                                            assignment_timestamp=sg.assignment_timestamp))


def _ids(cls, tasks: Tasks) -> list:
    return [cls(subtopology_id=s, partitions=sorted(ps)) for s, ps in sorted(tasks.items()) if ps]


def target_member_value(target: tuple[Tasks, Tasks]) -> bytes:
    T = TargetMemberValue.TaskIds
    return _prefixed(0, TargetMemberValue(active_tasks=_ids(T, target[0]), standby_tasks=_ids(T, target[1]),
                                          warmup_tasks=[]))


def current_assignment_value(m: StreamsMember) -> bytes:
    T = CurrentValue.TaskIds

    def active(tasks):
        return [T(subtopology_id=s, partitions=sorted(ps), assignment_epochs=[ps[p] for p in sorted(ps)])
                for s, ps in sorted(tasks.items()) if ps]
    a, r = m.assigned, m.pending_revocation
    return _prefixed(0, CurrentValue(
        member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch, state=int(m.state),
        active_tasks=active(a.active), standby_tasks=_ids(T, a.standby), warmup_tasks=_ids(T, a.warmup),
        active_tasks_pending_revocation=active(r.active), standby_tasks_pending_revocation=_ids(T, r.standby),
        warmup_tasks_pending_revocation=_ids(T, r.warmup)))


# -- loading --------------------------------------------------------------------------------------

def _tasks(ids) -> Tasks:
    return {t.subtopology_id: frozenset(t.partitions) for t in ids or ()}


def _epoch_tasks(ids, default_epoch: int) -> dict[str, dict[int, int]]:
    """Active tasks with their assignment epochs (records without epochs: the member's epoch)."""
    out = {}
    for t in ids or ():
        epochs = t.assignment_epochs or [default_epoch] * len(t.partitions)
        out[t.subtopology_id] = dict(zip(t.partitions, epochs))
    return out


def restore(group_id: str, records: dict[tuple[int, str | None], bytes]) -> StreamsGroup | None:
    """A streams group from the latest value of each of its records (``(record type, member id or
    None) -> value``), as Kafka's replay builds it; None without a group metadata record."""
    meta = records.get((GROUP_METADATA, None))
    if meta is None:
        return None
    sg = StreamsGroup(group_id)
    v = _read(MetadataValue, meta)
    sg.group_epoch, sg.metadata_hash, sg.validated_topology_epoch = v.epoch, v.metadata_hash, v.validated_topology_epoch
    sg.assignment_configs = {c.key: c.value for c in v.last_assignment_configs or ()}
    if (TOPOLOGY, None) in records:
        sg.topology = from_request(_read(TopologyValue, records[(TOPOLOGY, None)]))
    if (TARGET_METADATA, None) in records:
        t = _read(TargetMetadataValue, records[(TARGET_METADATA, None)])
        sg.assignment_epoch, sg.assignment_timestamp = t.assignment_epoch, t.assignment_timestamp
    for (record_type, member_id), value in records.items():
        if record_type == TARGET_MEMBER:
            t = _read(TargetMemberValue, value)
            sg.target[member_id] = (_tasks(t.active_tasks), _tasks(t.standby_tasks))
        elif record_type == MEMBER_METADATA:
            m = _read(MemberValue, value)
            current = records.get((CURRENT_ASSIGNMENT, member_id))
            member = StreamsMember(
                member_id, instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id,
                client_host=m.client_host, rebalance_timeout_ms=m.rebalance_timeout_ms,
                topology_epoch=m.topology_epoch, process_id=m.process_id,
                user_endpoint=None if m.user_endpoint is None else (m.user_endpoint.host, m.user_endpoint.port),
                client_tags=tuple((kv.key, kv.value) for kv in m.client_tags or ()))
            if current is not None:
                c = _read(CurrentValue, current)
                known = {int(s) for s in MemberState}
                member = replace(
                    member, member_epoch=c.member_epoch, previous_member_epoch=c.previous_member_epoch,
                    state=MemberState(c.state) if c.state in known else MemberState.UNKNOWN,
                    assigned=TaskTuple(_epoch_tasks(c.active_tasks, c.member_epoch), _tasks(c.standby_tasks),
                                       _tasks(c.warmup_tasks)),
                    pending_revocation=TaskTuple(_epoch_tasks(c.active_tasks_pending_revocation, c.member_epoch),
                                                 _tasks(c.standby_tasks_pending_revocation),
                                                 _tasks(c.warmup_tasks_pending_revocation)))
            sg.members[member_id] = member
    return sg


__all__ = ["ConsumerRecordError", "STREAMS_RECORD_TYPES", "StreamsKey", "key", "parse_key", "restore"]
