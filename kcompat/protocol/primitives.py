"""Kafka wire primitives used by the generated message codecs.

Readers are offset-passing over a ``memoryview`` (or ``bytes``): ``r_x(buf, off) -> (value, off)``.
Writers append to a ``bytearray``: ``w_x(out, value) -> None``. Every length and count is checked
against the bytes remaining *before* anything is allocated; a violation raises :class:`DecodeError`
(the server closes the connection and logs why, DESIGN.md section 3).

Encodings follow the Kafka protocol guide (https://kafka.apache.org/protocol#protocol_types):
STRING/NULLABLE_STRING (int16 length, -1 = null), COMPACT_(NULLABLE_)STRING (unsigned varint
length + 1, 0 = null), BYTES (int32 length), COMPACT_BYTES, ARRAY (int32 count, -1 = null),
COMPACT_ARRAY (unsigned varint count + 1), UUID (16 bytes), tagged fields (KIP-482).
"""

from __future__ import annotations

import struct
import uuid as _uuid

__all__ = [
    "DecodeError", "TRUNCATED",
    "ZERO_UUID",
    "I8", "I16", "U16", "I32", "U32", "I64", "F64",
]


class DecodeError(ValueError):
    """Raised when bytes on the wire do not form a valid message of the expected version."""


# What reading a fixed-width value past the end of the buffer raises (``struct.unpack_from``, a
# ``memoryview`` index); the generated readers turn these into DecodeError.
TRUNCATED = (struct.error, IndexError)


ZERO_UUID = _uuid.UUID(int=0)

I8 = struct.Struct(">b")
I16 = struct.Struct(">h")
U16 = struct.Struct(">H")
I32 = struct.Struct(">i")
U32 = struct.Struct(">I")
I64 = struct.Struct(">q")
F64 = struct.Struct(">d")
_UUID = struct.Struct(">16s")

_INT_MIN = {1: -(1 << 7), 2: -(1 << 15), 4: -(1 << 31), 8: -(1 << 63)}


# ---------------------------------------------------------------------------------------------
# varints (unsigned LEB128, and zig-zag signed as used inside record batches)
# ---------------------------------------------------------------------------------------------

def r_uvarint(buf, off: int) -> tuple[int, int]:
    """Read an unsigned varint of at most 5 bytes (a uint32). Raises DecodeError if malformed."""
    result = 0
    shift = 0
    n = len(buf)
    while True:
        if off >= n:
            raise DecodeError("truncated varint")
        b = buf[off]
        off += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, off
        shift += 7
        if shift > 28:
            raise DecodeError("varint longer than 5 bytes")


def r_uvarlong(buf, off: int) -> tuple[int, int]:
    """Read an unsigned varint of at most 10 bytes (a uint64)."""
    result = 0
    shift = 0
    n = len(buf)
    while True:
        if off >= n:
            raise DecodeError("truncated varlong")
        b = buf[off]
        off += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, off
        shift += 7
        if shift > 63:
            raise DecodeError("varlong longer than 10 bytes")


def r_varint(buf, off: int) -> tuple[int, int]:
    """Read a zig-zag encoded signed varint (int32)."""
    v, off = r_uvarint(buf, off)
    return (v >> 1) ^ -(v & 1), off


def r_varlong(buf, off: int) -> tuple[int, int]:
    """Read a zig-zag encoded signed varlong (int64)."""
    v, off = r_uvarlong(buf, off)
    return (v >> 1) ^ -(v & 1), off


def w_uvarint(out: bytearray, v: int) -> None:
    """Append an unsigned varint."""
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def w_varint(out: bytearray, v: int) -> None:
    """Append a zig-zag encoded signed varint (int32)."""
    w_uvarint(out, ((v << 1) ^ (v >> 31)) & 0xFFFFFFFF)


def w_varlong(out: bytearray, v: int) -> None:
    """Append a zig-zag encoded signed varlong (int64)."""
    w_uvarint(out, ((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)


def uvarint_size(v: int) -> int:
    """Number of bytes the unsigned varint encoding of ``v`` takes."""
    n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


# ---------------------------------------------------------------------------------------------
# lengths and counts
# ---------------------------------------------------------------------------------------------

def _check(buf, off: int, length: int, what: str) -> None:
    if length > len(buf) - off:
        raise DecodeError(f"{what} length {length} exceeds the {len(buf) - off} bytes remaining")


def r_count(buf, off: int) -> tuple[int, int]:
    """ARRAY count (int32). Returns -1 for null: like Kafka's generated readers, any negative count
    means null (the caller refuses it where the field is not nullable). Checks count <= bytes remaining."""
    try:
        n = I32.unpack_from(buf, off)[0]
    except struct.error:
        raise DecodeError("truncated array count") from None
    off += 4
    if n < 0:
        return -1, off
    _check(buf, off, n, "array")
    return n, off


def r_ccount(buf, off: int) -> tuple[int, int]:
    """COMPACT_ARRAY count (uvarint count+1, 0 = null). Returns -1 for null."""
    n, off = r_uvarint(buf, off)
    n -= 1
    _check(buf, off, n, "compact array")
    return n, off


def w_count(out: bytearray, n: int) -> None:
    out += I32.pack(n)


def w_ccount(out: bytearray, n: int) -> None:
    w_uvarint(out, n + 1)


# ---------------------------------------------------------------------------------------------
# strings
# ---------------------------------------------------------------------------------------------

def r_nstr(buf, off: int):
    """NULLABLE_STRING: int16 length; any negative length is null, as in Kafka's readers."""
    try:
        n = I16.unpack_from(buf, off)[0]
    except struct.error:
        raise DecodeError("truncated string length") from None
    off += 2
    if n < 0:
        return None, off
    _check(buf, off, n, "string")
    end = off + n
    # invalid UTF-8 becomes U+FFFD, as Java's new String(bytes, UTF_8) in Kafka's readers
    return str(buf[off:end], "utf-8", "replace"), end


def r_str(buf, off: int):
    """STRING: int16 length, must not be null."""
    v, off = r_nstr(buf, off)
    if v is None:
        raise DecodeError("non-nullable string was null")
    return v, off


def r_ncstr(buf, off: int):
    """COMPACT_NULLABLE_STRING: uvarint length+1, 0 = null."""
    n, off = r_uvarint(buf, off)
    if n == 0:
        return None, off
    n -= 1
    _check(buf, off, n, "compact string")
    end = off + n
    return str(buf[off:end], "utf-8", "replace"), end


def r_cstr(buf, off: int):
    """COMPACT_STRING, must not be null."""
    v, off = r_ncstr(buf, off)
    if v is None:
        raise DecodeError("non-nullable compact string was null")
    return v, off


def w_nstr(out: bytearray, v) -> None:
    if v is None:
        out += b"\xff\xff"
        return
    b = v.encode("utf-8")
    out += I16.pack(len(b))
    out += b


w_str = w_nstr


def w_ncstr(out: bytearray, v) -> None:
    if v is None:
        out.append(0)
        return
    b = v.encode("utf-8")
    w_uvarint(out, len(b) + 1)
    out += b


w_cstr = w_ncstr


# ---------------------------------------------------------------------------------------------
# bytes and records
# ---------------------------------------------------------------------------------------------

def r_nbytes(buf, off: int):
    """NULLABLE_BYTES: int32 length, negative = null (as Kafka's readers). Returns a ``bytes`` copy."""
    try:
        n = I32.unpack_from(buf, off)[0]
    except struct.error:
        raise DecodeError("truncated bytes length") from None
    off += 4
    if n < 0:
        return None, off
    _check(buf, off, n, "bytes")
    end = off + n
    return bytes(buf[off:end]), end


def r_bytes(buf, off: int):
    v, off = r_nbytes(buf, off)
    if v is None:
        raise DecodeError("non-nullable bytes was null")
    return v, off


def r_ncbytes(buf, off: int):
    """COMPACT_NULLABLE_BYTES: uvarint length+1, 0 = null. Returns a ``bytes`` copy."""
    n, off = r_uvarint(buf, off)
    if n == 0:
        return None, off
    n -= 1
    _check(buf, off, n, "compact bytes")
    end = off + n
    return bytes(buf[off:end]), end


def r_cbytes(buf, off: int):
    v, off = r_ncbytes(buf, off)
    if v is None:
        raise DecodeError("non-nullable compact bytes was null")
    return v, off


def r_nrecords(buf, off: int):
    """RECORDS (nullable, int32 length, negative = null): a zero-copy ``memoryview`` slice of ``buf``."""
    try:
        n = I32.unpack_from(buf, off)[0]
    except struct.error:
        raise DecodeError("truncated records length") from None
    off += 4
    if n < 0:
        return None, off
    _check(buf, off, n, "records")
    end = off + n
    return memoryview(buf)[off:end], end


def r_ncrecords(buf, off: int):
    """COMPACT_RECORDS (nullable): a zero-copy ``memoryview`` slice of ``buf``."""
    n, off = r_uvarint(buf, off)
    if n == 0:
        return None, off
    n -= 1
    _check(buf, off, n, "compact records")
    end = off + n
    return memoryview(buf)[off:end], end


def r_records(buf, off: int):
    v, off = r_nrecords(buf, off)
    if v is None:
        raise DecodeError("non-nullable records was null")
    return v, off


def r_crecords(buf, off: int):
    v, off = r_ncrecords(buf, off)
    if v is None:
        raise DecodeError("non-nullable compact records was null")
    return v, off


class Out(bytearray):
    """Response buffer that can carry large record sets by reference instead of copying.

    Generated writers append to it like any ``bytearray``; :func:`w_nrecords` and
    :func:`w_ncrecords` put record sets of at least :data:`ZERO_COPY_MIN` bytes, and file ranges
    of any size, in ``parts`` instead. :meth:`buffers` returns the whole encoding as a list of buffers for
    ``transport.writelines``.
    """

    ZERO_COPY_MIN = 16384

    def __init__(self) -> None:
        super().__init__()
        self.parts: list = []  # (position in self, buffer)

    def buffers(self) -> list:
        if not self.parts:
            return [self]
        view = memoryview(self)
        result = []
        start = 0
        for pos, chunk in self.parts:
            if pos > start:
                result.append(view[start:pos])
            result.append(chunk)
            start = pos
        if start < len(self):
            result.append(view[start:])
        return result

    def total_size(self) -> int:
        return len(self) + sum(len(c) for _, c in self.parts)


_BUFFERS = (bytes, bytearray, memoryview)


def _append_records(out: bytearray, v) -> None:
    """Record bytes, or a file range (``kcompat.log.FileRecords``: ``len()`` and ``read_bytes()``,
    sent with sendfile), which an :class:`Out` keeps by reference and a plain buffer reads."""
    if type(out) is Out and (len(v) >= Out.ZERO_COPY_MIN or type(v) not in _BUFFERS):
        out.parts.append((len(out), v))
    elif isinstance(v, _BUFFERS):
        out += v
    else:
        out += v.read_bytes()


def w_nbytes(out: bytearray, v) -> None:
    if v is None:
        out += b"\xff\xff\xff\xff"
        return
    out += I32.pack(len(v))
    out += v


w_bytes = w_nbytes


def w_ncbytes(out: bytearray, v) -> None:
    if v is None:
        out.append(0)
        return
    w_uvarint(out, len(v) + 1)
    out += v


w_cbytes = w_ncbytes


def w_nrecords(out: bytearray, v) -> None:
    if v is None:
        out += b"\xff\xff\xff\xff"
        return
    out += I32.pack(len(v))
    _append_records(out, v)


w_records = w_nrecords


def w_ncrecords(out: bytearray, v) -> None:
    if v is None:
        out.append(0)
        return
    w_uvarint(out, len(v) + 1)
    _append_records(out, v)


w_crecords = w_ncrecords


# ---------------------------------------------------------------------------------------------
# uuid
# ---------------------------------------------------------------------------------------------

_UUIDS: dict[bytes, _uuid.UUID] = {}   # decoded UUIDs (immutable) by their bytes
_UUIDS_MAX = 4096                      # then the cache starts over


def r_uuid(buf, off: int):
    """UUID: 16 bytes, returned as :class:`uuid.UUID`. The same topic ids come in request after
    request, so the decoded objects are shared (``uuid.UUID`` builds one in about a microsecond)."""
    end = off + 16
    if end > len(buf):
        raise DecodeError("truncated uuid")
    raw = bytes(buf[off:end])
    u = _UUIDS.get(raw)
    if u is None:
        if len(_UUIDS) >= _UUIDS_MAX:
            _UUIDS.clear()
        u = _UUIDS[raw] = _uuid.UUID(bytes=raw)
    return u, end


def w_uuid(out: bytearray, v) -> None:
    out += v.bytes


# ---------------------------------------------------------------------------------------------
# arrays of primitives
# ---------------------------------------------------------------------------------------------

_FIXED = {"int8": (1, "b"), "int16": (2, "h"), "uint16": (2, "H"), "int32": (4, "i"),
          "uint32": (4, "I"), "int64": (8, "q"), "float64": (8, "d")}


def r_fixed_array(buf, off: int, n: int, kind: str):
    """Read ``n`` fixed-width numbers of ``kind`` (e.g. "int32") starting at ``off``."""
    size, code = _FIXED[kind]
    _check(buf, off, n * size, "array")
    return list(struct.unpack_from(f">{n}{code}", buf, off)), off + n * size


def w_fixed_array(out: bytearray, values, kind: str) -> None:
    size, code = _FIXED[kind]
    out += struct.pack(f">{len(values)}{code}", *values)


# ---------------------------------------------------------------------------------------------
# tagged fields (KIP-482)
# ---------------------------------------------------------------------------------------------

def r_unknown_tag(buf, off: int, tag: int, size: int, unknown):
    """Skip a tagged field this version does not know, keeping its raw bytes."""
    _check(buf, off, size, "tagged field")
    end = off + size
    if unknown is None:
        unknown = []
    unknown.append((tag, bytes(buf[off:end])))
    return unknown, end


def w_tagged(out: bytearray, fields: list) -> None:
    """Write a tagged-field section from ``[(tag, encoded bytes), ...]`` sorted by tag."""
    w_uvarint(out, len(fields))
    for tag, data in fields:
        w_uvarint(out, tag)
        w_uvarint(out, len(data))
        out += data
