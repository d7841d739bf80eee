"""Transactions on a partition: LSO, markers, the aborted-transaction index, and their rebuild
after a clean or an unclean reopen (KIP-98)."""

from __future__ import annotations

import uuid

import pytest

from kcompat.isr.partition import READ_COMMITTED, Partition
from kcompat.log import Log, LogConfig
from kcompat.protocol import records as rb
from kcompat.protocol.errors import ErrorCode, KafkaError

NOW = 1_700_000_000_000
TID = uuid.UUID(int=7)


def open_partition(path, clean=True):
    log = Log.open(path, LogConfig(segment_bytes=1 << 20), clean_shutdown=clean, now_ms=NOW)
    p = Partition("t", 0, TID, log)
    p.txn_verifier = lambda txn_id, pid, epoch, topic, part: 0
    return p


def txn_batch(pid, seq, n=1, epoch=0):
    return memoryview(bytearray(rb.build_batch([(NOW, b"k", b"v%d" % i, ()) for i in range(n)], producer_id=pid,
                                               producer_epoch=epoch, base_sequence=seq, transactional=True)))


def plain_batch():
    return memoryview(bytearray(rb.build_batch([(NOW, b"k", b"plain", ())])))


def scenario(p):
    p.append(txn_batch(1, 0, 3), NOW, "txn-a")           # 0-2, open
    assert p.last_stable_offset == 0
    p.append(plain_batch(), NOW)                          # 3
    p.append(txn_batch(2, 0, 2), NOW, "txn-b")           # 4-5, open
    assert p.last_stable_offset == 0 and p.high_watermark == 6
    assert p.read(0, 1 << 20, isolation_level=READ_COMMITTED) == b""
    assert p.append_marker(1, 0, 0, False, NOW) == 6      # abort txn-a
    assert p.last_stable_offset == 4                      # txn-b still open
    assert p.append_marker(2, 0, 0, True, NOW) == 7       # commit txn-b
    assert p.last_stable_offset == 8 == p.high_watermark


def test_lso_markers_and_aborted_index(tmp_path):
    p = open_partition(tmp_path / "t-0")
    scenario(p)
    assert p.aborted_transactions(0, 8) == [(1, 0)]
    assert p.aborted_transactions(7, 8) == []            # fetch after the aborted range
    headers = [h for _, h in rb.iter_batches(p.read(0, 1 << 20, isolation_level=READ_COMMITTED))]
    assert [h.is_control for h in headers] == [False, False, False, True, True]
    p.log.close()


@pytest.mark.parametrize("clean", [True, False])
def test_transactions_rebuilt_after_reopen(tmp_path, clean):
    p = open_partition(tmp_path / "t-0")
    scenario(p)
    p.append(txn_batch(1, 3, 1), NOW, "txn-a")           # 8: a new transaction, left open
    if clean:
        p.write_snapshot()
        p.log.close()
    else:
        p.log.close_without_flush()                       # as after kill -9: no snapshot at the end
    q = open_partition(tmp_path / "t-0", clean=clean)
    assert q.last_stable_offset == 8
    assert q.aborted_transactions(0, 9) == [(1, 0)]       # exactly once, not duplicated by the replay
    q.append_marker(1, 0, 0, False, NOW)                  # abort it: 9
    assert q.aborted_transactions(0, 10) == [(1, 0), (1, 8)]
    assert q.last_stable_offset == 10
    q.log.close()


def test_marker_and_write_fencing(tmp_path):
    p = open_partition(tmp_path / "t-0")
    p.append(txn_batch(1, 0, 1, epoch=3), NOW, "txn-a")
    with pytest.raises(KafkaError) as e:
        p.append(memoryview(bytearray(rb.build_batch([(NOW, b"k", b"x", ())], producer_id=1, producer_epoch=3,
                                                     base_sequence=1))), NOW)
    assert e.value.code == ErrorCode.INVALID_TXN_STATE     # non-transactional write inside a transaction
    with pytest.raises(KafkaError) as e:
        p.append_marker(1, 2, 0, True, NOW)
    assert e.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    p.append_marker(1, 3, 5, True, NOW)
    with pytest.raises(KafkaError) as e:
        p.append_marker(1, 3, 4, True, NOW)
    assert e.value.code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    p.txn_verifier = lambda *a: int(ErrorCode.INVALID_TXN_STATE)
    with pytest.raises(KafkaError) as e:
        p.append(txn_batch(1, 1, 1, epoch=3), NOW, "txn-a")
    assert e.value.code == ErrorCode.INVALID_TXN_STATE
    p.log.close()
