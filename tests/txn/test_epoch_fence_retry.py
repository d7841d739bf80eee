"""A fence whose record cannot be written is retried with the same bumped epoch (Kafka's
hasFailedEpochFence), also when that epoch is Short.MaxValue: a producer at epoch 32766 whose
transaction the coordinator must abort, with the PrepareAbort (epoch 32767) failing to append,
neither raises out of InitProducerId nor jams the coordinator's timers; the abort completes once a
write succeeds."""

from __future__ import annotations

from kcompat.protocol.errors import ErrorCode
from kcompat.txn import txn_records as rec
from kcompat.txn.state import TxnState
from tests.txn.test_coordinator_harness import FAST, TxnBroker

TID = "exhausted"


def test_failed_fence_at_the_last_epoch_is_retried_not_raised():
    b = TxnBroker(FAST)
    p = b.coord.partition_for(TID)
    v = rec.TxnLogValue(producer_id=7, producer_epoch=32765, timeout_ms=1000, state=TxnState.EMPTY,
                        partitions=frozenset(), last_update_ms=b.now, txn_start_ms=-1)
    b.log[p].append((0, rec.key_bytes(TID), rec.value_bytes(v)))
    b.restart()
    r = b.init(TID, 1000, version=4, pid=7, epoch=32765)
    assert (r.error_code, r.producer_epoch) == (0, 32766)        # Short.MaxValue - 1
    assert b.add(TID, 7, 32766, [("t", 0)]) == {("t", 0): 0}
    b.fail_next = 6                                            # the fence (PrepareAbort, 32767) fails
    r = b.init(TID, 1000, version=4, pid=7, epoch=32766)
    assert r.error_code != 0
    r = b.init(TID, 1000, version=4, pid=7, epoch=32766)       # raised RuntimeError before the fix
    assert r.error_code in (ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.PRODUCER_FENCED,
                            ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    for dt in (1, 5000, 20000):                                # the timers keep running
        b.advance(dt)
    assert b.meta(TID).state in (TxnState.PREPARE_ABORT, TxnState.COMPLETE_ABORT)
    assert b.meta(TID).epoch == 32767
