"""Unit tests of the share-partition state machine (kcompat.share.partition): every transition of
Kafka's SharePartition that KIP-932 defines, with the error codes ShareAcknowledge answers."""

from __future__ import annotations

import ast
import pathlib

import pytest

from kcompat.protocol.errors import ErrorCode
from kcompat.share.partition import (
    AcknowledgeType as A, AcquiredRecords as R, DeliveryState as S, PersistedBatch as P,
    SharePartition, SharePartitionConfig,
)

LOCK = 1000
CFG = SharePartitionConfig(record_lock_duration_ms=LOCK, delivery_count_limit=5, max_record_locks=100)
OK = ErrorCode.NONE
BAD_STATE = ErrorCode.INVALID_RECORD_STATE
BAD_REQUEST = ErrorCode.INVALID_REQUEST


def sp(start=0, batches=(), **cfg):
    return SharePartition(SharePartitionConfig(**{**CFG.__dict__, **cfg}), start, batches)


def window(p):
    """The window as (first, last, state, count, member) ranges."""
    return [(f, l, st, c, m) for f, l, st, c, m, _d in p.in_flight_records()]


def acquire_new(p, member, first, last, now=0, **kw):
    assert p.fetch_offset() == first
    return p.acquire(member, [(first, last)], last - first + 1, now, **kw)


# ---------------------------------------------------------------------------------- config, enums

def test_defaults_are_kafka_43s():
    c = SharePartitionConfig()
    assert (c.record_lock_duration_ms, c.delivery_count_limit, c.max_record_locks) == (30_000, 5, 2000)


def test_enum_ids_are_the_wire_ids():
    assert [int(s) for s in (S.AVAILABLE, S.ACQUIRED, S.ACKNOWLEDGED, S.ARCHIVED)] == [0, 1, 2, 4]
    assert [int(t) for t in (A.GAP, A.ACCEPT, A.RELEASE, A.REJECT, A.RENEW)] == [0, 1, 2, 3, 4]


def test_modules_are_pure():
    root = pathlib.Path(__file__).resolve().parents[2] / "kcompat" / "share"
    for name in ("partition.py", "inflight.py"):
        tree = ast.parse((root / name).read_text())
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        for mod in imported:
            assert mod in {"__future__", "enum", "bisect", "operator", "dataclasses", "typing",
                           "kcompat.protocol.errors", "kcompat.share.inflight"}, (name, mod)


# ---------------------------------------------------------------------------------- loading

def test_empty_partition():
    p = sp(start=42)
    assert (p.start_offset, p.end_offset, p.in_flight_count) == (42, 42, 0)
    assert p.fetch_offset() == 42
    assert p.next_deadline() is None
    assert p.persisted_state() == (42, [])


def test_load_keeps_states_counts_and_fills_gaps_as_never_delivered():
    p = sp(10, [P(10, 12, 0, 2), P(13, 14, 2, 1), P(20, 22, 4, 5), P(23, 23, 0, 1)])
    assert window(p) == [
        (10, 12, S.AVAILABLE, 2, None), (13, 14, S.ACKNOWLEDGED, 1, None),
        (15, 19, S.AVAILABLE, 0, None), (20, 22, S.ARCHIVED, 5, None), (23, 23, S.AVAILABLE, 1, None)]
    assert (p.start_offset, p.end_offset) == (10, 24)
    assert p.fetch_offset() == 10


def test_load_moves_start_past_a_done_prefix():
    p = sp(0, [P(0, 4, 2, 1), P(5, 9, 4, 3), P(10, 11, 0, 1)])
    assert (p.start_offset, p.end_offset) == (10, 12)
    p = sp(0, [P(0, 4, 2, 1)])
    assert (p.start_offset, p.end_offset, p.fetch_offset()) == (5, 5, 5)


def test_load_ignores_batches_below_start_and_clips_a_straddling_one():
    p = sp(10, [P(0, 5, 0, 1), P(8, 12, 0, 2)])
    assert window(p) == [(10, 12, S.AVAILABLE, 2, None)]


def test_load_acquired_is_available_and_a_count_at_the_limit_is_archived():
    p = sp(0, [P(0, 1, 1, 2), P(2, 3, 0, 5), P(4, 4, 0, 4)])
    assert window(p) == [(0, 1, S.AVAILABLE, 2, None), (2, 3, S.ARCHIVED, 5, None), (4, 4, S.AVAILABLE, 4, None)]


@pytest.mark.parametrize("batches", [[P(0, 5, 0, 1), P(5, 6, 0, 1)], [P(3, 2, 0, 1)]])
def test_load_rejects_overlapping_or_reversed_batches(batches):
    with pytest.raises(ValueError):
        sp(0, batches)


def test_load_rejects_unknown_states():
    with pytest.raises(ValueError):
        sp(0, [P(0, 1, 3, 1)])


# ---------------------------------------------------------------------------------- acquire

def test_acquire_new_records_locks_them_with_count_one():
    p = sp()
    assert p.acquire("m1", [(0, 4), (5, 9)], 10, now_ms=100) == [R(0, 9, 1)]
    assert window(p) == [(0, 9, S.ACQUIRED, 1, "m1")]
    assert p.next_deadline() == 100 + LOCK
    assert (p.start_offset, p.end_offset, p.in_flight_count) == (0, 10, 10)
    assert p.fetch_offset() == 10
    assert p.acquired_by_member() == {"m1": 10}


def test_acquire_nothing():
    p = sp()
    assert p.acquire("m1", [], 10, 0) == []
    assert p.acquire("m1", [(0, 4)], 0, 0) == []
    assert p.end_offset == 0


def test_gaps_and_control_batches_are_archived_not_acquired():
    p = sp()
    got = p.acquire("m1", [(0, 2), (5, 6), (7, 7, True), (8, 9)], 100, 0)
    assert got == [R(0, 2, 1), R(5, 6, 1), R(8, 9, 1)]
    assert window(p) == [(0, 2, S.ACQUIRED, 1, "m1"), (3, 4, S.ARCHIVED, 0, None),
                         (5, 6, S.ACQUIRED, 1, "m1"), (7, 7, S.ARCHIVED, 0, None), (8, 9, S.ACQUIRED, 1, "m1")]
    assert p.acknowledge("m1", [(0, 2, [A.ACCEPT])], 0) == OK
    assert p.start_offset == 5


def test_a_missing_prefix_and_a_leading_control_batch_move_the_start_offset():
    p = sp(start=10)
    assert p.acquire("m1", [(12, 12, True), (13, 15)], 100, 0) == [R(13, 15, 1)]
    assert (p.start_offset, p.end_offset) == (13, 16)
    p = sp(start=10)
    assert p.acquire("m1", [(10, 11, True)], 100, 0) == []
    assert (p.start_offset, p.end_offset, p.fetch_offset()) == (12, 12, 12)


def test_records_below_the_start_offset_are_never_acquired():
    p = sp(start=10)
    assert p.acquire("m1", [(0, 4), (5, 14)], 100, 0) == [R(10, 14, 1)]


def test_batch_optimized_mode_takes_whole_batches_past_max_records():
    p = sp()
    assert p.acquire("m1", [(0, 6), (7, 13), (14, 20)], 10, 0) == [R(0, 13, 1)]
    assert p.end_offset == 14


def test_record_limit_mode_takes_exactly_max_records_and_leaves_the_rest_available():
    p = sp()
    assert p.acquire("m1", [(0, 6), (7, 13)], 10, 0, record_limit_mode=True) == [R(0, 9, 1)]
    assert window(p) == [(0, 9, S.ACQUIRED, 1, "m1"), (10, 13, S.AVAILABLE, 0, None)]
    assert p.fetch_offset() == 10
    # the rest of the batch is delivered for the first time next
    assert p.acquire("m2", [(7, 13)], 2, 0, record_limit_mode=True) == [R(10, 11, 1)]
    assert p.acquire("m2", [(7, 13)], 5, 0) == [R(12, 13, 1)]


def test_batch_size_splits_returned_ranges_at_batch_boundaries():
    p = sp()
    got = p.acquire("m1", [(0, 2), (3, 5), (6, 8), (9, 9)], 100, 0, batch_size=4)
    assert got == [R(0, 5, 1), R(6, 9, 1)]
    assert window(p) == [(0, 9, S.ACQUIRED, 1, "m1")]


def test_max_record_locks_bounds_new_records_but_not_redeliveries():
    p = sp(max_record_locks=10)
    assert p.acquire("m1", [(0, 5), (6, 11), (12, 13)], 100, 0) == [R(0, 11, 1)]   # whole batches
    assert p.fetch_offset() is None
    assert p.acquire("m2", [(12, 13)], 100, 0) == []
    assert p.acknowledge("m1", [(3, 3, [A.RELEASE])], 0) == OK
    assert p.fetch_offset() == 3
    assert p.acquire("m2", [(0, 5), (6, 11), (12, 20)], 100, 0) == [R(3, 3, 2)]
    assert p.end_offset == 12
    assert p.acknowledge("m1", [(0, 2, [A.ACCEPT])], 0) == OK        # window 3..11: room for one
    assert p.fetch_offset() == 12
    assert p.acquire("m2", [(12, 13), (14, 15)], 100, 0) == [R(12, 13, 1)]
    assert p.fetch_offset() is None


def test_record_limit_mode_respects_max_record_locks():
    p = sp(max_record_locks=10)
    assert p.acquire("m1", [(0, 7)], 6, 0, record_limit_mode=True) == [R(0, 5, 1)]
    assert p.acquire("m1", [(0, 7), (8, 20)], 100, 0, record_limit_mode=True) == [R(6, 9, 1)]
    assert window(p) == [(0, 9, S.ACQUIRED, 1, "m1"), (10, 20, S.AVAILABLE, 0, None)]
    assert p.fetch_offset() == 10


def test_released_records_are_acquired_again_with_count_plus_one_by_anyone():
    p = sp()
    acquire_new(p, "m1", 0, 9)
    assert p.acknowledge("m1", [(3, 6, [A.RELEASE])], 0) == OK
    assert p.fetch_offset() == 3
    assert p.acquire("m2", [(0, 9), (10, 12)], 100, 5) == [R(3, 6, 2), R(10, 12, 1)]
    assert p.state_of(4) == (S.ACQUIRED, 2, "m2")
    assert p.state_of(2) == (S.ACQUIRED, 1, "m1")
    assert p.acquired_by_member() == {"m1": 6, "m2": 7}


def test_acquired_and_done_records_are_skipped():
    p = sp()
    acquire_new(p, "m1", 0, 9)
    assert p.acknowledge("m1", [(0, 9, [A.ACCEPT] * 3 + [A.RELEASE] * 2 + [A.REJECT] + [A.RENEW] * 4)], 0) == OK
    assert p.acquire("m2", [(0, 9)], 100, 0) == [R(3, 4, 2)]


def test_fetch_offset_archives_records_compacted_away():
    p = sp()
    acquire_new(p, "m1", 0, 9)
    assert p.acknowledge("m1", [(0, 9, [A.RELEASE])], 0) == OK
    # the log no longer has 0..5: the read from 0 starts at 6
    assert p.acquire("m2", [(6, 9)], 100, 0, fetch_offset=0) == [R(6, 9, 2)]
    assert p.start_offset == 6
    # without fetch_offset nothing is assumed about offsets before the first batch
    p = sp()
    acquire_new(p, "m1", 0, 9)
    p.acknowledge("m1", [(0, 9, [A.RELEASE])], 0)
    assert p.acquire("m2", [(6, 9)], 100, 0) == [R(6, 9, 2)]
    assert p.start_offset == 0 and p.fetch_offset() == 0


def test_a_gap_between_batches_inside_the_window_is_archived():
    p = sp()
    acquire_new(p, "m1", 0, 9)
    p.acknowledge("m1", [(0, 9, [A.RELEASE])], 0)
    assert p.acquire("m2", [(0, 2), (7, 9)], 100, 0) == [R(0, 2, 2), R(7, 9, 2)]
    assert p.state_of(5) == (S.ARCHIVED, 1, None)


def test_record_limit_mode_in_the_window_splits_a_range():
    p = sp()
    acquire_new(p, "m1", 0, 9)
    p.acknowledge("m1", [(0, 9, [A.RELEASE])], 0)
    assert p.acquire("m2", [(0, 9)], 4, 0, record_limit_mode=True) == [R(0, 3, 2)]
    assert p.acquire("m3", [(0, 9)], 4, 0, record_limit_mode=True) == [R(4, 7, 2)]
    assert p.acquire("m3", [(0, 9)], 4, 0) == [R(8, 9, 2)]


def test_a_record_on_its_last_delivery_attempt_is_delivered_alone():
    p = sp(0, [P(0, 9, 0, 4)], delivery_count_limit=5)
    got = [p.acquire("m", [(0, 9)], 1000, 0) for _ in range(10)]
    assert got == [[R(o, o, 5)] for o in range(10)]
    p = sp(0, [P(0, 1, 0, 1), P(2, 2, 0, 4), P(3, 5, 0, 1)], delivery_count_limit=5)
    assert p.acquire("m", [(0, 5)], 1000, 0) == [R(0, 1, 2)]          # stops before the last attempt
    assert p.acquire("m", [(0, 5)], 1000, 0) == [R(2, 2, 5)]
    assert p.acquire("m", [(0, 5)], 1000, 0) == [R(3, 5, 2)]


def test_throttling_halves_the_batch_as_the_count_grows():
    # limit 10: the threshold is ceil(10 / 2) = 5
    p = sp(0, [P(0, 99, 0, 5)], delivery_count_limit=10)
    assert p.acquire("m", [(0, 99)], 1000, 0) == [R(0, 49, 6)]          # 100 >> 1
    assert p.acquire("m", [(0, 99)], 1000, 0) == [R(50, 99, 6)]
    p = sp(0, [P(0, 99, 0, 6)], delivery_count_limit=10)
    assert p.acquire("m", [(0, 99)], 1000, 0) == [R(0, 24, 7)]          # 100 >> 2
    p = sp(0, [P(0, 99, 0, 8)], delivery_count_limit=10)
    assert p.acquire("m", [(0, 99)], 1000, 0) == [R(0, 5, 9)]           # 100 >> 4 = 6 records
    # a throttled record never joins records acquired before it in the same call, nor new ones after
    p = sp(0, [P(0, 9, 0, 1), P(10, 19, 0, 5)], delivery_count_limit=10)
    assert p.acquire("m", [(0, 9), (10, 19)], 1000, 0) == [R(0, 9, 2)]
    assert p.acquire("m", [(10, 19), (20, 29)], 1000, 0) == [R(10, 14, 6)]
    assert p.end_offset == 20


def test_no_isolation_with_a_limit_of_two():
    p = sp(0, [P(0, 9, 0, 1)], delivery_count_limit=2)
    assert p.acquire("m", [(0, 9)], 1000, 0) == [R(0, 9, 2)]


def test_log_batches_must_be_sorted():
    p = sp()
    with pytest.raises(ValueError):
        p.acquire("m", [(5, 9), (0, 4)], 10, 0)
    with pytest.raises(ValueError):
        p.acquire("m", [(5, 4)], 10, 0)


# ---------------------------------------------------------------------------------- acknowledge

@pytest.mark.parametrize("ack, state", [(A.ACCEPT, S.ACKNOWLEDGED), (A.REJECT, S.ARCHIVED), (A.GAP, S.ARCHIVED),
                                        (A.RELEASE, S.AVAILABLE)])
def test_each_acknowledge_type(ack, state):
    p = sp()
    acquire_new(p, "m1", 0, 9)
    assert p.acknowledge("m1", [(4, 6, [ack])], 0) == OK
    assert p.state_of(5) == (state, 1, None)
    assert p.state_of(3) == (S.ACQUIRED, 1, "m1")


def test_renew_extends_the_lock_and_keeps_the_record_acquired():
    p = sp()
    acquire_new(p, "m1", 0, 9, now=0)
    assert p.acknowledge("m1", [(0, 4, [A.RENEW])], 700) == OK
    assert p.state_of(2) == (S.ACQUIRED, 1, "m1")
    assert p.next_deadline() == LOCK
    assert p.expire_locks(LOCK) is True
    assert window(p) == [(0, 4, S.ACQUIRED, 1, "m1"), (5, 9, S.AVAILABLE, 1, None)]
    assert p.next_deadline() == 700 + LOCK
    assert p.acknowledge("m1", [(0, 4, [A.ACCEPT])], 800) == OK
    assert p.start_offset == 5


def test_release_at_the_delivery_limit_archives():
    p = sp(delivery_count_limit=2)
    acquire_new(p, "m1", 0, 4)
    assert p.acknowledge("m1", [(0, 4, [A.RELEASE])], 0) == OK
    assert p.acquire("m1", [(0, 4)], 10, 0) == [R(0, 4, 2)]
    assert p.acknowledge("m1", [(0, 4, [A.RELEASE])], 0) == OK
    assert (p.start_offset, p.end_offset, p.in_flight_records()) == (5, 5, [])


def test_per_offset_types_and_start_offset_advance():
    p = sp()
    acquire_new(p, "m1", 0, 5)
    types = [A.ACCEPT, A.REJECT, A.GAP, A.ACCEPT, A.RELEASE, A.ACCEPT]
    assert p.acknowledge("m1", [(0, 5, types)], 0) == OK
    assert p.start_offset == 4
    assert window(p) == [(4, 4, S.AVAILABLE, 1, None), (5, 5, S.ACKNOWLEDGED, 1, None)]
    assert p.delivery_complete_count == 1


def test_several_batches_in_one_request():
    p = sp()
    acquire_new(p, "m1", 0, 9)
    assert p.acknowledge("m1", [(0, 1, [A.ACCEPT]), (2, 3, [A.RELEASE]), (8, 9, [A.REJECT])], 0) == OK
    assert window(p) == [(2, 3, S.AVAILABLE, 1, None), (4, 7, S.ACQUIRED, 1, "m1"), (8, 9, S.ARCHIVED, 1, None)]


@pytest.mark.parametrize("batches", [
    [(5, 4, [A.ACCEPT])],                              # first > last
    [(0, 4, [])],                                      # no types
    [(0, 4, [A.ACCEPT, A.ACCEPT])],                    # neither 1 nor the range length
    [(0, 1, [A.ACCEPT, 5])],                           # unknown type
    [(0, 1, [-1])],
    [(4, 6, [A.ACCEPT]), (2, 3, [A.ACCEPT])],          # out of order / overlapping
    [(0, 12, [A.ACCEPT])],                             # past the end of the window
    [(10, 12, [A.ACCEPT])],
])
def test_malformed_acknowledgements_are_invalid_request(batches):
    p = sp()
    acquire_new(p, "m1", 0, 9)
    before = p.in_flight_records()
    assert p.acknowledge("m1", batches, 0) == BAD_REQUEST
    assert p.in_flight_records() == before


def test_acknowledging_records_not_acquired_by_the_member_is_invalid_record_state():
    p = sp()
    acquire_new(p, "m1", 0, 9)
    p.acquire("m2", [(10, 19)], 10, 0)
    p.acknowledge("m1", [(0, 1, [A.ACCEPT]), (2, 3, [A.RELEASE])], 0)
    before = p.in_flight_records()
    for batches in ([(4, 5, [A.ACCEPT]), (12, 12, [A.ACCEPT])],  # 4..5 alone would do, 12 is m2's
                    [(3, 3, [A.ACCEPT])],                       # released: AVAILABLE
                    [(2, 3, [A.RELEASE])],
                    [(9, 10, [A.ACCEPT])],                      # spans m1's and m2's
                    [(4, 5, [A.ACCEPT]), (5, 6, [A.ACCEPT])]):  # 5 twice in one request
        assert p.acknowledge("m1", batches, 0) == BAD_STATE, batches
        assert p.in_flight_records() == before
    assert p.acknowledge("m3", [(4, 5, [A.RENEW])], 0) == BAD_STATE
    assert p.acknowledge("m1", [(8, 9, [A.ACCEPT])], 0) == OK
    assert p.acknowledge("m1", [(8, 9, [A.ACCEPT])], 0) == BAD_STATE         # already acknowledged


def test_acknowledgements_below_the_start_offset_are_ignored():
    p = sp()
    acquire_new(p, "m1", 0, 9)
    assert p.acknowledge("m1", [(0, 4, [A.ACCEPT])], 0) == OK
    assert p.acknowledge("m1", [(0, 4, [A.ACCEPT])], 0) == OK                # a retry: already done
    assert p.acknowledge("m1", [(2, 6, [A.REJECT])], 0) == OK                # only 5..6 count
    assert p.start_offset == 7


def test_acknowledging_with_nothing_in_flight_is_invalid_record_state():
    p = sp(start=10)
    assert p.acknowledge("m1", [(10, 12, [A.ACCEPT])], 0) == BAD_STATE
    assert p.acknowledge("m1", [(1, 2, [A.ACCEPT])], 0) == OK


# ---------------------------------------------------------------------------------- releases

def test_release_member_releases_only_its_records():
    p = sp(delivery_count_limit=1)
    acquire_new(p, "m1", 0, 4)
    p.acquire("m2", [(5, 9)], 10, 0)
    assert p.release_member("m1", 0) is True
    assert p.release_member("m1", 0) is False
    assert window(p) == [(5, 9, S.ACQUIRED, 1, "m2")]        # limit 1: archived, start moved
    p = sp()
    acquire_new(p, "m1", 0, 4)
    p.acquire("m2", [(5, 9)], 10, 0)
    assert p.release_member("m2", 0) is True
    assert window(p) == [(0, 4, S.ACQUIRED, 1, "m1"), (5, 9, S.AVAILABLE, 1, None)]
    assert p.fetch_offset() == 5


def test_locks_expire_at_their_deadline():
    p = sp()
    acquire_new(p, "m1", 0, 4, now=0)
    p.acquire("m2", [(5, 9)], 10, 500)
    assert p.next_deadline() == LOCK
    assert p.expire_locks(LOCK - 1) is False
    assert p.expire_locks(LOCK) is True
    assert window(p) == [(0, 4, S.AVAILABLE, 1, None), (5, 9, S.ACQUIRED, 1, "m2")]
    assert p.next_deadline() == 500 + LOCK
    assert p.acknowledge("m1", [(0, 4, [A.ACCEPT])], LOCK) == BAD_STATE     # too late
    assert p.acquire("m1", [(0, 4)], 10, LOCK) == [R(0, 4, 2)]
    assert p.expire_locks(10 * LOCK) is True
    assert p.next_deadline() is None


def test_an_expired_lock_at_the_limit_archives():
    p = sp(delivery_count_limit=2)
    acquire_new(p, "m1", 0, 4)
    p.expire_locks(LOCK)
    assert p.acquire("m1", [(0, 4)], 10, LOCK) == [R(0, 4, 2)]
    p.expire_locks(2 * LOCK)
    assert (p.start_offset, p.fetch_offset()) == (5, 5)


# ---------------------------------------------------------------------------------- persisted state

def test_persisted_state_is_the_whole_window_with_acquired_records_as_before_acquisition():
    p = sp()
    acquire_new(p, "m1", 0, 9)
    p.acknowledge("m1", [(0, 1, [A.ACCEPT]), (2, 3, [A.RELEASE]), (6, 7, [A.ACCEPT])], 0)
    p.acquire("m2", [(0, 9), (12, 13)], 100, 0)
    assert window(p) == [(2, 3, S.ACQUIRED, 2, "m2"), (4, 5, S.ACQUIRED, 1, "m1"), (6, 7, S.ACKNOWLEDGED, 1, None),
                         (8, 9, S.ACQUIRED, 1, "m1"), (10, 11, S.ARCHIVED, 0, None), (12, 13, S.ACQUIRED, 1, "m2")]
    start, batches = p.persisted_state()
    assert start == 2
    assert batches == [P(2, 3, 0, 1), P(4, 5, 0, 0), P(6, 7, 2, 1), P(8, 9, 0, 0), P(10, 11, 4, 0), P(12, 13, 0, 0)]
    q = SharePartition(p.config, start, batches)
    assert q.acquire("m3", [(0, 9), (12, 13)], 100, 0) == [R(2, 3, 2), R(4, 5, 1), R(8, 9, 1), R(12, 13, 1)]
    assert q.start_offset == 2 and q.end_offset == 14


def test_persisted_state_coalesces():
    p = sp()
    acquire_new(p, "m1", 0, 4)
    p.acquire("m2", [(5, 9)], 10, 1)
    assert p.persisted_state() == (0, [P(0, 9, 0, 0)])


# ---------------------------------------------------------------------------------- offset moves

def test_move_start_drops_records_below_and_ignores_their_acknowledgements():
    p = sp()
    acquire_new(p, "m1", 0, 9)
    assert p.move_start(3) is True
    assert p.move_start(2) is False
    assert (p.start_offset, p.end_offset) == (3, 10)
    assert p.acknowledge("m1", [(0, 4, [A.ACCEPT])], 0) == OK
    assert p.start_offset == 5
    assert p.move_start(50) is True
    assert (p.start_offset, p.end_offset, p.fetch_offset()) == (50, 50, 50)


def test_move_start_trims_a_done_prefix_it_uncovers():
    p = sp()
    acquire_new(p, "m1", 0, 9)
    p.acknowledge("m1", [(5, 7, [A.ACCEPT])], 0)
    p.move_start(5)
    assert p.start_offset == 8


def test_reset_discards_the_window_in_either_direction():
    p = sp(start=100)
    acquire_new(p, "m1", 100, 109)
    assert p.move_start(20, reset=True) is True
    assert (p.start_offset, p.end_offset, p.in_flight_records()) == (20, 20, [])
    assert p.move_start(20, reset=True) is False
    assert p.move_start(500, reset=True) is True
    assert p.fetch_offset() == 500


def test_archive_ranges_for_aborted_transactions():
    p = sp()
    acquire_new(p, "m1", 0, 9)
    p.acknowledge("m1", [(6, 6, [A.RELEASE])], 0)
    assert p.archive([(2, 3), (5, 7), (40, 50)]) is True
    assert window(p) == [(0, 1, S.ACQUIRED, 1, "m1"), (2, 3, S.ARCHIVED, 1, None), (4, 4, S.ACQUIRED, 1, "m1"),
                         (5, 7, S.ARCHIVED, 1, None), (8, 9, S.ACQUIRED, 1, "m1")]
    assert p.archive([(2, 3)]) is False
    assert p.acknowledge("m1", [(0, 1, [A.ACCEPT]), (4, 4, [A.ACCEPT])], 0) == OK
    assert p.start_offset == 8


# ---------------------------------------------------------------------------------- views

def test_counts_and_views():
    p = sp()
    acquire_new(p, "m1", 0, 9)
    p.acquire("m2", [(10, 14)], 10, 0)
    p.acknowledge("m1", [(2, 3, [A.ACCEPT]), (5, 5, [A.REJECT])], 0)
    assert p.in_flight_count == 15
    assert p.delivery_complete_count == 3
    assert p.acquired_by_member() == {"m1": 7, "m2": 5}
    assert p.state_of(100) is None and p.state_of(-1) is None
    assert "start=0" in repr(p)
