"""Transaction coordinator flows, as Kafka's TransactionCoordinator (3.x, transaction.version 0/1):
InitProducerId and fencing (KIP-98, KIP-360), AddPartitionsToTxn 0-5 (KIP-890 verification),
AddOffsetsToTxn, EndTxn with markers, timeouts, epoch overflow, expiration, Describe/ListTransactions
(KIP-664), append failures."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.txn.coordinator import (
    MARKER_RETRY_BACKOFF_MS, MAX_PRODUCER_EPOCH, TransactionCoordinator, TxnConfig, partition_for,
)
from kcompat.txn.state import TxnEvent, TxnState
from kcompat.txn.txn_records import key_bytes
from tests.txn.test_coordinator_harness import FAST, T0, TxnBroker, offsets_partition

S = TxnState
E = ErrorCode
T0P0, T0P1, T1P0, U0 = ("t", 0), ("t", 1), ("t", 2), ("u", 0)


def committed(b: TxnBroker, tid: str, pid: int, epoch: int, parts=(T0P0,), commit: bool = True) -> None:
    assert set(b.add(tid, pid, epoch, list(parts)).values()) == {0}
    assert b.end(tid, pid, epoch, commit) == 0
    b.write_markers()
    assert b.state(tid) is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)


# ---------------------------------------------------------------------------------------------
# InitProducerId
# ---------------------------------------------------------------------------------------------


def test_partition_for_is_kafkas_hash():
    # Utils.abs(id.hashCode) % partitions; "polygenelubricants".hashCode is Integer.MIN_VALUE
    assert partition_for("my-txn", 50) == abs(_java_hash("my-txn")) % 50
    assert _java_hash("polygenelubricants") == -(2**31)
    assert partition_for("polygenelubricants", 50) == 0


def _java_hash(s: str) -> int:
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def test_new_transactional_id_gets_a_new_producer_id_and_epoch_0():
    b = TxnBroker()
    r = b.init("x", 30_000)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, 1000, 0)
    m = b.meta("x")
    assert (m.state, m.producer_id, m.producer_epoch, m.timeout_ms, m.txn_start_ms, m.last_update_ms) == (
        S.EMPTY, 1000, 0, 30_000, -1, T0)
    assert len(b.appended) == 1 and b.appended[0].partition == b.coord.partition_for("x")


def test_init_again_bumps_the_epoch_and_updates_the_timeout():
    b = TxnBroker()
    b.begin("x")
    r = b.init("x", 45_000)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, 1000, 1)
    assert b.meta("x").timeout_ms == 45_000
    pid, epoch = 1000, 1
    committed(b, "x", pid, epoch)
    r = b.init("x")
    assert (r.producer_id, r.producer_epoch) == (1000, 2)
    assert b.allocated == [1000]


def test_idempotent_producer_without_transactional_id():
    b = TxnBroker()
    r = b.init(None)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, 1000, 0)
    assert not b.appended


def test_allocation_failure_is_returned():
    def fail():
        raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    b = TxnBroker()
    b.coord._allocate_producer_id = fail
    assert b.init("x").error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    assert b.init(None).error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    assert b.meta("x") is None or not b.meta("x").visible


@pytest.mark.parametrize("timeout", [0, -1, FAST.max_timeout_ms + 1])
def test_invalid_transaction_timeout(timeout):
    b = TxnBroker()
    r = b.init("x", timeout)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.INVALID_TRANSACTION_TIMEOUT, -1, -1)
    assert b.init("x", FAST.max_timeout_ms).error_code == 0


def test_invalid_transaction_timeout_is_checked_before_ownership():
    b = TxnBroker(own=False)
    assert b.init("x", FAST.max_timeout_ms + 1).error_code == E.INVALID_TRANSACTION_TIMEOUT
    assert b.init("x").error_code == E.NOT_COORDINATOR


def test_invalid_requests():
    b = TxnBroker()
    assert b.init("").error_code == E.INVALID_REQUEST
    assert b.init("x", pid=5, epoch=-1, version=3).error_code == E.INVALID_REQUEST
    assert b.init("x", pid=-1, epoch=3, version=3).error_code == E.INVALID_REQUEST
    assert b.add("", 1, 0, [T0P0]) == {T0P0: E.INVALID_REQUEST}
    assert b.end("", 1, 0, True) == E.INVALID_REQUEST


def test_coordinator_load_in_progress_and_not_coordinator():
    b = TxnBroker(own=False)
    p = b.coord.partition_for("x")
    assert b.init("x").error_code == E.NOT_COORDINATOR
    b.coord.begin_loading(p)
    assert b.init("x").error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    assert b.add("x", 1, 0, [T0P0]) == {T0P0: E.COORDINATOR_LOAD_IN_PROGRESS}
    assert b.end("x", 1, 0, True) == E.COORDINATOR_LOAD_IN_PROGRESS
    assert b.describe("x")[0].error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    assert b.list_txns().error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    b.apply(b.coord.load(p, [], b.now))
    assert b.coord.owns(p)
    assert b.init("x").error_code == 0
    b.apply(b.coord.unload(p))
    assert not b.coord.owns(p) and b.meta("x") is None
    assert b.init("x").error_code == E.NOT_COORDINATOR


def test_second_producer_fences_the_first_during_a_transaction():
    """Zombie fencing: InitProducerId during an ongoing transaction aborts it with a bumped epoch
    (CONCURRENT_TRANSACTIONS until the abort completes), then bumps the epoch once more."""
    b = TxnBroker()
    pid, epoch = b.begin("x")
    assert b.add("x", pid, epoch, [T0P0, U0]) == {T0P0: 0, U0: 0}
    r = b.init("x")
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.CONCURRENT_TRANSACTIONS, -1, -1)
    m = b.meta("x")
    assert (m.state, m.producer_epoch) == (S.PREPARE_ABORT, epoch + 1)
    [mk] = b.marker_queue
    assert (mk.producer_id, mk.producer_epoch, mk.commit, sorted(mk.partitions)) == (pid, epoch + 1, False,
                                                                                       [T0P0, U0])
    # the zombie is fenced at once, and stays fenced
    assert b.end("x", pid, epoch, True) == E.PRODUCER_FENCED
    assert b.add("x", pid, epoch, [T0P1]) == {T0P1: E.PRODUCER_FENCED}
    assert b.add("x", pid, epoch, [T0P1], version=1) == {T0P1: E.INVALID_PRODUCER_EPOCH}
    assert b.end("x", pid, epoch, True, version=1) == E.INVALID_PRODUCER_EPOCH
    assert b.init("x").error_code == E.CONCURRENT_TRANSACTIONS  # markers not written yet
    b.write_markers()
    assert b.state("x") is S.COMPLETE_ABORT
    r = b.init("x")
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, epoch + 2)
    assert b.add("x", pid, epoch, [T0P0]) == {T0P0: E.PRODUCER_FENCED}
    assert b.end("x", pid, epoch + 1, False) == E.PRODUCER_FENCED
    assert b.markers_log[T0P0] == [(pid, epoch + 1, False, 0)]


def test_produced_fenced_maps_to_invalid_producer_epoch_for_old_versions():
    b = TxnBroker()
    pid, epoch = b.begin("x")
    b.begin("x")  # epoch + 1
    assert b.add("x", pid, epoch, [T0P0], version=1) == {T0P0: E.INVALID_PRODUCER_EPOCH}
    assert b.add("x", pid, epoch, [T0P0], version=2) == {T0P0: E.PRODUCER_FENCED}
    assert b.add_offsets("x", pid, epoch, version=1) == E.INVALID_PRODUCER_EPOCH
    assert b.add_offsets("x", pid, epoch, version=2) == E.PRODUCER_FENCED
    assert b.end("x", pid, epoch, True, version=0) == E.INVALID_PRODUCER_EPOCH
    assert b.end("x", pid, epoch, True, version=2) == E.PRODUCER_FENCED
    # InitProducerId v3: PRODUCER_FENCED is new in v4
    assert b.init("x", pid=pid, epoch=epoch - 1 if epoch else 7, version=3).error_code == E.INVALID_PRODUCER_EPOCH
    assert b.init("x", pid=pid, epoch=7, version=4).error_code == E.PRODUCER_FENCED


def test_kip360_init_producer_id_with_producer_id_and_epoch():
    b = TxnBroker()
    pid, epoch = b.begin("x")  # epoch 0
    # the producer resumes after an error: current epoch -> bump, remember the previous epoch
    r = b.init("x", pid=pid, epoch=0, version=4)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, 1)
    assert b.meta("x").last_producer_epoch == 0
    # a retry of that call (the response was lost): the previous epoch -> same epoch, no bump
    r = b.init("x", pid=pid, epoch=0, version=4)
    assert (r.error_code, r.producer_epoch) == (0, 1)
    # an epoch that is neither: fenced
    assert b.init("x", pid=pid, epoch=5, version=4).error_code == E.PRODUCER_FENCED
    # a different producer id: fenced
    assert b.init("x", pid=pid + 7, epoch=1, version=4).error_code == E.PRODUCER_FENCED
    # a producer without transactional state bumps without a last epoch
    r = b.init("x")
    assert (r.producer_epoch, b.meta("x").last_producer_epoch) == (2, -1)
    # after that, the old epoch is no longer the previous one
    assert b.init("x", pid=pid, epoch=1, version=4).error_code == E.PRODUCER_FENCED


def test_kip360_first_init_with_an_unknown_producer_id_gets_a_new_one():
    b = TxnBroker()
    r = b.init("x", pid=77, epoch=3, version=4)  # a transactional id the coordinator never saw
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, 1000, 0)


def test_kip360_previous_epoch_is_lost_on_reload_as_in_kafka():
    b = TxnBroker()
    pid, _ = b.begin("x")
    assert b.init("x", pid=pid, epoch=0, version=4).producer_epoch == 1
    b.restart()
    assert b.meta("x").last_producer_epoch == -1
    assert b.init("x", pid=pid, epoch=0, version=4).error_code == E.PRODUCER_FENCED


def test_epoch_overflow_rotates_the_producer_id():
    b = TxnBroker()
    pid, _ = b.begin("x")
    m = b.meta("x")
    m.producer_epoch = MAX_PRODUCER_EPOCH - 2  # 32765: one more bump reaches the last usable epoch
    r = b.init("x")
    assert (r.producer_id, r.producer_epoch) == (pid, MAX_PRODUCER_EPOCH - 1)
    r = b.init("x")  # 32766 is exhausted: a new producer id with epoch 0
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, 1001, 0)
    m = b.meta("x")
    assert (m.last_producer_id, m.last_producer_epoch) == (pid, -1)
    assert b.allocated == [1000, 1001]


def test_epoch_overflow_with_kip360_retry_of_the_rotation():
    b = TxnBroker()
    pid, _ = b.begin("x")
    b.meta("x").producer_epoch = MAX_PRODUCER_EPOCH - 1
    r = b.init("x", pid=pid, epoch=MAX_PRODUCER_EPOCH - 1, version=4)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, 1001, 0)
    assert b.meta("x").last_producer_epoch == MAX_PRODUCER_EPOCH - 1
    # the producer never got that answer and retries with the old id and exhausted epoch
    r = b.init("x", pid=pid, epoch=MAX_PRODUCER_EPOCH - 1, version=4)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, 1001, 0)


def test_fencing_at_the_last_epoch_then_rotation():
    b = TxnBroker()
    pid, _ = b.begin("x")
    b.meta("x").producer_epoch = MAX_PRODUCER_EPOCH - 1  # the producer holds epoch 32766
    epoch = MAX_PRODUCER_EPOCH - 1
    assert b.add("x", pid, epoch, [T0P0]) == {T0P0: 0}
    assert b.init("x").error_code == E.CONCURRENT_TRANSACTIONS  # fence with epoch 32767
    assert b.meta("x").producer_epoch == MAX_PRODUCER_EPOCH
    b.write_markers()
    assert b.markers_log[T0P0] == [(pid, MAX_PRODUCER_EPOCH, False, 0)]
    r = b.init("x")
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, 1001, 0)


# ---------------------------------------------------------------------------------------------
# AddPartitionsToTxn / AddOffsetsToTxn
# ---------------------------------------------------------------------------------------------


def test_add_partitions_starts_the_transaction():
    b = TxnBroker()
    pid, epoch = b.begin("x")
    b.now += 5
    n = len(b.appended)
    assert b.add("x", pid, epoch, [T0P0, T0P1]) == {T0P0: 0, T0P1: 0}
    m = b.meta("x")
    assert (m.state, m.partitions, m.txn_start_ms, m.last_update_ms) == (S.ONGOING, {T0P0, T0P1}, T0 + 5, T0 + 5)
    b.now += 5
    assert b.add("x", pid, epoch, [T0P1]) == {T0P1: 0}  # already there: no record
    assert len(b.appended) == n + 1
    assert b.add("x", pid, epoch, [U0]) == {U0: 0}
    m = b.meta("x")
    assert (m.partitions, m.txn_start_ms, m.last_update_ms) == ({T0P0, T0P1, U0}, T0 + 5, T0 + 10)


def test_add_partitions_errors():
    b = TxnBroker()
    pid, epoch = b.begin("x")
    assert b.add("y", pid, epoch, [T0P0]) == {T0P0: E.INVALID_PRODUCER_ID_MAPPING}
    assert b.add("x", pid + 1, epoch, [T0P0]) == {T0P0: E.INVALID_PRODUCER_ID_MAPPING}
    assert b.add("x", pid, epoch + 1, [T0P0]) == {T0P0: E.PRODUCER_FENCED}
    # one unknown partition fails the whole batch; the others are not attempted
    assert b.add("x", pid, epoch, [T0P0, ("t", 9), ("nope", 0)]) == {
        T0P0: E.OPERATION_NOT_ATTEMPTED, ("t", 9): E.UNKNOWN_TOPIC_OR_PARTITION,
        ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert b.state("x") is S.EMPTY


def test_add_offsets_adds_the_groups_offsets_partition():
    b = TxnBroker()
    pid, epoch = b.begin("x")
    assert b.add_offsets("x", pid, epoch, "my-group") == 0
    assert b.meta("x").partitions == {offsets_partition("my-group")}
    assert b.add_offsets("x", pid + 1, epoch, "my-group") == E.INVALID_PRODUCER_ID_MAPPING
    assert b.end("x", pid, epoch, True) == 0
    assert b.add_offsets("x", pid, epoch, "g2") == E.CONCURRENT_TRANSACTIONS
    b.write_markers()
    assert b.markers_log[offsets_partition("my-group")] == [(pid, epoch, True, 0)]


def test_concurrent_transactions_while_markers_are_pending():
    b = TxnBroker()
    pid, epoch = b.begin("x")
    assert b.add("x", pid, epoch, [T0P0]) == {T0P0: 0}
    assert b.end("x", pid, epoch, True) == 0
    assert b.add("x", pid, epoch, [T0P1]) == {T0P1: E.CONCURRENT_TRANSACTIONS}
    assert b.add_offsets("x", pid, epoch) == E.CONCURRENT_TRANSACTIONS
    assert b.end("x", pid, epoch, True) == E.CONCURRENT_TRANSACTIONS
    assert b.end("x", pid, epoch, False) == E.CONCURRENT_TRANSACTIONS
    assert b.init("x").error_code == E.CONCURRENT_TRANSACTIONS
    b.write_markers()
    assert b.add("x", pid, epoch, [T0P1]) == {T0P1: 0}
    assert b.meta("x").partitions == {T0P1}


def test_add_partitions_v4_batch_and_verify_only():
    b = TxnBroker()
    px, ex = b.begin("x")
    py, ey = b.begin("y")
    res = b.add_batch([("x", px, ex, False, [T0P0]), ("y", py, ey, False, [U0, T0P1])], version=4)
    assert res == {"x": {T0P0: 0}, "y": {U0: 0, T0P1: 0}}
    res = b.add_batch([("y", py, ey + 1, True, [U0]), ("z", 5, 0, True, [U0]), ("x", px, ex, True, [("t", 99)])],
                      version=5)
    assert res == {"y": {U0: E.PRODUCER_FENCED}, "z": {U0: E.INVALID_PRODUCER_ID_MAPPING},
                   "x": {("t", 99): E.UNKNOWN_TOPIC_OR_PARTITION}}
    res = b.add_batch([("x", px, ex, True, [T0P0, T0P1])], version=5)
    assert res == {"x": {T0P0: 0, T0P1: E.TRANSACTION_ABORTABLE}}
    res = b.add_batch([("x", px, ex, True, [T0P0, T0P1])], version=4)
    assert res == {"x": {T0P0: 0, T0P1: E.INVALID_TXN_STATE}}
    assert b.meta("x").partitions == {T0P0}  # verify_only adds nothing
    assert b.end("x", px, ex, True) == 0
    assert b.add_batch([("x", px, ex, True, [T0P0])], version=5) == {"x": {T0P0: E.CONCURRENT_TRANSACTIONS}}


def test_verify_for_the_produce_path():
    b = TxnBroker()
    pid, epoch = b.begin("x")
    # not added: TRANSACTION_ABORTABLE (a Produce below v11 turns it into INVALID_TXN_STATE)
    assert b.coord.verify("x", pid, epoch, "t", 0) == E.TRANSACTION_ABORTABLE  # not added (Empty)
    assert b.add("x", pid, epoch, [T0P0]) == {T0P0: 0}
    assert b.coord.verify("x", pid, epoch, "t", 0) == 0
    assert b.coord.verify("x", pid, epoch, "t", 1) == E.TRANSACTION_ABORTABLE
    assert b.coord.verify("x", pid, epoch + 1, "t", 0) == E.INVALID_PRODUCER_EPOCH
    assert b.coord.verify("x", pid + 1, epoch, "t", 0) == E.INVALID_PRODUCER_ID_MAPPING
    assert b.coord.verify("nope", pid, epoch, "t", 0) == E.INVALID_PRODUCER_ID_MAPPING
    assert b.end("x", pid, epoch, False) == 0
    assert b.coord.verify("x", pid, epoch, "t", 0) == E.NOT_ENOUGH_REPLICAS  # CONCURRENT_TRANSACTIONS
    b.write_markers()
    assert b.coord.verify("x", pid, epoch, "t", 0) == E.TRANSACTION_ABORTABLE  # a new transaction adds it again
    other = TxnBroker(own=False)
    assert other.coord.verify("x", pid, epoch, "t", 0) == E.NOT_ENOUGH_REPLICAS  # NOT_COORDINATOR


# ---------------------------------------------------------------------------------------------
# EndTxn and markers
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("commit", [True, False])
def test_begin_add_end_with_markers(commit):
    b = TxnBroker()
    pid, epoch = b.begin("x")
    assert b.add("x", pid, epoch, [T0P0, U0]) == {T0P0: 0, U0: 0}
    assert b.add_offsets("x", pid, epoch, "g") == 0
    b.now += 10
    n = len(b.appended)
    assert b.end("x", pid, epoch, commit) == 0
    # the reply follows the Prepare* record; the markers are asked for in the same result
    prepare = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
    assert len(b.appended) == n + 1 and b.state("x") is prepare
    [mk] = b.marker_queue
    assert (mk.transactional_id, mk.producer_id, mk.producer_epoch, mk.commit) == ("x", pid, epoch, commit)
    assert mk.partitions == sorted([T0P0, U0, offsets_partition("g")])
    described = b.describe("x")[0]
    assert described.transaction_state == str(prepare)
    assert {(t.topic, p) for t in described.topics for p in t.partitions} == set(mk.partitions)
    # markers written for two partitions, the third fails with a retriable error
    b.write_markers({U0: E.NOT_LEADER_OR_FOLLOWER})
    assert b.state("x") is prepare and not b.marker_queue
    assert {(t.topic, p) for t in b.describe("x")[0].topics for p in t.partitions} == {U0}
    assert b.coord.next_deadline() == b.now + MARKER_RETRY_BACKOFF_MS
    b.advance(MARKER_RETRY_BACKOFF_MS)
    [retry] = b.marker_queue
    assert retry.partitions == [U0] and retry.commit is commit
    b.write_markers()
    m = b.meta("x")
    assert (m.state, m.partitions, m.txn_start_ms) == (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT, set(), T0)
    assert m.transitions[-2:] == [(S.ONGOING, TxnEvent.COMMIT if commit else TxnEvent.ABORT, prepare),
                                  (prepare, TxnEvent.MARKERS_WRITTEN, m.state)]
    for tp in mk.partitions:
        assert b.markers_log[tp] == [(pid, epoch, commit, 0)]
    # a retried EndTxn with the same result succeeds, with the other result it is invalid
    n = len(b.appended)
    assert b.end("x", pid, epoch, commit) == 0
    assert b.end("x", pid, epoch, not commit) == E.INVALID_TXN_STATE
    assert len(b.appended) == n and not b.marker_queue


def test_end_txn_errors():
    b = TxnBroker()
    pid, epoch = b.begin("x")
    assert b.end("x", pid, epoch, True) == E.INVALID_TXN_STATE  # Empty: nothing to commit
    assert b.end("x", pid, epoch, False) == E.INVALID_TXN_STATE
    assert b.end("y", pid, epoch, True) == E.INVALID_PRODUCER_ID_MAPPING
    assert b.end("x", pid + 1, epoch, True) == E.INVALID_PRODUCER_ID_MAPPING
    assert b.add("x", pid, epoch, [T0P0]) == {T0P0: 0}
    assert b.end("x", pid, epoch + 1, True) == E.PRODUCER_FENCED  # strict equality for clients
    assert b.end("x", pid, epoch, True, version=5) == 0


def test_marker_fenced_error_stops_sending():
    b = TxnBroker()
    pid, epoch = b.begin("x")
    b.add("x", pid, epoch, [T0P0, T0P1])
    b.end("x", pid, epoch, True)
    b.write_markers({T0P1: E.INVALID_PRODUCER_EPOCH})
    assert b.state("x") is S.PREPARE_COMMIT
    b.advance(10_000)
    assert not b.marker_queue and b.state("x") is S.PREPARE_COMMIT
    # a coordinator that loads the partition again resumes it
    result = b.restart()
    assert [mk.partitions for mk in result.markers] == [[T0P0, T0P1]]


def test_markers_skip_deleted_partitions():
    b = TxnBroker()
    pid, epoch = b.begin("x")
    b.add("x", pid, epoch, [T0P0, U0])
    b.end("x", pid, epoch, True)
    del b.topics["u"]
    b.write_markers({U0: E.UNKNOWN_TOPIC_OR_PARTITION})
    assert b.state("x") is S.COMPLETE_COMMIT
    # a transaction whose partitions are all gone completes without markers
    pid, epoch = b.begin("y")
    b.add("y", pid, epoch, [T0P1])
    del b.topics["t"]
    assert b.end("y", pid, epoch, False) == 0
    assert not b.marker_queue and b.state("y") is S.PREPARE_ABORT
    b.advance(1)
    assert b.state("y") is S.COMPLETE_ABORT


def test_markers_of_an_older_coordinator_epoch_or_producer_are_ignored():
    b = TxnBroker()
    pid, epoch = b.begin("x")
    b.add("x", pid, epoch, [T0P0])
    b.end("x", pid, epoch, True)
    [mk] = b.marker_queue
    b.apply(b.coord.markers_written("x", pid, epoch, {T0P0: 0}, b.now, coordinator_epoch=mk.coordinator_epoch + 1))
    assert b.state("x") is S.PREPARE_COMMIT
    b.apply(b.coord.markers_written("x", pid, epoch + 1, {T0P0: 0}, b.now))
    assert b.state("x") is S.PREPARE_COMMIT
    b.apply(b.coord.markers_written("other", pid, epoch, {T0P0: 0}, b.now))
    b.write_markers()
    assert b.state("x") is S.COMPLETE_COMMIT


def test_unexpected_marker_errors_are_retried():
    b = TxnBroker()
    pid, epoch = b.begin("x")
    b.add("x", pid, epoch, [T0P0])
    b.end("x", pid, epoch, True)
    b.write_markers({T0P0: E.CORRUPT_MESSAGE})
    b.advance(MARKER_RETRY_BACKOFF_MS)
    b.write_markers()
    assert b.state("x") is S.COMPLETE_COMMIT


# ---------------------------------------------------------------------------------------------
# timeouts and expiration
# ---------------------------------------------------------------------------------------------


def test_timed_out_transaction_is_aborted_with_a_bumped_epoch():
    b = TxnBroker()
    pid, epoch = b.begin("x", timeout=5000)
    assert b.add("x", pid, epoch, [T0P0]) == {T0P0: 0}
    b.advance(1000)  # abort check at T0 + 1000: not timed out
    assert b.state("x") is S.ONGOING and not b.marker_queue
    b.advance(4000)  # start + timeout == now: not yet (Kafka: start + timeout < now)
    assert b.state("x") is S.ONGOING
    assert b.coord.next_deadline() == b.now + 1000
    b.advance(1000)
    assert b.state("x") is S.PREPARE_ABORT and b.meta("x").producer_epoch == epoch + 1
    b.write_markers()
    assert b.state("x") is S.COMPLETE_ABORT
    assert b.markers_log[T0P0] == [(pid, epoch + 1, False, 0)]
    # the zombie cannot go on
    assert b.add("x", pid, epoch, [T0P0]) == {T0P0: E.PRODUCER_FENCED}
    assert b.end("x", pid, epoch, True) == E.PRODUCER_FENCED
    r = b.init("x")
    assert r.producer_epoch == epoch + 2


def test_pending_transactions_are_not_timed_out_twice():
    b = TxnBroker()
    pid, epoch = b.begin("x", timeout=1000)
    b.add("x", pid, epoch, [T0P0])
    b.advance(3000)
    b.advance(3000)
    assert b.meta("x").producer_epoch == epoch + 1 and len(b.marker_queue) == 1


def test_transactional_ids_expire():
    b = TxnBroker()
    pid, epoch = b.begin("x")
    committed(b, "x", pid, epoch)
    pid2, epoch2 = b.begin("y")
    b.add("y", pid2, epoch2, [T0P0])  # Ongoing ids never expire (they time out)
    b.now += 539_000
    b.begin("z")
    b.advance(1000)
    b.advance(60_000)  # x idle for 600 s at the expiration run: tombstone
    assert b.meta("x") is None and b.meta("z") is not None
    [tombstone] = [r for r in b.appended if r.value is None]
    assert tombstone.key == key_bytes("x") and tombstone.partition == b.coord.partition_for("x")
    assert b.describe("x")[0].error_code == E.TRANSACTIONAL_ID_NOT_FOUND
    r = b.init("x")
    assert (r.producer_id, r.producer_epoch) == (b.allocated[-1], 0) and r.producer_id not in (pid,)
    b.restart()
    assert b.meta("x").producer_id == r.producer_id


# ---------------------------------------------------------------------------------------------
# DescribeTransactions / ListTransactions
# ---------------------------------------------------------------------------------------------


def test_describe_transactions():
    b = TxnBroker()
    pid, epoch = b.begin("x", timeout=30_000)
    b.now += 7
    b.add("x", pid, epoch, [T0P1, T0P0, U0])
    [d, nf, bad] = b.describe("x", "nope", "")
    assert (d.error_code, d.transactional_id, d.transaction_state, d.transaction_timeout_ms,
            d.transaction_start_time_ms, d.producer_id, d.producer_epoch) == (0, "x", "Ongoing", 30_000, T0 + 7,
                                                                              pid, epoch)
    assert [(t.topic, t.partitions) for t in d.topics] == [("t", [0, 1]), ("u", [0])]
    assert nf.error_code == E.TRANSACTIONAL_ID_NOT_FOUND and bad.error_code == E.INVALID_REQUEST
    b.end("x", pid, epoch, True)
    b.write_markers()
    [d] = b.describe("x")
    assert (d.transaction_state, d.topics) == ("CompleteCommit", [])
    b.apply(b.coord.shutdown())
    assert b.describe("x")[0].error_code == E.COORDINATOR_NOT_AVAILABLE
    assert b.list_txns().error_code == E.COORDINATOR_NOT_AVAILABLE
    assert b.init("x").error_code == E.NOT_COORDINATOR


def test_list_transactions_with_filters():
    b = TxnBroker()
    pa, ea = b.begin("a")
    pb, eb = b.begin("b")
    pc, ec = b.begin("c")
    b.add("a", pa, ea, [T0P0])
    b.now += 1000
    b.add("b", pb, eb, [T0P0])
    b.end("b", pb, eb, False)

    def listed(**kw):
        r = b.list_txns(**kw)
        assert r.error_code == 0
        return {(s.transactional_id, s.producer_id, s.transaction_state) for s in r.transaction_states}, \
            r.unknown_state_filters

    assert listed() == ({("a", pa, "Ongoing"), ("b", pb, "PrepareAbort"), ("c", pc, "Empty")}, [])
    assert listed(states=["Ongoing", "PrepareAbort", "Bogus"]) == (
        {("a", pa, "Ongoing"), ("b", pb, "PrepareAbort")}, ["Bogus"])
    assert listed(pids=[pc, 424242]) == ({("c", pc, "Empty")}, [])
    assert listed(states=["Ongoing"], pids=[pb]) == (set(), [])
    b.now += 500
    # KIP-994: transactions running longer than the duration (a started 1500 ms ago, b 500 ms ago)
    assert listed(states=["Ongoing", "PrepareAbort"], duration=1000) == ({("a", pa, "Ongoing")}, [])
    # v0 has no duration filter
    r = b.list_txns(states=["Ongoing", "PrepareAbort"], duration=1000, version=0)
    assert len(r.transaction_states) == 2


def test_list_transactions_in_kafkas_order():
    """By __transaction_state partition, then each partition's hash order: Kafka 4.3.1's
    ``kafka-transactions list`` printed tx-done (partition 7), tx-open (15), tx-abort (39)."""
    b = TxnBroker(replace(FAST, num_partitions=50))
    for tid in ("tx-abort", "tx-done", "tx-open"):
        b.begin(tid)
    assert [s.transactional_id for s in b.list_txns().transaction_states] == ["tx-done", "tx-open", "tx-abort"]


# ---------------------------------------------------------------------------------------------
# append failures
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("code,expected", [
    (E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE), (E.REQUEST_TIMED_OUT, E.COORDINATOR_NOT_AVAILABLE),
    (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR), (E.KAFKA_STORAGE_ERROR, E.NOT_COORDINATOR),
    (E.MESSAGE_TOO_LARGE, E.UNKNOWN_SERVER_ERROR), (E.UNKNOWN_SERVER_ERROR, E.UNKNOWN_SERVER_ERROR)])
def test_failed_appends_answer_with_coordinator_errors(code, expected):
    b = TxnBroker()
    b.fail_next = code
    assert b.init("x").error_code == expected
    assert b.meta("x") is None or not b.meta("x").visible
    assert b.list_txns().transaction_states == []
    r = b.init("x")
    assert (r.error_code, r.producer_epoch) == (0, 0)
    pid, epoch = r.producer_id, r.producer_epoch
    b.fail_next = code
    assert b.add("x", pid, epoch, [T0P0]) == {T0P0: expected}
    assert b.state("x") is S.EMPTY
    assert b.add("x", pid, epoch, [T0P0]) == {T0P0: 0}
    b.fail_next = code
    assert b.end("x", pid, epoch, True) == expected
    assert b.state("x") is S.ONGOING and not b.marker_queue
    assert b.end("x", pid, epoch, True) == 0
    b.write_markers()
    assert b.state("x") is S.COMPLETE_COMMIT


def test_failed_fence_keeps_the_bumped_epoch():
    """Kafka's hasFailedEpochFence: the epoch bumped for a fence stays in memory (the old producer
    remains fenced) and the next fence does not bump it again."""
    b = TxnBroker()
    pid, epoch = b.begin("x")
    b.add("x", pid, epoch, [T0P0])
    b.fail_next = E.NOT_ENOUGH_REPLICAS
    assert b.init("x").error_code == E.COORDINATOR_NOT_AVAILABLE
    m = b.meta("x")
    assert (m.state, m.producer_epoch, m.epoch) == (S.ONGOING, epoch, epoch + 1)
    assert b.add("x", pid, epoch, [T0P1]) == {T0P1: E.PRODUCER_FENCED}
    assert b.init("x").error_code == E.CONCURRENT_TRANSACTIONS
    assert b.meta("x").producer_epoch == epoch + 1
    b.write_markers()
    assert b.init("x").producer_epoch == epoch + 2


def test_failed_completion_is_retried():
    b = TxnBroker()
    pid, epoch = b.begin("x")
    b.add("x", pid, epoch, [T0P0])
    b.end("x", pid, epoch, True)
    b.fail_next = E.NOT_ENOUGH_REPLICAS
    b.write_markers()
    assert b.state("x") is S.PREPARE_COMMIT
    b.advance(MARKER_RETRY_BACKOFF_MS)
    assert b.state("x") is S.COMPLETE_COMMIT and not b.marker_queue
    assert b.markers_log[T0P0] == [(pid, epoch, True, 0)]


def test_failed_batch_append_answers_only_the_lost_transactions():
    b = TxnBroker()
    px, ex = b.begin("x")
    py, ey = b.begin("y")
    txns = [("x", px, ex, False, [T0P0]), ("y", py, ey, False, [T0P0])]
    token = ("add_partitions_to_txn", 0)
    b._versions[token] = 4
    from kcompat.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
    from tests.txn.test_coordinator_harness import request_topics
    req = AddPartitionsToTxnRequest(transactions=[
        AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
            transactional_id=t, producer_id=p, producer_epoch=e, verify_only=v,
            topics=request_topics(AddPartitionsToTxnRequest.AddPartitionsToTxnTopic, parts))
        for t, p, e, v, parts in txns])
    result = b.coord.add_partitions_to_txn(token, req, 4, b.now)
    assert len(result.records) == 2
    # the record of x was appended and replayed, the one of y was lost
    b.coord.replay(result.records[0])
    b.apply(b.coord.append_failed(result, E.NOT_LEADER_OR_FOLLOWER, b.now))
    resp = b.replies.pop(token)
    errors = {r.transactional_id: r.topic_results[0].results_by_partition[0].partition_error_code
              for r in resp.results_by_transaction}
    assert errors == {"x": 0, "y": E.NOT_COORDINATOR}
    assert b.state("x") is S.ONGOING and b.state("y") is S.EMPTY


def test_coordinator_without_partitions_has_no_deadline():
    c = TransactionCoordinator(TxnConfig(), allocate_producer_id=lambda: 1, partition_exists=lambda t, p: True,
                               group_partition_for=lambda g: 0)
    assert c.next_deadline() is None
    assert c.poll(T0).records == []
