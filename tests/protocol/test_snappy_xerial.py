"""Snappy in the xerial framing (what the Java client's snappy-java ``SnappyOutputStream`` writes).

Framing, as snappy-java's ``SnappyCodec``: 8-byte magic ``\\x82SNAPPY\\x00``, int32 version (1), int32
minimum compatible version (1), then per block an int32 big-endian length and a raw snappy block
of at most 32 KiB of input. Streams come from two encoders that share no code with kcompat's
reader: kafka-python's ``kafka.codec.snappy_encode`` (its own framing code) and one written here
from the format description; kcompat's own writers are cross-checked with kafka-python's reader.
"""

from __future__ import annotations

import random
import struct

import cramjam
import pytest

from kcompat.protocol import compression, records
from kcompat.protocol.compression import SNAPPY, CompressionError

MAGIC = b"\x82SNAPPY\x00"
BLOCK = 32 * 1024


def hand_xerial(payload: bytes, block: int = BLOCK) -> bytes:
    out = bytearray(MAGIC + struct.pack(">ii", 1, 1))
    for i in range(0, len(payload), block):
        raw = bytes(cramjam.snappy.compress_raw(payload[i:i + block]))
        out += struct.pack(">i", len(raw)) + raw
    return bytes(out)


def kafka_python_codec():
    """kafka-python's codec; its snappy backend comes with the test extra kafka-python[snappy]."""
    import kafka.codec as codec
    assert codec.has_snappy(), "kafka-python[snappy] (a test dependency) is not installed"
    return codec


def kp_xerial(payload: bytes) -> bytes:
    return kafka_python_codec().snappy_encode(payload, xerial_compatible=True, xerial_blocksize=BLOCK)


ENCODERS = {"hand-32k": hand_xerial, "hand-1k": lambda p: hand_xerial(p, 1024), "kafka-python": kp_xerial}


def payload(size: int, kind: str) -> bytes:
    if kind == "random":  # incompressible: snappy blocks are mostly literals
        return random.Random(size).randbytes(size)
    text = b"".join(b"record %d: the quick brown fox jumps over the lazy dog\n" % i for i in range(size // 40 + 1))
    return text[:size]


SIZES = [0, 1, 17, 1000, BLOCK - 1, BLOCK, BLOCK + 1, 100_000, 300_000]
PAYLOADS = [(n, kind) for n in SIZES for kind in ("text", "random")]


@pytest.mark.parametrize("encoder", ENCODERS)
@pytest.mark.parametrize("size,kind", PAYLOADS)
def test_xerial_stream_decodes_byte_exact(encoder, size, kind):
    data = payload(size, kind)
    stream = ENCODERS[encoder](data)
    assert stream[:8] == MAGIC and struct.unpack(">ii", stream[8:16]) == (1, 1)
    blocks = -(-size // (1024 if encoder == "hand-1k" else BLOCK))
    assert _block_count(stream) == blocks
    assert compression.decompress(SNAPPY, stream) == data
    assert compression.decompress(SNAPPY, memoryview(stream)) == data  # records hand it a memoryview
    assert compression.decompress(SNAPPY, bytearray(stream), max_size=size) == data  # bound is inclusive


def _block_count(stream: bytes) -> int:
    pos, n = 16, 0
    while pos < len(stream):
        pos += 4 + struct.unpack_from(">i", stream, pos)[0]
        n += 1
    assert pos == len(stream)
    return n


@pytest.mark.parametrize("size,kind", PAYLOADS)
def test_raw_snappy_decodes_and_kcompat_output_reads_elsewhere(size, kind):
    data = payload(size, kind)
    assert compression.decompress(SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data
    codec = kafka_python_codec()
    assert compression.decompress(SNAPPY, codec.snappy_encode(data, xerial_compatible=False)) == data
    # the other direction: what kcompat writes (raw) and its xerial helper, read by kafka-python
    ours = compression.compress(SNAPPY, data)
    assert ours[:8] != MAGIC and codec.snappy_decode(ours) == data
    if size:  # kafka-python takes a 16-byte (header-only) stream for raw snappy
        assert codec.snappy_decode(compression.xerial_compress(data)) == data


def test_size_bound_applies_across_blocks():
    data = payload(100_000, "text")
    for stream in (hand_xerial(data), hand_xerial(data, 1024)):
        with pytest.raises(CompressionError, match="size bound"):
            compression.decompress(SNAPPY, stream, max_size=len(data) - 1)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["text", "random"])
def test_truncated_stream_raises_or_yields_whole_blocks(kind):
    """No length covers the whole stream, so a cut at a block boundary reads as fewer blocks (the
    batch CRC catches that in Kafka); a cut anywhere else must raise CompressionError."""
    data = payload(3 * 1024 + 500, kind)
    stream = hand_xerial(data, 1024)
    boundaries, pos = {16: 0}, 16
    while pos < len(stream):
        pos += 4 + struct.unpack_from(">i", stream, pos)[0]
        boundaries[pos] = min(len(data), 1024 * len(boundaries))
    for cut in range(len(stream)):
        truncated = stream[:cut]
        if cut in boundaries:
            assert compression.decompress(SNAPPY, truncated) == data[:boundaries[cut]], cut
        elif cut >= 8:  # the magic is there: a cut header or block is an error
            with pytest.raises(CompressionError):
                compression.decompress(SNAPPY, truncated)
        else:  # not even the magic: read as raw snappy, never anything but CompressionError or nothing
            try:
                assert compression.decompress(SNAPPY, truncated) == b"", cut
            except CompressionError:
                pass


def _with_block(raw: bytes, length: int | None = None) -> bytes:
    return MAGIC + struct.pack(">ii", 1, 1) + struct.pack(">i", len(raw) if length is None else length) + raw


GOOD = bytes(cramjam.snappy.compress_raw(b"hello hello hello hello hello"))
CORRUPT = {
    "negative-length": _with_block(GOOD, -1),
    "length-past-end": _with_block(GOOD, len(GOOD) + 1),
    "huge-length": _with_block(GOOD, 2**31 - 1),
    "partial-length-field": MAGIC + struct.pack(">ii", 1, 1) + b"\x00\x00",
    "declared-size-over-bound": _with_block(b"\xff\xff\xff\xff\x0f" + GOOD[1:]),
    "declared-size-too-long": _with_block(bytes([GOOD[0] + 5]) + GOOD[1:]),
    "declared-size-too-short": _with_block(bytes([GOOD[0] - 5]) + GOOD[1:]),
    "copy-before-start": _with_block(b"\x08" + b"\x01\x10"),   # length 8, copy offset 16 of nothing
    "literal-past-end": _with_block(b"\x03\x08"),              # 3-byte literal, no bytes follow
    "second-block-garbage": hand_xerial(b"x" * 2000, 1024)[:-3] + b"\xff\xff\xff",
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("name", CORRUPT)
def test_corrupt_stream_raises_compression_error(name):
    with pytest.raises(CompressionError):
        compression.decompress(SNAPPY, CORRUPT[name], max_size=1 << 20)


# ---- end to end: a RecordBatch v2 with xerial-snappy records ---------------------------------------

def _records(n: int, size: int):
    rnd = random.Random(n)
    return [(1_700_000_000_000 + i, None if i % 5 == 0 else b"key-%d" % i, rnd.randbytes(size) if i % 2 else
             b"value %d " % i * (size // 10 + 1), [("h", b"%d" % i)] if i % 3 == 0 else ()) for i in range(n)]


def xerial_batch(recs, encoder) -> bytes:
    """An uncompressed batch re-packed as the Java client would send it: xerial snappy records,
    compression bits 2, batchLength and CRC32C recomputed."""
    plain = bytearray(records.build_batch(recs))
    body = encoder(bytes(plain[records.HEADER_SIZE:]))
    out = plain[:records.HEADER_SIZE] + body
    struct.pack_into(">i", out, 8, len(out) - records.LOG_OVERHEAD)
    attrs = struct.unpack_from(">h", out, 21)[0]
    struct.pack_into(">h", out, 21, (attrs & ~records.ATTR_COMPRESSION_MASK) | SNAPPY)
    struct.pack_into(">I", out, 17, records.compute_crc(out, 0, len(out)))
    return bytes(out)


@pytest.mark.parametrize("encoder", ENCODERS)
@pytest.mark.parametrize("n,size", [(1, 10), (20, 100), (40, 2000)])  # the last spans several blocks
def test_xerial_batch_iterates_to_the_same_records(encoder, n, size):
    recs = _records(n, size)
    expected = list(records.iter_records(records.build_batch(recs)))
    batch = xerial_batch(recs, ENCODERS[encoder])
    h = records.parse_header(batch)
    assert h.compression == SNAPPY and records.crc_valid(batch, 0, h) and h.size == len(batch)
    assert batch[records.HEADER_SIZE:records.HEADER_SIZE + 8] == MAGIC
    got = list(records.iter_records(batch))
    assert got == expected
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in got] == \
        [(i, ts, k, v, tuple(hs)) for i, (ts, k, v, hs) in enumerate(recs)]


def test_build_batch_writes_raw_snappy_that_kafka_python_reads():
    """kcompat writes raw snappy (as librdkafka does), which every client reads."""
    recs = _records(40, 2000)
    batch = records.build_batch(recs, codec=SNAPPY)
    assert records.parse_header(batch).compression == SNAPPY
    body = batch[records.HEADER_SIZE:]
    assert body[:8] != MAGIC
    assert kafka_python_codec().snappy_decode(body) == records.build_batch(recs)[records.HEADER_SIZE:]
    assert list(records.iter_records(batch)) == list(records.iter_records(records.build_batch(recs)))


def test_corrupt_xerial_batch_is_a_corrupt_record_error():
    batch = bytearray(xerial_batch(_records(20, 100), hand_xerial))
    struct.pack_into(">i", batch, records.HEADER_SIZE + 16, 1 << 30)  # first block length past the end
    with pytest.raises(records.CorruptRecordError):
        list(records.iter_records(bytes(batch)))
