"""``__transaction_state`` records (Kafka's byte format) and loading: a coordinator that replays the
log after a crash in any state restores every transactional id and completes the transactions it
finds in PrepareCommit/PrepareAbort (markers again, then Complete*), so no partition stays blocked."""

from __future__ import annotations

import struct

import pytest

from kcompat.protocol.errors import ErrorCode
from kcompat.txn.coordinator import Record
from kcompat.txn.state import TxnState
from kcompat.txn.txn_records import (
    RecordFormatError, TxnLogValue, key_bytes, parse_key, parse_value, value_bytes,
)
from tests.txn.test_coordinator_harness import T0, TxnBroker, offsets_partition

S = TxnState
T0P0, T0P1, U0 = ("t", 0), ("t", 1), ("u", 0)


# ---------------------------------------------------------------------------------------------
# record format
# ---------------------------------------------------------------------------------------------


def kafka_key(tid: str) -> bytes:
    raw = tid.encode()
    return struct.pack(">hh", 0, len(raw)) + raw


def kafka_value_v0(pid, epoch, timeout, status, partitions, last_update, start) -> bytes:
    out = struct.pack(">hqhib", 0, pid, epoch, timeout, status)
    if partitions is None:
        out += struct.pack(">i", -1)
    else:
        out += struct.pack(">i", len(partitions))
        for topic, ids in partitions:
            out += struct.pack(">h", len(topic)) + topic.encode() + struct.pack(">i", len(ids))
            out += b"".join(struct.pack(">i", i) for i in ids)
    return out + struct.pack(">qq", last_update, start)


def test_key_and_value_bytes_are_kafkas_v0():
    assert key_bytes("my-txn") == kafka_key("my-txn")
    assert parse_key(kafka_key("my-txn")) == "my-txn"
    empty = TxnLogValue(1000, 3, 60_000, S.EMPTY, frozenset(), T0, -1)
    assert value_bytes(empty) == kafka_value_v0(1000, 3, 60_000, 0, None, T0, -1)  # Empty: null partitions
    ongoing = TxnLogValue(1000, 3, 60_000, S.ONGOING, frozenset({T0P1, U0, T0P0}), T0 + 1, T0)
    assert value_bytes(ongoing) == kafka_value_v0(1000, 3, 60_000, 1, [("t", [0, 1]), ("u", [0])], T0 + 1, T0)
    done = TxnLogValue(1000, 3, 60_000, S.COMPLETE_ABORT, frozenset(), T0 + 2, T0)
    assert value_bytes(done) == kafka_value_v0(1000, 3, 60_000, 5, [], T0 + 2, T0)  # completed: an empty array
    for v in (empty, ongoing, done):
        assert parse_value(value_bytes(v)) == v
    assert parse_value(None) is None


def test_value_v1_with_tagged_fields_is_read():
    v = TxnLogValue(7, 0, 1000, S.PREPARE_COMMIT, frozenset({T0P0}), T0, T0, previous_producer_id=6,
                    next_producer_id=8, client_transaction_version=2)
    data = value_bytes(v, version=1)
    assert data[:2] == b"\x00\x01"
    assert parse_value(data) == v


def test_states_never_written():
    for state in (S.DEAD, S.PREPARE_EPOCH_FENCE):
        with pytest.raises(ValueError):
            value_bytes(TxnLogValue(1, 0, 1, state, frozenset(), 0, 0))
    with pytest.raises(ValueError):
        value_bytes(TxnLogValue(1, 0, 1, S.EMPTY, frozenset({T0P0}), 0, 0))


def test_unreadable_records():
    assert parse_key(struct.pack(">h", 1) + b"whatever") is None  # another record type: skipped
    for bad in (b"", b"\x00", kafka_key("x") + b"\x00"):
        with pytest.raises(RecordFormatError):
            parse_key(bad)
    with pytest.raises(RecordFormatError):
        parse_value(struct.pack(">h", 2) + b"\x00" * 40)
    with pytest.raises(RecordFormatError):
        parse_value(kafka_value_v0(1, 0, 1, 9, None, 0, 0))  # unknown state id
    with pytest.raises(RecordFormatError):
        parse_value(kafka_value_v0(1, 0, 1, 0, None, 0, 0)[:-3])


# ---------------------------------------------------------------------------------------------
# loading after a crash in each state
# ---------------------------------------------------------------------------------------------


def durable(m):
    return (m.producer_id, m.producer_epoch, m.timeout_ms, m.state, frozenset(m.partitions), m.txn_start_ms,
            m.last_update_ms)


def scenario(state: TxnState):
    """A broker with transactional id x in ``state`` (markers not written for Prepare*)."""
    b = TxnBroker()
    pid, epoch = b.begin("x", 30_000)
    if state is S.EMPTY:
        return b, pid, epoch
    b.now += 10
    assert b.add("x", pid, epoch, [T0P0, U0]) == {T0P0: 0, U0: 0}
    assert b.add_offsets("x", pid, epoch, "g") == 0
    if state is S.ONGOING:
        return b, pid, epoch
    b.now += 10
    commit = state in (S.PREPARE_COMMIT, S.COMPLETE_COMMIT)
    assert b.end("x", pid, epoch, commit) == 0
    if state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
        b.write_markers()
    assert b.state("x") is state
    return b, pid, epoch


@pytest.mark.parametrize("state", [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT, S.COMPLETE_COMMIT,
                                   S.COMPLETE_ABORT])
def test_load_after_a_crash_in_each_state(state):
    b, pid, epoch = scenario(state)
    before = durable(b.meta("x"))
    b.marker_queue.clear()  # kill -9: markers asked for but never written
    result = b.restart()
    assert durable(b.meta("x")) == before
    parts = sorted([T0P0, U0, offsets_partition("g")])
    if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        [mk] = result.markers
        assert (mk.transactional_id, mk.producer_id, mk.producer_epoch, mk.coordinator_epoch, mk.commit,
                mk.partitions) == ("x", pid, epoch, 1, state is S.PREPARE_COMMIT, parts)
        assert b.init("x").error_code == ErrorCode.CONCURRENT_TRANSACTIONS
        b.write_markers()
        done = S.COMPLETE_COMMIT if state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        assert b.state("x") is done
        for tp in parts:
            assert b.markers_log[tp] == [(pid, epoch, state is S.PREPARE_COMMIT, 1)]
    else:
        assert result.markers == []
    if state is S.ONGOING:
        # the producer may go on after the restart ...
        assert b.add("x", pid, epoch, [T0P1]) == {T0P1: 0}
        # ... and if it does not, its transaction times out and is aborted
        b.advance(31_000)
        assert b.state("x") is S.PREPARE_ABORT
        b.write_markers()
        assert b.state("x") is S.COMPLETE_ABORT
        assert b.markers_log[T0P1] == [(pid, epoch + 1, False, 1)]
    # nothing is left blocked: a new transaction works
    r = b.init("x")
    assert r.error_code == 0
    pid2, epoch2 = r.producer_id, r.producer_epoch
    assert b.add("x", pid2, epoch2, [T0P0]) == {T0P0: 0}
    assert b.end("x", pid2, epoch2, True) == 0
    b.write_markers()
    assert b.state("x") is S.COMPLETE_COMMIT


def test_crash_after_some_markers_resends_all_of_them():
    b, pid, epoch = scenario(S.PREPARE_COMMIT)
    b.write_markers({U0: ErrorCode.NOT_LEADER_OR_FOLLOWER})
    result = b.restart()
    [mk] = result.markers
    assert U0 in mk.partitions and T0P0 in mk.partitions  # Kafka does not persist which ones were written
    b.write_markers()
    assert b.state("x") is S.COMPLETE_COMMIT
    assert b.markers_log[T0P0] == [(pid, epoch, True, 0), (pid, epoch, True, 1)]


def test_crash_after_a_fence_completes_the_abort_with_the_bumped_epoch():
    b, pid, epoch = scenario(S.ONGOING)
    assert b.init("x").error_code == ErrorCode.CONCURRENT_TRANSACTIONS
    result = b.restart()
    [mk] = result.markers
    assert (mk.producer_epoch, mk.commit) == (epoch + 1, False)
    b.write_markers()
    assert b.init("x").producer_epoch == epoch + 2


def test_crash_while_loading_prepared_transactions_of_deleted_topics():
    b, pid, epoch = scenario(S.PREPARE_ABORT)
    del b.topics["t"], b.topics["u"], b.topics["__consumer_offsets"]
    result = b.restart()
    assert result.markers == [] and b.state("x") is S.COMPLETE_ABORT


def test_load_replays_tombstones_unknown_keys_and_bad_records():
    b = TxnBroker()
    b.begin("x")
    b.begin("y")
    p = b.coord.partition_for("x")
    b.log[p].append((99, struct.pack(">h", 3) + b"future record type", b"\x00\x00"))
    b.log[p].append((100, key_bytes("bad"), b"\x00\x00\x01"))
    b.log[b.coord.partition_for("y")].append((101, key_bytes("y"), None))
    b.restart()
    assert b.meta("x").state is S.EMPTY and b.meta("y") is None and b.meta("bad") is None
    assert b.coord.transactional_ids() == ["x"]


def test_records_replayed_while_loading_count():
    b = TxnBroker(own=False)
    p = b.coord.partition_for("x")
    b.coord.begin_loading(p)
    value = value_bytes(TxnLogValue(5, 2, 1000, S.ONGOING, frozenset({T0P0}), T0, T0))
    b.coord.replay(Record(p, key_bytes("x"), value))
    b.apply(b.coord.load(p, [], T0))
    m = b.meta("x")
    assert (m.state, m.producer_id, m.producer_epoch, m.partitions) == (S.ONGOING, 5, 2, {T0P0})


def test_load_of_a_kafka_written_log():
    """Records as Kafka writes them (v0 values and the v1 flexible values of transaction.version 1)."""
    b = TxnBroker(own=False)
    p = b.coord.partition_for("k")
    log = [
        (0, kafka_key("k"), kafka_value_v0(42, 0, 60_000, 0, None, T0, -1)),
        (1, kafka_key("k"), kafka_value_v0(42, 0, 60_000, 1, [("t", [1, 0])], T0 + 1, T0 + 1)),
        (2, kafka_key("k"), kafka_value_v0(42, 0, 60_000, 2, [("t", [1, 0])], T0 + 2, T0 + 1)),
    ]
    result = b.coord.load(p, log, T0 + 3, coordinator_epoch=7)
    b.apply(result)
    [mk] = result.markers
    assert (mk.producer_id, mk.producer_epoch, mk.coordinator_epoch, mk.commit, mk.partitions) == (
        42, 0, 7, True, [T0P0, T0P1])
    b.write_markers()
    m = b.meta("k")
    assert (m.state, m.txn_start_ms, m.last_update_ms) == (S.COMPLETE_COMMIT, T0 + 1, T0)
    # the completion is written in Kafka's format too
    assert b.appended[-1].value == kafka_value_v0(42, 0, 60_000, 4, [], T0, T0 + 1)


def test_loading_again_replaces_the_partition():
    b = TxnBroker()
    pid, epoch = b.begin("x")
    p = b.coord.partition_for("x")
    b.coord.begin_loading(p)
    assert b.meta("x") is None and b.init("x").error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    b.apply(b.coord.load(p, list(b.log[p]), b.now))
    assert b.meta("x").producer_id == pid
    b.apply(b.coord.load(p, list(b.log[p]), b.now, coordinator_epoch=3))
    assert b.meta("x").producer_epoch == epoch
