"""Small helpers shared by the generated message modules (see tools/gen_protocol.py)."""

from __future__ import annotations

from kcompat.protocol.primitives import DecodeError


class _Default:
    """Sentinel for "argument not given" where the default is a fresh list or struct."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<default>"


_DEFAULT = _Default()


def _repr(obj) -> str:
    fields = ", ".join(f"{s}={getattr(obj, s)!r}" for s in obj.__slots__
                       if s != "unknown_tagged_fields" or getattr(obj, s))
    return f"{type(obj).__qualname__}({fields})"


def _tag_of(entry) -> int:
    return entry[0]


def r_bool(buf, off: int):
    if off >= len(buf):
        raise DecodeError("truncated bool")
    return buf[off] != 0, off + 1


def w_bool(out: bytearray, v) -> None:
    out.append(1 if v else 0)
