"""A share partition dropped while its state is still being written (the group's last share session
closed right after an acknowledgement: a consumer's final commit on close) is loaded again only
once that write has reached the share coordinator: loaded before (the next consumer's first
fetch), it would hand out again the records the write acknowledges, each delivered twice.

The manager runs against a persister whose writes reach the share coordinator only after a delay,
as a write queued behind another one does."""

from __future__ import annotations

import asyncio
import uuid

from kcompat.broker.share.partitions import SharePartitionManager
from kcompat.broker.share_persister import ReadStateResult
from kcompat.protocol.errors import ErrorCode
from kcompat.share.inflight import AcknowledgeType
from kcompat.share.state_batches import PersistedStateBatch

GROUP, TOPIC_ID, MEMBER = "g", uuid.uuid4(), "m1"
KEY = (GROUP, TOPIC_ID, 0)


class SlowPersister:
    """The share coordinator's state of one key; a write takes effect ``delay_s`` after it is made."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.start_offset = -1
        self.batches: dict[tuple[int, int], PersistedStateBatch] = {}
        self.initialized = False
        self.reads = 0

    async def read_state(self, group_id, topic_id, partition, leader_epoch) -> ReadStateResult:
        self.reads += 1
        if not self.initialized:
            return ReadStateResult(ErrorCode.INVALID_REQUEST, 0, -1, [])
        return ReadStateResult(ErrorCode.NONE, 0, self.start_offset, list(self.batches.values()))

    async def initialize_state(self, group_id, topic_id, partition, state_epoch, start_offset) -> ErrorCode:
        self.initialized, self.start_offset = True, start_offset
        return ErrorCode.NONE

    async def write_state(self, group_id, topic_id, partition, state_epoch, leader_epoch, start_offset, batches,
                          delivery_complete_count=-1) -> ErrorCode:
        await asyncio.sleep(self.delay_s)
        if start_offset >= 0:
            self.start_offset = start_offset
        for b in batches:
            self.batches[(b[0], b[1])] = PersistedStateBatch(*b)
        self.batches = {k: b for k, b in self.batches.items() if b.last_offset >= self.start_offset}
        return ErrorCode.NONE


class Log:
    """What the manager reads of the local partition."""

    topic, is_leader, leader_epoch, log_start_offset, high_watermark = "t", True, 0, 0, 100


def manager(persister: SlowPersister) -> SharePartitionManager:
    log = Log()
    return SharePartitionManager(
        partition_of=lambda topic_id, index: log, persister=persister,
        group_config=lambda group_id: {"share.auto.offset.reset": "earliest"},
        defaults={"group.share.record.lock.duration.ms": 30_000, "group.share.delivery.count.limit": 5,
                  "group.share.partition.max.record.locks": 2000},
        now_ms=lambda: 1_000)


async def _acknowledged_then_idle() -> tuple[int, int | None, SlowPersister]:
    """Acquire offsets 0-9 and accept them; before the write lands the group has no session here
    any more (``drop_group``), and the partition is loaded again: (the reloaded start offset, its
    first fetchable offset, the persister). The acknowledgement's own answer is NONE."""
    persister = SlowPersister(delay_s=0.2)
    m = manager(persister)
    entry = await m._entry(KEY)
    assert [(a.first_offset, a.last_offset) for a in entry.sp.acquire(MEMBER, [(0, 9)], 500, 1_000)] == [(0, 9)]
    results, waits = await m.apply_acknowledgements(GROUP, MEMBER, {(TOPIC_ID, 0): [(0, 9, [AcknowledgeType.ACCEPT])]})
    assert results == {(TOPIC_ID, 0): ErrorCode.NONE}
    m.drop_group(GROUP, still_active=lambda: False)
    reloaded = await m._entry(KEY)
    assert reloaded is not entry
    assert (await m.acknowledged((results, waits))) == {(TOPIC_ID, 0): ErrorCode.NONE}
    m.close()
    return reloaded.sp.start_offset, reloaded.sp.fetch_offset(), persister


def test_a_group_without_sessions_reloads_after_its_last_acknowledgement_is_written():
    start, fetch_from, persister = asyncio.run(_acknowledged_then_idle())
    assert (start, fetch_from) == (10, 10)
    assert persister.start_offset == 10

