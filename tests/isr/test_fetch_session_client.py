"""The fetcher side of incremental fetch sessions (KIP-227, Kafka's client ``FetchSessionHandler``):
what each request carries and how the response's top level moves the session on."""

from __future__ import annotations

import uuid

import pytest

from kcompat.isr.fetch_session_client import FetchSessionHandler
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.fetch import FetchRequest

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def fp(partition: int, offset: int, epoch: int = 3, max_bytes: int = 1 << 20, log_start: int = 0):
    return FetchRequest.FetchPartition(partition=partition, current_leader_epoch=epoch, fetch_offset=offset,
                                       last_fetched_epoch=epoch, log_start_offset=log_start,
                                       partition_max_bytes=max_bytes)


def desired(**offsets) -> dict:
    """{(T1, n): fp(n, offset)} for p<n>=offset keywords."""
    return {(T1, int(k[1:])): fp(int(k[1:]), v) for k, v in offsets.items()}


def established(sid: int = 77, **offsets) -> FetchSessionHandler:
    h = FetchSessionHandler()
    h.build(desired(**offsets))
    assert h.handle_response(ErrorCode.NONE, sid, [])
    return h


def test_the_first_fetch_is_full_with_epoch_zero():
    h = FetchSessionHandler()
    plan = h.build(desired(p0=5, p1=7))
    assert (plan.session_id, plan.session_epoch, plan.full) == (0, 0, True)
    assert list(plan.partitions) == [(T1, 0), (T1, 1)] and plan.forgotten == []


def test_a_session_is_established_at_epoch_one_and_unchanged_partitions_are_not_sent():
    h = FetchSessionHandler()
    h.build(desired(p0=5, p1=7))
    assert h.handle_response(ErrorCode.NONE, 77, [(T1, 0), (T1, 1)])
    plan = h.build(desired(p0=5, p1=7))
    assert (plan.session_id, plan.session_epoch, plan.full) == (77, 1, False)
    assert plan.partitions == {} and plan.forgotten == []
    assert h.handle_response(ErrorCode.NONE, 77, [])
    assert h.build(desired(p0=5, p1=7)).session_epoch == 2


@pytest.mark.parametrize("change", [dict(offset=6), dict(epoch=4), dict(max_bytes=10), dict(log_start=2)])
def test_a_partition_whose_fields_changed_is_sent(change):
    h = established(p0=5, p1=7)
    want = desired(p0=5, p1=7)
    want[(T1, 1)] = fp(1, change.get("offset", 7), change.get("epoch", 3), change.get("max_bytes", 1 << 20),
                       change.get("log_start", 0))
    plan = h.build(want)
    assert plan.partitions == {(T1, 1): want[(T1, 1)]} and plan.forgotten == []


def test_a_new_partition_joins_and_an_undesired_one_is_forgotten_then_re_added():
    h = established(p0=5, p1=7)
    want = desired(p0=5)           # p1 backing off this round
    want[(T2, 0)] = fp(0, 0)
    plan = h.build(want)
    assert plan.partitions == {(T2, 0): want[(T2, 0)]} and plan.forgotten == [(T1, 1)]
    assert h.handle_response(ErrorCode.NONE, 77, [(T2, 0)])
    assert set(h.session_partitions) == {(T1, 0), (T2, 0)}
    want = {**desired(p0=5, p1=7), (T2, 0): fp(0, 0)}   # p1 back, unchanged: it must be re-added
    plan = h.build(want)
    assert plan.partitions == {(T1, 1): want[(T1, 1)]} and plan.forgotten == []


@pytest.mark.parametrize("error, session_id", [(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0),
                                               (ErrorCode.INVALID_FETCH_SESSION_EPOCH, 77),
                                               (ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR, 77)])
def test_each_session_error_makes_the_next_fetch_full(error, session_id):
    h = established(p0=5, p1=7)
    h.build(desired(p0=5, p1=7))
    assert not h.handle_response(error, 0, [])
    plan = h.build(desired(p0=5, p1=7))
    # session not found: start over; another error: close the session and ask for a new one
    assert (plan.session_id, plan.session_epoch, plan.full) == (session_id, 0, True)
    assert list(plan.partitions) == [(T1, 0), (T1, 1)]
    assert h.handle_response(ErrorCode.NONE, 91, [(T1, 0)])
    assert (h.session_id, h.epoch) == (91, 1)


def test_a_connection_error_makes_the_next_fetch_full_closing_the_session():
    h = established(p0=5)
    h.build(desired(p0=6))
    h.handle_error()
    plan = h.build(desired(p0=6))
    assert (plan.session_id, plan.session_epoch, plan.full, list(plan.partitions)) == (77, 0, True, [(T1, 0)])


def test_a_leader_without_sessions_keeps_every_fetch_full():
    h = FetchSessionHandler()
    for _ in range(3):
        plan = h.build(desired(p0=5, p1=7))
        assert (plan.session_id, plan.session_epoch, plan.full) == (0, 0, True)
        assert len(plan.partitions) == 2
        assert h.handle_response(ErrorCode.NONE, 0, [(T1, 0), (T1, 1)])


def test_an_incremental_answer_without_a_session_starts_over():
    h = established(p0=5)
    h.build({})
    assert h.handle_response(ErrorCode.NONE, 0, [])
    assert (h.build(desired(p0=5)).session_id, h.epoch) == (0, 0)


def test_a_response_with_partitions_outside_the_session_is_not_used():
    h = established(p0=5)
    h.build(desired(p0=5))
    assert not h.handle_response(ErrorCode.NONE, 77, [(T1, 9)])
    plan = h.build(desired(p0=5))
    assert (plan.session_id, plan.session_epoch, plan.full) == (77, 0, True)
    h = FetchSessionHandler()
    h.build(desired(p0=5))
    assert not h.handle_response(ErrorCode.NONE, 77, [(T2, 0)])   # full: only what was asked
    assert (h.session_id, h.epoch) == (0, 0)


def test_the_epoch_increments_and_wraps_to_one():
    h = established(p0=5)
    h.epoch = 2**31 - 2
    h.build(desired(p0=5))
    assert h.handle_response(ErrorCode.NONE, 77, [])
    assert h.epoch == 2**31 - 1
    h.build(desired(p0=5))
    assert h.handle_response(ErrorCode.NONE, 77, [])
    assert h.epoch == 1
