"""The replica fetcher's requests through its fetch session (KIP-227), against a scripted leader:
the first Fetch is full with epoch 0, later ones carry only changed partitions, an incremental
response may answer a partition the request left out (its high watermark moved) and is applied
with the fetch state that partition was planned from, and an answer whose high watermark the
follower could not take (here a truncation for a diverging epoch) makes the next fetch full."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

from kcompat.broker.replica_fetcher import ReplicaFetcher
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.fetch import FetchResponse
from kcompat.protocol.records import build_batch, iter_batches

TID = uuid.UUID(int=7)
R = FetchResponse


class FakeLog:
    def __init__(self) -> None:
        self.log_end_offset = 0
        self.log_start_offset = 0
        self.latest_epoch = None

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return (-1, -1)


class FakePartition:
    def __init__(self, p: int) -> None:
        self.topic, self.partition_id = "t", p
        self.log = FakeLog()
        self.high_watermark = 0
        self.leader_epoch = 1

    def append_as_follower(self, records, now) -> None:
        for _pos, h in iter_batches(bytes(records)):
            self.log.log_end_offset = h.next_offset
        self.log.latest_epoch = 1

    def set_follower_high_watermark(self, hw: int) -> None:
        self.high_watermark = hw

    def truncate_to(self, offset: int, now) -> None:
        self.log.log_end_offset = offset
        self.high_watermark = min(self.high_watermark, offset)


class ScriptedClients:
    """The leader: ``send`` records each request and answers the next scripted response."""

    def __init__(self) -> None:
        self.requests: list = []
        self.answers: asyncio.Queue = asyncio.Queue()

    async def send(self, leader_id, req, version, timeout_s):
        self.requests.append(req)
        return await self.answers.get()

    def close_node(self, leader_id) -> None:
        pass


CONFIG = {"replica.fetch.backoff.ms": 1000, "replica.fetch.wait.max.ms": 500, "replica.fetch.min.bytes": 1,
          "replica.fetch.response.max.bytes": 10 << 20, "replica.fetch.max.bytes": 1 << 20,
          "replica.socket.timeout.ms": 30000}


def manager(clients):
    topic = SimpleNamespace(topic_id=TID, partitions={p: SimpleNamespace(isr=[1, 2]) for p in (0, 1)})
    context = SimpleNamespace(node_id=2, config=SimpleNamespace(get=CONFIG.__getitem__), now_ms=lambda: 1000,
                              image=SimpleNamespace(topics={"t": topic}), is_shutting_down=lambda: False)
    quota = SimpleNamespace(should_throttle=lambda *a: False, is_throttled=lambda *a: False)
    m = SimpleNamespace(context=context, follower_quota=quota, clients=clients, broker_epoch=lambda: 5,
                        closed=False, remote_log=None, fetchers={})
    return m


def answer(session_id: int, parts: list, error=ErrorCode.NONE):
    return R(error_code=error, session_id=session_id, responses=[R.FetchableTopicResponse(topic_id=TID, partitions=[
        R.PartitionData(partition_index=p, error_code=0, high_watermark=hw, log_start_offset=0,
                        records=records, diverging_epoch=diverging or R.EpochEndOffset(epoch=-1, end_offset=-1))
        for p, hw, records, diverging in parts])] if parts else [])


def batch(base: int, n: int) -> bytes:
    return build_batch([(1, None, b"v", ()) for _ in range(n)], base_offset=base, partition_leader_epoch=1)


async def next_request(clients, n: int):
    while len(clients.requests) < n:
        await asyncio.sleep(0.001)
    return clients.requests[n - 1]


def test_session_requests_and_responses_through_the_fetcher():
    async def run():
        clients = ScriptedClients()
        m = manager(clients)
        f = ReplicaFetcher(m, leader_id=1)
        m.fetchers[1] = f
        parts = [FakePartition(0), FakePartition(1)]
        for p in parts:
            f.add(p, 1)
        try:
            req = await next_request(clients, 1)
            assert (req.session_id, req.session_epoch) == (0, 0)
            assert sorted(p.partition for t in req.topics for p in t.partitions) == [0, 1]
            await clients.answers.put(answer(55, [(0, 0, None, None), (1, 0, None, None)]))

            req = await next_request(clients, 2)
            assert (req.session_id, req.session_epoch, req.topics, req.forgotten_topics_data) == (55, 1, [], [])
            # partition 1 was not in the request, yet the leader answers it: records and a new HW
            await clients.answers.put(answer(55, [(1, 3, batch(0, 3), None)]))

            req = await next_request(clients, 3)
            assert parts[1].log.log_end_offset == 3 and parts[1].high_watermark == 3
            assert (req.session_id, req.session_epoch) == (55, 2)
            assert [(p.partition, p.fetch_offset) for t in req.topics for p in t.partitions] == [(1, 3)]
            # a diverging epoch for partition 1: truncated, its HW not taken: the next fetch is full
            await clients.answers.put(answer(55, [(1, 3, None, R.EpochEndOffset(epoch=0, end_offset=1))]))

            req = await next_request(clients, 4)
            assert parts[1].log.log_end_offset == 1
            assert (req.session_id, req.session_epoch) == (55, 0)
            assert sorted((p.partition, p.fetch_offset) for t in req.topics for p in t.partitions) == [(0, 0), (1, 1)]
            await clients.answers.put(answer(0, [], ErrorCode.FETCH_SESSION_ID_NOT_FOUND))

            req = await next_request(clients, 5)
            assert (req.session_id, req.session_epoch) == (0, 0)
        finally:
            f.stop()
    asyncio.run(run())
