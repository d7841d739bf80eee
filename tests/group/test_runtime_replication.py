"""The group runtime over replicated ``__consumer_offsets`` partitions (kcompat.broker.group_runtime
and coordinator_runtime): a write is answered once the high watermark passed it (Kafka's acks=-1
coordinator writes), committed offsets change only then, a failed wait answers with Kafka's
coordinator errors and leaves nothing applied, replies wait behind the writes of their partition,
and the coordinator follows the leadership of its partition (unloaded when it moves away, loaded
from the log up to its end when it comes back, replies held until that log is committed)."""

from __future__ import annotations

import asyncio

from kcompat.broker.group_runtime import OFFSETS_TOPIC
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.heartbeat import HeartbeatRequest
from kcompat.protocol.messages.join_group import JoinGroupRequest
from kcompat.protocol.messages.offset_commit import OffsetCommitRequest
from kcompat.protocol.messages.offset_fetch import OffsetFetchRequest
from kcompat.protocol.messages.sync_group import SyncGroupRequest
from tests.group.harness import subscription
from tests.group.runtime_harness import RuntimeBroker, settle, tick

E = ErrorCode
GROUP = "g"


def commit(b: RuntimeBroker, offset: int, *, group: str = GROUP, generation: int = -1, member: str = ""):
    req = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=generation, member_id=member,
                              topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name="t", partitions=[
                                  OffsetCommitRequest.OffsetCommitRequestPartition(
                                      partition_index=0, committed_offset=offset, committed_metadata="")])])
    return b.groups.offset_commit(b.ctx(8), req)


def commit_error(resp) -> int:
    return resp.topics[0].partitions[0].error_code


def fetch(b: RuntimeBroker, group: str = GROUP):
    req = OffsetFetchRequest(group_id=group, topics=[OffsetFetchRequest.OffsetFetchRequestTopic(
        name="t", partition_indexes=[0])])
    return b.groups.offset_fetch(b.ctx(7), req)


def fetched(resp) -> tuple[int, int | None]:
    """(top-level error, committed offset of t-0)."""
    return resp.error_code, resp.topics[0].partitions[0].committed_offset if resp.topics else None


def part(b: RuntimeBroker, group: str = GROUP) -> int:
    return b.groups.coordinator.partition_for(group)


def run(tmp_path, scenario, **config):
    async def main():
        b = RuntimeBroker(tmp_path, data={"t": 1}, **config)
        await b.start()
        try:
            await scenario(b)
        finally:
            b.stop()
    asyncio.run(main())


def test_single_replica_writes_are_answered_synchronously(tmp_path):
    async def scenario(b):
        fut = commit(b, 5)
        assert fut.done() and commit_error(fut.result()) == E.NONE  # no await: the HW is the LEO
        assert b.groups.pending_writes(part(b)) == 0
        f = fetch(b)
        assert f.done() and fetched(f.result()) == (E.NONE, 5)
    run(tmp_path, scenario)


def test_an_offset_commit_is_answered_and_visible_once_replicated(tmp_path):
    async def scenario(b):
        p = b.replicate(OFFSETS_TOPIC, part(b))
        fut = commit(b, 7)
        await tick()
        assert not fut.done()
        assert p.log_end_offset > p.high_watermark
        # an OffsetFetch meanwhile waits behind the pending commit of its partition, and reads
        # what was committed when it came (Kafka reads at the last committed offset)
        f = fetch(b)
        await tick()
        assert not f.done()
        b.catch_up(OFFSETS_TOPIC, part(b))
        assert commit_error(await settle(fut)) == E.NONE
        assert fetched(await settle(f)) == (E.NONE, -1)
        assert fetched(await settle(fetch(b))) == (E.NONE, 7)
    run(tmp_path, scenario)


def test_commits_complete_in_log_order(tmp_path):
    async def scenario(b):
        b.replicate(OFFSETS_TOPIC, part(b))
        futs = [commit(b, n) for n in (1, 2, 3)]
        await tick()
        assert not any(f.done() for f in futs)
        b.catch_up(OFFSETS_TOPIC, part(b))
        for f in futs:
            assert commit_error(await settle(f)) == E.NONE
        assert fetched(await settle(fetch(b))) == (E.NONE, 3)
    run(tmp_path, scenario)


def test_a_commit_not_replicated_in_time_fails_and_is_not_applied(tmp_path):
    async def scenario(b):
        b.replicate(OFFSETS_TOPIC, part(b))
        fut = commit(b, 4)
        b.catch_up(OFFSETS_TOPIC, part(b))
        assert commit_error(await settle(fut)) == E.NONE
        late = commit(b, 9)
        # offsets.commit.timeout.ms=200 without the follower fetching: COORDINATOR_NOT_AVAILABLE
        assert commit_error(await settle(late)) == E.COORDINATOR_NOT_AVAILABLE
        group = b.groups.coordinator._groups[GROUP]
        assert not +group.pending_commits
        assert fetched(await settle(fetch(b))) == (E.NONE, 4)
    run(tmp_path, scenario, offsets_commit_timeout_ms=200)


def test_a_commit_with_the_isr_below_min_isr_fails_with_coordinator_not_available(tmp_path):
    async def scenario(b):
        p = b.replicate(OFFSETS_TOPIC, part(b), isr=(1,), min_isr=2)  # ISR {1} < min.insync.replicas 2
        resp = await settle(commit(b, 3))
        assert commit_error(resp) == E.COORDINATOR_NOT_AVAILABLE
        assert p.log_end_offset > 0  # appended (acks=1 + HW wait, as Kafka's group runtime), never committed
        assert fetched(await settle(fetch(b))) == (E.NONE, -1)
    run(tmp_path, scenario, offsets_commit_timeout_ms=200)


def join(b, member: str = "", version: int = 3):
    req = JoinGroupRequest(group_id=GROUP, session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id=member,
                           protocol_type="consumer",
                           protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range",
                                                                                metadata=subscription("t"))])
    return b.groups.join_group(b.ctx(version), req)


def sync(b, member: str, generation: int, assignment: bytes | None = None):
    req = SyncGroupRequest(group_id=GROUP, generation_id=generation, member_id=member, assignments=[] if assignment
                           is None else [SyncGroupRequest.SyncGroupRequestAssignment(member_id=member,
                                                                                     assignment=assignment)])
    return b.groups.sync_group(b.ctx(3), req)


def heartbeat(b, member: str, generation: int):
    req = HeartbeatRequest(group_id=GROUP, generation_id=generation, member_id=member)
    return b.groups.heartbeat(b.ctx(3), req)


async def stable_member(b) -> tuple[str, int]:
    """One member joins and syncs (solo partition); returns (member id, generation)."""
    joined = await settle(join(b))
    assert joined.error_code == E.NONE, joined
    synced = await settle(sync(b, joined.member_id, joined.generation_id, b"plan"))
    assert synced.error_code == E.NONE and synced.assignment == b"plan"
    return joined.member_id, joined.generation_id


def test_sync_group_and_the_replies_behind_it_wait_for_the_group_record(tmp_path):
    async def scenario(b):
        b.replicate(OFFSETS_TOPIC, part(b))
        joined = await settle(join(b))
        assert joined.error_code == E.NONE
        member, gen = joined.member_id, joined.generation_id
        s = sync(b, member, gen, b"plan")
        await tick()
        assert not s.done()
        # the group is Stable in memory, but a heartbeat answer waits for the record's commit
        hb = heartbeat(b, member, gen)
        await tick()
        assert not hb.done()
        b.catch_up(OFFSETS_TOPIC, part(b))
        resp = await settle(s)
        assert resp.error_code == E.NONE and resp.assignment == b"plan"
        assert (await settle(hb)).error_code == E.NONE
    run(tmp_path, scenario)


def test_a_group_record_not_replicated_fails_the_sync_and_rebalances(tmp_path):
    async def scenario(b):
        b.replicate(OFFSETS_TOPIC, part(b))
        joined = await settle(join(b))
        member, gen = joined.member_id, joined.generation_id
        resp = await settle(sync(b, member, gen, b"plan"))
        assert resp.error_code == E.COORDINATOR_NOT_AVAILABLE and resp.assignment == b""
        group = b.groups.coordinator._groups[GROUP]
        assert str(group.state) == "PreparingRebalance"
        assert group.members[member].assignment == b""
        b.catch_up(OFFSETS_TOPIC, part(b))
        assert (await settle(heartbeat(b, member, gen))).error_code == E.REBALANCE_IN_PROGRESS
    run(tmp_path, scenario, offsets_commit_timeout_ms=200)


def test_leadership_moving_away_answers_not_coordinator_and_unloads(tmp_path):
    async def scenario(b):
        member, gen = await stable_member(b)
        assert commit_error(await settle(commit(b, 5, generation=gen, member=member))) == E.NONE
        b.replicate(OFFSETS_TOPIC, part(b))
        waiting = commit(b, 8, generation=gen, member=member)
        await tick()
        assert not waiting.done()
        b.move_leadership(OFFSETS_TOPIC, part(b))
        assert commit_error(await settle(waiting)) == E.NOT_COORDINATOR
        coord = b.groups.coordinator
        assert not coord.owns(part(b)) and GROUP not in coord._groups
        assert not any(k[1] == GROUP for k in coord._timers._entries)  # session timers stopped
        assert b.groups.pending_writes(part(b)) == 0
        assert (await settle(heartbeat(b, member, gen))).error_code == E.NOT_COORDINATOR
        assert fetched(await settle(fetch(b)))[0] == E.NOT_COORDINATOR
        assert commit_error(await settle(commit(b, 9, generation=gen, member=member))) == E.NOT_COORDINATOR
    run(tmp_path, scenario)


def test_leadership_coming_back_reloads_up_to_the_log_end_and_holds_replies_until_committed(tmp_path):
    async def scenario(b):
        member, gen = await stable_member(b)
        assert commit_error(await settle(commit(b, 5, generation=gen, member=member))) == E.NONE
        b.replicate(OFFSETS_TOPIC, part(b))
        waiting = commit(b, 8, generation=gen, member=member)
        await tick()
        b.move_leadership(OFFSETS_TOPIC, part(b))
        assert commit_error(await settle(waiting)) == E.NOT_COORDINATOR
        # back as leader; the follower has not fetched the last commit yet (HW < LEO)
        b.take_leadership(OFFSETS_TOPIC, part(b))
        await b.loaded()
        coord = b.groups.coordinator
        assert coord.owns(part(b))
        group = coord._groups[GROUP]
        assert str(group.state) == "Stable" and member in group.members and group.generation_id == gen
        assert group.offsets[("t", 0)].offset == 8  # read up to the log end offset
        f = fetch(b)
        await tick()
        assert not f.done()  # the loaded tail is not committed yet
        b.catch_up(OFFSETS_TOPIC, part(b))
        assert fetched(await settle(f)) == (E.NONE, 8)
        assert (await settle(heartbeat(b, member, gen))).error_code == E.NONE
    run(tmp_path, scenario)


def test_a_transaction_marker_completes_offsets_only_once_replicated(tmp_path):
    async def scenario(b):
        from kcompat.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest as T
        b.replicate(OFFSETS_TOPIC, part(b))
        req = T(transactional_id="tid", group_id=GROUP, producer_id=77, producer_epoch=0, topics=[
            T.TxnOffsetCommitRequestTopic(name="t", partitions=[T.TxnOffsetCommitRequestPartition(
                partition_index=0, committed_offset=11, committed_metadata="")])])
        fut = b.groups.txn_offset_commit(b.ctx(3), req)
        b.catch_up(OFFSETS_TOPIC, part(b))
        assert (await settle(fut)).topics[0].partitions[0].error_code == E.NONE
        marker = b.groups.write_txn_marker(part(b), 77, 0, 0, True)
        await tick()
        assert not marker.done()
        group = b.groups.coordinator._groups[GROUP]
        assert ("t", 0) not in group.offsets  # still pending its transaction
        b.catch_up(OFFSETS_TOPIC, part(b))
        assert await settle(marker) == E.NONE
        assert group.offsets[("t", 0)].offset == 11
    run(tmp_path, scenario)
