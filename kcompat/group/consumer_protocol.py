"""The embedded consumer protocol of classic groups (protocol type ``consumer``): the
ConsumerProtocolSubscription a member sends in JoinGroup and the ConsumerProtocolAssignment it
gets in SyncGroup (kafka-specs ConsumerProtocolSubscription/Assignment.json, Kafka's
``ConsumerProtocol``). The KIP-848 coordinator reads and writes them for classic members of a
consumer group and when a group changes protocol. Bytes are an int16 version then the struct; a
version newer than kcompat knows is read as the newest it knows (its prefix), as Kafka does."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kcompat.protocol.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from kcompat.protocol.messages.consumer_protocol_subscription import ConsumerProtocolSubscription
from kcompat.protocol.primitives import DecodeError

_I16 = struct.Struct(">h")


class EmbeddedProtocolError(ValueError):
    """Bytes that are not a consumer protocol subscription or assignment."""


@dataclass(frozen=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    owned: dict[str, frozenset[int]]     # topic name -> partitions (v1+)
    rack_id: str | None                  # v3+


def _read(cls, data: bytes):
    if data is None or len(data) < 2:
        raise EmbeddedProtocolError(f"{cls.__name__}: shorter than its version")
    buf = memoryview(data)
    version = _I16.unpack_from(buf, 0)[0]
    lo, hi = cls.VALID_VERSIONS
    if version < lo:
        raise EmbeddedProtocolError(f"{cls.__name__}: version {version}")
    try:
        obj, _ = cls.read(buf, 2, min(version, hi))
    except (DecodeError, struct.error, IndexError, ValueError) as e:
        raise EmbeddedProtocolError(f"bad {cls.__name__}: {e}") from e
    return version, obj


def parse_subscription(data: bytes) -> Subscription:
    """A JoinGroup protocol's metadata. Raises :class:`EmbeddedProtocolError`."""
    version, sub = _read(ConsumerProtocolSubscription, data)
    owned: dict[str, frozenset[int]] = {}
    for tp in (sub.owned_partitions or ()) if version >= 1 else ():
        owned[tp.topic] = owned.get(tp.topic, frozenset()) | frozenset(tp.partitions)
    rack = sub.rack_id if version >= 3 else None
    return Subscription(version, tuple(sub.topics), owned, rack or None)


def assignment_bytes(version: int, partitions: dict[str, frozenset[int]]) -> bytes:
    """A SyncGroup assignment at ``version`` (that of the member's subscription, capped to what
    kcompat writes)."""
    version = max(0, min(version, ConsumerProtocolAssignment.VALID_VERSIONS[1]))
    out = bytearray(_I16.pack(version))
    ConsumerProtocolAssignment(assigned_partitions=[
        ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=sorted(ps))
        for t, ps in sorted(partitions.items()) if ps], user_data=None).write(out, version)
    return bytes(out)


def parse_assignment(data: bytes) -> dict[str, frozenset[int]]:
    """A SyncGroup assignment (empty bytes: nothing). Raises :class:`EmbeddedProtocolError`."""
    if not data:
        return {}
    _, a = _read(ConsumerProtocolAssignment, data)
    out: dict[str, frozenset[int]] = {}
    for tp in a.assigned_partitions:
        out[tp.topic] = out.get(tp.topic, frozenset()) | frozenset(tp.partitions)
    return out
