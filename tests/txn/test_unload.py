"""Giving a ``__transaction_state`` partition up (TransactionCoordinator.unload, Kafka's
onResignation) and loading it again with a higher coordinator epoch; a write failing because its
partition was unloaded meanwhile answers NOT_COORDINATOR."""

from __future__ import annotations

from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.end_txn import EndTxnRequest
from kcompat.txn.state import TxnState
from tests.txn.test_coordinator_harness import TxnBroker

E = ErrorCode
TID = "tid"


def test_unload_forgets_the_ids_of_the_partition_and_stops_their_timers():
    b = TxnBroker()
    pid, epoch = b.begin(TID, timeout=2_000)
    assert b.add(TID, pid, epoch, [("t", 0)]) == {("t", 0): 0}
    other = next(t for t in ("a", "b", "c", "d", "e") if b.coord.partition_for(t) != b.coord.partition_for(TID))
    opid, oepoch = b.begin(other)
    partition = b.coord.partition_for(TID)
    b.apply(b.coord.unload(partition))
    assert b.meta(TID) is None and not b.coord.owns(partition)
    assert b.init(TID).error_code == E.NOT_COORDINATOR
    assert b.end(TID, pid, epoch, True) == E.NOT_COORDINATOR
    assert b.describe(TID)[0].error_code == E.NOT_COORDINATOR
    written = len(b.appended)
    b.advance(10_000)  # past the transaction timeout: no abort, the id is not ours any more
    assert len(b.appended) == written and not b.marker_queue
    assert b.state(other) is TxnState.EMPTY and b.add(other, opid, oepoch, [("t", 1)]) == {("t", 1): 0}


def test_markers_answered_after_the_unload_are_ignored_and_a_reload_resumes_them_with_its_epoch():
    b = TxnBroker()
    pid, epoch = b.begin(TID)
    b.add(TID, pid, epoch, [("t", 0), ("u", 1)])
    assert b.end(TID, pid, epoch, True) == 0
    assert len(b.marker_queue) == 1
    partition = b.coord.partition_for(TID)
    b.apply(b.coord.unload(partition))
    b.write_markers()  # answered late, for a partition no longer loaded
    assert b.meta(TID) is None and not b.coord._retries
    written = len(b.appended)
    b.coord.begin_loading(partition)
    assert b.init(TID).error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    result = b.apply(b.coord.load(partition, list(b.log[partition]), b.now, coordinator_epoch=7))
    assert b.state(TID) is TxnState.PREPARE_COMMIT
    assert [(m.coordinator_epoch, m.commit, sorted(m.partitions)) for m in result.markers] == \
        [(7, True, [("t", 0), ("u", 1)])]
    b.write_markers()
    assert b.state(TID) is TxnState.COMPLETE_COMMIT and len(b.appended) == written + 1


def test_a_write_failing_after_its_partition_was_unloaded_answers_not_coordinator():
    b = TxnBroker()
    pid, epoch = b.begin(TID)
    b.add(TID, pid, epoch, [("t", 0)])
    token = ("end", 1)
    b._versions[token] = 3
    result = b.coord.end_txn(token, EndTxnRequest(transactional_id=TID, producer_id=pid, producer_epoch=epoch,
                                                  committed=True), 3, b.now)
    assert len(result.records) == 1 and result.markers
    b.apply(b.coord.unload(b.coord.partition_for(TID)))
    out = b.coord.append_failed(result, int(E.REQUEST_TIMED_OUT), b.now)
    assert [r.error_code for _, r in out.replies] == [E.NOT_COORDINATOR]
    assert not out.markers
