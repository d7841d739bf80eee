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
memory; :class:`CompressionError` is raised on corrupt input or when the bound is exceeded.
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

_zstd_d = zstandard.ZstdDecompressor()
_zstd_c = zstandard.ZstdCompressor(level=3)


class CompressionError(ValueError):
    """Corrupt compressed data, an unknown codec, or output beyond the size bound."""


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
    """Decompress ``data`` with ``codec``; at most ``max_size`` bytes of output."""
    try:
        if codec == NONE:
            return bytes(data)
        if codec == GZIP:
            d = zlib.decompressobj(47)  # gzip or zlib header, auto-detected
            out = d.decompress(bytes(data), max_size + 1)
            if len(out) > max_size or d.unconsumed_tail:
                raise CompressionError("decompressed gzip data exceeds the size bound")
            return out
        if codec == SNAPPY:
            return _snappy_decompress(bytes(data), max_size)
        if codec == LZ4:
            d = lz4.frame.LZ4FrameDecompressor()
            out = d.decompress(bytes(data), max_length=max_size + 1)
            if len(out) > max_size:
                raise CompressionError("decompressed lz4 data exceeds the size bound")
            return out
        if codec == ZSTD:
            dobj = _zstd_d.decompressobj()
            out = dobj.decompress(bytes(data))
            if len(out) > max_size:
                raise CompressionError("decompressed zstd data exceeds the size bound")
            return out
    except CompressionError:
        raise
    except Exception as e:  # each library has its own error types
        raise CompressionError(f"corrupt {NAMES.get(codec, codec)} data: {e}") from e
    raise CompressionError(f"unknown compression codec {codec}")


def _snappy_decompress(data: bytes, max_size: int) -> bytes:
    if data[:8] != XERIAL_MAGIC:
        _check_snappy_len(data, max_size)
        return bytes(cramjam.snappy.decompress_raw(data))
    n = len(data)
    if n < 16:  # magic, then version and compatible version (int32 each) before the first block
        raise CompressionError("truncated xerial snappy header")
    out = bytearray()
    pos = 16
    while pos < n:
        if pos + 4 > n:
            raise CompressionError("truncated xerial snappy block header")
        (length,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if length < 0 or pos + length > n:
            raise CompressionError("xerial snappy block length out of range")
        block = data[pos:pos + length]
        _check_snappy_len(block, max_size - len(out))
        out += cramjam.snappy.decompress_raw(block)
        pos += length
    return bytes(out)


def _check_snappy_len(block: bytes, max_size: int) -> None:
    # a raw snappy block starts with the uncompressed length as an unsigned varint
    length = shift = 0
    for i in range(min(5, len(block))):
        b = block[i]
        length |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
    if length > max_size:
        raise CompressionError("decompressed snappy data exceeds the size bound")
