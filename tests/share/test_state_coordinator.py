"""The share coordinator as a pure state machine (:mod:`kcompat.share.state_coordinator`): every
share-state API and its error codes as Kafka 4.3's ShareCoordinatorShard answers them, the
snapshot cadence, the batch combiner (Kafka's PersisterStateBatchCombiner cases and properties),
keys and their partition, pruning offsets, cold snapshots, failed writes, and (hypothesis) that
any sequence of operations replayed from its records gives the state the live coordinator had."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings, strategies as st

from kcompat.coordinator.java_strings import java_string_hash
from kcompat.protocol.errors import ErrorCode as E
from kcompat.protocol.messages.delete_share_group_state import DeleteShareGroupStateRequest as DelQ
from kcompat.protocol.messages.initialize_share_group_state import InitializeShareGroupStateRequest as InitQ
from kcompat.protocol.messages.read_share_group_state import ReadShareGroupStateRequest as ReadQ
from kcompat.protocol.messages.read_share_group_state_summary import ReadShareGroupStateSummaryRequest as SumQ
from kcompat.protocol.messages.write_share_group_state import WriteShareGroupStateRequest as WriteQ
from kcompat.share import state_records as sc
from kcompat.share.state_batches import PersistedStateBatch as B, combine_state_batches
from kcompat.share.state_coordinator import ShareKey, ShareStateConfig, ShareStateCoordinator

T = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
T2 = uuid.UUID(int=7)
G = "group1"


class Harness:
    """One coordinator owning every partition of a small ``__share_group_state``; ``commit``
    appends a result's records to an in-memory log (offsets per partition) and replays them."""

    def __init__(self, *, per_snapshot: int = 500, partitions: int = 1, exists=None, cold_ms: int = 10_000):
        self.config = ShareStateConfig(num_partitions=partitions, snapshot_update_records_per_snapshot=per_snapshot,
                                       cold_partition_snapshot_interval_ms=cold_ms)
        self.exists = exists or (lambda t, p: t in (T, T2) and 0 <= p < 8)
        self.c = ShareStateCoordinator(self.config, topic_partition_exists=lambda t, p: self.exists(t, p))
        self.now = 1_000
        self.logs: dict[int, list] = {p: [] for p in range(partitions)}
        for p in range(partitions):
            self.c.load(p, [], self.now)

    def run(self, method: str, req, version: int = 0, *, commit: bool = True):
        result = getattr(self.c, method)("reply", req, version, self.now)
        if commit:
            self.commit(result)
        [(reply_to, response)] = result.replies
        assert reply_to == "reply"
        return result, response

    def commit(self, result) -> None:
        for r in result.records:
            log = self.logs[r.partition]
            r.offset = len(log)
            log.append((r.offset, r.key, r.value))
            self.c.replay(r)

    def reloaded(self) -> ShareStateCoordinator:
        c = ShareStateCoordinator(self.config, topic_partition_exists=self.exists)
        for p, log in self.logs.items():
            c.load(p, list(log), self.now)
        return c

    # -- one partition, one key shortcuts ---------------------------------------------------------

    def init(self, state_epoch=0, start_offset=-1, *, group=G, topic=T, partition=0, commit=True):
        result, resp = self.run("initialize_state", InitQ(group_id=group, topics=[InitQ.InitializeStateData(
            topic_id=topic, partitions=[InitQ.PartitionData(partition=partition, state_epoch=state_epoch,
                                                            start_offset=start_offset)])]), commit=commit)
        return result, resp.results[0].partitions[0]

    def write(self, batches=(), *, start_offset=0, state_epoch=0, leader_epoch=0, dcc=0, version=1, group=G,
              topic=T, partition=0, commit=True):
        req = WriteQ(group_id=group, topics=[WriteQ.WriteStateData(topic_id=topic, partitions=[WriteQ.PartitionData(
            partition=partition, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start_offset,
            delivery_complete_count=dcc, state_batches=[WriteQ.StateBatch(
                first_offset=b[0], last_offset=b[1], delivery_state=b[2], delivery_count=b[3]) for b in batches])])])
        result, resp = self.run("write_state", req, version, commit=commit)
        return result, resp.results[0].partitions[0]

    def read(self, leader_epoch=0, *, group=G, topic=T, partition=0, commit=True):
        result, resp = self.run("read_state", ReadQ(group_id=group, topics=[ReadQ.ReadStateData(
            topic_id=topic, partitions=[ReadQ.PartitionData(partition=partition, leader_epoch=leader_epoch)])]),
            commit=commit)
        return result, resp.results[0].partitions[0]

    def summary(self, *, version=1, group=G, topic=T, partition=0):
        _, resp = self.run("read_state_summary", SumQ(group_id=group, topics=[SumQ.ReadStateSummaryData(
            topic_id=topic, partitions=[SumQ.PartitionData(partition=partition, leader_epoch=0)])]), version)
        return resp.results[0].partitions[0]

    def delete(self, *partitions, group=G, topic=T, commit=True):
        result, resp = self.run("delete_state", DelQ(group_id=group, topics=[DelQ.DeleteStateData(
            topic_id=topic, partitions=[DelQ.PartitionData(partition=p) for p in partitions or (0,)])]),
            commit=commit)
        return result, resp.results[0].partitions

    def state(self, partition=0, group=G, topic=T):
        return self.c.state(group, topic, partition)


def decoded(record):
    return sc.decode_record(record.key, record.value)


def batches_of(pr):
    return [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in pr.state_batches]


# ----------------------------------------------------------------------------------------------
# keys and partitions
# ----------------------------------------------------------------------------------------------

def test_coordinator_key_is_kafkas_string_and_partition_its_java_hash():
    key = ShareKey(G, T, 3)
    tid = sc.kafka_uuid_str(T)
    assert len(tid) == 22 and "=" not in tid and sc.kafka_uuid_parse(tid) == T
    assert sc.coordinator_key(*key) == f"{G}:{tid}:3"
    h = java_string_hash(f"{G}:{tid}:3")
    assert sc.partition_for(key, 50) == abs(h) % 50
    # the FindCoordinator string form lands on the same partition, normalized as Kafka parses it
    assert sc.partition_for(f"{G}:{tid}:3", 50) == sc.partition_for(key, 50)
    assert sc.partition_for(f"  {G} :{tid}:3", 50) == sc.partition_for(key, 50)  # the group id trimmed
    assert sc.parse_share_key(f" {G}\t:{tid}:+3:") == ShareKey(G, T, 3)  # Java's trim, split, parseInt


def test_java_hash_of_a_known_string():
    # "Aa" and "BB" collide in Java (2112); 31 * h overflows as an int32
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("polygenelubricants") == -2**31
    assert sc.partition_for.__doc__  # Utils.abs(MIN_VALUE) is 0, as the txn coordinator's


@pytest.mark.parametrize("key", [
    "", "g", "g:x", "g:x:1:2", f":{sc.kafka_uuid_str(T)}:1", f"  :{sc.kafka_uuid_str(T)}:1",
    "g:not-a-uuid:1", f"g:{sc.kafka_uuid_str(T)}:x", f"g:{sc.kafka_uuid_str(T)}:1.5",
    f"g:{sc.kafka_uuid_str(T)}:99999999999", f"g:{sc.kafka_uuid_str(T)}", "g:AAAAAAAAAAAAAAAAAAAAAAAAAAAA:1",
])
def test_invalid_share_keys_are_refused(key):
    with pytest.raises(ValueError):
        sc.parse_share_key(key)


def test_record_formats_round_trip():
    h = Harness()
    result, _ = h.init(3, 10)
    [rec] = result.records
    assert rec.key[:2] == b"\x00\x00" and rec.value[:2] == b"\x00\x00"  # snapshot key type 0, value v0
    snapshot, key, value = decoded(rec)
    assert snapshot and key == ShareKey(G, T, 0)
    assert (value.snapshot_epoch, value.state_epoch, value.leader_epoch, value.start_offset,
            value.delivery_complete_count, value.create_timestamp, value.write_timestamp, value.state_batches) == \
        (0, 3, 0, 10, 0, h.now, h.now, [])
    result, _ = h.write([(10, 12, 2, 1)], start_offset=10, state_epoch=3)
    assert result.records[0].key[:2] == b"\x00\x01"
    assert sc.decode_record(b"\x00\x07abc", b"") is None  # an unknown record type is skipped
    with pytest.raises(sc.RecordFormatError):
        sc.decode_record(b"\x00\x00\x00", None)


# ----------------------------------------------------------------------------------------------
# InitializeShareGroupState
# ----------------------------------------------------------------------------------------------

def test_initialize_writes_a_fresh_snapshot():
    h = Harness()
    result, pr = h.init(5, 10)
    assert (pr.error_code, pr.error_message) == (0, None)
    s = h.state()
    assert (s.state_epoch, s.start_offset, s.leader_epoch, s.delivery_complete_count, s.batches) == (5, 10, 0, 0, ())
    h.write([(10, 20, 2, 1)], start_offset=10, state_epoch=5)
    # again (an offsets reset): a new snapshot epoch, the batches gone, the same state epoch allowed
    result, pr = h.init(5, -1)
    assert pr.error_code == 0
    s = h.state()
    assert (s.snapshot_epoch, s.start_offset, s.delivery_complete_count, s.batches) == (1, -1, -1, ())


def test_initialize_errors():
    h = Harness()
    result, pr = h.init(partition=-1)
    assert (pr.error_code, pr.error_message, result.records) == (E.INVALID_REQUEST, sc.NEGATIVE_PARTITION_ID, [])
    h.init(5)
    result, pr = h.init(4)
    assert (pr.error_code, result.records) == (E.FENCED_STATE_EPOCH, [])
    assert pr.error_message == ("The share coordinator rejected the request because the share-group state epoch "
                                "did not match.")
    result, pr = h.init(-1)  # -1: no state epoch given, no fence (Kafka 4.3)
    assert pr.error_code == 0
    result, pr = h.init(partition=9)
    assert (pr.error_code, result.records) == (E.UNKNOWN_TOPIC_OR_PARTITION, [])
    result, pr = h.init(topic=uuid.UUID(int=99))
    assert pr.error_code == E.UNKNOWN_TOPIC_OR_PARTITION


# ----------------------------------------------------------------------------------------------
# WriteShareGroupState and the snapshot cadence
# ----------------------------------------------------------------------------------------------

def test_write_to_an_uninitialized_partition_is_invalid():
    h = Harness()
    result, pr = h.write([(0, 10, 0, 1)])
    assert (pr.error_code, pr.error_message, result.records) == (E.INVALID_REQUEST, sc.WRITE_UNINITIALIZED, [])
    assert h.state() is None


def test_write_updates_then_snapshots_every_n_updates():
    h = Harness(per_snapshot=3)
    h.init(0, 0)
    kinds = []
    for i in range(9):
        result, pr = h.write([(i * 10, i * 10 + 9, 2, 1)], start_offset=0, dcc=(i + 1) * 10)
        assert pr.error_code == 0
        kinds.append(decoded(result.records[0])[0])
    # Kafka's count: the first update after a snapshot is counted 0 (an absent entry), and a
    # snapshot resets it only once it reached the limit
    assert kinds == [False, False, False, False, True, False, False, False, True]
    s = h.state()
    assert s.snapshot_epoch == 2 and s.delivery_complete_count == 90
    assert s.batches == (B(0, 89, 2, 1),)  # adjacent batches of equal state combined


def test_snapshot_every_write_with_zero_updates_per_snapshot_keeps_unacknowledged_batches():
    """Kafka's testNonSequentialBatchUpdates: the start offset moves past an acknowledged batch
    while a later one is acknowledged; the batch between them is not lost."""
    h = Harness(per_snapshot=0)
    h.init(0, -1)
    result, _ = h.read(0)
    assert result.records == []  # initialized at leader epoch 0 already
    h.write([(0, 10, 0, 1)], start_offset=0)
    result, _ = h.write([(100, 109, 1, 1), (110, 119, 1, 2), (120, 129, 1, 0)], start_offset=100)
    assert decoded(result.records[0])[2].snapshot_epoch == 2
    h.write([(100, 109, 2, 1)], start_offset=-1, dcc=10)
    result, _ = h.write([(120, 129, 2, 1)], start_offset=110, dcc=10)
    snapshot, _, value = decoded(result.records[0])
    assert snapshot and value.snapshot_epoch == 4 and value.start_offset == 110
    assert h.state().batches == (B(110, 119, 1, 2), B(120, 129, 2, 1))


def test_write_fencing():
    h = Harness()
    h.init(1, 0)
    h.read(3)
    result, pr = h.write(leader_epoch=2, state_epoch=1)
    assert (pr.error_code, result.records) == (E.FENCED_LEADER_EPOCH, [])
    assert pr.error_message == "The leader epoch in the request is older than the epoch on the broker."
    result, pr = h.write(leader_epoch=5, state_epoch=0)
    assert (pr.error_code, result.records) == (E.FENCED_STATE_EPOCH, [])
    _, pr = h.write(leader_epoch=-1, state_epoch=-1)  # -1: not given, not fenced
    assert pr.error_code == 0
    _, pr = h.write(leader_epoch=3, state_epoch=1, partition=-1)
    assert (pr.error_code, pr.error_message) == (E.INVALID_REQUEST, sc.NEGATIVE_PARTITION_ID)


def test_write_never_raises_the_leader_epoch_a_read_does():
    h = Harness()
    h.init(0, 0)
    h.write(leader_epoch=7)
    assert h.state().leader_epoch == 0 and h.state().fence_leader_epoch == 0
    result, pr = h.read(7)
    assert pr.error_code == 0 and len(result.records) == 1
    assert (h.state().leader_epoch, h.state().fence_leader_epoch) == (7, 7)


def test_write_to_a_deleted_topic_partition_is_unknown():
    h = Harness()
    h.init(0, 0)
    h.exists = lambda t, p: False
    _, pr = h.write()
    assert pr.error_code == E.UNKNOWN_TOPIC_OR_PARTITION


def test_write_v0_has_no_delivery_complete_count():
    h = Harness()
    h.init(0, 0)
    h.write([(0, 4, 2, 1)], start_offset=5, dcc=3, version=0)
    assert h.state().delivery_complete_count == -1


def test_update_batches_are_pruned_at_the_start_offset():
    h = Harness()
    h.init(0, 0)
    h.write([(0, 9, 0, 1), (10, 19, 0, 1)], start_offset=0)
    h.write([(12, 14, 2, 1)], start_offset=12)
    assert h.state().start_offset == 12
    assert h.state().batches == (B(12, 14, 2, 1), B(15, 19, 0, 1))


# ----------------------------------------------------------------------------------------------
# ReadShareGroupState
# ----------------------------------------------------------------------------------------------

def test_read_returns_the_state_and_records_a_higher_leader_epoch():
    h = Harness()
    h.init(2, -1)
    result, pr = h.read(1)
    assert (pr.error_code, pr.state_epoch, pr.start_offset, batches_of(pr)) == (0, 2, -1, [])
    [rec] = result.records
    snapshot, _, value = decoded(rec)
    assert not snapshot and (value.leader_epoch, value.start_offset, value.delivery_complete_count,
                             value.state_batches) == (1, -1, -1, [])
    h.write([(5, 9, 2, 1)], start_offset=5, leader_epoch=1, state_epoch=2)
    result, pr = h.read(1)
    assert result.records == [] and (pr.start_offset, batches_of(pr)) == (5, [(5, 9, 2, 1)])
    result, pr = h.read(-1)
    assert result.records == [] and pr.error_code == 0


def test_read_errors():
    h = Harness()
    result, pr = h.read(1)
    assert (pr.error_code, pr.error_message, result.records) == (E.INVALID_REQUEST, sc.READ_UNINITIALIZED, [])
    h.init()
    h.read(5)
    result, pr = h.read(3)
    assert (pr.error_code, result.records) == (E.FENCED_LEADER_EPOCH, [])
    _, pr = h.read(5, partition=-1)
    assert pr.error_code == E.INVALID_REQUEST
    h.exists = lambda t, p: False
    _, pr = h.read(5)
    assert pr.error_code == E.UNKNOWN_TOPIC_OR_PARTITION


# ----------------------------------------------------------------------------------------------
# ReadShareGroupStateSummary, DeleteShareGroupState
# ----------------------------------------------------------------------------------------------

def test_summary():
    h = Harness()
    pr = h.summary()
    assert (pr.error_code, pr.start_offset, pr.state_epoch, pr.leader_epoch, pr.delivery_complete_count) == \
        (0, -1, 0, 0, -1)
    h.init(4, 0)
    h.read(2)
    h.write([(0, 9, 2, 1)], start_offset=10, leader_epoch=2, state_epoch=4, dcc=10)
    pr = h.summary()
    assert (pr.start_offset, pr.state_epoch, pr.leader_epoch, pr.delivery_complete_count) == (10, 4, 2, 10)
    assert h.summary(partition=-1).error_code == E.INVALID_REQUEST
    assert h.summary(partition=9).error_code == E.UNKNOWN_TOPIC_OR_PARTITION


def test_delete_writes_a_tombstone_and_forgets_the_key():
    h = Harness()
    result, prs = h.delete(0)
    assert [pr.error_code for pr in prs] == [0] and result.records == []  # nothing stored: nothing written
    h.init(1, 0)
    h.write([(0, 3, 2, 1)], start_offset=0)
    result, prs = h.delete(0, 1)
    assert [pr.error_code for pr in prs] == [0, 0]
    [rec] = result.records
    assert rec.value is None and decoded(rec) == (True, ShareKey(G, T, 0), None)
    assert h.state() is None
    _, pr = h.write()
    assert pr.error_code == E.INVALID_REQUEST
    h.init(0, 0)  # a new state after deletion starts its epochs again
    assert h.state().snapshot_epoch == 0
    assert h.reloaded().state(G, T, 0) == h.state()
    _, prs = h.delete(-1, 9)
    assert [pr.error_code for pr in prs] == [E.INVALID_REQUEST, E.UNKNOWN_TOPIC_OR_PARTITION]


# ----------------------------------------------------------------------------------------------
# requests as a whole: ownership, empty requests, several keys
# ----------------------------------------------------------------------------------------------

def test_keys_of_partitions_not_owned_loading_or_after_shutdown():
    h = Harness(partitions=2)
    key_p = {p: next(i for i in range(8) if sc.partition_for(ShareKey(G, T, i), 2) == p) for p in (0, 1)}
    h.c.unload(1)
    _, pr = h.init(partition=key_p[1])
    assert (pr.error_code, pr.error_message) == (E.NOT_COORDINATOR, "Unable to initialize share group state: "
                                                 + "This is not the correct coordinator.")
    h.c.begin_loading(1)
    _, pr = h.init(partition=key_p[1])
    assert pr.error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    _, pr = h.init(partition=key_p[0])
    assert pr.error_code == 0
    h.c.shutdown()
    _, pr = h.read(partition=key_p[0])
    assert pr.error_code == E.COORDINATOR_NOT_AVAILABLE


@pytest.mark.parametrize("req", [
    ReadQ(group_id=G, topics=[]), ReadQ(group_id="", topics=[ReadQ.ReadStateData(topic_id=T, partitions=[
        ReadQ.PartitionData(partition=0)])]), ReadQ(group_id=G, topics=[ReadQ.ReadStateData(topic_id=T, partitions=[])]),
])
def test_empty_requests_get_an_empty_response(req):
    h = Harness()
    result, resp = h.run("read_state", req)
    assert resp.results == [] and result.records == []


def test_one_request_for_several_keys_and_topics():
    h = Harness(partitions=4)
    req = InitQ(group_id=G, topics=[
        InitQ.InitializeStateData(topic_id=T, partitions=[InitQ.PartitionData(partition=p, state_epoch=1,
                                                                              start_offset=0) for p in range(4)]),
        InitQ.InitializeStateData(topic_id=T2, partitions=[InitQ.PartitionData(partition=0, state_epoch=1,
                                                                               start_offset=0)])])
    result, resp = h.run("initialize_state", req)
    assert [(t.topic_id, [p.partition for p in t.partitions]) for t in resp.results] == [(T, [0, 1, 2, 3]), (T2, [0])]
    assert len(result.records) == 5
    assert {r.partition for r in result.records} == {sc.partition_for(r.share_key, 4) for r in result.records}
    for p in range(4):
        assert h.state(p).state_epoch == 1


# ----------------------------------------------------------------------------------------------
# uncommitted writes, failed writes
# ----------------------------------------------------------------------------------------------

def test_a_snapshot_computed_before_an_update_committed_includes_it():
    h = Harness(per_snapshot=1)
    h.init(0, 0)
    r1, _ = h.write([(0, 4, 2, 1)], start_offset=0, commit=False)   # update, not committed yet
    r2, _ = h.write([(5, 9, 2, 1)], start_offset=0, commit=False)   # counted: update
    r3, _ = h.write([(10, 14, 0, 1)], start_offset=0, commit=False)  # snapshot
    assert [decoded(r.records[0])[0] for r in (r1, r2, r3)] == [False, False, True]
    assert h.c.state(G, T, 0, committed=True).batches == ()
    for r in (r1, r2, r3):
        h.commit(r)
    assert h.state().batches == (B(0, 9, 2, 1), B(10, 14, 0, 1))
    assert h.c.state(G, T, 0, committed=True) == h.state() == h.reloaded().state(G, T, 0)


def test_a_failed_write_is_undone_and_answered_with_a_coordinator_error():
    h = Harness()
    h.init(0, 0)
    h.write([(0, 4, 2, 1)], start_offset=0)
    before = h.state()
    result, _ = h.write([(5, 9, 2, 1)], start_offset=5, commit=False)
    r2, _ = h.write([(10, 12, 0, 1)], start_offset=-1, commit=False)
    assert h.state().batches == (B(5, 9, 2, 1), B(10, 12, 0, 1))
    replaced = h.c.write_failed(result, list(result.records), int(E.NOT_ENOUGH_REPLICAS), h.now)
    [(_, resp)] = replaced.replies
    pr = resp.results[0].partitions[0]
    assert (pr.error_code, pr.error_message) == (E.COORDINATOR_NOT_AVAILABLE, "Unable to write share group state: "
                                                 + "The coordinator is not available.")
    assert h.state().batches == (B(0, 4, 2, 1), B(10, 12, 0, 1))  # the later pending write stays
    h.c.write_failed(r2, list(r2.records), int(E.NOT_LEADER_OR_FOLLOWER), h.now)
    assert h.state() == before == h.c.state(G, T, 0, committed=True)
    # a reply that only waited for others' writes (failed is empty) is answered with the error too
    result, _ = h.read(0, commit=False)
    replaced = h.c.write_failed(result, [], int(E.REQUEST_TIMED_OUT), h.now)
    assert replaced.replies[0][1].results[0].partitions[0].error_code == E.COORDINATOR_NOT_AVAILABLE


# ----------------------------------------------------------------------------------------------
# pruning offsets, cold snapshots, deleted topics
# ----------------------------------------------------------------------------------------------

def test_tracker_kafka_semantics():
    t = sc.OffsetsTracker()
    assert t.last_redundant_offset() is None
    k1, k2, k3 = (ShareKey(G, T, i) for i in range(3))
    t.update(k1, 0, False)
    assert t.last_redundant_offset() is None  # 0: nothing to prune
    t.update(k2, 1, False)
    t.update(k1, 2, False)
    assert t.last_redundant_offset() == 1
    t.update(k2, 5, False)
    assert t.last_redundant_offset() == 2
    t.update(k3, 6, True)  # a tombstone counts, then the key is gone
    assert t.last_redundant_offset() == 2
    t.update(k1, 7, True)
    t.update(k2, 8, True)
    assert t.last_redundant_offset() == 8


def test_last_redundant_offset_follows_snapshots_not_updates():
    h = Harness(per_snapshot=2)
    h.init(0, 0, partition=0)       # offset 0
    h.init(0, 0, partition=1)       # offset 1
    assert h.c.last_redundant_offset(0) is None
    for _ in range(4):              # 2-5: updates, then a snapshot of key 0 at offset 5
        h.write([(0, 1, 2, 1)], partition=0)
    assert decoded_last(h)[0]
    assert h.c.last_redundant_offset(0) == 1
    h.init(0, 0, partition=1)       # offset 6: key 1's snapshot, key 0's latest is 5
    assert h.c.last_redundant_offset(0) == 5
    h.delete(0, 1)                  # tombstones 7, 8
    assert h.c.last_redundant_offset(0) == 8
    assert h.reloaded().last_redundant_offset(0) == 8


def decoded_last(h, partition=0):
    _, key, value = h.logs[partition][-1]
    return sc.decode_record(key, value)


def test_cold_keys_are_snapshotted_again_once():
    h = Harness(cold_ms=10_000)
    h.init(0, 0, partition=0)                   # written at 1 000
    h.now += 5_000
    h.init(0, 0, partition=1)                   # written at 6 000
    assert h.c.next_deadline() == 1_000 + 10_000
    h.now = 13_000
    result = h.c.poll(h.now)
    [rec] = result.records                      # only key 0 has not been written for 10 s
    snapshot, key, value = decoded(rec)
    assert snapshot and key.partition == 0 and value.snapshot_epoch == 1
    assert (value.create_timestamp, value.write_timestamp) == (1_000, 13_000)
    h.commit(result)
    assert h.c.next_deadline() == 23_000
    h.now = 23_001
    result = h.c.poll(h.now)
    h.commit(result)
    assert sorted(decoded(r)[1].partition for r in result.records) == [0, 1]
    h.now = 33_002
    assert h.c.poll(h.now).records == []  # every key cold-snapshotted: nothing changes any more


def test_deleted_topics_get_tombstones():
    h = Harness()
    h.init(0, 0, topic=T, partition=0)
    h.init(0, 0, topic=T2, partition=0)
    result = h.c.on_topics_deleted([T], h.now)
    assert [decoded(r) for r in result.records] == [(True, ShareKey(G, T, 0), None)]
    h.commit(result)
    assert h.state(topic=T) is None and h.state(topic=T2) is not None


# ----------------------------------------------------------------------------------------------
# the batch combiner
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("so_far,new,expected,start", [
    ([(100, 130, 0, 1)], [], [(120, 130, 0, 1)], 120),
    ([], [(100, 130, 0, 1)], [(120, 130, 0, 1)], 120),
    ([], [], [], 120),
    ([(100, 110, 0, 1)], [(100, 110, 0, 1)], [(100, 110, 0, 1)], -1),
    ([(100, 110, 0, 1)], [(100, 105, 0, 1)], [(100, 110, 0, 1)], -1),
    ([(100, 110, 0, 1)], [(105, 108, 0, 1)], [(100, 110, 0, 1)], -1),
    ([(100, 110, 0, 1)], [(111, 115, 0, 1)], [(100, 115, 0, 1)], -1),
    ([(100, 110, 0, 1), (121, 130, 0, 1)], [(111, 119, 2, 2), (116, 123, 2, 2)],  # Kafka's expected result
     [(100, 110, 0, 1), (111, 123, 2, 2), (124, 130, 0, 1)], -1),                   # loses 124-130 (test not run)
    ([(100, 110, 0, 1)], [(101, 105, 1, 2), (101, 115, 2, 2), (101, 120, 3, 2)],
     [(100, 100, 0, 1), (101, 120, 3, 2)], -1),
    ([(100, 110, 0, 1), (121, 130, 0, 1)], [(111, 119, 2, 2), (116, 123, 2, 2)],
     [(120, 123, 2, 2), (124, 130, 0, 1)], 120),
    ([(111, 120, 0, 1)], [(111, 113, 0, 2), (114, 114, 2, 1), (115, 119, 0, 2)],
     [(111, 113, 0, 2), (114, 114, 2, 1), (115, 119, 0, 2), (120, 120, 0, 1)], -1),
    ([(100, 110, 0, 3)], [(100, 110, 0, 1)], [(100, 110, 0, 3)], -1),
    ([(100, 110, 0, 1)], [(100, 105, 0, 2)], [(100, 105, 0, 2), (106, 110, 0, 1)], -1),
    ([(100, 110, 0, 3)], [(100, 115, 0, 1)], [(100, 110, 0, 3), (111, 115, 0, 1)], -1),
    ([(100, 115, 0, 1)], [(105, 110, 1, 1)], [(100, 104, 0, 1), (105, 110, 1, 1), (111, 115, 0, 1)], -1),
    ([(100, 115, 1, 1)], [(105, 110, 0, 1)], [(100, 115, 1, 1)], -1),
    ([(100, 110, 0, 1)], [(105, 115, 0, 2)], [(100, 104, 0, 1), (105, 115, 0, 2)], -1),
])
def test_combiner_matches_kafkas_cases(so_far, new, expected, start):
    assert combine_state_batches(so_far, new, start) == [B(*b) for b in expected]


batch = st.builds(lambda f, n, s, c: (f, f + n, s, c), st.integers(0, 40), st.integers(0, 12),
                  st.sampled_from([0, 2, 4]), st.integers(0, 3))


@settings(max_examples=400, deadline=None)
@given(st.lists(batch, max_size=6), st.lists(batch, max_size=6), st.sampled_from([-1, 0, 5, 17, 30]))
def test_combiner_properties(so_far, new, start):
    """Sorted, non-overlapping, covering exactly the offsets at or above the start offset that an
    input covers, each with the highest (delivery count, delivery state) any input gives it."""
    out = combine_state_batches(so_far, new, start)
    assert all(b.first_offset <= b.last_offset for b in out)
    assert all(a.last_offset < b.first_offset for a, b in zip(out, out[1:]))
    best: dict[int, tuple[int, int]] = {}
    for f, l, s, c in so_far + new:
        for o in range(max(f, start), l + 1):
            best[o] = max(best.get(o, (-1, -1)), (c, s))
    got = {o: (b.delivery_count, b.delivery_state) for b in out for o in range(b.first_offset, b.last_offset + 1)}
    assert got == best
    # the order the writes arrive in does not matter
    assert combine_state_batches(new, so_far, start) == out


# ----------------------------------------------------------------------------------------------
# replay equals live (hypothesis)
# ----------------------------------------------------------------------------------------------

op = st.one_of(
    st.tuples(st.just("init"), st.integers(0, 3), st.sampled_from([-1, 0, 50]), st.integers(0, 2)),
    st.tuples(st.just("write"), st.lists(batch, max_size=4), st.sampled_from([-1, 0, 10, 25]), st.integers(0, 2)),
    st.tuples(st.just("read"), st.integers(-1, 4), st.just(0), st.integers(0, 2)),
    st.tuples(st.just("delete"), st.just(0), st.just(0), st.integers(0, 2)),
    st.tuples(st.just("cold"), st.just(0), st.just(0), st.just(0)),
    st.tuples(st.just("fail"), st.lists(batch, max_size=2), st.just(0), st.integers(0, 2)),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(op, max_size=40), st.sampled_from([0, 1, 3, 500]))
def test_replaying_the_records_gives_the_live_state(ops, per_snapshot):
    h = Harness(per_snapshot=per_snapshot, partitions=2, cold_ms=1_000)
    for kind, a, b, partition in ops:
        h.now += 700
        if kind == "init":
            h.init(a, b, partition=partition)
        elif kind == "write":
            h.write(a, start_offset=b, state_epoch=-1, leader_epoch=-1, dcc=len(a), partition=partition)
        elif kind == "read":
            h.read(a, partition=partition)
        elif kind == "delete":
            h.delete(partition)
        elif kind == "cold":
            h.commit(h.c.poll(h.now))
        else:  # a write whose append fails: it leaves no trace
            result, _ = h.write(a, start_offset=-1, state_epoch=-1, leader_epoch=-1, partition=partition,
                                commit=False)
            h.c.write_failed(result, list(result.records), int(E.NOT_LEADER_OR_FOLLOWER), h.now)
    reloaded = h.reloaded()
    for p in range(2):
        live = {k: h.c.state(*k) for k in h.c.keys(p)}
        assert live == {k: reloaded.state(*k) for k in reloaded.keys(p)}
        assert live == {k: h.c.state(*k, committed=True) for k in h.c.keys(p)}
        assert reloaded.last_redundant_offset(p) == h.c.last_redundant_offset(p)
