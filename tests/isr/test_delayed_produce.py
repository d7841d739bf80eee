"""DelayedProduce's answer when an acks=-1 wait ends in an error (Kafka's ``DelayedProduce``: only
``responseStatus.error`` is set; the append's offsets stay and there is no error message)."""

from __future__ import annotations

import asyncio

import pytest

from kcompat.isr.append_records import DelayedProduce, ProducePartitionResult
from kcompat.protocol.errors import ErrorCode


class _Waiting:
    """A partition whose replication wait ends with ``code``."""

    def __init__(self, topic: str, partition_id: int, code: ErrorCode) -> None:
        self.topic, self.partition_id, self.code = topic, partition_id, code
        self.asked: list[tuple[int, int]] = []

    async def wait_for_replication(self, required: int, timeout_ms: int) -> ErrorCode:
        self.asked.append((required, timeout_ms))
        return self.code


@pytest.mark.parametrize("code", [ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                                  ErrorCode.NOT_LEADER_OR_FOLLOWER])
def test_a_failed_wait_keeps_the_appends_offsets_and_sends_no_message(code):
    late = ProducePartitionResult("t", 0, ErrorCode.NONE, base_offset=40, log_append_time=-1, log_start_offset=3)
    done = ProducePartitionResult("t", 1, ErrorCode.NONE, base_offset=7, log_append_time=-1, log_start_offset=0)
    p0, p1 = _Waiting("t", 0, code), _Waiting("t", 1, ErrorCode.NONE)
    results = asyncio.run(DelayedProduce([late, done], [(late, p0, 45), (done, p1, 9)], 1500).complete())
    assert results == [late, done] and p0.asked == [(45, 1500)] and p1.asked == [(9, 1500)]
    assert (late.error, late.base_offset, late.log_append_time, late.log_start_offset, late.message) == \
        (code, 40, -1, 3, None)
    assert (done.error, done.base_offset, done.log_start_offset, done.message) == (ErrorCode.NONE, 7, 0, None)
