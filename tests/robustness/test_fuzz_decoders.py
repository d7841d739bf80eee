"""A short, seeded run of tools/fuzz_protocol.py: every request decoder (every API key and
version, request headers v1/v2), the connection's framing, the record-batch readers, every codec,
and the produce and follower append paths on a real log get mutated valid inputs, and must raise
nothing but their own error type (DecodeError, CorruptRecordError, CompressionError, KafkaError
with a Kafka error code) nor allocate more than MEM_PER_BYTE x the input + MEM_BASE. Work grows
linearly with the input (counted in function calls, not timed). Plus the bugs the long run found,
one test each.

The full job (10^6 inputs, also the CPU-time check and the atheris engine) is described in
bench/README.md; same seed, same inputs, so a finding here replays there.
"""

from __future__ import annotations

import random
import struct
import tracemalloc
import uuid

import pytest

from kcompat.isr.partition import AppendPolicy, Partition
from kcompat.log import Log, LogConfig
from kcompat.protocol import compression
from kcompat.protocol import records as rb
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.protocol.messages import API_TABLE, api_classes
from kcompat.protocol.primitives import DecodeError
from tools import fuzz_protocol as fp
from tools import fuzz_targets as ft

SEED = 25
INPUTS = 20000       # about 8 s on an idle core
NOW = ft.NOW_MS


@pytest.fixture(scope="module")
def targets():
    ts = ft.all_targets()
    yield ts
    ft.close_all()


def test_every_decoder_keeps_its_properties_on_mutated_inputs(targets, tmp_path):
    fuzzer = fp.Fuzzer(targets, SEED, tmp_path)
    counts = fp.shares(targets, INPUTS)
    tracemalloc.start()
    try:
        for t in targets:
            fuzzer.run_target(t, counts[t.name])
    finally:
        tracemalloc.stop()
    summary = fp.report(fuzzer, 0.0)
    assert {t.group for t in targets} == {"request", "header", "frame", "batch", "compression", "append",
                                          "follower"}
    requests = {t.name for t in targets if t.group == "request"}
    assert len(requests) == sum(api_classes(k)[0].VALID_VERSIONS[1] - api_classes(k)[0].VALID_VERSIONS[0] + 1
                                for k in API_TABLE)
    assert all(fuzzer.stats[t.name].inputs >= 20 for t in targets)
    found = list(fuzzer.findings.values())
    assert not found, (f"{len(found)} findings: "
                       + "; ".join(f"{f['kind']} in {f['target']} x{f['count']}: {f['exception'][:200]} at {f['where']}"
                                   for f in found)
                       + "\n\n" + "\n\n".join(f"input {(f['input'] or '')[:2000]}\n{f['traceback']}" for f in found))
    assert summary["inputs"] >= INPUTS * 0.9


@pytest.mark.parametrize("group", ["request", "header", "frame", "batch", "compression", "append", "follower"])
def test_work_grows_linearly_with_the_input(targets, group):
    """Function calls (deterministic) for valid inputs of 1x..8x the size: a decoder that loops
    without consuming input, or re-reads it, shows an exponent near 2."""
    picked = [t for t in targets if t.group == group and t.scaled is not None]
    if group == "request":  # the first and the last version of every API
        by_key: dict[str, list] = {}
        for t in picked:
            by_key.setdefault(t.name.split(":")[1], []).append(t)
        picked = [v for ts in by_key.values() for v in (ts[0], ts[-1])]
    worst = []
    for t in picked:
        fam = [t.scaled(k) for k in (50, 100, 200, 400)]
        sizes = [len(d) for d in fam]
        calls = [fp.cost_calls(t, d) for d in fam]
        if sizes[3] > sizes[1] * 2:
            worst.append((fp.growth_of_increments(calls, sizes), t.name, sizes, calls))
    assert worst
    bad = [w for w in worst if w[0] > fp.MAX_CALLS_EXPONENT]
    assert not bad, f"superlinear work: {bad}"


# -- the findings of the long run, one test each ---------------------------------------------------------

@pytest.mark.parametrize("key", sorted(API_TABLE))
def test_a_truncated_request_raises_decode_error_only(key):
    """Before: fixed-width fields past the end raised struct.error, bools IndexError."""
    req, _ = api_classes(key)
    rng = random.Random(key)
    for v in range(req.VALID_VERSIONS[0], req.VALID_VERSIONS[1] + 1):
        data = ft.encode(ft.sample(req, req, v, rng, width=2), v)
        for cut in range(len(data)):
            try:
                req.read(memoryview(data[:cut]), 0, v)
            except DecodeError:
                pass


def log_partition(tmp_path, name: str, policy: AppendPolicy | None = None) -> Partition:
    log = Log.open(tmp_path / f"{name}-0", LogConfig(), recovery_point=0, log_start_offset=0, clean_shutdown=True,
                   now_ms=NOW)
    return Partition(name, 0, uuid.UUID(int=9), log, policy=policy)


def bomb(codec: int, size: int) -> bytes:
    """One record whose value is ``size`` zero bytes: a few KB compressed."""
    return rb.build_batch([(NOW, b"k", bytes(size), ())], codec=codec)


@pytest.mark.parametrize("codec", [compression.GZIP, compression.LZ4, compression.ZSTD])
def test_a_compression_bomb_is_refused_without_inflating_it(tmp_path, codec):
    """A 64 MiB record compressed to a few KB, produced to a compacted topic (the validation
    reads keys): refused as CORRUPT_MESSAGE past compression.decompressed_limit, and memory stays
    small. Before: zstd inflated the whole frame before any check; up to 256 MiB was accepted."""
    data = bomb(codec, 64 << 20)
    assert len(data) < 300_000
    p = log_partition(tmp_path, "bomb", AppendPolicy(compact=True))
    tracemalloc.start()
    try:
        with pytest.raises(KafkaError) as e:
            p.append(memoryview(bytearray(data)), NOW)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert e.value.code == ErrorCode.CORRUPT_MESSAGE and "size bound" in str(e.value)
    assert peak < fp.MEM_PER_BYTE * len(data) + fp.MEM_BASE, peak
    assert p.log_end_offset == 0
    # a batch that really expands 30x is fine
    ok = rb.build_batch([(NOW, b"k%d" % i, b"v" * 100, ()) for i in range(1000)], codec=codec)
    assert p.append(memoryview(bytearray(ok)), NOW).base_offset == 0


def test_snappy_block_announcing_more_than_snappy_can_expand_is_refused():
    block = b"\xff\xff\xff\xff\x0f" + bytes(20)  # announces 4 GiB from 25 bytes
    with pytest.raises(compression.CompressionError):
        compression.decompress(compression.SNAPPY, block)


def test_follower_refuses_a_control_batch_whose_marker_does_not_decode(tmp_path):
    """Before: appended, then the producer-state replay raised CorruptRecordError."""
    p = log_partition(tmp_path, "marker")
    good = rb.build_control_batch(rb.CONTROL_COMMIT, 7, 0, 1, NOW)
    bad = rb.build_batch([(NOW, b"\x00", b"", ())], producer_id=7, producer_epoch=0, transactional=True,
                         control=True)  # a 1-byte key: no control type
    with pytest.raises(KafkaError) as e:
        p.append_as_follower(bad, NOW)
    assert e.value.code == ErrorCode.CORRUPT_MESSAGE
    assert p.log_end_offset == 0
    assert p.append_as_follower(good, NOW) == (0, 0)


def test_follower_gap_beyond_two_billion_offsets_rolls_at_the_batch(tmp_path):
    """A follower copying a compacted leader: offsets 0, then 5e9. Before: appended to the segment
    at 0, whose 32-bit relative offsets overflowed at the next roll or close."""
    p = log_partition(tmp_path, "gap")
    for base in (0, 5_000_000_000, 5_000_000_001):
        p.append_as_follower(rb.build_batch([(NOW, b"k", b"v", ())], base_offset=base), NOW)
    p.log.close()
    reopened = Log.open(tmp_path / "gap-0", LogConfig(), recovery_point=0, log_start_offset=0, clean_shutdown=True,
                        now_ms=NOW)
    try:
        assert reopened.log_end_offset == 5_000_000_002
        data = reopened.read(5_000_000_000, 1 << 20)
        assert [h.base_offset for _, h in rb.iter_batches(data)] == [5_000_000_000, 5_000_000_001]
    finally:
        reopened.close()
    empty = log_partition(tmp_path, "gap-empty")
    empty.append_as_follower(rb.build_batch([(NOW, b"k", b"v", ())], base_offset=9_000_000_000), NOW)
    assert empty.log_end_offset == 9_000_000_001
    span = (rb.build_batch([(NOW, b"k", b"v", ())], base_offset=9_000_000_001)
            + rb.build_batch([(NOW, b"k", b"v", ())], base_offset=9_000_000_002 + 2**31))
    with pytest.raises(ValueError):  # more offsets than one segment can index, in one append
        empty.append_as_follower(span, NOW)
    assert empty.log_end_offset == 9_000_000_001


def test_follower_refuses_offsets_beyond_a_java_long(tmp_path):
    """Before: a batch ending at 2^63 - 1 was appended and its log end offset, 2^63, no longer
    fit the protocol (struct.error encoding any Fetch or ListOffsets answer for it). Kafka's long
    arithmetic wraps there and refuses the offsets as out of order."""
    p = log_partition(tmp_path, "wrap")
    with pytest.raises(KafkaError) as e:
        p.append_as_follower(rb.build_batch([(NOW, b"k", b"v", ())] * 2, base_offset=2**63 - 2), NOW)
    assert e.value.code == ErrorCode.CORRUPT_MESSAGE and p.log_end_offset == 0
    assert p.append_as_follower(rb.build_batch([(NOW, b"k", b"v", ())], base_offset=2**63 - 2), NOW)
    assert p.log_end_offset == 2**63 - 1


def test_frame_target_is_the_connection_code():
    """The frame targets drive kcompat.broker.connection.KafkaConnection itself: a frame cut
    short inside the body is closed with a log line; a complete valid one is dispatched."""
    t = ft.frame_target(False)
    try:
        valid = t.seeds(random.Random(1))[-1]
        assert t.run(valid).startswith("open")
        cut = valid[:-1]
        assert t.run(struct.pack(">i", len(cut) - 4) + cut[4:]).startswith("closed:malformed")
    finally:
        t.close()
