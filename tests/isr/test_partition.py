"""Unit tests of kcompat.isr.partition.Partition over a real kcompat.log.Log in tmp_path: the
produce validation of Kafka's UnifiedLog.appendAsLeader / LogValidator, idempotent producer
state (also across reopen, with and without snapshots), reads and watermarks."""

from __future__ import annotations

import struct
import uuid

import pytest

from kcompat.log import Log, LogConfig
from kcompat.protocol import records as rb
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.isr.partition import AppendPolicy, Partition

NOW = 1_700_000_000_000
TOPIC_ID = uuid.UUID(int=42)


def open_log(path, config: LogConfig | None = None, *, log_start_offset: int = 0, clean: bool = True) -> Log:
    return Log.open(path, config or LogConfig(), recovery_point=0, log_start_offset=log_start_offset,
                    clean_shutdown=clean, now_ms=NOW)


@pytest.fixture
def part(tmp_path):
    p = Partition("t", 0, TOPIC_ID, open_log(tmp_path / "t-0"), leader_epoch=3)
    yield p
    if not p.log.closed:
        p.log.close()


def batch(values, *, ts: int = NOW, pid: int = -1, epoch: int = -1, seq: int = -1, **kw) -> bytearray:
    return bytearray(rb.build_batch([(ts + i, b"k", v, ()) for i, v in enumerate(values)], producer_id=pid,
                                    producer_epoch=epoch, base_sequence=seq, **kw))


def stored(p: Partition, offset: int = 0) -> bytes:
    out = b""
    while offset < p.high_watermark:
        data = p.read(offset, 1 << 20)
        out += data
        offset = [h for _pos, h in rb.iter_batches(data)][-1].next_offset
    return out


def values(data: bytes) -> list[tuple[int, bytes]]:
    out = []
    for pos, h in rb.iter_batches(data):
        out += [(r.offset, r.value) for r in rb.iter_records(data[pos:pos + h.size])]
    return out


def code_of(fn) -> ErrorCode:
    with pytest.raises(KafkaError) as e:
        fn()
    return e.value.code


# -- append ------------------------------------------------------------------------------------------

def test_append_assigns_offsets_and_stamps_the_leader_epoch(part):
    info = part.append(memoryview(batch([b"a", b"b", b"c"])), NOW)
    assert (info.base_offset, info.log_append_time, info.log_start_offset, info.duplicate) == (0, -1, 0, False)
    assert part.append(memoryview(batch([b"d"])), NOW).base_offset == 3
    assert (part.log_end_offset, part.high_watermark, part.last_stable_offset) == (4, 4, 4)
    data = stored(part)
    hs = [h for _pos, h in rb.iter_batches(data)]
    assert [(h.base_offset, h.partition_leader_epoch) for h in hs] == [(0, 3), (3, 3)]
    assert all(rb.crc_valid(data, pos, h) for pos, h in rb.iter_batches(data))  # both fields are outside the CRC
    assert values(data) == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]


def test_log_append_time_topic_stamps_the_batch_and_recomputes_the_crc(tmp_path):
    p = Partition("t", 0, TOPIC_ID, open_log(tmp_path / "t-0"), policy=AppendPolicy(log_append_time=True))
    info = p.append(memoryview(batch([b"a", b"b"], ts=NOW - 99999)), NOW + 5)
    assert info.log_append_time == NOW + 5
    data = p.read(0, 1 << 20)
    pos, h = next(rb.iter_batches(data))
    assert h.timestamp_type == rb.LOG_APPEND_TIME and h.max_timestamp == NOW + 5
    assert rb.crc_valid(data, pos, h)
    assert [r.timestamp for r in rb.iter_records(data)] == [NOW + 5, NOW + 5]
    p.log.close()


def _corrupt() -> bytearray:
    b = batch([b"a", b"b"])
    b[-1] ^= 0x55
    return b


def _inconsistent_count() -> bytearray:
    b = batch([b"a", b"b"])
    struct.pack_into(">i", b, 57, 5)  # recordsCount 5, lastOffsetDelta 1
    struct.pack_into(">I", b, 17, rb.compute_crc(b, 0, len(b)))
    return b


def _zero_count() -> bytearray:
    b = batch([b"a"])
    struct.pack_into(">i", b, 57, 0)
    struct.pack_into(">I", b, 17, rb.compute_crc(b, 0, len(b)))
    return b


def _magic(m: int) -> bytearray:
    b = batch([b"a"])
    b[16] = m & 0xFF
    return b


@pytest.mark.parametrize("name,make,code", [
    ("empty", lambda: bytearray(), ErrorCode.INVALID_RECORD),
    ("truncated", lambda: batch([b"a", b"b"])[:-4], ErrorCode.INVALID_RECORD),
    ("shorter than the magic", lambda: batch([b"a"])[:15], ErrorCode.INVALID_RECORD),
    ("two batches", lambda: batch([b"a"]) + batch([b"b"]), ErrorCode.INVALID_RECORD),
    ("bad crc", _corrupt, ErrorCode.CORRUPT_MESSAGE),
    ("magic 1", lambda: _magic(1), ErrorCode.INVALID_RECORD),
    ("magic 5", lambda: _magic(5), ErrorCode.CORRUPT_MESSAGE),
    ("control batch", lambda: bytearray(rb.build_control_batch(rb.CONTROL_COMMIT, 5, 0, 0, NOW)),
     ErrorCode.INVALID_RECORD),
    ("count does not match offsets", _inconsistent_count, ErrorCode.INVALID_RECORD),
    ("zero records", _zero_count, ErrorCode.INVALID_RECORD),
    ("idempotent without sequence", lambda: batch([b"a"], pid=5, epoch=0, seq=-1), ErrorCode.INVALID_RECORD),
])
def test_invalid_batches_are_rejected_and_nothing_is_written(part, name, make, code):
    part.append(memoryview(batch([b"before"])), NOW)
    before = stored(part)
    assert code_of(lambda: part.append(memoryview(make()), NOW)) == code, name
    assert part.log_end_offset == 1 and stored(part) == before
    assert part.producer_state.producers.get(5) is None


def test_max_message_bytes(tmp_path):
    p = Partition("t", 0, TOPIC_ID, open_log(tmp_path / "t-0"), policy=AppendPolicy(max_message_bytes=200))
    small = batch([b"x" * 50])
    big = batch([b"x" * 200])
    assert len(small) <= 200 < len(big)
    assert code_of(lambda: p.append(memoryview(big), NOW)) == ErrorCode.MESSAGE_TOO_LARGE
    assert p.append(memoryview(small), NOW).base_offset == 0
    p.log.close()


def test_timestamp_bounds(tmp_path):
    policy = AppendPolicy(timestamp_before_max_ms=1000, timestamp_after_max_ms=500)
    p = Partition("t", 0, TOPIC_ID, open_log(tmp_path / "t-0"), policy=policy)
    assert code_of(lambda: p.append(memoryview(batch([b"old"], ts=NOW - 1001)), NOW)) == ErrorCode.INVALID_TIMESTAMP
    assert code_of(lambda: p.append(memoryview(batch([b"new"], ts=NOW + 501)), NOW)) == ErrorCode.INVALID_TIMESTAMP
    assert p.append(memoryview(batch([b"ok"], ts=NOW - 1000)), NOW).base_offset == 0
    assert p.append(memoryview(batch([b"ok"], ts=NOW + 499)), NOW).base_offset == 1
    p.log.close()


# -- idempotence -------------------------------------------------------------------------------------

def test_idempotent_duplicates_gaps_and_epochs(part):
    b0 = batch([b"a", b"b"], pid=9, epoch=0, seq=0)
    b1 = batch([b"c"], pid=9, epoch=0, seq=2)
    assert part.append(memoryview(bytearray(b0)), NOW).base_offset == 0
    part.append(memoryview(batch([b"plain"])), NOW)
    assert part.append(memoryview(bytearray(b1)), NOW).base_offset == 3
    dup = part.append(memoryview(bytearray(b0)), NOW)
    assert (dup.base_offset, dup.duplicate) == (0, True)
    assert part.append(memoryview(bytearray(b1)), NOW).base_offset == 3
    assert part.log_end_offset == 4
    assert code_of(lambda: part.append(memoryview(batch([b"gap"], pid=9, epoch=0, seq=4)), NOW)) \
        == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert part.append(memoryview(batch([b"e1"], pid=9, epoch=1, seq=0)), NOW).base_offset == 4
    assert code_of(lambda: part.append(memoryview(batch([b"old"], pid=9, epoch=0, seq=3)), NOW)) \
        == ErrorCode.INVALID_PRODUCER_EPOCH
    # a failed append changes nothing, so the right next batch still goes in
    assert part.append(memoryview(batch([b"e1b"], pid=9, epoch=1, seq=1)), NOW).base_offset == 5
    assert [v for _o, v in values(stored(part))] == [b"a", b"b", b"plain", b"c", b"e1", b"e1b"]


@pytest.mark.parametrize("how", ["replay", "snapshot", "corrupt snapshot", "rolled segments"])
def test_producer_state_survives_reopen(tmp_path, how):
    config = LogConfig(segment_bytes=300) if how == "rolled segments" else LogConfig()
    p = Partition("t", 0, TOPIC_ID, open_log(tmp_path / "t-0", config))
    sent = []
    seq = 0
    for i in range(12):
        b = batch([b"v%02d" % i] * 2, pid=77, epoch=2, seq=seq)
        sent.append((b, p.append(memoryview(bytearray(b)), NOW).base_offset))
        seq += 2
    if how == "rolled segments":
        assert len(p.log.segments) > 2 and p.log.snapshot_offsets
    if how in ("snapshot", "corrupt snapshot"):
        p.write_snapshot()
    leo = p.log_end_offset
    p.log.close()
    if how == "corrupt snapshot":
        snap = sorted((tmp_path / "t-0").glob("*.snapshot"))[-1]
        data = bytearray(snap.read_bytes())
        data[-1] ^= 0xFF
        snap.write_bytes(bytes(data))
    p2 = Partition("t", 0, TOPIC_ID, open_log(tmp_path / "t-0", config, clean=how != "replay"))
    assert p2.log_end_offset == leo
    last, last_base = sent[-1]
    dup = p2.append(memoryview(bytearray(last)), NOW)
    assert (dup.base_offset, dup.duplicate) == (last_base, True)
    assert code_of(lambda: p2.append(memoryview(batch([b"gap"], pid=77, epoch=2, seq=seq + 1)), NOW)) \
        == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert code_of(lambda: p2.append(memoryview(batch([b"old"], pid=77, epoch=1, seq=0)), NOW)) \
        == ErrorCode.INVALID_PRODUCER_EPOCH
    assert p2.append(memoryview(batch([b"next"], pid=77, epoch=2, seq=seq)), NOW).base_offset == leo
    p2.log.close()


# -- reads ---------------------------------------------------------------------------------------------

def test_read_inside_a_batch_returns_the_whole_batch(part):
    part.append(memoryview(batch([b"a", b"b"])), NOW)
    part.append(memoryview(batch([b"c", b"d", b"e"])), NOW)
    data = part.read(3, 1 << 20)
    hs = [h for _pos, h in rb.iter_batches(data)]
    assert hs[0].base_offset == 2 and sum(h.size for h in hs) == len(data)
    assert values(data) == [(2, b"c"), (3, b"d"), (4, b"e")]


def test_read_limits_and_min_one_batch(part):
    big = batch([b"x" * 500])
    part.append(memoryview(bytearray(big)), NOW)
    part.append(memoryview(batch([b"y"])), NOW)
    assert len(part.read(0, 10)) == len(big)  # KIP-74: the first batch even if larger
    assert part.read(0, 10, min_one_batch=False) == b""
    assert len(part.read(0, len(big) + 5)) == len(big)  # whole batches only


def test_offset_out_of_range_and_delete_records(part):
    for i in range(3):
        part.append(memoryview(batch([b"%d" % i, b"%d'" % i])), NOW)
    assert part.read(6, 1000) == b""  # at the high watermark
    assert code_of(lambda: part.read(7, 1000)) == ErrorCode.OFFSET_OUT_OF_RANGE
    assert code_of(lambda: part.delete_records(7)) == ErrorCode.OFFSET_OUT_OF_RANGE
    assert part.delete_records(3) == 3
    assert part.log_start_offset == 3
    assert part.delete_records(1) == 3  # never moves back
    assert code_of(lambda: part.read(2, 1000)) == ErrorCode.OFFSET_OUT_OF_RANGE
    assert values(part.read(3, 1000))[0] == (2, b"1")  # the batch holding offset 3 starts at 2
    assert part.append(memoryview(batch([b"z"])), NOW).log_start_offset == 3
    assert part.delete_records(-1) == 7  # -1 = the high watermark
    assert part.read(7, 1000) == b""
    assert code_of(lambda: part.read(6, 1000)) == ErrorCode.OFFSET_OUT_OF_RANGE


def test_waiters_are_woken_by_appends_only(part):
    calls = []
    wake = lambda: calls.append(1)  # noqa: E731
    part.add_waiter(wake)
    with pytest.raises(KafkaError):
        part.append(memoryview(_corrupt()), NOW)
    assert calls == []
    part.append(memoryview(batch([b"a"])), NOW)
    assert calls == [1]
    dup_batch = batch([b"i"], pid=1, epoch=0, seq=0)
    part.append(memoryview(bytearray(dup_batch)), NOW)
    part.append(memoryview(bytearray(dup_batch)), NOW)  # duplicate: nothing appended, nothing to wake
    assert calls == [1, 1]
    part.remove_waiter(wake)
    part.append(memoryview(batch([b"b"])), NOW)
    assert calls == [1, 1]
