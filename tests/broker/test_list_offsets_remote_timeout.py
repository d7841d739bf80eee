"""ListOffsets' remote timestamp lookups are bounded as Kafka 4.3.1's ``DelayedRemoteListOffsets``:
by v10's TimeoutMs (KIP-1075) when positive, else ``remote.list.offsets.request.timeout.ms``; a
partition whose lookup is not done by then answers REQUEST_TIMED_OUT, the others their result.
The handler runs against a remote log whose lookup for one partition never finishes (a tiered
broker's own lookups are in tests/tiered/test_tiered_broker.py)."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

from kcompat.broker.handlers import list_offsets
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.list_offsets import ListOffsetsRequest as Q, ListOffsetsResponse as R


class StuckRemoteLog:
    """Partition 0's lookup answers (offset 7, timestamp 70) at once, partition 1's never."""

    def __init__(self) -> None:
        self.cancelled = []

    async def offset_for_timestamp(self, p, timestamp_ms):
        if p.partition_id == 0:
            return 7, 70
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.append(p.partition_id)
            raise


def _lookups(remote_log, timeout_ms):
    services = SimpleNamespace(remote_log=remote_log)
    parts = [list_offsets._RemoteLookup(SimpleNamespace(topic="t", partition_id=i, leader_epoch=3), i, 50, 100, None)
             for i in (0, 1)]
    topics = [R.ListOffsetsTopicResponse(name="t", partitions=parts)]
    return asyncio.run(list_offsets._with_remote_lookups(services, topics, timeout_ms))


def test_an_unfinished_remote_lookup_is_request_timed_out_the_others_answer():
    remote_log = StuckRemoteLog()
    start = time.monotonic()
    resp = _lookups(remote_log, 200)
    assert time.monotonic() - start >= 0.2
    assert [(p.partition_index, p.error_code, p.offset, p.timestamp, p.leader_epoch)
            for p in resp.topics[0].partitions] == [(0, 0, 7, 70, 3), (1, ErrorCode.REQUEST_TIMED_OUT, -1, -1, -1)]
    assert remote_log.cancelled == [1]


def test_the_timeout_is_v10s_timeout_ms_when_positive_else_the_broker_config():
    services = SimpleNamespace(config={"remote.list.offsets.request.timeout.ms": 30000})
    for version, timeout_ms, expected in ((9, 0, 30000), (10, 1500, 1500), (10, 0, 30000), (11, -1, 30000)):
        req = Q(replica_id=-1, timeout_ms=timeout_ms, topics=[])
        assert list_offsets._remote_timeout_ms(services, req, version) == expected
