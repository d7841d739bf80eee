"""A waiting fetch (kcompat.isr.fetch_messages.DelayedFetch) and the Completion it answers through
(kcompat.isr.completion): answered inside the append that makes it answerable, before that
append returns, as Kafka's purgatory completes a DelayedFetch in the produce's own thread; not
answered by an append a consumer cannot see yet; answered at max_wait_ms; and it stops watching
the partition once answered, or once its waiter goes away."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from kcompat.isr.completion import Completion
from kcompat.isr.fetch_messages import FetchParams, FetchPartitionRequest
from kcompat.isr.partition import AppendPolicy
from kcompat.isr.replica_manager import ReplicaManager
from kcompat.log import LogConfig, LogManager
from kcompat.protocol import records as rb

NOW = 1_700_000_000_000


def cfg_for(topic: str) -> LogConfig:
    return LogConfig()


@pytest.fixture
def rm(tmp_path):
    m = LogManager([tmp_path / "d"], cfg_for)
    m.startup(NOW, "c", 1)
    rm = ReplicaManager(m, 1, log_config_for=cfg_for, policy_for=lambda t: AppendPolicy(), now_ms=lambda: NOW,
                        leader_of=lambda t, p: 1, topic_exists=lambda t: True)
    yield rm
    m.shutdown()


def lead(rm: ReplicaManager, isr=(1,)):
    p = rm.ensure_partition("t", 0, uuid.uuid4(), 0)
    rm.apply_partition_state(p, leader=1, leader_epoch=0, partition_epoch=0, replicas=[1, 2], isr=list(isr),
                             now_ms=NOW, min_insync_replicas=1, replica_lag_time_max_ms=30_000)
    return p


def batch(n: int = 1) -> bytearray:
    return bytearray(rb.build_batch([(NOW, b"k", b"v%d" % i, ()) for i in range(n)]))


def params(max_wait_ms: int = 500, replica_id: int = -1) -> FetchParams:
    return FetchParams(replica_id=replica_id, replica_epoch=-1, max_wait_ms=max_wait_ms, min_bytes=1,
                       max_bytes=1 << 20, isolation_level=0, follower_reads=False, rack_id=None, selector=None,
                       racks=lambda: {}, zero_copy=False)


def fetch_at(rm: ReplicaManager, offset: int, **kw):
    return rm.fetch_messages(params(**kw), [FetchPartitionRequest("t", 0, offset, 1 << 20)])


def test_completion_calls_back_synchronously_once_and_isolates_callback_errors():
    c = Completion()
    seen = []
    c.add_callback(lambda v, e: seen.append(("first", v, e)))
    c.add_callback(lambda v, e: 1 / 0)          # logged, not raised into the completer
    c.add_callback(lambda v, e: seen.append(("third", v, e)))
    c.set_result(7)
    assert seen == [("first", 7, None), ("third", 7, None)]
    c.set_result(8)                               # a second result is ignored
    c.add_callback(lambda v, e: seen.append(("late", v, e)))   # already done: called at once
    assert seen[-1] == ("late", 7, None) and len(seen) == 3


def test_completion_map_carries_errors_and_cancel_reaches_the_source():
    stopped = []
    source = Completion(on_cancel=lambda: stopped.append(True))
    derived = source.map(lambda v: v + 1)
    failing = source.map(lambda v: 1 / 0)
    out = []
    derived.add_callback(lambda v, e: out.append((v, e)))
    failing.add_callback(lambda v, e: out.append((v, type(e))))
    source.set_result(1)
    assert out == [(2, None), (None, ZeroDivisionError)]

    source2 = Completion(on_cancel=lambda: stopped.append("source2"))
    derived2 = source2.map(lambda v: v)
    derived2.cancel()
    assert stopped == ["source2"] and source2.done
    called = []
    source2.add_callback(lambda v, e: called.append(v))   # cancelled: never called
    assert called == []


def test_completion_can_be_awaited():
    async def main():
        c = Completion()
        asyncio.get_running_loop().call_later(0.01, c.set_result, "ok")
        assert await c == "ok"
        failed = Completion()
        failed.set_exception(ValueError("x"))
        with pytest.raises(ValueError):
            await failed
    asyncio.run(main())


def test_a_waiting_fetch_is_answered_inside_the_append_that_makes_it_readable(rm):
    async def main():
        p = lead(rm)
        waiting = fetch_at(rm, 0)
        assert isinstance(waiting, Completion) and not waiting.done
        answered_during_append = []
        waiting.add_callback(lambda results, e: answered_during_append.append(results[0].high_watermark))
        p.append(batch(3), NOW)
        # the callback ran before append returned, and saw the new high watermark
        assert answered_during_append == [3]
        assert not p._waiters and not rm.fetch_waiters   # it stopped watching
    asyncio.run(main())


def test_an_append_the_consumer_cannot_see_yet_does_not_answer_it(rm):
    async def main():
        p = lead(rm, isr=(1, 2))                      # HW waits for replica 2
        waiting = fetch_at(rm, 0, max_wait_ms=60_000)
        p.append(batch(2), NOW)
        assert not waiting.done                       # LEO 2, HW 0: nothing readable yet
        assert p.high_watermark == 0
        waiting.cancel()                              # the client went away
        assert not p._waiters and not rm.fetch_waiters
    asyncio.run(main())


def test_max_wait_answers_with_nothing(rm):
    async def main():
        lead(rm)
        waiting = fetch_at(rm, 0, max_wait_ms=20)
        results = await waiting
        assert len(results[0].records) == 0 and results[0].high_watermark == 0
    asyncio.run(main())


def test_a_leadership_change_answers_a_waiting_fetch(rm):
    async def main():
        p = lead(rm)
        waiting = fetch_at(rm, 0, max_wait_ms=60_000)
        p.leader_epoch = 1                            # as a new leader epoch from the metadata
        rm.wake_delayed_fetches()
        assert waiting.done
    asyncio.run(main())
