"""What StreamsGroupDescribe and StreamsGroupHeartbeat show of a KIP-1071 streams group: the
described group with its topology and members (Kafka 4.3.1's ``StreamsGroup.asDescribedGroup``:
the configured topology with the internal topics' decided partition counts once it is ready, else
the topology as the member sent it), and the source partitions per Interactive Queries endpoint
(``PartitionsByUserEndpoint``)."""

from __future__ import annotations

from kcompat.group.model import Group
from kcompat.group.streams_group import StreamsGroup, Tasks
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.streams_group_describe import StreamsGroupDescribeResponse as DescribeResponse
from kcompat.protocol.messages.streams_group_heartbeat import StreamsGroupHeartbeatResponse as HeartbeatResponse


def task_ids(cls, tasks) -> list:
    """``{subtopology: partitions}`` -> ``[cls(subtopology_id, partitions)]``, sorted."""
    return [cls(subtopology_id=s, partitions=sorted(ps)) for s, ps in sorted(tasks.items())]


def endpoint_partitions(sg: StreamsGroup) -> list:
    """PartitionsByUserEndpoint: each endpoint's active and standby source partitions."""
    R = HeartbeatResponse
    if sg.topology is None:
        return []
    by_sub: dict[str, list[str]] = {}
    for topic, sub in sg.topology.source_topic_subtopology().items():
        by_sub.setdefault(sub, []).append(topic)

    def partitions(tasks: Tasks) -> list:
        out: dict[str, set[int]] = {}
        for sub, ps in tasks.items():
            for topic in by_sub.get(sub, ()):
                out.setdefault(topic, set()).update(ps)
        return [R.TopicPartition(topic=t, partitions=sorted(ps)) for t, ps in sorted(out.items())]

    out = []
    for m in sg.members.values():
        if m.user_endpoint is not None:
            out.append(R.EndpointToPartitions(
                user_endpoint=R.Endpoint(host=m.user_endpoint[0], port=m.user_endpoint[1]),
                active_partitions=partitions(m.assigned.active_ids()),
                standby_partitions=partitions(m.assigned.standby)))
    return out


def describe_group(group: Group | None, group_id: str, include_authorized_operations: bool, operations: int):
    """One DescribedGroup of StreamsGroupDescribe (StreamsGroup.asDescribedGroup) for ``group``
    (None: missing): GROUP_ID_NOT_FOUND for a missing group or one of another type."""
    D = DescribeResponse
    if group is None or group.streams is None:
        message = (f"Group {group_id} not found." if group is None
                   else f"Group {group_id} is not a streams group.")
        return D.DescribedGroup(error_code=int(ErrorCode.GROUP_ID_NOT_FOUND), error_message=message,
                                group_id=group_id, group_state="", members=[])
    sg = group.streams
    members = []
    for m in sg.members.values():
        target = sg.target.get(m.member_id, ({}, {}))
        members.append(D.Member(
            member_id=m.member_id, member_epoch=m.member_epoch, instance_id=m.instance_id, rack_id=m.rack_id,
            client_id=m.client_id, client_host=m.client_host, topology_epoch=m.topology_epoch,
            process_id=m.process_id,
            user_endpoint=None if m.user_endpoint is None else D.Endpoint(host=m.user_endpoint[0],
                                                                          port=m.user_endpoint[1]),
            client_tags=[D.KeyValue(key=k, value=v) for k, v in m.client_tags], task_offsets=[],
            task_end_offsets=[],
            assignment=D.Assignment(active_tasks=task_ids(D.TaskIds, m.assigned.active),
                                    standby_tasks=task_ids(D.TaskIds, m.assigned.standby),
                                    warmup_tasks=task_ids(D.TaskIds, m.assigned.warmup)),
            target_assignment=D.Assignment(active_tasks=task_ids(D.TaskIds, target[0]),
                                           standby_tasks=task_ids(D.TaskIds, target[1]), warmup_tasks=[]),
            is_classic=False))
    return D.DescribedGroup(
        error_code=0, error_message=None, group_id=group_id, group_state=sg.state.value,
        group_epoch=sg.group_epoch, assignment_epoch=sg.assignment_epoch, topology=_described_topology(sg),
        members=members, authorized_operations=operations if include_authorized_operations else -(2**31))

def _described_topology(sg: StreamsGroup):
    """The configured topology when it is ready (internal topics with their decided partition
    counts), else the topology as the member sent it."""
    D = DescribeResponse
    if sg.topology is None:
        return None
    ready = sg.configured is not None and sg.configured.ready

    def info(t, partitions):
        return D.TopicInfo(name=t.name, partitions=partitions, replication_factor=t.replication_factor,
                           topic_configs=[D.KeyValue(key=k, value=v) for k, v in t.configs])

    def partitions_of(t):
        if not ready:
            return t.partitions
        return sg.configured.partitions.get(t.name, t.partitions)

    subs = [D.Subtopology(
        subtopology_id=s.subtopology_id, source_topics=list(s.source_topics),
        repartition_sink_topics=list(s.repartition_sink_topics),
        state_changelog_topics=[info(t, partitions_of(t)) for t in s.state_changelog_topics],
        repartition_source_topics=[info(t, partitions_of(t)) for t in s.repartition_source_topics])
        for s in sg.topology.subtopologies]
    return D.Topology(epoch=sg.topology.epoch, subtopologies=subs)
