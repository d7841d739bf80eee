"""Record batch compression codecs (attributes bits 0-2 of a RecordBatch v2).

Codec ids as Kafka's ``CompressionType``: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.

- gzip: RFC 1952 via the standard library's zlib.
- snappy: Kafka's Java client writes the *xerial* framing (``snappy-java``'s
  ``SnappyOutputStream``): an 8-byte magic ``\\x82SNAPPY\\x00``, two int32s (version, compatible
  version), then blocks of ``int32 length + raw snappy``. librdkafka and kafka-python write raw
  snappy but read both. We decompress both and compress raw (what librdkafka does).
- lz4: the LZ4 frame format (Kafka fixed its header checksum in KIP-57, magic v1+).
- zstd: the zstd frame format (KIP-110).

Decompression output is bounded by ``max_size`` bytes to keep a malicious batch from exhausting
memory; :class:`CompressionError` is raised on corrupt input, a truncated stream, or when the bound
is exceeded. :func:`decompress_chunks` streams the output in pieces of at most ``CHUNK_SIZE``
bytes, so a reader that does not keep the records (the produce-side validation) holds one piece at
a time, as Kafka's ``DefaultRecordBatch.skipKeyValueIterator`` streams through its codec's
``InputStream``. Kafka puts no limit on how far a batch may expand; the time to walk a batch
grows with its decompressed size, so kcompat, which walks it on its one event-loop thread, limits
it with :func:`decompressed_limit` (``MAX_RATIO`` times the compressed size, at least
``MIN_DECOMPRESSED_LIMIT``): far above what real data reaches (JSON with zstd ~15x, repeated
records ~30x), far below a compression bomb (gzip reaches ~1000x, zstd ~30000x).
"""

from __future__ import annotations

import struct
import zlib

import cramjam
import lz4.frame
import zstandard

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
BY_NAME = {v: k for k, v in NAMES.items()}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
DEFAULT_MAX_SIZE = 256 * 1024 * 1024
CHUNK_SIZE = 256 * 1024           # bytes per piece from decompress_chunks
MAX_RATIO = 64                    # decompressed_limit: bytes out per compressed byte in
MIN_DECOMPRESSED_LIMIT = 1 << 20  # decompressed_limit for small batches (bytes)
# Raw snappy emits at most 64 bytes per 3 input bytes (a 2-byte-offset copy), so a block whose
# preamble announces more than this many times its size is corrupt: refused before allocating.
_SNAPPY_MAX_RATIO = 22
_ZSTD_FEED = 256  # compressed bytes per zstd decompress call (at most): <= 8 MiB out per call

_zstd_d = zstandard.ZstdDecompressor()
_zstd_c = zstandard.ZstdCompressor(level=3)


class CompressionError(ValueError):
    """Corrupt compressed data, an unknown codec, or output beyond the size bound."""


def decompressed_limit(compressed_size: int) -> int:
    """The most bytes a batch whose compressed records take ``compressed_size`` bytes may
    decompress to where kcompat walks its records: ``MAX_RATIO`` times that, at least
    ``MIN_DECOMPRESSED_LIMIT`` and at most ``DEFAULT_MAX_SIZE``. Kafka has no such limit (see the
    module docstring)."""
    return min(DEFAULT_MAX_SIZE, max(MIN_DECOMPRESSED_LIMIT, MAX_RATIO * compressed_size))


def compress(codec: int, data) -> bytes:
    """Compress ``data`` (bytes-like) with ``codec``; returns bytes."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        c = zlib.compressobj(6, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if codec == SNAPPY:
        return bytes(cramjam.snappy.compress_raw(bytes(data)))
    if codec == LZ4:
        return lz4.frame.compress(bytes(data))
    if codec == ZSTD:
        return _zstd_c.compress(bytes(data))
    raise CompressionError(f"unknown compression codec {codec}")


def xerial_compress(data, block_size: int = 32 * 1024) -> bytes:
    """Snappy in the xerial framing, as the Java client writes it (for tests and tools)."""
    out = bytearray(XERIAL_MAGIC)
    out += struct.pack(">ii", 1, 1)
    data = bytes(data)
    for i in range(0, len(data), block_size):
        block = bytes(cramjam.snappy.compress_raw(data[i:i + block_size]))
        out += struct.pack(">i", len(block))
        out += block
    return bytes(out)


def decompress(codec: int, data, max_size: int = DEFAULT_MAX_SIZE) -> bytes:
    """Decompress ``data`` with ``codec``; at most ``max_size`` bytes of output (else
    CompressionError, as for corrupt or truncated input)."""
    if codec == NONE:
        if len(data) > max_size:
            raise CompressionError("data exceeds the size bound")
        return bytes(data)
    return b"".join(decompress_chunks(codec, data, max_size))


def decompress_chunks(codec: int, data, max_size: int = DEFAULT_MAX_SIZE, chunk_size: int = CHUNK_SIZE):
    """Yield the decompression of ``data`` (bytes-like) with ``codec`` in pieces of about
    ``chunk_size`` bytes (gzip, lz4: at most that; zstd: at least that, at most ~8 MiB; snappy: one
    block, at most 22 times its compressed size), so memory stays at one piece whatever the data
    expands to. Raises CompressionError on an unknown codec, corrupt or truncated data, or as soon
    as the output passes ``max_size`` bytes in total (that piece is not yielded)."""
    total = 0
    try:
        for piece in _pieces(codec, bytes(data), max_size, chunk_size):
            total += len(piece)
            if total > max_size:
                raise CompressionError(f"decompressed {NAMES.get(codec, codec)} data exceeds the size bound "
                                       f"({max_size} bytes)")
            yield piece
    except CompressionError:
        raise
    except Exception as e:  # each library has its own error types (zlib.error, RuntimeError, ...)
        raise CompressionError(f"corrupt {NAMES.get(codec, codec)} data: {e}") from e


def _pieces(codec: int, data: bytes, max_size: int, chunk: int):
    if codec == NONE:
        for i in range(0, len(data), chunk):
            yield data[i:i + chunk]
    elif codec == GZIP:
        d = zlib.decompressobj(47)  # gzip or zlib header, auto-detected
        tail = data
        while not d.eof:
            before = len(tail)
            out = d.decompress(tail, chunk)
            tail = d.unconsumed_tail
            if not out and not d.eof and (not tail or len(tail) == before):
                raise CompressionError("truncated gzip data")
            if out:
                yield out
    elif codec == SNAPPY:
        yield from _snappy_pieces(data, max_size, chunk)
    elif codec == LZ4:
        d = lz4.frame.LZ4FrameDecompressor()
        out = d.decompress(data, max_length=chunk)
        while True:
            if out:
                yield out
            if d.eof:
                return
            if d.needs_input or not out:
                raise CompressionError("truncated lz4 data")
            out = d.decompress(b"", max_length=chunk)
    elif codec == ZSTD:
        # decompressobj has no output bound per call and stream_reader accepts a truncated frame,
        # so feed the input a little at a time: one zstd input byte makes at most 32 KiB (an RLE
        # block: 4 bytes -> 128 KiB), so a call fed k bytes makes at most k * 32 KiB; k shrinks
        # as the output approaches max_size.
        d = _zstd_d.decompressobj()
        acc = bytearray()
        total = 0
        pos = 0
        n = len(data)
        while pos < n:
            feed = min(_ZSTD_FEED, max(8, (max_size - total) >> 15))
            out = d.decompress(data[pos:pos + feed])
            pos += feed
            total += len(out)
            acc += out
            if total > max_size:
                raise CompressionError(f"decompressed zstd data exceeds the size bound ({max_size} bytes)")
            if len(acc) >= chunk or (acc and d.eof):
                yield bytes(acc)
                acc.clear()
            if d.eof:
                return
        raise CompressionError("truncated zstd data")
    else:
        raise CompressionError(f"unknown compression codec {codec}")


def _snappy_pieces(data: bytes, max_size: int, chunk: int):
    if data[:8] != XERIAL_MAGIC:
        _check_snappy_len(data, max_size)
        yield bytes(cramjam.snappy.decompress_raw(data))
        return
    n = len(data)
    if n < 16:  # magic, then version and compatible version (int32 each) before the first block
        raise CompressionError("truncated xerial snappy header")
    pos = 16
    total = 0
    while pos < n:
        if pos + 4 > n:
            raise CompressionError("truncated xerial snappy block header")
        (length,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if length < 0 or pos + length > n:
            raise CompressionError("xerial snappy block length out of range")
        block = data[pos:pos + length]
        total += _check_snappy_len(block, max_size - total)
        yield bytes(cramjam.snappy.decompress_raw(block))
        pos += length


def _check_snappy_len(block: bytes, max_size: int) -> int:
    """The uncompressed length a raw snappy block announces (an unsigned varint preamble),
    checked against ``max_size`` and against what ``len(block)`` bytes can expand to."""
    length = shift = 0
    for i in range(min(5, len(block))):
        b = block[i]
        length |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
    if length > max_size:
        raise CompressionError("decompressed snappy data exceeds the size bound")
    if length > _SNAPPY_MAX_RATIO * len(block):
        raise CompressionError(f"corrupt snappy data: a {len(block)}-byte block cannot expand to {length} bytes")
    return length
