"""The transaction runtime over replicated partitions (kcompat.broker.txn_runtime): a
``__transaction_state`` record is answered, replayed and followed by its markers only once
committed; acks=-1 refuses to append below ``min.insync.replicas``; markers count once replicated,
and go by WriteTxnMarkers to partitions other brokers lead; the coordinator is unloaded when its
partition's leadership moves away and reloaded (with the new leader epoch as coordinator epoch)
when it comes back or its epoch changes."""

from __future__ import annotations

import asyncio

from kcompat.broker.txn_runtime import TRANSACTION_STATE_TOPIC
from kcompat.protocol import records as rb
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from kcompat.protocol.messages.end_txn import EndTxnRequest
from kcompat.protocol.messages.init_producer_id import InitProducerIdRequest
from kcompat.txn.state import TxnState
from tests.group.runtime_harness import FOLLOWER, RuntimeBroker, settle, tick

E = ErrorCode
TID = "tid"
TXN = TRANSACTION_STATE_TOPIC


def init(b, tid: str = TID, timeout_ms: int = 60_000):
    req = InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=timeout_ms, producer_id=-1,
                                producer_epoch=-1)
    return b.txn.init_producer_id(b.ctx(4), req)


def add(b, pid: int, epoch: int, partitions, tid: str = TID):
    by_topic: dict[str, list[int]] = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(p)
    R = AddPartitionsToTxnRequest
    req = R(v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[R.AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in by_topic.items()])
    return b.txn.add_partitions_to_txn(b.ctx(3), req)


def end(b, pid: int, epoch: int, commit: bool = True, tid: str = TID):
    req = EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit)
    return b.txn.end_txn(b.ctx(3), req)


def part(b, tid: str = TID) -> int:
    return b.txn.coordinator.partition_for(tid)


def state(b, tid: str = TID):
    m = b.txn.coordinator.metadata(tid)
    return None if m is None or not m.visible else m.state


async def reaches(b, want, ticks: int = 50) -> bool:
    """Whether the transaction reaches state ``want`` within ``ticks`` loop iterations."""
    for _ in range(ticks):
        if state(b) is want:
            return True
        await tick()
    return state(b) is want


def markers(p) -> list[tuple[int, bool, int]]:
    """(producer id, commit, coordinator epoch) of the control batches in a partition's log."""
    out = []
    data = p.log.read(0, 1 << 20, max_offset=p.log_end_offset)
    for pos, h in rb.iter_batches(data):
        if h.is_control:
            for rec in rb.iter_records(memoryview(data)[pos:pos + h.size]):
                out.append((h.producer_id, rb.control_type(rec) == rb.CONTROL_COMMIT,
                            int.from_bytes(bytes(rec.value)[2:6], "big", signed=True)))
    return out


async def open_txn(b, partitions=(("t", 0),)) -> tuple[int, int]:
    r = await settle(init(b))
    assert r.error_code == E.NONE, r
    resp = await settle(add(b, r.producer_id, r.producer_epoch, list(partitions)))
    assert all(p.partition_error_code == 0 for t in resp.results_by_topic_v3_and_below
               for p in t.results_by_partition), resp
    return r.producer_id, r.producer_epoch


def run(tmp_path, scenario, data=None, **config):
    async def main():
        b = RuntimeBroker(tmp_path, data={"t": 2} if data is None else data, **config)
        await b.start()
        try:
            await scenario(b)
        finally:
            b.stop()
    asyncio.run(main())


def test_single_replica_transactions_complete_without_waiting(tmp_path):
    async def scenario(b):
        f = init(b)
        assert f.done() and f.result().error_code == E.NONE
        pid, epoch = await open_txn(b)
        e = end(b, pid, epoch)
        assert e.done() and e.result().error_code == E.NONE
        assert state(b) is TxnState.COMPLETE_COMMIT  # markers and completion written synchronously
        assert markers(b.partition("t", 0)) == [(pid, True, 0)]
    run(tmp_path, scenario)


def test_records_are_answered_and_markers_sent_once_committed(tmp_path):
    async def scenario(b):
        b.replicate(TXN, part(b))
        f = init(b)
        await tick()
        assert not f.done() and state(b) is None  # not replayed yet: not visible
        b.catch_up(TXN, part(b))
        r = await settle(f)
        assert r.error_code == E.NONE and state(b) is TxnState.EMPTY
        a = add(b, r.producer_id, r.producer_epoch, [("t", 0)])
        b.catch_up(TXN, part(b))
        await settle(a)
        e = end(b, r.producer_id, r.producer_epoch)
        await tick()
        assert not e.done() and markers(b.partition("t", 0)) == []  # PrepareCommit not committed: no marker
        b.catch_up(TXN, part(b))
        assert (await settle(e)).error_code == E.NONE
        assert markers(b.partition("t", 0)) == [(r.producer_id, True, 0)]
        await tick()
        assert state(b) is TxnState.PREPARE_COMMIT  # CompleteCommit waits for replication too
        b.catch_up(TXN, part(b))
        assert await reaches(b, TxnState.COMPLETE_COMMIT)
    run(tmp_path, scenario)


def test_below_min_isr_nothing_is_appended_and_the_client_retries(tmp_path):
    async def scenario(b):
        p = b.replicate(TXN, part(b), isr=(1,), min_isr=2)
        before = p.log_end_offset
        r = await settle(init(b))
        assert r.error_code == E.COORDINATOR_NOT_AVAILABLE
        assert p.log_end_offset == before and state(b) is None
    run(tmp_path, scenario)


def test_a_state_write_not_replicated_in_time_fails_and_is_not_applied(tmp_path):
    async def scenario(b):
        b.replicate(TXN, part(b))
        r = await settle(init(b, timeout_ms=300))  # waits the transaction timeout, then gives up
        assert r.error_code == E.COORDINATOR_NOT_AVAILABLE
        m = b.txn.coordinator.metadata(TID)
        assert m is None or (m.pending is None and not m.visible)
    run(tmp_path, scenario)


def test_markers_wait_for_the_replication_of_the_data_partition(tmp_path):
    async def scenario(b):
        pid, epoch = await open_txn(b)
        data = b.replicate("t", 0)
        assert (await settle(end(b, pid, epoch))).error_code == E.NONE
        assert markers(data) == [(pid, True, 0)]
        await tick()
        assert state(b) is TxnState.PREPARE_COMMIT  # the marker is not replicated yet
        b.catch_up("t", 0)
        assert await reaches(b, TxnState.COMPLETE_COMMIT)
    run(tmp_path, scenario)


def test_markers_for_partitions_led_elsewhere_go_by_write_txn_markers(tmp_path):
    async def scenario(b):
        sent = []

        async def fake_send(node, m, tps, timeout_ms):
            sent.append((node, m.producer_id, m.commit, sorted(tps)))
            return {tp: 0 for tp in tps}

        b.txn._send_markers = fake_send
        pid, epoch = await open_txn(b, [("t", 0), ("t", 1)])
        b.image.topics["t"].partitions[1].leader = FOLLOWER  # t-1 is led by broker 2
        assert (await settle(end(b, pid, epoch))).error_code == E.NONE
        assert await reaches(b, TxnState.COMPLETE_COMMIT)
        assert sent == [(FOLLOWER, pid, True, [("t", 1)])]
        assert markers(b.partition("t", 0)) == [(pid, True, 0)] and markers(b.partition("t", 1)) == []
    run(tmp_path, scenario)


def test_leadership_moving_away_unloads_and_coming_back_reloads_with_the_new_epoch(tmp_path):
    async def scenario(b):
        b.replicate(TXN, part(b))
        r = init(b)
        b.catch_up(TXN, part(b))
        r = await settle(r)
        a = add(b, r.producer_id, r.producer_epoch, [("t", 0)])
        b.catch_up(TXN, part(b))
        await settle(a)
        e = end(b, r.producer_id, r.producer_epoch)
        await tick()
        assert not e.done()
        b.move_leadership(TXN, part(b))
        assert (await settle(e)).error_code == E.NOT_COORDINATOR
        coord = b.txn.coordinator
        assert not coord.owns(part(b)) and coord.metadata(TID) is None
        assert not coord._retries and coord.next_deadline() in (None, coord._abort_at, coord._expire_at)
        assert (await settle(init(b))).error_code == E.NOT_COORDINATOR
        assert markers(b.partition("t", 0)) == []
        # back as leader (epoch 2); the PrepareCommit is in the log, above the HW: loaded, and
        # its markers are sent once the loaded log is committed, with the new coordinator epoch
        b.take_leadership(TXN, part(b))
        await b.loaded()
        assert coord.coordinator_epoch(part(b)) == 2
        assert state(b) is TxnState.PREPARE_COMMIT
        await tick()
        assert markers(b.partition("t", 0)) == []
        b.catch_up(TXN, part(b))
        for _ in range(50):
            if markers(b.partition("t", 0)):
                break
            await tick()
        assert markers(b.partition("t", 0)) == [(r.producer_id, True, 2)]
        b.catch_up(TXN, part(b))
        for _ in range(50):
            b.catch_up(TXN, part(b))
            if state(b) is TxnState.COMPLETE_COMMIT:
                break
            await tick()
        assert state(b) is TxnState.COMPLETE_COMMIT
    run(tmp_path, scenario)


def test_a_new_leader_epoch_of_a_partition_still_led_reloads_it(tmp_path):
    async def scenario(b):
        pid, epoch = await open_txn(b)
        coord = b.txn.coordinator
        assert coord.coordinator_epoch(part(b)) == 0
        b.image.topics[TXN].partitions[part(b)].leader_epoch = 4
        b.partition(TXN, part(b)).make_leader(leader_epoch=4, partition_epoch=0, replicas=[1], isr=[1],
                                              now_ms=b.now_ms())
        b.txn.on_partition_hosted(part(b))
        await b.loaded()
        assert coord.coordinator_epoch(part(b)) == 4
        assert state(b) is TxnState.ONGOING
        assert (await settle(end(b, pid, epoch))).error_code == E.NONE
        assert markers(b.partition("t", 0)) == [(pid, True, 4)]
    run(tmp_path, scenario)
