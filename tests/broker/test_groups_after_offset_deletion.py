"""Groups stay after their offsets go, as on Kafka 4.3.1 (probed side by side): an Empty classic
group and an Empty consumer group whose committed offsets are deleted with OffsetDelete, and an
offsets-only group whose topic is deleted, are still listed (Empty) afterwards. Kafka 4.3's
OffsetMetadataManager writes only the offsets' tombstones; the periodic cleanup
(``offsets.retention.check.interval.ms``) removes such groups later, with a group tombstone."""

from __future__ import annotations

from kcompat.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest as CGH
from kcompat.protocol.messages.create_topics import CreateTopicsRequest as CT
from kcompat.protocol.messages.delete_topics import DeleteTopicsRequest as DT
from kcompat.protocol.messages.find_coordinator import FindCoordinatorRequest as FC
from kcompat.protocol.messages.list_groups import ListGroupsRequest as LG
from kcompat.protocol.messages.offset_commit import OffsetCommitRequest as OC
from kcompat.protocol.messages.offset_delete import OffsetDeleteRequest as OD
from kcompat.protocol.messages.offset_fetch import OffsetFetchRequest as OF
from kcompat.testing import wire
from tests.support.broker_process import BrokerProcess, wait_for


def _create(bs: str, topic: str) -> None:
    wire.call(bs, CT(topics=[CT.CreatableTopic(name=topic, num_partitions=1, replication_factor=1, assignments=[],
                                               configs=[])], timeout_ms=30000), 5)


def _commit(bs: str, group: str, topic: str, epoch: int = -1, member: str = "") -> int:
    req = OC(group_id=group, generation_id_or_member_epoch=epoch, member_id=member, topics=[
        OC.OffsetCommitRequestTopic(name=topic, partitions=[OC.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=0, committed_leader_epoch=-1, committed_metadata="")])])
    return wire.call(bs, req, 8 if epoch < 0 else 9).topics[0].partitions[0].error_code


def _groups(bs: str) -> list[tuple[str, str, str]]:
    listed = wire.call(bs, LG(states_filter=[], types_filter=[]), 5).groups
    return sorted((g.group_id, g.group_state, g.group_type) for g in listed)


def test_groups_stay_listed_after_their_offsets_are_deleted(tmp_path):
    with BrokerProcess(tmp_path / "data") as b:
        bs = b.bootstrap
        _create(bs, "t")
        wait_for(lambda: wire.call(bs, FC(key_type=0, coordinator_keys=["classic"]), 4).coordinators[0].error_code == 0,
                 30, what="the group coordinator")
        assert wait_for(lambda: _commit(bs, "classic", "t") == 0 or None, 30, what="a first commit")
        member = "m-" + "a" * 20
        joined = wire.call(bs, CGH(group_id="cons", member_id=member, member_epoch=0, rebalance_timeout_ms=30000,
                                   subscribed_topic_names=["t"], topic_partitions=[]), 0)
        assert _commit(bs, "cons", "t", joined.member_epoch, member) == 0
        assert wire.call(bs, CGH(group_id="cons", member_id=member, member_epoch=-1), 0).error_code == 0
        assert _groups(bs) == [("classic", "Empty", "classic"), ("cons", "Empty", "consumer")]

        for group in ("classic", "cons"):
            r = wire.call(bs, OD(group_id=group, topics=[OD.OffsetDeleteRequestTopic(
                name="t", partitions=[OD.OffsetDeleteRequestPartition(partition_index=0)])]), 0)
            assert (r.error_code, [p.error_code for t in r.topics for p in t.partitions]) == (0, [0])
        assert _groups(bs) == [("classic", "Empty", "classic"), ("cons", "Empty", "consumer")]

        _create(bs, "t2")
        assert wait_for(lambda: _commit(bs, "classic2", "t2") == 0 or None, 30, what="a commit on t2")

        def committed() -> int:   # the topic's deletion reaches the coordinator through the metadata log
            req = OF(groups=[OF.OffsetFetchRequestGroup(group_id="classic2", topics=[
                OF.OffsetFetchRequestTopics(name="t2", partition_indexes=[0])])], require_stable=False)
            return wire.call(bs, req, 8).groups[0].topics[0].partitions[0].committed_offset
        assert committed() == 0
        assert wire.call(bs, DT(topic_names=["t2"], timeout_ms=30000), 5).responses[0].error_code == 0
        wait_for(lambda: committed() == -1, 30, what="the deleted topic's offsets gone")
        assert _groups(bs) == [("classic", "Empty", "classic"), ("classic2", "Empty", "classic"),
                               ("cons", "Empty", "consumer")]
