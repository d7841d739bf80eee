"""The fetch session cache on its own (Kafka's ``FetchSessionTest``): epochs, eviction
(``tryEvict``), what an incremental response includes (``maybeUpdateResponseData``), and a
duplicate request answered INVALID_FETCH_SESSION_EPOCH."""

from __future__ import annotations

import uuid

from kcompat.isr.fetch_messages import FetchPartitionRequest as Req
from kcompat.isr.fetch_messages import FetchPartitionResult as Res
from kcompat.isr.fetch_session import EVICTION_MS, FetchSessions, next_epoch
from kcompat.protocol.errors import ErrorCode

T = uuid.uuid4()


def test_next_epoch():
    assert [next_epoch(e) for e in (-1, -5, 0, 1, 2**31 - 1)] == [-1, -1, 1, 2, 1]


def _full(sessions: FetchSessions, n: int, now: int, privileged: bool = False, hw: int = 0) -> int:
    reqs = [Req("t", p, 0, 100) for p in range(n)]
    ctx = sessions.new_context(13, 0, 0, privileged, [T] * n, reqs, [], now)
    _error, session_id, send = ctx.respond([Res(high_watermark=hw, log_start_offset=0) for _ in reqs], now)
    assert send is None
    return session_id


def test_a_recent_session_is_kept_and_a_stale_one_evicted():
    s = FetchSessions(1, lambda tid: "t")
    first = _full(s, 2, 0)
    assert first != 0
    assert _full(s, 2, 1000) == 0                       # same size, recent: kept
    assert _full(s, 5, 1000) == 0                       # larger but recent (not evictable by all yet)
    second = _full(s, 1, EVICTION_MS + 1)               # unused for longer than the eviction time
    assert second != 0 and s.cache.get(first) is None and s.evictions() == 1
    assert (s.sessions(), s.partitions()) == (1, 1)


def test_a_follower_evicts_a_consumer_and_a_larger_session_an_old_smaller_one():
    s = FetchSessions(1, lambda tid: "t")
    consumer = _full(s, 3, 0)
    follower = _full(s, 1, 10, privileged=True)          # privileged beats unprivileged at any age
    assert follower != 0 and s.cache.get(consumer) is None
    assert _full(s, 10, 20) == 0                         # a consumer cannot evict a recent follower
    assert s.new_context(13, follower, 1, True, [], [], [], EVICTION_MS + 5).error is None
    assert _full(s, 10, EVICTION_MS + 6) == 0            # not old when last used: still not evictable by all
    assert s.new_context(13, follower, 2, True, [], [], [], EVICTION_MS + 20).error is None   # used when old
    assert _full(s, 1, EVICTION_MS + 21, privileged=True) == 0   # a smaller session is worth less
    assert _full(s, 2, EVICTION_MS + 22) == 0            # privileged sorts above unprivileged
    assert _full(s, 2, EVICTION_MS + 23, privileged=True) != 0   # a larger follower session wins
    assert s.evictions() == 2


def test_incremental_responses_and_a_duplicate_request():
    s = FetchSessions(10, lambda tid: "t")
    sid = _full(s, 3, 0, hw=5)
    ctx = s.new_context(13, sid, 1, False, [], [], [], 1)
    assert [r.partition for r in ctx.requests] == [0, 1, 2] and ctx.keys == [T, T, T]
    results = [Res(high_watermark=5, log_start_offset=0), Res(high_watermark=6, log_start_offset=0, records=b"x"),
               Res(error=ErrorCode.NOT_LEADER_OR_FOLLOWER)]
    assert ctx.would_send(results) == [1, 2]
    duplicate = s.new_context(13, sid, 1, False, [], [], [], 2)
    assert duplicate.error == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert ctx.respond(results, 2) == (ErrorCode.NONE, sid, [1, 2])
    # partition 1 returned records: it goes last
    ctx = s.new_context(13, sid, 2, False, [], [], [], 3)
    assert [r.partition for r in ctx.requests] == [0, 2, 1]
    # the error reset partition 2's cached high watermark: sent again once the error is gone
    results = [Res(high_watermark=5, log_start_offset=0), Res(high_watermark=5, log_start_offset=0),
               Res(high_watermark=6, log_start_offset=0)]
    # a request of the session taken meanwhile (a retried one) makes this answer stale
    again = s.new_context(13, sid, 3, False, [], [], [], 4)
    assert ctx.respond(results, 4) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, sid, [])
    assert ctx.throttled() == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, sid)
    assert again.respond(results, 4) == (ErrorCode.NONE, sid, [1])
    assert again.throttled() == (ErrorCode.NONE, sid)


def test_unknown_topic_ids_are_named_once_known():
    names: dict = {}
    s = FetchSessions(10, names.get)
    ctx = s.new_context(13, 0, 0, False, [T], [Req(None, 0, 0, 100)], [], 0)
    _e, sid, _ = ctx.respond([Res(error=ErrorCode.UNKNOWN_TOPIC_ID)], 0)
    assert s.new_context(13, sid, 1, False, [], [], [], 1).requests[0].topic is None
    names[T] = "now-known"
    assert s.new_context(13, sid, 2, False, [], [], [], 2).requests[0].topic == "now-known"
