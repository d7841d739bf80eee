"""KIP-1071 streams groups over the wire, answers compared with Apache Kafka 4.3.1 side by side
(raw StreamsGroupHeartbeat / StreamsGroupDescribe / ListGroups / DescribeGroups / OffsetCommit /
DeleteGroups against both brokers, fresh, with their defaults): ApiVersions 88/89 and the
streams.version feature (supported 0-1, finalized 1), the heartbeat's validation texts, a join that
makes the broker create the repartition and changelog topics (MISSING_INTERNAL_TOPICS, listed in
Kafka's order) while the initial rebalance delay holds the assignment back (ASSIGNMENT_DELAYED),
the epochs a new group goes through (2 at the join, 3 once the topology is valid), the described
group and topology, offset commits checked against the member epoch, leaving and deleting.

Every expected value below is what Kafka 4.3.1 answered to the same request."""

from __future__ import annotations

import time

from kcompat.protocol.messages.api_versions import ApiVersionsRequest
from kcompat.protocol.messages.create_topics import CreateTopicsRequest as CT
from kcompat.protocol.messages.delete_groups import DeleteGroupsRequest
from kcompat.protocol.messages.describe_groups import DescribeGroupsRequest
from kcompat.protocol.messages.find_coordinator import FindCoordinatorRequest
from kcompat.protocol.messages.list_groups import ListGroupsRequest
from kcompat.protocol.messages.offset_commit import OffsetCommitRequest as OC
from kcompat.protocol.messages.streams_group_describe import StreamsGroupDescribeRequest
from kcompat.protocol.messages.streams_group_heartbeat import StreamsGroupHeartbeatRequest as HB
from kcompat.testing import wire
from tests.support.broker_process import wait_for

INVALID_REQUEST, UNKNOWN_MEMBER_ID, GROUP_ID_NOT_FOUND, FENCED_MEMBER_EPOCH = 42, 25, 69, 110
STREAMS_INVALID_TOPOLOGY, STALE_MEMBER_EPOCH, UNSUPPORTED_VERSION, NON_EMPTY_GROUP = 130, 113, 35, 68
NOT_READY = {14, 15, 16}
APP = "wc"   # the names Kafka 4.3.1 was probed with (the missing topics are listed in hash order)
REPART = f"{APP}-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition"
CHANGELOG = f"{APP}-KSTREAM-AGGREGATE-STATE-STORE-0000000003-changelog"


def topology(epoch: int = 1, source: str = "wire-in", changelog_partitions: int = 0):
    """A word count's topology as Kafka Streams sends it."""
    return HB.Topology(epoch=epoch, subtopologies=[
        HB.Subtopology(subtopology_id="0", source_topics=[source], source_topic_regex=[], state_changelog_topics=[],
                       repartition_sink_topics=[REPART], repartition_source_topics=[], copartition_groups=[]),
        HB.Subtopology(subtopology_id="1", source_topics=[], source_topic_regex=[],
                       state_changelog_topics=[HB.TopicInfo(name=CHANGELOG, partitions=changelog_partitions,
                                                            replication_factor=0, topic_configs=[])],
                       repartition_sink_topics=[],
                       repartition_source_topics=[HB.TopicInfo(
                           name=REPART, partitions=0, replication_factor=0,
                           topic_configs=[HB.KeyValue(key="cleanup.policy", value="delete")])],
                       copartition_groups=[])])


def hb(bootstrap: str, member: str = "m1", epoch: int = 0, *, group: str = APP, owned=(), top="default",
       rebalance_timeout: int = 5000, **kw):
    """One heartbeat, retried while the coordinator loads. A join (epoch 0) sends the topology
    and empty task lists, as the client does; ``owned=None`` sends null task lists."""
    if top == "default":
        top = topology() if epoch == 0 else None
    tasks = None if owned is None else [HB.TaskIds(subtopology_id=s, partitions=sorted(ps))
                                        for s, ps in sorted(dict(owned).items())]
    fields = dict(active_tasks=tasks, standby_tasks=None if tasks is None else [],
                  warmup_tasks=None if tasks is None else [])
    fields.update(kw)
    req = HB(group_id=group, member_id=member, member_epoch=epoch, endpoint_information_epoch=0,
             rebalance_timeout_ms=rebalance_timeout if epoch == 0 else -1, topology=top,
             process_id="p1" if epoch == 0 else None, **fields)

    def answered():
        resp = wire.call(bootstrap, req, 0)
        if resp.error_code in NOT_READY:   # __consumer_offsets is made on the first FindCoordinator
            wire.call(bootstrap, FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), 4)
            return None
        return resp
    return wait_for(answered, 60, what="the group coordinator")


def status(resp) -> list[tuple[int, str]]:
    return [(s.status_code, s.status_detail) for s in resp.status]


def tasks(resp):
    return None if resp.active_tasks is None else {t.subtopology_id: list(t.partitions) for t in resp.active_tasks}


def test_api_versions_and_the_streams_feature(broker):
    av = wire.call(broker.bootstrap, ApiVersionsRequest(client_software_name="t", client_software_version="1"), 4)
    assert [(k.api_key, k.min_version, k.max_version) for k in av.api_keys if k.api_key in (88, 89)] == [
        (88, 0, 0), (89, 0, 0)]
    assert [(f.name, f.min_version, f.max_version) for f in av.supported_features
            if f.name == "streams.version"] == [("streams.version", 0, 1)]
    assert [(f.name, f.min_version_level, f.max_version_level) for f in av.finalized_features
            if f.name == "streams.version"] == [("streams.version", 1, 1)]


def test_heartbeat_validation_texts(broker):
    b = broker.bootstrap
    cases = [
        (dict(member=""), INVALID_REQUEST, "MemberId can't be empty."),
        (dict(top=None), INVALID_REQUEST, "Topology must be non-null when (re-)joining."),
        (dict(owned=None), INVALID_REQUEST, "ActiveTasks must be empty when (re-)joining."),
        (dict(rebalance_timeout=-1), INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request."),
        (dict(epoch=-3), INVALID_REQUEST, "MemberEpoch is -3, but must be greater than or equal to -2."),
        (dict(instance_id="i1"), INVALID_REQUEST, "Static membership is not yet supported."),
        (dict(epoch=1, owned=None, active_tasks=[]), INVALID_REQUEST,
         "If one task-type is non-null, all must be non-null."),
        (dict(top=topology(changelog_partitions=3)), STREAMS_INVALID_TOPOLOGY,
         f"Changelog topic {CHANGELOG} must have an undefined partition count, but it is set to 3."),
        (dict(top=topology(source="__consumer_offsets")), STREAMS_INVALID_TOPOLOGY,
         "Use of Kafka internal topics __consumer_offsets in a Kafka Streams topology is prohibited."),
        (dict(top=topology(source="bad name")), STREAMS_INVALID_TOPOLOGY,
         "Topic names bad name are not valid topic names."),
        (dict(epoch=3), GROUP_ID_NOT_FOUND, "Streams group wire-v not found."),
    ]
    for kw, code, message in cases:
        resp = hb(b, group="wire-v", **kw)
        assert (resp.error_code, resp.error_message, resp.member_epoch, resp.status) == (code, message, 0, []), kw


def test_malformed_topologies_are_unknown_server_error_as_on_kafka(broker):
    """Topologies no Kafka Streams client sends: Kafka 4.3.1 fails them inside its topology code and
    answers UNKNOWN_SERVER_ERROR (-1) with no message; so does kcompat (and logs why)."""
    def sub(sid="0", **kw):
        base = dict(subtopology_id=sid, source_topics=["wire-in"], source_topic_regex=[], state_changelog_topics=[],
                    repartition_sink_topics=[], repartition_source_topics=[], copartition_groups=[])
        base.update(kw)
        return HB.Subtopology(**base)

    def copartition(*indexes):
        return [HB.CopartitionGroup(source_topics=list(indexes), source_topic_regex=[], repartition_source_topics=[])]

    cases = {
        "index past the sources": [sub(copartition_groups=copartition(5))],
        "negative index": [sub(copartition_groups=copartition(-1))],
        "negative partitions": [sub(repartition_source_topics=[HB.TopicInfo(name="wire-rep", partitions=-5,
                                                                             replication_factor=1, topic_configs=[])])],
        "subtopology id twice": [sub(), sub()],
    }
    for i, (name, subtopologies) in enumerate(cases.items()):
        resp = hb(broker.bootstrap, group=f"wire-bad{i}", top=HB.Topology(epoch=0, subtopologies=subtopologies))
        assert (resp.error_code, resp.error_message, resp.status) == (-1, None, []), name
    resp = hb(broker.bootstrap, group="wire-bad-ok", top=HB.Topology(epoch=0, subtopologies=[sub(
        copartition_groups=copartition(0))]))
    assert resp.error_code == 0   # the same shape with a valid index is fine
    assert hb(broker.bootstrap, resp.member_id, -1, group="wire-bad-ok").error_code == 0
    assert wire.call(broker.bootstrap, DeleteGroupsRequest(groups_names=["wire-bad-ok"]), 2).results[0].error_code == 0


def test_join_internal_topics_assignment_describe_commit_leave_delete(broker):
    b = broker.bootstrap
    wire.call(b, CT(topics=[CT.CreatableTopic(name="wire-in", num_partitions=2, replication_factor=1, assignments=[],
                                              configs=[])], timeout_ms=30000), 5)
    joined = hb(b)
    assert (joined.error_code, joined.member_id, joined.member_epoch, joined.heartbeat_interval_ms) == (0, "m1", 1,
                                                                                                         5000)
    assert status(joined) == [(5, "Assignment delayed due to the configured initial rebalance delay."),
                              (3, f"Internal topics are missing: {CHANGELOG}, {REPART}")]
    assert tasks(joined) == {} and joined.standby_tasks == [] and joined.warmup_tasks == []

    # the broker creates the internal topics; the assignment waits for the initial rebalance
    # delay (group.streams.initial.rebalance.delay.ms, 3000 by default), then comes at epoch 3
    answers = []

    def assigned():
        answers.append(hb(b, "m1", 1))
        return answers[-1] if answers[-1].member_epoch != 1 else (time.sleep(0.2) or None)
    last = wait_for(assigned, 30, what="the first assignment")
    assert (last.member_epoch, status(last), tasks(last)) == (3, [], {"0": [0, 1], "1": [0, 1]})
    for waiting in answers[:-1]:
        assert waiting.active_tasks is None and status(waiting) in (
            [(5, "Assignment delayed due to the configured initial rebalance delay.")],
            [(5, "Assignment delayed due to the configured initial rebalance delay."),
             (3, f"Internal topics are missing: {CHANGELOG}, {REPART}")])
    steady = hb(b, "m1", 3, owned={"0": [0, 1], "1": [0, 1]})
    assert (steady.member_epoch, steady.active_tasks) == (3, None)
    fenced = hb(b, "m1", 8, owned={})
    assert (fenced.error_code, fenced.error_message) == (
        FENCED_MEMBER_EPOCH, "The streams group member has a greater member epoch (8) than the one known by the group "
                             "coordinator (3). The member must abandon all its partitions and rejoin.")
    update = hb(b, "m2", top=topology(epoch=2))
    assert (update.error_code, update.error_message) == (INVALID_REQUEST, "Topology updates are not supported yet.")

    (g, missing) = wire.call(b, StreamsGroupDescribeRequest(group_ids=[APP, "wire-nope"],
                                                            include_authorized_operations=False), 0).groups
    assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch) == (0, "Stable", 3, 3)
    assert [(s.subtopology_id, s.source_topics, s.repartition_sink_topics,
             [(t.name, t.partitions, t.replication_factor) for t in s.state_changelog_topics],
             [(t.name, t.partitions, [(c.key, c.value) for c in t.topic_configs]) for t in s.repartition_source_topics])
            for s in g.topology.subtopologies] == [
        ("0", ["wire-in"], [REPART], [], []),
        ("1", [], [], [(CHANGELOG, 2, 0)], [(REPART, 2, [("cleanup.policy", "delete")])])]
    (m,) = g.members
    assert (m.member_id, m.member_epoch, m.topology_epoch, m.process_id, m.is_classic) == ("m1", 3, 1, "p1", False)
    assert {t.subtopology_id: t.partitions for t in m.target_assignment.active_tasks} == {"0": [0, 1], "1": [0, 1]}
    assert (missing.error_code, missing.error_message, missing.group_state) == (
        GROUP_ID_NOT_FOUND, "Group wire-nope not found.", "")
    listed = wire.call(b, ListGroupsRequest(states_filter=[], types_filter=["streams"]), 5).groups
    assert [(x.group_id, x.protocol_type, x.group_state, x.group_type) for x in listed] == [
        (APP, "streams", "Stable", "streams")]
    (d,) = wire.call(b, DescribeGroupsRequest(groups=[APP], include_authorized_operations=False), 6).groups
    assert (d.error_code, d.error_message, d.group_state) == (GROUP_ID_NOT_FOUND, f"Group {APP} is not a classic group.",
                                                              "Dead")

    def commit(version: int, epoch: int, member: str = "m1") -> int:
        req = OC(group_id=APP, generation_id_or_member_epoch=epoch, member_id=member, group_instance_id=None,
                 retention_time_ms=-1, topics=[OC.OffsetCommitRequestTopic(name="wire-in", partitions=[
                     OC.OffsetCommitRequestPartition(partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                                                     commit_timestamp=-1, committed_metadata="")])])
        return wire.call(b, req, version).topics[0].partitions[0].error_code
    assert [commit(9, 3), commit(8, 3), commit(9, 4), commit(9, 2), commit(9, 3, "zz")] == [
        0, UNSUPPORTED_VERSION, STALE_MEMBER_EPOCH, STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID]

    def delete() -> int:
        return wire.call(b, DeleteGroupsRequest(groups_names=[APP]), 2).results[0].error_code
    assert delete() == NON_EMPTY_GROUP
    left = hb(b, "m1", -1)
    assert (left.error_code, left.member_epoch, left.heartbeat_interval_ms, left.status) == (0, -1, 0, [])
    unknown = hb(b, "zz", -1)
    assert (unknown.error_code, unknown.error_message) == (UNKNOWN_MEMBER_ID, f"Member zz is not a member of group {APP}.")
    (g,) = wire.call(b, StreamsGroupDescribeRequest(group_ids=[APP], include_authorized_operations=False), 0).groups
    assert (g.group_state, g.group_epoch, g.assignment_epoch, g.members) == ("Empty", 4, 3, [])
    assert delete() == 0


def test_a_restarted_broker_keeps_the_streams_group(tmp_path):
    """The StreamsGroup* records bring the group back after a restart: the member carries on at
    its epoch with its tasks, nothing rebalances."""
    from tests.support.broker_process import BrokerProcess

    with BrokerProcess(tmp_path / "data", {"group.streams.initial.rebalance.delay.ms": "0"}) as broker:
        b = broker.bootstrap
        wire.call(b, CT(topics=[CT.CreatableTopic(name="wire-in", num_partitions=2, replication_factor=1,
                                                  assignments=[], configs=[])], timeout_ms=30000), 5)
        hb(b)

        def assigned():
            resp = hb(b, "m1", 2)
            return resp if resp.member_epoch == 3 else (time.sleep(0.3) or None)
        first = wait_for(assigned, 30, what="the first assignment")
        assert tasks(first) == {"0": [0, 1], "1": [0, 1]}
        broker.restart()
        b = broker.bootstrap
        again = hb(b, "m1", 3, owned={"0": [0, 1], "1": [0, 1]})
        assert (again.error_code, again.member_epoch, again.active_tasks, status(again)) == (0, 3, None, [])
        (g,) = wire.call(b, StreamsGroupDescribeRequest(group_ids=[APP], include_authorized_operations=False),
                         0).groups
        assert (g.group_state, g.group_epoch, g.assignment_epoch, [m.member_id for m in g.members]) == (
            "Stable", 3, 3, ["m1"])
