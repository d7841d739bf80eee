"""Small helpers shared by the generated message modules (see tools/gen_protocol.py)."""

from __future__ import annotations

from kcompat.protocol.primitives import DecodeError


class _Default:
    """Sentinel for "argument not given" where the default is a fresh list or struct."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<default>"


_DEFAULT = _Default()


class Struct:
    """Base of every generated message and struct class: field-wise equality and a readable repr.
    Subclasses declare their fields in ``__slots__`` (plus ``unknown_tagged_fields``)."""

    __slots__ = ()
    __hash__ = None  # mutable

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in self.__slots__)

    def __repr__(self) -> str:
        fields = ", ".join(f"{s}={getattr(self, s)!r}" for s in self.__slots__
                           if s != "unknown_tagged_fields" or getattr(self, s))
        return f"{type(self).__qualname__}({fields})"


def _tag_of(entry) -> int:
    return entry[0]


def r_bool(buf, off: int):
    if off >= len(buf):
        raise DecodeError("truncated bool")
    return buf[off] != 0, off + 1


def w_bool(out: bytearray, v) -> None:
    out.append(1 if v else 0)
