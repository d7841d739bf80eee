"""Partition as leader and follower (kcompat.isr.partition_replication): HW = smallest LEO of the
ISR, acks=all waits, diverging epochs on follower reads, ISR expansion/shrink proposals, the
follower's truncation and HW, and the solo (replication factor 1) fast path."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from kcompat.isr.follower import AppendRecords, FollowerFetch, SetHighWatermark, Truncate
from kcompat.isr.partition import Partition
from kcompat.log import Log, LogConfig
from kcompat.protocol import records as rb
from kcompat.protocol.errors import ErrorCode, KafkaError

NOW = 1_700_000_000_000
CFG = LogConfig(segment_bytes=100_000, index_interval_bytes=100)


def partition(path, local_id: int, hw=None) -> Partition:
    return Partition("t", 0, uuid.UUID(int=1), Log.open(path, CFG, clean_shutdown=True, now_ms=NOW),
                     local_id=local_id, high_watermark=hw)


def produce(p: Partition, *values: bytes) -> int:
    b = rb.build_batch([(NOW, b"k", v, ()) for v in values])
    info = p.append(memoryview(bytearray(b)), NOW)
    return info.last_offset + 1


@pytest.fixture
def leader(tmp_path):
    p = partition(tmp_path / "l", 1)
    proposals = []
    p.isr_change_listener = lambda part, change: proposals.append(change)
    p.make_leader(leader_epoch=0, partition_epoch=0, replicas=[1, 2, 3], isr=[1, 2, 3], now_ms=NOW,
                  min_insync_replicas=2, replica_lag_time_max_ms=10_000)
    p.proposals = proposals
    return p


def fetch(p: Partition, replica: int, offset: int, epoch: int = 0, now: int = NOW):
    return p.read_for_follower(replica, fetch_offset=offset, log_start_offset=0, last_fetched_epoch=epoch,
                               max_bytes=1 << 20, now_ms=now)


def test_the_high_watermark_is_the_smallest_log_end_offset_of_the_isr(leader):
    end = produce(leader, b"a", b"b", b"c")
    assert (leader.log_end_offset, leader.high_watermark) == (3, 0)
    assert leader.read(0, 1 << 20) == b""          # consumers see nothing above the HW
    records, diverging = fetch(leader, 2, 0)
    assert diverging is None and len(records) > 0   # followers read up to the LEO
    fetch(leader, 2, end)
    assert leader.high_watermark == 0               # replica 3 still at 0
    fetch(leader, 3, 2)
    assert leader.high_watermark == 2
    fetch(leader, 3, end)
    assert leader.high_watermark == end and leader.read(0, 1 << 20) != b""


def test_acks_all_waits_for_the_isr_and_fails_when_leadership_moves(leader):
    async def run():
        end = produce(leader, b"x")
        waiting = asyncio.ensure_future(leader.wait_for_replication(end, 5_000))
        await asyncio.sleep(0.01)
        assert not waiting.done()
        fetch(leader, 2, end)
        fetch(leader, 3, end)
        assert await waiting == ErrorCode.NONE
        end2 = produce(leader, b"y")
        moved = asyncio.ensure_future(leader.wait_for_replication(end2, 5_000))
        await asyncio.sleep(0.01)
        leader.make_follower(leader_id=2, leader_epoch=1, replicas=[1, 2, 3])
        assert await moved == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert await leader.wait_for_replication(end2, 10) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    asyncio.run(run())


def test_acks_all_times_out_without_followers(leader):
    async def run():
        end = produce(leader, b"x")
        return await leader.wait_for_replication(end, 30)
    assert asyncio.run(run()) == ErrorCode.REQUEST_TIMED_OUT


def test_a_solo_partition_needs_no_followers(tmp_path):
    p = partition(tmp_path / "s", 1)
    end = produce(p, b"a", b"b")
    assert p.high_watermark == end
    assert asyncio.run(p.wait_for_replication(end, 10)) == ErrorCode.NONE
    p.check_min_isr(-1, 1)
    # min.insync.replicas above the replication factor counts as the replication factor (Kafka's
    # effectiveMinIsr): acks=all is taken, as Kafka 3.9.2 and 4.3.1 answered side by side
    p.check_min_isr(-1, 2)


def test_min_isr_above_the_replication_factor_counts_as_the_replication_factor(tmp_path):
    """Kafka's effectiveMinIsr: min(min.insync.replicas, assigned replicas)."""
    p = partition(tmp_path / "two", 1)
    p.make_leader(leader_epoch=0, partition_epoch=0, replicas=[1, 2], isr=[1, 2], now_ms=NOW,
                  min_insync_replicas=3, replica_lag_time_max_ms=10_000)
    p.check_min_isr(-1)   # 2 replicas, both in sync: enough for min.insync.replicas=3
    p.make_leader(leader_epoch=0, partition_epoch=1, replicas=[1, 2], isr=[1], now_ms=NOW,
                  min_insync_replicas=3, replica_lag_time_max_ms=10_000)
    with pytest.raises(KafkaError) as e:
        p.check_min_isr(-1)
    assert e.value.code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert "min.isr requirement of 2 for partition" in e.value.message
    p.check_min_isr(1)    # acks=1 never checks


def test_lagging_isr_members_are_proposed_out_and_caught_up_replicas_back_in(leader):
    end = produce(leader, b"a")
    fetch(leader, 2, end, now=NOW + 1)
    assert not leader.maybe_shrink_isr(NOW + 5_000)
    assert leader.maybe_shrink_isr(NOW + 10_002)    # replica 3 never fetched
    change = leader.proposals[-1]
    assert (change.kind, change.proposed_isr) == ("shrink", (1, 2))
    leader.on_isr_change_result(ErrorCode.NONE, isr=[1, 2], partition_epoch=1, leader_epoch=0, now_ms=NOW + 10_003)
    assert leader.isr == {1, 2} and leader.high_watermark == end
    fetch(leader, 3, end, now=NOW + 10_004)          # caught up: back in
    change = leader.proposals[-1]
    assert (change.kind, change.proposed_isr) == ("expand", (1, 2, 3))
    leader.on_isr_change_result(ErrorCode.OPERATION_NOT_ATTEMPTED)
    assert leader.replica_state.pending is None      # a rejected proposal can be made again
    fetch(leader, 3, end, now=NOW + 10_005)
    leader.on_isr_change_result(ErrorCode.INVALID_UPDATE_VERSION)
    # our partition epoch is stale: no new proposals (no retry storm) until the metadata arrives
    assert leader.replica_state.pending is not None
    fetch(leader, 3, end, now=NOW + 10_006)
    assert len(leader.proposals) == 3
    leader.make_leader(leader_epoch=0, partition_epoch=2, replicas=[1, 2, 3], isr=[1, 2, 3], now_ms=NOW + 10_007,
                       min_insync_replicas=2, replica_lag_time_max_ms=10_000)
    assert leader.replica_state.pending is None and leader.isr == {1, 2, 3}


def test_a_follower_with_a_divergent_suffix_is_told_where_to_truncate(tmp_path):
    old = partition(tmp_path / "old", 1)
    old.make_leader(leader_epoch=0, partition_epoch=0, replicas=[1], isr=[1], now_ms=NOW)
    produce(old, b"a", b"b")
    new = partition(tmp_path / "new", 2)
    new.make_follower(leader_id=1, leader_epoch=0, replicas=[1, 2])
    new.append_as_follower(old.read(0, 1 << 20), NOW)
    produce(old, b"lost")   # written by the old leader only
    new.make_leader(leader_epoch=1, partition_epoch=1, replicas=[1, 2], isr=[2], now_ms=NOW)
    produce(new, b"c")
    # the old leader fetches with its last epoch 0 at its LEO 3: epoch 0 ended at 2 on the new leader
    records, diverging = fetch(new, 1, 3, epoch=0)
    assert records == b"" and diverging == (0, 2)
    old.make_follower(leader_id=2, leader_epoch=1, replicas=[1, 2])
    old.truncate_to(2, NOW)
    assert old.log_end_offset == 2
    records, diverging = fetch(new, 1, 2, epoch=0)
    assert diverging is None
    old.append_as_follower(records, NOW)
    old.set_follower_high_watermark(new.high_watermark)
    assert old.log_end_offset == new.log_end_offset == 3


def replicate(follower: Partition, leader: Partition, ff: FollowerFetch, rounds: int) -> None:
    """``rounds`` fetches of ``follower`` from ``leader``, applying the FollowerFetch actions as the
    broker's replica fetcher does."""
    for _ in range(rounds):
        pos = ff.fetch_position(follower.log)
        records, diverging = leader.read_for_follower(2, fetch_offset=pos.fetch_offset, log_start_offset=0,
                                                      last_fetched_epoch=pos.last_fetched_epoch, max_bytes=1 << 20,
                                                      now_ms=NOW)
        for action in ff.on_fetch_response(follower.log, error_code=0, high_watermark=leader.high_watermark,
                                           log_start_offset=0, records=records, diverging_epoch=diverging,
                                           fetch_offset=pos.fetch_offset):
            if isinstance(action, Truncate):
                follower.truncate_to(action.offset, NOW)
            elif isinstance(action, AppendRecords):
                follower.append_as_follower(action.records, NOW)
            elif isinstance(action, SetHighWatermark):
                follower.set_follower_high_watermark(action.high_watermark)


def test_a_leader_that_lost_leadership_before_appending_catches_up_as_follower(tmp_path):
    """Found by bench/nemesis.py: node 2 became leader at epoch 1 (its epoch cache gets epoch 1 at
    its LEO) and was SIGSTOPped before appending anything; node 3 became leader at epoch 2 from
    the same offset. As a follower node 2 fetched with last epoch 1, which node 3 never had: node 3
    answers a diverging epoch (0, LEO), the truncation offset is node 2's own LEO - and node 2 must
    still drop epoch 1 (Kafka ``UnifiedLog.truncateTo`` truncates the epoch cache at the LEO), or
    it asks with epoch 1 forever and never replicates again (it stayed out of the ISR)."""
    first = partition(tmp_path / "n1", 1)
    first.make_leader(leader_epoch=0, partition_epoch=0, replicas=[1], isr=[1], now_ms=NOW)
    produce(first, b"a", b"b")
    stalled, new = partition(tmp_path / "n2", 2), partition(tmp_path / "n3", 3)
    for p in (stalled, new):
        p.make_follower(leader_id=1, leader_epoch=0, replicas=[1, 2, 3])
        p.append_as_follower(first.read(0, 1 << 20), NOW)
    stalled.make_leader(leader_epoch=1, partition_epoch=1, replicas=[1, 2, 3], isr=[2, 3], now_ms=NOW)
    assert stalled.log.latest_epoch == 1                 # an epoch without records
    new.make_leader(leader_epoch=2, partition_epoch=2, replicas=[1, 2, 3], isr=[3], now_ms=NOW)
    produce(new, b"c", b"d")
    stalled.make_follower(leader_id=3, leader_epoch=2, replicas=[1, 2, 3])
    ff = FollowerFetch("t", 0, leader_id=3, leader_epoch=2)
    ff.start(stalled.log, stalled.high_watermark)
    replicate(stalled, new, ff, rounds=3)
    assert stalled.log.latest_epoch == 2
    assert stalled.log_end_offset == new.log_end_offset == 4
    assert stalled.log.leader_epoch_cache.end_offset_for(1, stalled.log_end_offset)[0] == 0   # epoch 1 gone


def test_a_follower_high_watermark_is_the_leaders_capped_at_its_own_end(tmp_path):
    p = partition(tmp_path / "f", 2, hw=0)
    p.make_follower(leader_id=1, leader_epoch=0, replicas=[1, 2])
    p.set_follower_high_watermark(10)
    assert p.high_watermark == 0                     # nothing local yet
    with pytest.raises(KafkaError) as e:
        fetch(p, 3, 0)
    assert e.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
