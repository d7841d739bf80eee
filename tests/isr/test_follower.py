"""kcompat.isr.follower.FollowerFetch: the follower's decisions for one partition (Kafka
AbstractFetcherThread with KIP-320 truncation on fetch), against an in-memory LocalLog."""

from __future__ import annotations

import pytest

from kcompat.isr.follower import (
    AppendRecords, Backoff, FetchPosition, Fenced, FollowerFetch, IncrementLogStartOffset, ListLeaderOffsets,
    SetHighWatermark, Truncate, TruncateFullyAndStartAt,
)
from kcompat.log import LeaderEpochFileCache
from kcompat.log.leader_epoch import EpochEntry
from kcompat.protocol import records as rb
from kcompat.protocol.errors import ErrorCode

NOW = 1_700_000_000_000


class FakeLog:
    """A LocalLog: LEO, log start and an epoch cache, in memory."""

    def __init__(self, leo: int, epochs=(), log_start: int = 0) -> None:
        self.log_end_offset = leo
        self.log_start_offset = log_start
        self.cache = LeaderEpochFileCache(None, [EpochEntry(*e) for e in epochs])

    @property
    def latest_epoch(self):
        return self.cache.latest_epoch

    def end_offset_for_epoch(self, epoch: int):
        return self.cache.end_offset_for(epoch, self.log_end_offset)


def batches(*specs) -> bytes:
    """``(base offset, count, epoch)`` -> concatenated batches."""
    return b"".join(rb.build_batch([(NOW, b"k", b"v%d" % i, ()) for i in range(n)], base_offset=base,
                                   partition_leader_epoch=epoch) for base, n, epoch in specs)


def started(log: FakeLog, hw: int = 0, epoch: int = 7) -> FollowerFetch:
    f = FollowerFetch("t", 0, leader_id=2, leader_epoch=epoch)
    assert f.start(log, hw) == []
    return f


def respond(f: FollowerFetch, log: FakeLog, *, error=0, hw=0, lso=0, records=b"", diverging=None, fetch_offset=None):
    return f.on_fetch_response(log, error_code=error, high_watermark=hw, log_start_offset=lso, records=records,
                               diverging_epoch=diverging, fetch_offset=fetch_offset)


# -- start and fetch position -------------------------------------------------------------------
def test_fetch_position_carries_leo_latest_epoch_and_leader_epoch():
    log = FakeLog(10, [(1, 0), (3, 6)], log_start=2)
    f = FollowerFetch("t", 0, leader_id=2, leader_epoch=7)
    assert f.fetch_position(log) is None                   # not started
    f.start(log, 4)
    assert f.fetch_position(log) == FetchPosition(10, 3, 7, 2)
    assert started(FakeLog(0)).fetch_position(FakeLog(0)) == FetchPosition(0, -1, 7, 0)


def test_a_log_without_epochs_truncates_to_its_high_watermark_first():
    log = FakeLog(10, [], log_start=2)
    f = FollowerFetch("t", 0, leader_id=2, leader_epoch=7)
    assert f.start(log, 4) == [Truncate(4)]
    assert f.start(FakeLog(10, [(1, 0)]), 4) == []         # with epochs: fetch from the LEO, the leader says
    assert f.start(FakeLog(3, []), 3) == []                # nothing above the HW


def test_leader_change():
    log = FakeLog(5, [(1, 0)])
    f = started(log, epoch=7)
    assert respond(f, log, error=ErrorCode.FENCED_LEADER_EPOCH) == [Fenced(ErrorCode.FENCED_LEADER_EPOCH)]
    assert f.fetch_position(log) is None
    assert f.on_leader_change(2, 7, log, 5) == [] and f.state == "fenced"   # not newer
    assert f.on_leader_change(3, 8, log, 5) == []
    assert (f.state, f.leader_id, f.fetch_position(log)) == ("fetching", 3, FetchPosition(5, 1, 8, 0))


# -- records -----------------------------------------------------------------------------------------
def test_records_are_appended_then_hw_and_log_start_follow_the_leader():
    log = FakeLog(4, [(1, 0)], log_start=0)
    f = started(log)
    data = batches((4, 2, 1), (6, 3, 2))
    actions = respond(f, log, hw=7, lso=3, records=data)
    assert actions == [AppendRecords(memoryview(data), 4, 8), SetHighWatermark(7), IncrementLogStartOffset(3)]
    assert bytes(actions[0].records) == data
    # the leader's HW above what we hold: capped at our new LEO; its log start above that HW: not yet
    actions = respond(f, log, hw=20, lso=15, records=batches((4, 2, 1)))
    assert actions[1:] == [SetHighWatermark(6)]


def test_a_trailing_partial_batch_is_left_for_the_next_fetch():
    log = FakeLog(0)
    f = started(log)
    whole = batches((0, 2, 1))
    partial = batches((2, 3, 1))[:-5]
    actions = respond(f, log, hw=5, records=whole + partial)
    assert actions == [AppendRecords(memoryview(whole), 0, 1), SetHighWatermark(2)]
    assert bytes(actions[0].records) == whole
    assert respond(f, log, hw=5, records=partial) == [SetHighWatermark(0)]


def test_no_records_still_moves_the_hw_even_down():
    log = FakeLog(10, [(1, 0)], log_start=4)
    f = started(log)
    assert respond(f, log, hw=8) == [SetHighWatermark(8)]
    assert respond(f, log, hw=2) == [SetHighWatermark(4)]  # never below our log start


def test_the_first_batch_straddling_an_empty_logs_start_restarts_it():
    log = FakeLog(5, [], log_start=5)                      # empty, restarted at the leader's log start 5
    f = started(log, hw=5)
    data = batches((3, 4, 1))                              # 3-6: the leader's start is inside it
    assert respond(f, log, hw=7, lso=5, records=data) == [AppendRecords(memoryview(data), 3, 6), SetHighWatermark(7),
                                                          IncrementLogStartOffset(5)]


def test_garbage_records_back_off():
    log = FakeLog(0)
    f = started(log)
    bad = bytearray(batches((0, 1, 1)))
    bad[16] = 1                                            # magic 1
    assert respond(f, log, records=bytes(bad)) == [Backoff(ErrorCode.CORRUPT_MESSAGE)]


def test_a_response_to_an_older_fetch_is_dropped():
    log = FakeLog(6, [(1, 0)])
    f = started(log)
    assert respond(f, log, hw=6, records=batches((4, 2, 1)), fetch_offset=4) == []


# -- errors ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("code", [ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_LEADER_EPOCH,
                                  ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.KAFKA_STORAGE_ERROR])
def test_retriable_errors_back_off(code):
    log = FakeLog(3, [(1, 0)])
    f = started(log)
    assert respond(f, log, error=code, hw=-1, lso=-1) == [Backoff(code)]
    assert f.fetch_position(log) is not None


def test_an_unknown_error_code_backs_off():
    log = FakeLog(3, [(1, 0)])
    assert respond(started(log), log, error=9999) == [Backoff(ErrorCode.UNKNOWN_SERVER_ERROR)]


def test_offset_out_of_range_asks_for_the_leaders_offsets():
    log = FakeLog(10, [(1, 0)], log_start=0)
    f = started(log)
    assert respond(f, log, error=ErrorCode.OFFSET_OUT_OF_RANGE, hw=-1, lso=-1) == [ListLeaderOffsets()]
    assert f.fetch_position(log) is None
    assert f.on_leader_offsets(log, leader_log_start_offset=0, leader_log_end_offset=7) == [Truncate(7)]
    assert f.fetch_position(log) == FetchPosition(10, 1, 7, 0)
    assert f.on_leader_offsets(log, leader_log_start_offset=0, leader_log_end_offset=7) == []   # not asked


def test_offset_out_of_range_behind_the_leaders_start_restarts_the_log_there():
    log = FakeLog(10, [(1, 0)])
    f = started(log)
    respond(f, log, error=ErrorCode.OFFSET_OUT_OF_RANGE)
    assert f.on_leader_offsets(log, leader_log_start_offset=50, leader_log_end_offset=80) == \
        [TruncateFullyAndStartAt(50)]
    respond(f, log, error=ErrorCode.OFFSET_OUT_OF_RANGE)
    assert f.on_leader_offsets(log, leader_log_start_offset=5, leader_log_end_offset=80) == []   # fetch again


def test_offset_moved_to_tiered_storage_restarts_at_the_leaders_local_log_start():
    """KIP-405: the leader has our next offset only in remote storage; we restart empty at its
    local log start (ListOffsets -4), keeping its log start offset as ours."""
    log = FakeLog(10, [(1, 0)])
    f = started(log)
    assert respond(f, log, error=ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE) == [ListLeaderOffsets(tiered=True)]
    assert f.fetch_position(log) is None
    assert f.on_leader_offsets(log, leader_log_start_offset=0, leader_log_end_offset=900,
                               leader_local_log_start_offset=700) == [TruncateFullyAndStartAt(700, 0)]


# -- divergence (KIP-320) ------------------------------------------------------------------------------
def test_diverging_epoch_truncates_and_nothing_else():
    log = FakeLog(10, [(1, 0), (3, 6)])
    f = started(log)
    # the leader ended epoch 3 at 8: we truncate to min(our end of 3 (LEO 10), 8)
    assert respond(f, log, hw=8, lso=5, records=b"", diverging=(3, 8)) == [Truncate(8)]
    assert respond(f, log, diverging=(-1, -1), hw=10) == [SetHighWatermark(10)]   # unset: records path


def test_a_diverging_epoch_ending_at_the_leo_still_truncates():
    # our last epoch 3 starts at the LEO with no record (we led it, appended nothing); the leader
    # never had it: Truncate(LEO) drops that epoch (else every fetch diverges again, forever)
    log = FakeLog(10, [(1, 0), (3, 10)])
    f = started(log)
    assert respond(f, log, diverging=(1, 10)) == [Truncate(10)]


@pytest.mark.parametrize("leader_epoch, leader_end, expected", [
    (3, 8, 8),      # a shared epoch: min(local end of it, leader end, fetch offset)
    (1, 4, 4),      # the leader's epoch 1 ended earlier than ours (6)
    (1, 7, 6),      # ... or later: our own end of epoch 1
    (2, 5, 6),      # epoch 2 unknown here: our end of the largest epoch below it (1 ends at 6); next round
    (0, 3, 0),      # below our first epoch: it "ends" where our first epoch starts (Kafka endOffsetFor)
    (-1, 9, 9),     # no epoch in the answer (old protocol): min(leader end, fetch offset)
    (-1, 12, 10),
    (5, -1, 10),    # undefined end offset: nothing to truncate
])
def test_truncation_offset(leader_epoch, leader_end, expected):
    log = FakeLog(10, [(1, 0), (3, 6)])
    assert FollowerFetch.truncation_offset(log, leader_epoch, leader_end, 10) == expected


def test_truncation_offset_without_local_epochs_uses_the_leaders_end():
    assert FollowerFetch.truncation_offset(FakeLog(10), 4, 7, 10) == 7
    assert FollowerFetch.truncation_offset(FakeLog(10), 4, 12, 10) == 10


# -- the state table: every (state, event) pair ---------------------------------------------------
EVENTS = {
    "start": lambda f, log: f.start(log, 0),
    "newer_leader": lambda f, log: f.on_leader_change(3, f.leader_epoch + 1, log, 0),
    "same_leader": lambda f, log: f.on_leader_change(2, f.leader_epoch, log, 0),
    "ok": lambda f, log: respond(f, log, hw=1),
    "out_of_range": lambda f, log: respond(f, log, error=ErrorCode.OFFSET_OUT_OF_RANGE),
    "moved_to_tiered": lambda f, log: respond(f, log, error=ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE),
    "fenced": lambda f, log: respond(f, log, error=ErrorCode.FENCED_LEADER_EPOCH),
    "not_leader": lambda f, log: respond(f, log, error=ErrorCode.NOT_LEADER_OR_FOLLOWER),
    "leader_offsets": lambda f, log: f.on_leader_offsets(log, leader_log_start_offset=0, leader_log_end_offset=5),
}
TABLE = {  # state -> {event: next state}; events not listed leave the state unchanged
    "new": {"start": "fetching", "newer_leader": "fetching", "same_leader": "fetching"},
    "fetching": {"start": "fetching", "newer_leader": "fetching", "out_of_range": "awaiting_offsets",
                 "moved_to_tiered": "awaiting_offsets", "fenced": "fenced"},
    "awaiting_offsets": {"start": "fetching", "newer_leader": "fetching", "leader_offsets": "fetching"},
    "fenced": {"start": "fetching", "newer_leader": "fetching"},
}


@pytest.mark.parametrize("state", sorted(TABLE))
@pytest.mark.parametrize("event", sorted(EVENTS))
def test_state_table(state, event):
    log = FakeLog(5, [(1, 0)])
    f = FollowerFetch("t", 0, leader_id=2, leader_epoch=7)
    f.state = state
    EVENTS[event](f, log)
    assert f.state == TABLE[state].get(event, state)
    assert (f.fetch_position(log) is not None) == (f.state == "fetching")
