"""kcompat.isr.replica_state: follower fetch state (Kafka Replica.updateFetchState), the high
watermark over the (maximal) ISR, ISR shrink/expand decisions with a pending AlterPartition, and the
acks=all / min.insync.replicas checks of Kafka's Partition."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from kcompat.isr.replica_state import FollowerReplica, ReplicaState
from kcompat.protocol.errors import ErrorCode, KafkaError

LAG = 30_000
T = 1_700_000_000_000   # wall-clock ms: a replica never caught up has last_caught_up_time_ms 0, long ago


class Leader:
    """The leader's log end offset, as the owning Partition would expose it."""

    def __init__(self, leo: int = 0) -> None:
        self.leo = leo

    def __call__(self) -> int:
        return self.leo


def state(leader: Leader, *, replicas=(1, 2, 3), isr=(1, 2, 3), hw=0, min_isr=1, epoch_start=0, now=0,
          eligible=None) -> ReplicaState:
    return ReplicaState(1, replicas=replicas, isr=isr, leader_epoch=5, partition_epoch=7,
                        leader_epoch_start_offset=epoch_start, high_watermark=hw, leader_log_end_offset=leader,
                        min_insync_replicas=min_isr, replica_lag_time_max_ms=LAG, now_ms=T + now,
                        is_eligible=eligible)


def fetch(rs: ReplicaState, replica: int, offset: int, now: int, leader_leo: int | None = None) -> bool:
    """A Fetch from ``replica`` at ``offset``, ``now`` ms after T."""
    leo = rs._leo() if leader_leo is None else leader_leo
    return rs.update_follower_fetch(replica, fetch_offset=offset, log_start_offset=0, fetch_time_ms=T + now,
                                    leader_end_offset=leo)


# -- FollowerReplica -----------------------------------------------------------------------------
def test_caught_up_time_follows_kafkas_three_cases():
    f = FollowerReplica(2)
    f.update_fetch_state(fetch_offset=10, log_start_offset=0, fetch_time_ms=100, leader_end_offset=10)
    assert (f.log_end_offset, f.last_caught_up_time_ms) == (10, 100)          # at the leader's LEO: now
    f.update_fetch_state(fetch_offset=10, log_start_offset=0, fetch_time_ms=200, leader_end_offset=15)
    assert f.last_caught_up_time_ms == 100                                    # behind, reached the last LEO (10)
    f.update_fetch_state(fetch_offset=15, log_start_offset=0, fetch_time_ms=300, leader_end_offset=20)
    assert f.last_caught_up_time_ms == 200                                    # reached 15: caught up as of t=200
    f.update_fetch_state(fetch_offset=17, log_start_offset=3, fetch_time_ms=400, leader_end_offset=25)
    assert f.last_caught_up_time_ms == 200                                    # 20 of the last fetch not reached
    assert (f.log_start_offset, f.last_fetch_leader_log_end_offset, f.last_fetch_time_ms) == (3, 25, 400)
    f.update_fetch_state(fetch_offset=25, log_start_offset=3, fetch_time_ms=500, leader_end_offset=25)
    assert f.last_caught_up_time_ms == 500


def test_is_caught_up():
    f = FollowerReplica(2, log_end_offset=7, last_caught_up_time_ms=1000)
    assert f.is_caught_up(7, 10**9, LAG)              # at the leader's LEO, however long ago
    assert f.is_caught_up(9, 1000 + LAG, LAG)
    assert not f.is_caught_up(9, 1001 + LAG, LAG)


def test_become_leader_resets_followers():
    leader = Leader(50)
    rs = state(leader, isr=(1, 2), now=1000)
    assert rs.follower(2).last_caught_up_time_ms == T + 1000   # ISR member: caught up now
    assert rs.follower(3).last_caught_up_time_ms == 0      # not in the ISR: never
    assert rs.follower(2).log_end_offset == -1
    fetch(rs, 2, 50, 2000)
    rs.become_leader(leader_epoch=6, partition_epoch=8, replicas=(1, 2, 3), isr=(1, 2), leader_epoch_start_offset=50,
                     now_ms=T + 3000, new_leader=False)
    f = rs.follower(2)
    assert (f.log_end_offset, f.last_fetch_time_ms, f.last_caught_up_time_ms) == (50, T + 3000, T + 3000)
    rs.become_leader(leader_epoch=7, partition_epoch=9, replicas=(1, 2, 3), isr=(1, 2), leader_epoch_start_offset=50,
                     now_ms=T + 4000, new_leader=True)
    assert rs.follower(2).log_end_offset == -1 and rs.leader_epoch == 7


# -- high watermark -------------------------------------------------------------------------------
def test_hw_is_the_smallest_leo_of_the_isr_and_never_decreases():
    leader = Leader(10)
    rs = state(leader)
    assert not rs.maybe_increment_high_watermark(T + 0)        # followers' LEOs unknown
    assert not fetch(rs, 2, 6, 1)
    assert fetch(rs, 3, 4, 2)
    assert rs.high_watermark == 4
    assert fetch(rs, 3, 10, 3)
    assert rs.high_watermark == 6
    fetch(rs, 2, 3, 4)                                     # follower 2 truncated: the leader's HW stays
    assert rs.high_watermark == 6
    fetch(rs, 2, 10, 5)
    assert rs.high_watermark == 10
    leader.leo = 12
    assert not rs.maybe_increment_high_watermark(T + 6)


def test_a_single_replica_isr_follows_the_leader_leo():
    leader = Leader(0)
    rs = state(leader, replicas=(1,), isr=(1,))
    leader.leo = 5
    assert rs.maybe_increment_high_watermark(T + 0) and rs.high_watermark == 5


def test_caught_up_replica_outside_the_isr_holds_the_hw():
    leader = Leader(20)
    rs = state(leader, isr=(1, 2), now=0)
    fetch(rs, 2, 20, 1)
    assert rs.high_watermark == 20
    leader.leo = 30
    fetch(rs, 3, 20, 2, leader_leo=20)                     # replica 3 caught up as of now, not in the ISR
    fetch(rs, 2, 30, 3)
    assert rs.high_watermark == 20                         # waits for 3 so that it can join
    fetch(rs, 3, 25, 4 + LAG * 2)                          # 3 has not caught up for too long: ignored
    assert rs.high_watermark == 30


def test_ineligible_replica_does_not_hold_the_hw():
    leader = Leader(20)
    rs = state(leader, isr=(1, 2), eligible=lambda r: r != 3)
    fetch(rs, 3, 5, 1, leader_leo=5)
    fetch(rs, 2, 20, 2)
    assert rs.high_watermark == 20


def test_hw_does_not_advance_under_min_isr():
    leader = Leader(10)
    rs = state(leader, isr=(1,), min_isr=2)
    assert rs.under_min_isr and not rs.maybe_increment_high_watermark(T + 0)
    assert rs.high_watermark == 0
    rs.update_assignment((1, 2, 3), (1, 2), partition_epoch=8)
    fetch(rs, 2, 10, 1)
    assert rs.high_watermark == 10


def test_pending_expand_widens_and_pending_shrink_keeps_the_maximal_isr():
    leader = Leader(10)
    rs = state(leader, isr=(1, 2))
    fetch(rs, 2, 10, 1)
    fetch(rs, 3, 10, 1)
    assert rs.high_watermark == 10
    change = rs.prepare_isr_expand(3)
    assert change.kind == "expand" and change.proposed_isr == (1, 2, 3) and change.partition_epoch == 7
    assert rs.maximal_isr == {1, 2, 3} and rs.isr == {1, 2}
    leader.leo = 20
    fetch(rs, 2, 20, 2)
    fetch(rs, 3, 15, 2 + LAG * 3)                          # not caught up, yet in the maximal ISR
    assert rs.high_watermark == 15
    assert rs.isr_change_committed((1, 2, 3), 8, T + 3 + LAG * 3) is False
    rs.prepare_isr_shrink({3})
    assert rs.maximal_isr == {1, 2, 3}                     # still waiting for 3 until committed
    assert not rs.maybe_increment_high_watermark(T + 4 + LAG * 3)
    assert not rs.isr_change_committed((1, 2), 8, T + 5 + LAG * 3)   # stale partition epoch: ignored
    assert rs.isr_change_committed((1, 2), 9, T + 5 + LAG * 3)
    assert rs.high_watermark == 20 and rs.pending is None


# -- ISR shrink / expand --------------------------------------------------------------------------
def test_out_of_sync_replicas():
    leader = Leader(10)
    rs = state(leader, now=0)
    fetch(rs, 2, 10, 100)
    fetch(rs, 3, 8, 100)
    assert rs.out_of_sync_replicas(T + LAG) == set()
    assert rs.out_of_sync_replicas(T + LAG + 1) == {3}         # lagging since it became leader at 0
    assert rs.out_of_sync_replicas(T + LAG + 1, replica_lag_time_max_ms=10 * LAG) == set()
    leader.leo = 12
    assert rs.out_of_sync_replicas(T + LAG + 101) == {2, 3}    # 2 stuck at 10 since 100
    rs.prepare_isr_shrink({2, 3})
    assert rs.out_of_sync_replicas(T + LAG * 5) == set()       # nothing while a change is in flight
    rs.isr_change_failed()
    assert rs.out_of_sync_replicas(T + LAG * 5) == {2, 3}


def test_can_join_isr():
    leader = Leader(30)
    rs = state(leader, isr=(1, 2), hw=10, epoch_start=25, eligible=lambda r: r != 4, replicas=(1, 2, 3, 4))
    fetch(rs, 3, 20, 1)
    assert not rs.can_join_isr(3)                          # >= HW but below the epoch start 25
    fetch(rs, 3, 25, 2)
    assert rs.can_join_isr(3)
    fetch(rs, 4, 30, 3)
    assert not rs.can_join_isr(4)                          # not eligible
    assert not rs.can_join_isr(2)                          # already in the ISR
    assert not rs.can_join_isr(9)                          # not a replica
    rs.prepare_isr_expand(3)
    assert not rs.can_join_isr(3)                          # change in flight
    with pytest.raises(ValueError):
        rs.prepare_isr_expand(3)
    rs2 = state(Leader(30), isr=(1, 2), hw=28, epoch_start=0)
    fetch(rs2, 3, 27, 1)
    assert not rs2.can_join_isr(3)                         # below the HW


def test_unknown_replica_fetch_is_unknown_leader_epoch():
    rs = state(Leader(5))
    with pytest.raises(KafkaError) as e:
        fetch(rs, 9, 5, 1)
    assert e.value.code == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_low_watermark():
    rs = state(Leader(10))
    rs.update_follower_fetch(2, fetch_offset=10, log_start_offset=4, fetch_time_ms=1, leader_end_offset=10)
    rs.update_follower_fetch(3, fetch_offset=10, log_start_offset=2, fetch_time_ms=1, leader_end_offset=10)
    assert rs.low_watermark(6) == 2
    assert rs.low_watermark(6, is_alive=lambda r: r != 3) == 4


# -- produce checks -------------------------------------------------------------------------------
def test_min_isr_before_append():
    rs = state(Leader(0), isr=(1,), min_isr=2)
    with pytest.raises(KafkaError) as e:
        rs.check_min_isr_before_append(-1)
    assert e.value.code == ErrorCode.NOT_ENOUGH_REPLICAS
    rs.check_min_isr_before_append(1)                      # acks=1 and acks=0 are not checked
    rs.check_min_isr_before_append(0)
    capped = state(Leader(0), replicas=(1,), isr=(1,), min_isr=3)
    assert capped.effective_min_isr == 1
    capped.check_min_isr_before_append(-1)                 # min ISR above the replication factor


def test_acks_all_completion_and_not_enough_replicas_after_append():
    leader = Leader(0)
    rs = state(leader, isr=(1, 2, 3), min_isr=2)
    leader.leo = 5                                         # a produce appended offsets 0-4: required offset 5
    assert rs.check_enough_replicas_reach_offset(5) == (False, ErrorCode.NONE)
    fetch(rs, 2, 5, 1)
    assert rs.check_enough_replicas_reach_offset(5) == (False, ErrorCode.NONE)   # 3 has not got them
    fetch(rs, 3, 5, 1)
    assert rs.check_enough_replicas_reach_offset(5) == (True, ErrorCode.NONE)
    leader.leo = 8
    fetch(rs, 2, 8, 2)
    rs.prepare_isr_shrink({2, 3})
    rs.isr_change_committed((1, 3), 8, T + 3)                  # 3 still at 5: the HW stays
    assert rs.check_enough_replicas_reach_offset(8) == (False, ErrorCode.NONE)
    rs.prepare_isr_shrink({3})
    rs.isr_change_committed((1,), 9, T + 4)                # ISR down to the leader, below min ISR 2
    assert rs.high_watermark == 5                          # and the HW does not advance below min ISR
    rs.min_insync_replicas = 1
    assert not rs.maybe_increment_high_watermark(T + 5)   # 3 (at 5) still counts as caught up: it holds the HW
    assert rs.maybe_increment_high_watermark(T + 5 + 2 * LAG) and rs.high_watermark == 8
    rs.min_insync_replicas = 2
    assert rs.check_enough_replicas_reach_offset(8) == (True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)


# -- invariants under random operation sequences ---------------------------------------------------
ops = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(1, 5)),
    st.tuples(st.just("fetch"), st.sampled_from([2, 3]), st.integers(0, 60)),
    st.tuples(st.just("tick"), st.integers(0, 2 * LAG)),
    st.tuples(st.just("shrink")),
    st.tuples(st.just("expand"), st.sampled_from([2, 3])),
    st.tuples(st.just("commit")),
    st.tuples(st.just("fail")),
), max_size=60)


@settings(max_examples=200, deadline=None)
@given(ops=ops, min_isr=st.integers(1, 3))
def test_invariants(ops, min_isr):
    """HW never decreases, never passes the leader's LEO, and whenever it moves every maximal-ISR
    follower has it; an acks=all produce completes exactly when the HW reached its offset."""
    leader = Leader(0)
    rs = state(leader, min_isr=min_isr)
    now = 0
    next_partition_epoch = 8
    for op in ops:
        before = rs.high_watermark
        if op[0] == "append":
            leader.leo += op[1]
            rs.maybe_increment_high_watermark(T + now)
        elif op[0] == "fetch":
            fetch(rs, op[1], min(op[2], leader.leo), now)
        elif op[0] == "tick":
            now += op[1]
        elif op[0] == "shrink" and not rs.is_inflight:
            out = rs.out_of_sync_replicas(T + now)
            if out:
                rs.prepare_isr_shrink(out)
        elif op[0] == "expand" and rs.can_join_isr(op[1]):
            rs.prepare_isr_expand(op[1])
        elif op[0] == "commit" and rs.pending is not None:
            rs.isr_change_committed(rs.pending.proposed_isr, next_partition_epoch, T + now)
            next_partition_epoch += 1
        elif op[0] == "fail":
            rs.isr_change_failed()
        hw = rs.high_watermark
        assert before <= hw <= leader.leo
        if hw > before:
            assert not rs.under_min_isr
            for r in rs.maximal_isr - {1}:
                assert rs.follower(r).log_end_offset >= hw
        done, _err = rs.check_enough_replicas_reach_offset(leader.leo)
        assert done == (hw >= leader.leo)
