"""Kafka RecordBatch v2 (message format "magic 2", KIP-98): header view, CRC, builder, iteration.

The broker treats batches as opaque bytes (DESIGN.md section 4): on the produce path it reads the
61-byte header, checks the CRC32C, and rewrites ``baseOffset`` (outside the CRC) and, for
LogAppendTime topics, ``maxTimestamp`` + attributes (inside the CRC, so the CRC is recomputed).
Records are decoded only off the hot path: timestamp lookups, tests, tools, compaction.

Batch header layout (byte offsets)::

    0  baseOffset int64          27 baseTimestamp int64
    8  batchLength int32         35 maxTimestamp int64
    12 partitionLeaderEpoch int32 43 producerId int64
    16 magic int8                51 producerEpoch int16
    17 crc uint32 (CRC32C of bytes 21..end)  53 baseSequence int32
    21 attributes int16          57 recordsCount int32
    23 lastOffsetDelta int32     61 records...

Attributes: bits 0-2 compression, bit 3 timestamp type (1 = LogAppendTime), bit 4 transactional,
bit 5 control, bit 6 delete horizon set.
"""

from __future__ import annotations

import struct
from typing import Iterator, NamedTuple

import crc32c

from kcompat.protocol import compression
from kcompat.protocol.primitives import (
    DecodeError, r_varint, r_varlong, w_varint, w_varlong,
)

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes not counted in batchLength
MAGIC = 2
CRC_START = 21

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

CREATE_TIME = 0
LOG_APPEND_TIME = 1

CONTROL_ABORT = 0
CONTROL_COMMIT = 1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")


class CorruptRecordError(ValueError):
    """A batch whose framing, magic or CRC is invalid (Kafka: CORRUPT_MESSAGE)."""


class BatchHeader(NamedTuple):
    """The 61-byte RecordBatch v2 header, decoded."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch including the 12-byte log overhead."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & ATTR_TIMESTAMP_TYPE else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record, wrapping at 2**31 as Kafka does (``RecordBatch.lastSequence``)."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def parse_header(buf, off: int = 0) -> BatchHeader:
    """Decode the header of the batch at ``buf[off:]``.

    Raises CorruptRecordError if fewer than 61 bytes remain, the magic is not 2, or batchLength is
    too small to hold the header. Does not check that the whole batch is present (see ``size``).
    """
    if len(buf) - off < HEADER_SIZE:
        raise CorruptRecordError(f"batch header needs {HEADER_SIZE} bytes, {len(buf) - off} remain")
    h = BatchHeader._make(_HEADER.unpack_from(buf, off))
    if h.magic != MAGIC:
        raise CorruptRecordError(f"unsupported record batch magic {h.magic}")
    if h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(f"batch length {h.batch_length} is shorter than the header")
    if h.last_offset_delta < 0:
        raise CorruptRecordError(f"negative lastOffsetDelta {h.last_offset_delta}")
    return h


def compute_crc(buf, off: int, size: int) -> int:
    """CRC32C of the batch bytes covered by the checksum (attributes to end)."""
    return crc32c.crc32c(memoryview(buf)[off + CRC_START:off + size])


def crc_valid(buf, off: int, header: BatchHeader) -> bool:
    """True if the stored CRC matches the batch at ``buf[off:off + header.size]``."""
    if len(buf) - off < header.size:
        return False
    return compute_crc(buf, off, header.size) == header.crc


def iter_batches(buf, off: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for each complete batch in ``buf[off:end]``.

    Stops silently at a trailing partial batch (fetch responses may end with one). Raises
    CorruptRecordError on a malformed header.
    """
    end = len(buf) if end is None else end
    while end - off >= HEADER_SIZE:
        h = parse_header(buf, off)
        if off + h.size > end:
            return
        yield off, h
        off += h.size


def set_base_offset(buf, off: int, base_offset: int) -> None:
    """Rewrite baseOffset in place (not covered by the CRC)."""
    _I64.pack_into(buf, off, base_offset)


def set_partition_leader_epoch(buf, off: int, epoch: int) -> None:
    """Rewrite partitionLeaderEpoch in place (not covered by the CRC)."""
    _I32.pack_into(buf, off + 12, epoch)


def set_log_append_time(buf, off: int, size: int, timestamp_ms: int) -> None:
    """Mark a batch LogAppendTime with ``timestamp_ms`` as its maxTimestamp; recomputes the CRC."""
    (attrs,) = _I16.unpack_from(buf, off + 21)
    _I16.pack_into(buf, off + 21, attrs | ATTR_TIMESTAMP_TYPE)
    _I64.pack_into(buf, off + 35, timestamp_ms)
    _U32.pack_into(buf, off + 17, compute_crc(buf, off, size))


# ------------------------------------------------------------------------------------------------
# records inside a batch
# ------------------------------------------------------------------------------------------------

class Record(NamedTuple):
    """One record of a batch, with absolute offset and timestamp resolved."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple  # ((key: str, value: bytes | None), ...)


class _RecordsReader:
    """The records section of one batch, read front to back (Kafka's ``DataInputStream`` over a
    batch's codec stream): the section itself when uncompressed, else the pieces of
    :func:`compression.decompress_chunks`, so a compressed batch is held one piece at a time (plus
    the record being decoded), whatever it expands to. ``buf[off:]`` are the bytes available and
    not consumed yet."""

    __slots__ = ("buf", "off", "_pieces")

    def __init__(self, h: BatchHeader, batch, max_size: int | None) -> None:
        if len(batch) < h.size:
            raise CorruptRecordError("incomplete batch")
        body = memoryview(batch)[HEADER_SIZE:h.size]
        self.off = 0
        if h.compression == compression.NONE:
            self.buf = body
            self._pieces = None
        else:
            if max_size is None:
                max_size = compression.decompressed_limit(len(body))
            self.buf = bytearray()
            self._pieces = iter(compression.decompress_chunks(h.compression, body, max_size))

    def ensure(self, n: int) -> None:
        """Make ``n`` bytes available at ``buf[off:]``, or as many as remain."""
        if self._pieces is None or len(self.buf) - self.off >= n:
            return
        del self.buf[:self.off]
        self.off = 0
        for piece in self._pieces:
            self.buf += piece
            if len(self.buf) >= n:
                return
        self._pieces = None

    def skip(self, n: int) -> None:
        """Consume ``n`` >= 0 bytes. CorruptRecordError if the records end first."""
        avail = len(self.buf) - self.off
        if n <= avail:
            self.off += n
            return
        if self._pieces is not None:
            n -= avail
            self.buf.clear()
            self.off = 0
            for piece in self._pieces:
                if len(piece) > n:
                    self.buf += memoryview(piece)[n:]
                    return
                n -= len(piece)
            self._pieces = None
            if n == 0:   # the skip ends exactly where the records do (a last record over pieces)
                return
        raise CorruptRecordError("record length out of range")

    def finish(self) -> None:
        """Decompress what follows the last record, so that a corrupt end of the compressed
        stream (a checksum, a truncated frame) is found as when decompressing it whole; bytes
        after the last record are ignored, as kcompat always has (Kafka rejects them)."""
        if self._pieces is not None:
            for _ in self._pieces:
                pass
            self._pieces = None


# a record's length varint (5), attributes (1), timestamp delta (10), offset delta (5) and key
# length (5): what scan_records reads before skipping the key
_PREFIX = 26


def iter_records(batch, max_size: int = compression.DEFAULT_MAX_SIZE) -> Iterator[Record]:
    """Decode the records of one complete batch (bytes-like starting at the batch).

    Decompresses if needed, piece by piece (at most ``max_size`` bytes in all; None:
    :func:`compression.decompressed_limit` of the batch), so memory stays at one piece plus one
    record. For LogAppendTime batches every record's timestamp is the batch's maxTimestamp, as in
    Kafka. Raises CorruptRecordError on bad input.
    """
    h = parse_header(batch, 0)
    reader = _RecordsReader(h, batch, max_size)
    log_append = h.timestamp_type == LOG_APPEND_TIME
    try:
        for _ in range(h.records_count):
            reader.ensure(5)
            length, off = r_varint(reader.buf, reader.off)
            if length < 0:
                raise CorruptRecordError("record length out of range")
            prefix = off - reader.off
            reader.ensure(prefix + length)
            body = reader.buf
            off = reader.off + prefix
            end = off + length
            if end > len(body):
                raise CorruptRecordError("record length out of range")
            off += 1  # attributes (unused)
            ts_delta, off = r_varlong(body, off)
            off_delta, off = r_varint(body, off)
            key, off = _r_varbytes(body, off, end)
            value, off = _r_varbytes(body, off, end)
            nh, off = r_varint(body, off)
            if nh < 0 or nh > end - off:
                raise CorruptRecordError("record header count out of range")
            headers = []
            for _h in range(nh):
                hk, off = _r_varbytes(body, off, end)
                if hk is None:
                    raise CorruptRecordError("null record header key")
                hv, off = _r_varbytes(body, off, end)
                headers.append((hk.decode("utf-8", "replace"), hv))
            if off != end:
                raise CorruptRecordError("record length does not match its fields")
            reader.off = end
            ts = h.max_timestamp if log_append else h.base_timestamp + ts_delta
            yield Record(h.base_offset + off_delta, ts, key, value, tuple(headers))
        reader.finish()
    except DecodeError as e:
        raise CorruptRecordError(str(e)) from e
    except compression.CompressionError as e:
        raise CorruptRecordError(str(e)) from e


class RecordView(NamedTuple):
    """What the produce-side validation needs of one record, without copying key, value or
    headers (Kafka's ``skipKeyValueIterator``): deltas from the batch's base offset and base
    timestamp, and the key and value lengths in bytes (-1 = null)."""

    offset_delta: int
    timestamp_delta: int
    key_length: int
    value_length: int


def scan_records(batch, max_size: int | None = None) -> Iterator[RecordView]:
    """The records of one complete batch (bytes-like starting at the batch) as
    :class:`RecordView`, in order, decompressing if needed, piece by piece, at most ``max_size``
    bytes in all (None: :func:`compression.decompressed_limit` of the batch, a bound on the work
    a produce request can ask for; Kafka has none).

    Walks only each record's length, attributes, deltas and the key/value length prefixes, so it
    costs a few varint reads per record and holds one decompressed piece at a time. Raises
    CorruptRecordError if the batch is incomplete or does not decompress within the bound, a
    record overruns its length or the batch, or ``recordsCount`` records are not all there."""
    h = parse_header(batch, 0)
    reader = _RecordsReader(h, batch, max_size)
    if reader._pieces is None:
        yield from _scan_uncompressed(h, reader.buf)
        return
    try:
        for _ in range(h.records_count):
            reader.ensure(_PREFIX)
            buf = reader.buf
            length, start = r_varint(buf, reader.off)
            if length < 0:
                raise CorruptRecordError("record length out of range")
            off = start + 1  # attributes (unused)
            ts_delta, off = r_varlong(buf, off)
            off_delta, off = r_varint(buf, off)
            key_length, off = r_varint(buf, off)
            used = off - start  # bytes of this record consumed so far
            if used + max(key_length, 0) > length:
                raise CorruptRecordError("record field length out of range")
            reader.off = off
            if key_length > 0:
                reader.skip(key_length)
                used += key_length
            reader.ensure(5)
            value_length, off = r_varint(reader.buf, reader.off)
            used += off - reader.off
            if used > length or value_length > length - used:
                raise CorruptRecordError("record field length out of range")
            reader.off = off
            reader.skip(length - used)
            yield RecordView(off_delta, ts_delta, max(key_length, -1), max(value_length, -1))
        reader.finish()
    except DecodeError as e:
        raise CorruptRecordError(str(e)) from e
    except compression.CompressionError as e:
        raise CorruptRecordError(str(e)) from e


def _scan_uncompressed(h: BatchHeader, body) -> Iterator[RecordView]:
    """scan_records of an uncompressed records section ``body``: the same walk without the
    reader's bookkeeping (the produce path of a compacted topic runs it for every record)."""
    off = 0
    n = len(body)
    try:
        for _ in range(h.records_count):
            length, off = r_varint(body, off)
            if length < 0 or off + length > n:
                raise CorruptRecordError("record length out of range")
            end = off + length
            off += 1  # attributes (unused)
            ts_delta, off = r_varlong(body, off)
            off_delta, off = r_varint(body, off)
            key_length, off = r_varint(body, off)
            if key_length > 0:
                off += key_length
            if off > end:
                raise CorruptRecordError("record field length out of range")
            value_length, off = r_varint(body, off)
            if off > end or value_length > end - off:
                raise CorruptRecordError("record field length out of range")
            yield RecordView(off_delta, ts_delta, max(key_length, -1), max(value_length, -1))
            off = end
    except DecodeError as e:
        raise CorruptRecordError(str(e)) from e


def _r_varbytes(buf, off: int, end: int):
    n, off = r_varint(buf, off)
    if n < 0:
        return None, off
    if off + n > end:
        raise CorruptRecordError("record field length out of range")
    return bytes(buf[off:off + n]), off + n


def encode_record(out: bytearray, offset_delta: int, timestamp_delta: int, key, value, headers=()) -> None:
    """Append one record (length-prefixed) to ``out``."""
    body = bytearray(b"\x00")  # attributes
    w_varlong(body, timestamp_delta)
    w_varint(body, offset_delta)
    for b in (key, value):
        if b is None:
            w_varint(body, -1)
        else:
            w_varint(body, len(b))
            body += b
    w_varint(body, len(headers))
    for hk, hv in headers:
        hkb = hk.encode("utf-8") if isinstance(hk, str) else hk
        w_varint(body, len(hkb))
        body += hkb
        if hv is None:
            w_varint(body, -1)
        else:
            w_varint(body, len(hv))
            body += hv
    w_varint(out, len(body))
    out += body


def build_batch(records, *, base_offset: int = 0, codec: int = compression.NONE,
                producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                base_sequence: int = NO_SEQUENCE, transactional: bool = False,
                control: bool = False, timestamp_type: int = CREATE_TIME,
                partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                offset_deltas=None) -> bytes:
    """Build one RecordBatch v2.

    ``records``: sequence of ``(timestamp_ms, key, value, headers)`` with headers a sequence of
    ``(str, bytes | None)``. ``offset_deltas`` defaults to 0..n-1 (non-contiguous deltas model a
    compacted batch). Returns the batch bytes with a valid CRC32C.
    """
    records = list(records)
    if not records:
        raise ValueError("a batch needs at least one record")
    deltas = list(offset_deltas) if offset_deltas is not None else list(range(len(records)))
    base_ts = records[0][0]
    max_ts = max(r[0] for r in records)
    body = bytearray()
    for delta, (ts, key, value, headers) in zip(deltas, records):
        encode_record(body, delta, ts - base_ts, key, value, headers)
    if codec != compression.NONE:
        body = compression.compress(codec, body)
    attrs = codec & ATTR_COMPRESSION_MASK
    if timestamp_type == LOG_APPEND_TIME:
        attrs |= ATTR_TIMESTAMP_TYPE
    if transactional:
        attrs |= ATTR_TRANSACTIONAL
    if control:
        attrs |= ATTR_CONTROL
    batch_length = HEADER_SIZE - LOG_OVERHEAD + len(body)
    out = bytearray(_HEADER.pack(base_offset, batch_length, partition_leader_epoch, MAGIC, 0, attrs,
                                 deltas[-1], base_ts, max_ts, producer_id, producer_epoch,
                                 base_sequence, len(records)))
    out += body
    _U32.pack_into(out, 17, compute_crc(out, 0, len(out)))
    return bytes(out)


def build_control_batch(kind: int, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                        timestamp_ms: int, base_offset: int = 0,
                        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH) -> bytes:
    """A transaction marker batch (KIP-98): control + transactional, one record whose key is
    ``(version=0, type)`` and value ``(version=0, coordinator_epoch)``. ``kind`` is CONTROL_ABORT
    or CONTROL_COMMIT."""
    key = struct.pack(">hh", 0, kind)
    value = struct.pack(">hi", 0, coordinator_epoch)
    return build_batch([(timestamp_ms, key, value, ())], base_offset=base_offset,
                       producer_id=producer_id, producer_epoch=producer_epoch,
                       transactional=True, control=True,
                       partition_leader_epoch=partition_leader_epoch)


def control_type(record: Record) -> int:
    """The control type (CONTROL_ABORT / CONTROL_COMMIT, or another id) of a control record."""
    if record.key is None or len(record.key) < 4:
        raise CorruptRecordError("control record key too short")
    return struct.unpack_from(">h", record.key, 2)[0]
