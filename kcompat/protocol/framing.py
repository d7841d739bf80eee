"""The framing Kafka's ``AbstractApiMessageSerde`` gives a record stored as a Kafka record value:
``frame version (uvarint, 1) | record type (uvarint, the spec's apiKey) | record version (uvarint)
| record``. ``__cluster_metadata`` (``MetadataRecordSerde``) and ``__remote_log_metadata``
(``RemoteLogMetadataSerde``, KIP-405) both use it."""

from __future__ import annotations

from typing import Mapping

from kcompat.protocol.primitives import DecodeError, r_uvarint, w_uvarint

FRAME_VERSION = 1


def encode_framed(record, version: int | None = None) -> bytes:
    """Frame one generated record object at ``version`` (default: its highest)."""
    cls = type(record)
    if version is None:
        version = cls.VALID_VERSIONS[1]
    out = bytearray()
    w_uvarint(out, FRAME_VERSION)
    w_uvarint(out, cls.API_KEY)
    w_uvarint(out, version)
    record.write(out, version)
    return bytes(out)


def decode_framed(value, types: Mapping[int, type]) -> object:
    """Inverse of :func:`encode_framed`; ``types`` maps record type ids to generated classes.
    Raises DecodeError on an unknown frame version or record type, or a truncated record."""
    view = memoryview(value)
    frame, off = r_uvarint(view, 0)
    if frame != FRAME_VERSION:
        raise DecodeError(f"unknown record frame version {frame}")
    kind, off = r_uvarint(view, off)
    version, off = r_uvarint(view, off)
    cls = types.get(kind)
    if cls is None:
        raise DecodeError(f"unknown record type {kind}")
    record, _ = cls.read(view, off, version)
    return record
