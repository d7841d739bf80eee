"""Transaction version 2 in the transaction coordinator (KIP-890 part 2, as Kafka 4.3.1's
TransactionCoordinator.endTransaction and TransactionMetadata): EndTxn v5 bumps the epoch and
answers the producer id and epoch to use next, the markers carry the bumped epoch and version 2,
an epoch overflow moves to a new producer id, AddPartitionsToTxn v4+ (a broker's implicit add)
records client version 2, the log value is the flexible v1 once transaction.version >= 1 (read
back on load), older EndTxn versions keep TV1 semantics, and the coordinator's own aborts follow
the finalized version."""

from __future__ import annotations

from kcompat.protocol.errors import ErrorCode
from kcompat.txn.coordinator import MAX_PRODUCER_EPOCH
from kcompat.txn.state import TxnState
from kcompat.txn.txn_records import parse_value
from tests.txn.test_coordinator_harness import TxnBroker, offsets_partition

S = TxnState
E = ErrorCode
TP = ("t", 0)


def tv2_broker(**kw) -> TxnBroker:
    b = TxnBroker(**kw)
    b.tv = 2
    return b


def implicit_add(b: TxnBroker, tid: str, pid: int, epoch: int, parts=(TP,), version: int = 5) -> dict:
    """What a broker sends for a TV2 client's Produce v12: AddPartitionsToTxn v5, not verify-only."""
    return b.add_batch([(tid, pid, epoch, False, list(parts))], version=version)[tid]


def last_value(b: TxnBroker, tid: str):
    entries = b.log[b.coord.partition_for(tid)]
    raw = entries[-1][2]
    return int.from_bytes(raw[:2], "big"), parse_value(raw)


def test_commit_bumps_the_epoch_and_the_markers_carry_it():
    b = tv2_broker()
    pid, epoch = b.begin("x")
    assert implicit_add(b, "x", pid, epoch) == {TP: 0}
    assert b.meta("x").client_txn_version == 2
    r = b.end_response("x", pid, epoch, True)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, epoch + 1)
    m = b.meta("x")
    assert (m.state, m.producer_epoch, m.last_producer_epoch) == (S.PREPARE_COMMIT, epoch + 1, epoch)
    [mk] = b.marker_queue
    assert (mk.producer_id, mk.producer_epoch, mk.commit, mk.transaction_version) == (pid, epoch + 1, True, 2)
    b.write_markers()
    m = b.meta("x")
    assert (m.state, m.producer_id, m.producer_epoch) == (S.COMPLETE_COMMIT, pid, epoch + 1)
    # the next transaction uses the bumped epoch; its abort bumps again
    assert implicit_add(b, "x", pid, epoch + 1) == {TP: 0}
    r = b.end_response("x", pid, epoch + 1, False)
    assert (r.error_code, r.producer_epoch) == (0, epoch + 2)
    b.write_markers()
    assert b.state("x") is S.COMPLETE_ABORT


def test_the_log_value_is_v1_with_the_client_version_and_is_read_back():
    b = tv2_broker()
    pid, epoch = b.begin("x")
    implicit_add(b, "x", pid, epoch)
    assert b.end("x", pid, epoch, True, version=5) == 0
    version, value = last_value(b, "x")
    assert (version, value.state, value.client_transaction_version, value.producer_epoch) == (
        1, S.PREPARE_COMMIT, 2, epoch + 1)
    # a coordinator loading the Prepare* record resumes its markers with the bumped epoch and version 2
    markers = b.restart().markers
    assert [(mk.producer_epoch, mk.transaction_version) for mk in markers] == [(epoch + 1, 2)]
    m = b.meta("x")
    assert (m.state, m.client_txn_version, m.producer_epoch) == (S.PREPARE_COMMIT, 2, epoch + 1)
    b.write_markers()
    assert b.state("x") is S.COMPLETE_COMMIT and last_value(b, "x")[1].client_transaction_version == 2


def test_the_log_value_stays_v0_until_transaction_version_1():
    b = TxnBroker()
    pid, epoch = b.begin("x")
    assert last_value(b, "x")[0] == 0
    b.tv = 1
    b.add("x", pid, epoch, [TP])
    assert last_value(b, "x")[0] == 1 and last_value(b, "x")[1].client_transaction_version == 0


def test_retries_of_end_txn_v5():
    b = tv2_broker()
    pid, epoch = b.begin("x")
    implicit_add(b, "x", pid, epoch)
    assert b.end("x", pid, epoch, True, version=5) == 0
    # while the markers are being written: CONCURRENT_TRANSACTIONS, whatever the epoch (KAFKA-18464)
    assert b.end("x", pid, epoch, True, version=5) == E.CONCURRENT_TRANSACTIONS
    b.write_markers()
    # a retry (the epoch before the bump) of the same result: the current id and epoch again
    r = b.end_response("x", pid, epoch, True)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, epoch + 1)
    assert b.end("x", pid, epoch, False, version=5) == E.INVALID_TXN_STATE
    assert b.end("x", pid, epoch + 1, True, version=5) == E.INVALID_TXN_STATE
    assert b.end("x", pid, epoch - 1, True, version=5) == E.PRODUCER_FENCED
    assert b.end("x", pid + 1, epoch + 1, True, version=5) == E.INVALID_PRODUCER_ID_MAPPING


def test_an_abort_with_no_partition_bumps_the_epoch_without_markers():
    b = tv2_broker()
    pid, epoch = b.begin("x")
    assert b.end("x", pid, epoch, True, version=5) == E.INVALID_TXN_STATE   # commit of nothing
    assert b.end("x", pid, epoch + 1, False, version=5) == E.PRODUCER_FENCED
    r = b.end_response("x", pid, epoch, False)
    assert (r.error_code, r.producer_epoch) == (0, epoch + 1)
    assert b.state("x") is S.PREPARE_ABORT and not b.marker_queue
    b.advance(0)   # no marker to write: completed at the next poll
    assert b.state("x") is S.COMPLETE_ABORT and b.meta("x").producer_epoch == epoch + 1
    assert b.end("x", pid, epoch, False, version=5) == 0   # retry
    assert b.end("x", pid, epoch + 1, False, version=5) == 0   # another empty abort
    b.advance(0)
    assert b.meta("x").producer_epoch == epoch + 2


def test_epoch_overflow_moves_to_a_new_producer_id():
    b = tv2_broker()
    pid, _ = b.begin("x")
    m = b.meta("x")
    m.producer_epoch = MAX_PRODUCER_EPOCH - 1   # as after many transactions
    implicit_add(b, "x", pid, MAX_PRODUCER_EPOCH - 1)
    r = b.end_response("x", pid, MAX_PRODUCER_EPOCH - 1, True)
    new_pid = b.allocated[-1]
    assert new_pid != pid and (r.error_code, r.producer_id, r.producer_epoch) == (0, new_pid, 0)
    [mk] = b.marker_queue
    assert (mk.producer_id, mk.producer_epoch) == (pid, MAX_PRODUCER_EPOCH)
    assert last_value(b, "x")[1].next_producer_id == new_pid
    b.write_markers()
    m = b.meta("x")
    assert (m.state, m.producer_id, m.producer_epoch, m.last_producer_id) == (S.COMPLETE_COMMIT, new_pid, 0, pid)
    # a retry with the old id at Short.MaxValue - 1 gets the new id
    r = b.end_response("x", pid, MAX_PRODUCER_EPOCH - 1, True)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, new_pid, 0)
    assert implicit_add(b, "x", new_pid, 0) == {TP: 0}


def test_older_end_txn_versions_keep_tv1_semantics_on_a_tv2_cluster():
    b = tv2_broker()
    pid, epoch = b.begin("x")
    assert b.add("x", pid, epoch, [TP]) == {TP: 0}   # a client's AddPartitionsToTxn v3: TV0
    assert b.meta("x").client_txn_version == 0
    r = b.end_response("x", pid, epoch, True, version=4)
    assert (r.error_code, b.meta("x").producer_epoch) == (0, epoch)
    [mk] = b.marker_queue
    assert (mk.producer_epoch, mk.transaction_version) == (epoch, 0)
    b.write_markers()
    assert b.end("x", pid, epoch, True, version=4) == 0   # TV1 retry: same epoch
    assert b.end("x", pid, epoch, False, version=4) == E.INVALID_TXN_STATE


def test_add_offsets_is_tv0_and_an_implicit_add_of_the_offsets_partition_is_tv2():
    b = tv2_broker()
    pid, epoch = b.begin("x")
    assert b.add_offsets("x", pid, epoch) == 0 and b.meta("x").client_txn_version == 0
    b2 = tv2_broker()
    pid, epoch = b2.begin("y")
    assert implicit_add(b2, "y", pid, epoch, [offsets_partition("g")]) == {offsets_partition("g"): 0}
    assert b2.meta("y").client_txn_version == 2


def test_a_timed_out_transaction_is_aborted_with_tv2_markers_and_one_bump():
    b = tv2_broker()
    pid, epoch = b.begin("x", timeout=1000)
    implicit_add(b, "x", pid, epoch)
    b.advance(3000)
    m = b.meta("x")
    # the fence's bump is the only one (KAFKA-19367)
    assert (m.state, m.producer_epoch, m.client_txn_version) == (S.PREPARE_ABORT, epoch + 1, 2)
    [mk] = b.marker_queue
    assert (mk.producer_epoch, mk.commit, mk.transaction_version) == (epoch + 1, False, 2)
    b.write_markers()
    assert b.state("x") is S.COMPLETE_ABORT
    # the old producer's EndTxn looks like a retry of the abort (Kafka's table: the epoch one
    # below): its commit is INVALID_TXN_STATE, its abort answered as done; an older epoch is fenced
    assert b.end("x", pid, epoch, True, version=5) == E.INVALID_TXN_STATE
    assert b.end("x", pid, epoch, False, version=5) == 0
    assert b.end("x", pid, epoch - 1, False, version=5) == E.PRODUCER_FENCED
    r = b.init("x", pid=pid, epoch=epoch + 1, version=4)
    assert (r.error_code, r.producer_epoch) == (0, epoch + 2)


def test_an_older_end_txn_ends_a_transaction_a_tv2_produce_opened_with_tv0_markers():
    """A Produce v12 added the partition (client version 2), an EndTxn v4 ends it: Kafka's TV1 path
    writes TV_0 markers with the epoch unchanged (as a 4.3.1 node answered), so the partition's
    leader takes them."""
    b = tv2_broker()
    pid, epoch = b.begin("x")
    implicit_add(b, "x", pid, epoch)
    assert b.end("x", pid, epoch, True, version=4) == 0
    [mk] = b.marker_queue
    assert (mk.producer_epoch, mk.transaction_version) == (epoch, 0)
    b.write_markers()
    assert b.state("x") is S.COMPLETE_COMMIT and b.meta("x").client_txn_version == 0


def test_a_timed_out_transaction_on_a_tv1_cluster_is_aborted_with_tv0_markers():
    b = TxnBroker()
    b.tv = 1
    pid, epoch = b.begin("x", timeout=1000)
    implicit_add(b, "x", pid, epoch)   # a v12 produce: the transaction is a TV2 client's
    b.advance(3000)
    [mk] = b.marker_queue
    assert (mk.producer_epoch, mk.transaction_version) == (epoch + 1, 0)
