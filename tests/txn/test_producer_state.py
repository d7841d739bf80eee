"""Unit tests of kcompat.txn.producer_state: Kafka's ProducerStateManager rules for idempotent
producers (KIP-98, KIP-360) and its ``.snapshot`` file format."""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.records import (
    ATTR_CONTROL, ATTR_TRANSACTIONAL, BatchHeader, build_batch, parse_header,
)
from kcompat.txn.producer_state import (
    NUM_BATCHES_TO_RETAIN, BatchMetadata, ProducerStateManager, in_sequence,
)

INT32_MAX = 2**31 - 1
TS = 1_700_000_000_000


def hdr(pid: int, epoch: int, seq: int, n: int = 1, *, base_offset: int = 0, attrs: int = 0,
        max_ts: int = TS) -> BatchHeader:
    return BatchHeader(base_offset=base_offset, batch_length=100, partition_leader_epoch=0, magic=2, crc=0,
                       attributes=attrs, last_offset_delta=n - 1, base_timestamp=TS, max_timestamp=max_ts,
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq, records_count=n)


class Appender:
    """Drives a ProducerStateManager like Partition.append does, assigning offsets."""

    def __init__(self) -> None:
        self.psm = ProducerStateManager()
        self.leo = 0
        self.log: list[tuple[int, int, int]] = []  # (pid, first seq, offset)

    def append(self, h: BatchHeader) -> tuple[int, bool]:
        dup = self.psm.check(h)
        if dup is not None:
            return dup.first_offset, True
        base = self.leo
        self.psm.update(h, base, h.max_timestamp)
        self.leo += h.last_offset_delta + 1
        self.log.append((h.producer_id, h.base_sequence, base))
        return base, False


def code_of(fn) -> ErrorCode:
    with pytest.raises(KafkaError) as e:
        fn()
    return e.value.code


def test_in_sequence_wraps_at_int32_max():
    assert in_sequence(4, 5)
    assert not in_sequence(4, 6) and not in_sequence(4, 4) and not in_sequence(4, 3)
    assert in_sequence(INT32_MAX, 0)
    assert not in_sequence(INT32_MAX - 1, 0)


def test_unknown_producer_starts_with_any_sequence():
    a = Appender()
    assert a.append(hdr(7, 0, 42, 3)) == (0, False)
    assert a.append(hdr(7, 0, 45, 1)) == (3, False)
    # and a producer with a non-zero epoch too (e.g. after a KIP-360 bump elsewhere)
    assert a.append(hdr(8, 5, 1000)) == (4, False)


def test_duplicates_of_the_last_five_batches_return_original_offsets():
    a = Appender()
    offsets = []
    seq = 0
    for i in range(7):
        n = i + 1
        offsets.append(a.append(hdr(1, 0, seq, n))[0])
        seq += n
    # the last five batches are remembered: retries succeed with their original offsets
    seqs = [0, 1, 3, 6, 10, 15, 21]
    for i in range(2, 7):
        assert a.append(hdr(1, 0, seqs[i], i + 1)) == (offsets[i], True)
    # the two oldest are forgotten: a retry of them is out of order (Kafka's behaviour)
    for i in range(2):
        assert code_of(lambda i=i: a.psm.check(hdr(1, 0, seqs[i], i + 1))) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert len(a.psm.producers[1].batches) == NUM_BATCHES_TO_RETAIN
    assert a.leo == 28


def test_duplicate_must_match_the_whole_sequence_range():
    a = Appender()
    a.append(hdr(1, 0, 0, 5))
    # same first sequence, different length: not a duplicate, and not in sequence either
    assert code_of(lambda: a.psm.check(hdr(1, 0, 0, 3))) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_sequence_gap_is_out_of_order():
    a = Appender()
    a.append(hdr(1, 0, 0, 2))
    assert code_of(lambda: a.psm.check(hdr(1, 0, 3))) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert code_of(lambda: a.psm.check(hdr(1, 0, 1))) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert a.append(hdr(1, 0, 2)) == (2, False)


def test_epochs():
    a = Appender()
    a.append(hdr(1, 3, 0, 2))
    # older epoch: fenced, whatever the sequence
    assert code_of(lambda: a.psm.check(hdr(1, 2, 2))) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert code_of(lambda: a.psm.check(hdr(1, 2, 0))) == ErrorCode.INVALID_PRODUCER_EPOCH
    # newer epoch must restart at sequence 0
    assert code_of(lambda: a.psm.check(hdr(1, 4, 2))) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert a.append(hdr(1, 4, 0)) == (2, False)
    entry = a.psm.producers[1]
    assert entry.producer_epoch == 4
    assert [b.first_seq for b in entry.batches] == [0]  # the old epoch's batches are dropped
    # a retry from the old epoch is now fenced rather than deduplicated
    assert code_of(lambda: a.psm.check(hdr(1, 3, 0, 2))) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert code_of(lambda: a.psm.check(hdr(1, 3, 2))) == ErrorCode.INVALID_PRODUCER_EPOCH


def test_sequence_wraps_around_int32_max():
    a = Appender()
    a.append(hdr(1, 0, INT32_MAX - 2, 3))  # sequences MAX-2, MAX-1, MAX
    assert a.psm.producers[1].last_seq == INT32_MAX
    assert a.append(hdr(1, 0, 0, 2)) == (3, False)
    # a batch that itself wraps: last sequence = (base + delta) mod 2**31
    b = Appender()
    h = hdr(2, 0, INT32_MAX - 1, 4)
    assert h.last_sequence == 1
    b.append(h)
    assert b.append(hdr(2, 0, 2)) == (4, False)
    assert b.append(h) == (0, True)


def test_transactional_and_control_batches_track_the_open_transaction():
    psm = ProducerStateManager()
    psm.update(hdr(5, 0, 0, 2, attrs=ATTR_TRANSACTIONAL), 10, TS)
    psm.update(hdr(5, 0, 2, 1, attrs=ATTR_TRANSACTIONAL), 12, TS)
    assert psm.producers[5].current_txn_first_offset == 10
    assert psm.first_unstable_offset() == 10
    psm.update(hdr(5, 0, -1, 1, attrs=ATTR_TRANSACTIONAL | ATTR_CONTROL), 13, TS + 5)
    assert psm.complete_txn(5, 0, 0, 13, TS + 5) == (5, 10, 13)
    assert psm.first_unstable_offset() is None
    e = psm.producers[5]
    assert e.current_txn_first_offset == -1 and e.last_timestamp == TS + 5
    assert [(b.first_seq, b.first_offset) for b in e.batches] == [(0, 10), (2, 12)]  # markers are not batches


def test_markers_of_transaction_version_2_need_a_bumped_epoch():
    """KIP-1228: a TV2 marker's epoch must be above the producer's here (its EndTxn bumped it), or
    the same with no transaction open (a marker sent again, KAFKA-19999); a TV0/TV1 marker's may
    be the same."""
    psm = ProducerStateManager()
    psm.update(hdr(5, 3, 0, 1, attrs=ATTR_TRANSACTIONAL), 10, TS)
    assert code_of(lambda: psm.check_marker(5, 3, 0, transaction_version=2)) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert code_of(lambda: psm.check_marker(5, 2, 0, transaction_version=2)) == ErrorCode.INVALID_PRODUCER_EPOCH
    psm.check_marker(5, 3, 0)                        # a TV1 marker with the producer's epoch
    psm.check_marker(5, 4, 0, transaction_version=2)
    psm.complete_txn(5, 4, 0, 11, TS)
    e = psm.producers[5]
    assert (e.producer_epoch, list(e.batches)) == (4, [])   # the bump starts the sequence again
    psm.check_marker(5, 4, 0, transaction_version=2)  # the same marker again: nothing open, accepted
    psm.check(hdr(5, 4, 0, 1, attrs=ATTR_TRANSACTIONAL))   # the next transaction starts at sequence 0
    psm.check_marker(9, 0, 0, transaction_version=2)  # a producer never seen here


def test_replay_rebuilds_the_same_state_as_appends():
    a = Appender()
    headers = []
    for pid, epoch, seq, n in [(1, 0, 0, 3), (2, 0, 10, 1), (1, 0, 3, 2), (1, 1, 0, 1), (2, 0, 11, 4)]:
        h = hdr(pid, epoch, seq, n)
        base, _dup = a.append(h)
        headers.append(h._replace(base_offset=base))
    rebuilt = ProducerStateManager()
    for h in headers:
        rebuilt.replay(h)
    rebuilt.replay(hdr(-1, -1, -1, 1))  # non-idempotent batches are ignored
    assert state(rebuilt) == state(a.psm)


def state(psm: ProducerStateManager):
    return {pid: (e.producer_epoch, list(e.batches), e.current_txn_first_offset)
            for pid, e in sorted(psm.producers.items())}


# -- snapshots --------------------------------------------------------------------------------------

ENTRY = struct.Struct(">qhiqiqiq")  # Kafka's PRODUCER_SNAPSHOT_ENTRY_SCHEMA


def test_snapshot_is_kafkas_file_format():
    psm = ProducerStateManager()
    psm.update(hdr(7, 2, 0, 3), 100, TS)
    psm.update(hdr(7, 2, 3, 2), 103, TS + 9)
    data = psm.snapshot()
    version, crc, count = struct.unpack_from(">hIi", data, 0)
    assert version == 1 and count == 1
    assert crc == crc32c.crc32c(data[6:])
    assert ENTRY.unpack_from(data, 10) == (7, 2, 4, 104, 1, TS + 9, -1, -1)
    assert len(data) == 10 + ENTRY.size


def test_snapshot_written_by_kafka_loads():
    """An entry laid out as Kafka writes it (also one without batches)."""
    body = struct.pack(">i", 2) + ENTRY.pack(9, 1, 19, 509, 4, TS, 3, -1) + ENTRY.pack(10, 0, -1, -1, 0, TS, -1, -1)
    data = struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    psm = ProducerStateManager()
    psm.load_snapshot(data)
    e = psm.producers[9]
    assert (e.producer_epoch, e.coordinator_epoch) == (1, 3)
    assert list(e.batches) == [BatchMetadata(15, 19, 505, 509, TS)]
    assert psm.producers[10].batches == type(psm.producers[10].batches)(maxlen=NUM_BATCHES_TO_RETAIN)
    # the last batch is still recognised as a duplicate, the next sequence is accepted
    assert psm.check(hdr(9, 1, 15, 5)) == BatchMetadata(15, 19, 505, 509, TS)
    assert psm.check(hdr(9, 1, 20)) is None
    # an entry without batches has last sequence -1: as in Kafka's checkSequence, only 0 follows it
    assert code_of(lambda: psm.check(hdr(10, 0, 77))) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert psm.check(hdr(10, 0, 0)) is None


def test_snapshot_round_trip_keeps_the_last_batch_of_each_producer():
    a = Appender()
    for pid, seq, n in [(1, 0, 2), (1, 2, 2), (2, 5, 1), (1, 4, 3), (3, INT32_MAX, 2)]:
        a.append(hdr(pid, 0, seq, n))
    loaded = ProducerStateManager()
    loaded.truncate_and_reload(a.psm.snapshot())
    assert set(loaded.producers) == {1, 2, 3}
    for pid, e in a.psm.producers.items():
        le = loaded.producers[pid]
        assert le.producer_epoch == e.producer_epoch
        assert list(le.batches) == [e.batches[-1]]
    # a wrapped batch (INT32_MAX, 0) survives the round trip
    assert list(loaded.producers[3].batches)[0][:2] == (INT32_MAX, 0)
    assert loaded.check(hdr(1, 0, 4, 3)).first_offset == a.psm.producers[1].batches[-1].first_offset
    assert loaded.check(hdr(1, 0, 7)) is None
    loaded.truncate_and_reload(None)
    assert loaded.producers == {}


@pytest.mark.parametrize("damage", ["crc", "version", "short", "truncated"])
def test_corrupt_snapshot_is_rejected(damage):
    psm = ProducerStateManager()
    psm.update(hdr(7, 0, 0, 3), 0, TS)
    data = bytearray(psm.snapshot())
    if damage == "crc":
        data[-1] ^= 1
    elif damage == "version":
        data[1] = 9
    elif damage == "short":
        data = data[:5]
    else:
        data = data[:-3]
        struct.pack_into(">I", data, 2, crc32c.crc32c(bytes(data[6:])))
    with pytest.raises(ValueError):
        ProducerStateManager().load_snapshot(bytes(data))


def test_headers_from_real_batches():
    b = build_batch([(TS, None, b"x", ()), (TS + 1, None, b"y", ())], producer_id=4, producer_epoch=1,
                    base_sequence=7)
    h = parse_header(b)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (4, 1, 7, 8)
    a = Appender()
    assert a.append(h) == (0, False)
    assert a.append(h) == (0, True)


# -- property: a producer retrying arbitrarily is deduplicated exactly --------------------------------

@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5), st.lists(st.integers(0, 4), max_size=3)), min_size=1, max_size=30),
       st.integers(0, INT32_MAX))
def test_retries_of_in_flight_batches_are_never_written_twice(batches, first_seq):
    """A producer sends batches in order (sequences continue, wrapping at INT32_MAX) and, after each
    one, re-sends some of its last five (what in-flight retries look like). Every batch is written
    exactly once, and every retry is answered with its original offset."""
    a = Appender()
    sent: list[tuple[BatchHeader, int]] = []
    seq = first_seq
    for n, retries in batches:
        h = hdr(11, 0, seq, n)
        base, dup = a.append(h)
        assert not dup and base == a.leo - n
        sent.append((h, base))
        seq = (seq + n) & INT32_MAX
        for back in retries:
            if back < len(sent):
                old, old_base = sent[-1 - back]
                assert a.append(old) == (old_base, True)
    assert len(a.log) == len(batches)
    assert a.leo == sum(n for n, _r in batches)
