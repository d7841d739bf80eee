"""Remote log segment metadata (KIP-405) as Kafka's topic-based ``RemoteLogMetadataManager``
keeps it: records in the ``__remote_log_metadata`` topic (``kafka-specs/storage``
``RemoteLogSegmentMetadataRecord``, ``RemoteLogSegmentMetadataUpdateRecord``,
``RemotePartitionDeleteMetadataRecord``, each framed as Kafka's ``RemoteLogMetadataSerde``:
frame version, record type, version, record; the record key is null), the partitioner that
picks the metadata partition of a user partition, and the per-partition state replaying them
builds (Kafka ``RemoteLogMetadataCache``).

Segment states and their allowed transitions (Kafka ``RemoteLogSegmentState``)::

    COPY_SEGMENT_STARTED -> COPY_SEGMENT_FINISHED | DELETE_SEGMENT_STARTED
    COPY_SEGMENT_FINISHED -> DELETE_SEGMENT_STARTED
    DELETE_SEGMENT_STARTED -> DELETE_SEGMENT_FINISHED   (the segment is then forgotten)

Only ``COPY_SEGMENT_FINISHED`` segments are readable; a ``COPY_SEGMENT_STARTED`` one left by a
crashed or deposed leader is deleted by the next leader before it copies anything.
"""

from __future__ import annotations

import bisect
import enum
import logging
import struct
import uuid
from dataclasses import dataclass, field

from kcompat.protocol.framing import decode_framed, encode_framed
from kcompat.protocol.murmur2 import murmur2
from kcompat.protocol.storage_records import RECORD_TYPES
from kcompat.protocol.storage_records.remote_log_segment_metadata_record import RemoteLogSegmentMetadataRecord
from kcompat.protocol.storage_records.remote_log_segment_metadata_update_record import (
    RemoteLogSegmentMetadataUpdateRecord,
)
from kcompat.protocol.storage_records.remote_partition_delete_metadata_record import (
    RemotePartitionDeleteMetadataRecord,
)
from kcompat.tiered.storage import SegmentKey

log = logging.getLogger("kcompat.tiered")

REMOTE_LOG_METADATA_TOPIC = "__remote_log_metadata"


class SegmentState(enum.IntEnum):
    """Kafka ``RemoteLogSegmentState`` (its ids are the record's ``RemoteLogSegmentState``)."""

    COPY_SEGMENT_STARTED = 0
    COPY_SEGMENT_FINISHED = 1
    DELETE_SEGMENT_STARTED = 2
    DELETE_SEGMENT_FINISHED = 3


class PartitionDeleteState(enum.IntEnum):
    """Kafka ``RemotePartitionDeleteState``."""

    DELETE_PARTITION_MARKED = 0
    DELETE_PARTITION_STARTED = 1
    DELETE_PARTITION_FINISHED = 2


VALID_TRANSITIONS = {
    SegmentState.COPY_SEGMENT_STARTED: {SegmentState.COPY_SEGMENT_FINISHED, SegmentState.DELETE_SEGMENT_STARTED},
    SegmentState.COPY_SEGMENT_FINISHED: {SegmentState.DELETE_SEGMENT_STARTED},
    SegmentState.DELETE_SEGMENT_STARTED: {SegmentState.DELETE_SEGMENT_FINISHED},
    SegmentState.DELETE_SEGMENT_FINISHED: set(),
}


def _java_long_hash(v: int) -> int:
    v &= 0xFFFFFFFFFFFFFFFF
    return (v ^ (v >> 32)) & 0xFFFFFFFF


def metadata_partition(topic_id: uuid.UUID, partition: int, num_partitions: int) -> int:
    """The ``__remote_log_metadata`` partition of a user partition (Kafka
    ``RemoteLogMetadataTopicPartitioner.metadataPartition``: murmur2 of the 4 bytes of
    ``Objects.hash(topicId.leastSignificantBits, topicId.mostSignificantBits, partition)``,
    made positive, modulo ``remote.log.metadata.topic.num.partitions``)."""
    msb, lsb = topic_id.int >> 64, topic_id.int & 0xFFFFFFFFFFFFFFFF
    h = 1
    for part in (_java_long_hash(lsb), _java_long_hash(msb), partition & 0xFFFFFFFF):
        h = (31 * h + part) & 0xFFFFFFFF
    return (murmur2(struct.pack(">I", h)) & 0x7FFFFFFF) % num_partitions


@dataclass
class RemoteSegment:
    """Kafka ``RemoteLogSegmentMetadata``: offsets ``[key.start_offset, end_offset]``
    (inclusive), ``leader_epochs`` epoch -> first offset of that epoch in the segment,
    ``size`` of the ``.log`` in bytes, ``max_timestamp_ms`` the largest record timestamp."""

    key: SegmentKey
    end_offset: int
    broker_id: int
    max_timestamp_ms: int
    event_timestamp_ms: int
    leader_epochs: dict[int, int]
    size: int
    state: SegmentState = SegmentState.COPY_SEGMENT_STARTED

    @property
    def start_offset(self) -> int:
        return self.key.start_offset

    def to_record(self) -> RemoteLogSegmentMetadataRecord:
        """The ``RemoteLogSegmentMetadataRecord`` announcing this segment (state STARTED)."""
        R = RemoteLogSegmentMetadataRecord
        return R(remote_log_segment_id=_segment_id_entry(R, self.key), start_offset=self.key.start_offset,
                 end_offset=self.end_offset, broker_id=self.broker_id, max_timestamp_ms=self.max_timestamp_ms,
                 event_timestamp_ms=self.event_timestamp_ms,
                 segment_leader_epochs=[R.SegmentLeaderEpochEntry(leader_epoch=e, offset=o)
                                        for e, o in sorted(self.leader_epochs.items())],
                 segment_size_in_bytes=self.size, remote_log_segment_state=int(self.state))

    def update_record(self, state: SegmentState, broker_id: int, now_ms: int) -> RemoteLogSegmentMetadataUpdateRecord:
        """The ``RemoteLogSegmentMetadataUpdateRecord`` moving this segment to ``state``."""
        U = RemoteLogSegmentMetadataUpdateRecord
        return U(remote_log_segment_id=_segment_id_entry(U, self.key), broker_id=broker_id,
                 event_timestamp_ms=now_ms, remote_log_segment_state=int(state))


def _segment_id_entry(cls, key: SegmentKey):
    return cls.RemoteLogSegmentIdEntry(
        topic_id_partition=cls.TopicIdPartitionEntry(name=key.topic, id=key.topic_id, partition=key.partition),
        id=key.segment_id)


def partition_delete_record(topic: str, topic_id: uuid.UUID, partition: int, state: PartitionDeleteState,
                            broker_id: int, now_ms: int) -> RemotePartitionDeleteMetadataRecord:
    """A ``RemotePartitionDeleteMetadataRecord`` (topic deletion)."""
    D = RemotePartitionDeleteMetadataRecord
    return D(topic_id_partition=D.TopicIdPartitionEntry(name=topic, id=topic_id, partition=partition),
             broker_id=broker_id, event_timestamp_ms=now_ms, remote_partition_delete_state=int(state))


def encode(record) -> bytes:
    """The record value of a metadata record (``RemoteLogMetadataSerde.serialize``)."""
    return encode_framed(record)


def decode(value):
    """Inverse of :func:`encode`; raises ``DecodeError`` (unknown frame/type, truncated)."""
    return decode_framed(value, RECORD_TYPES)


def record_partition(record) -> tuple[uuid.UUID, int]:
    """``(topic id, partition)`` a metadata record is about."""
    tip = (record.topic_id_partition if isinstance(record, RemotePartitionDeleteMetadataRecord)
           else record.remote_log_segment_id.topic_id_partition)
    return tip.id, tip.partition


@dataclass
class RemotePartitionState:
    """What ``__remote_log_metadata`` says about one user partition: its segments by id and its
    deletion state. :meth:`apply` replays one record; replaying a record twice changes nothing
    (a re-read of the metadata partition after a failover is harmless)."""

    segments: dict[uuid.UUID, RemoteSegment] = field(default_factory=dict)
    delete_state: PartitionDeleteState | None = None

    def apply(self, record) -> None:
        """Apply one decoded record (invalid state transitions are logged and ignored, as
        Kafka's cache rejects them)."""
        if isinstance(record, RemoteLogSegmentMetadataRecord):
            sid = record.remote_log_segment_id
            if sid.id in self.segments:
                return
            tip = sid.topic_id_partition
            self.segments[sid.id] = RemoteSegment(
                SegmentKey(tip.name, tip.id, tip.partition, record.start_offset, sid.id), record.end_offset,
                record.broker_id, record.max_timestamp_ms, record.event_timestamp_ms,
                {e.leader_epoch: e.offset for e in record.segment_leader_epochs}, record.segment_size_in_bytes,
                SegmentState(record.remote_log_segment_state))
        elif isinstance(record, RemoteLogSegmentMetadataUpdateRecord):
            seg = self.segments.get(record.remote_log_segment_id.id)
            state = SegmentState(record.remote_log_segment_state)
            if seg is None or seg.state == state:
                return
            if state not in VALID_TRANSITIONS[seg.state]:
                log.warning("remote segment %s: ignoring transition %s -> %s", seg.key.segment_id,
                            seg.state.name, state.name)
                return
            if state == SegmentState.DELETE_SEGMENT_FINISHED:
                del self.segments[seg.key.segment_id]
            else:
                seg.state = state
        elif isinstance(record, RemotePartitionDeleteMetadataRecord):
            self.delete_state = PartitionDeleteState(record.remote_partition_delete_state)

    def copied(self) -> list[RemoteSegment]:
        """The readable (``COPY_SEGMENT_FINISHED``) segments by start offset."""
        return sorted((s for s in self.segments.values() if s.state == SegmentState.COPY_SEGMENT_FINISHED),
                      key=lambda s: (s.start_offset, s.end_offset))

    def in_state(self, *states: SegmentState) -> list[RemoteSegment]:
        """Segments in any of ``states``, by start offset."""
        return sorted((s for s in self.segments.values() if s.state in states), key=lambda s: s.start_offset)

    def highest_copied_offset(self) -> int:
        """Largest end offset of a readable segment, -1 if none (Kafka
        ``highestOffsetInRemoteStorage``)."""
        return max((s.end_offset for s in self.copied()), default=-1)

    def earliest_offset(self) -> int | None:
        """Start offset of the first readable segment, None if none."""
        copied = self.copied()
        return copied[0].start_offset if copied else None

    def size_in_bytes(self) -> int:
        """Total ``.log`` bytes of the readable segments."""
        return sum(s.size for s in self.copied())

    def segment_for(self, offset: int) -> RemoteSegment | None:
        """The readable segment holding ``offset``; else the first one starting after it (a
        gap left by compaction or a failover), None if there is none."""
        copied = self.copied()
        i = bisect.bisect_right([s.start_offset for s in copied], offset) - 1
        if i >= 0 and copied[i].end_offset >= offset:
            return copied[i]
        for s in copied[max(i, 0):]:
            if s.start_offset > offset:
                return s
        return None
