"""The local ``__cluster_metadata`` log of a single-voter quorum.

Metadata records are stored the way KRaft stores them, so Kafka's
``kafka-dump-log --cluster-metadata-decoder`` can read the files: each record of a RecordBatch v2
has a null key and a value framed as ``frame version (uvarint, 1) | record type (uvarint) |
record version (uvarint) | record (flexible encoding)`` (Kafka ``MetadataRecordSerde``). A batch
is appended and fsynced before its records are applied to the image: with one voter, durable on
the local disk is committed.

Replication across a Raft quorum replaces the commit step in the KRaft issue; the record format
and the replay path stay.
"""

from __future__ import annotations

import logging
from pathlib import Path

from kcompat.kraft.image import MetadataImage, record_class
from kcompat.log import Log, LogConfig
from kcompat.protocol import records as rb
from kcompat.protocol.framing import FRAME_VERSION, decode_framed, encode_framed

log = logging.getLogger("kcompat.kraft")

METADATA_TOPIC = "__cluster_metadata"
__all__ = ["FRAME_VERSION", "METADATA_TOPIC", "MetadataLog", "decode_record", "encode_record"]


def encode_record(record) -> bytes:
    """Frame one metadata record as KRaft does (``MetadataRecordSerde``), at its highest version."""
    return encode_framed(record)


class _MetadataTypes:
    """The metadata record registry as a mapping for :func:`decode_framed`."""

    @staticmethod
    def get(kind: int):
        try:
            return record_class(kind)
        except KeyError:
            return None


def decode_record(value) -> object:
    """Inverse of :func:`encode_record`. Raises DecodeError on an unknown frame or record type."""
    return decode_framed(value, _MetadataTypes)  # type: ignore[arg-type]


class MetadataLog:
    """Append-and-replay store for metadata records in ``<dir>/__cluster_metadata-0``."""

    def __init__(self, directory: Path, now_ms: int) -> None:
        self.directory = directory / f"{METADATA_TOPIC}-0"
        self.directory.mkdir(parents=True, exist_ok=True)
        # The metadata log is small and every append is fsynced: recover it fully at start-up.
        self.log = Log.open(self.directory, LogConfig(), recovery_point=0, log_start_offset=0,
                            clean_shutdown=False, now_ms=now_ms)

    def replay(self, image: MetadataImage) -> int:
        """Apply every stored record to ``image`` in order; returns the number applied."""
        count = 0
        offset = self.log.log_start_offset
        end = self.log.log_end_offset
        while offset < end:
            data = self.log.read(offset, 1 << 20)
            if not data:
                break
            for pos, header in rb.iter_batches(data):
                batch = memoryview(data)[pos:pos + header.size]
                if header.is_control:
                    offset = header.next_offset
                    continue
                for rec in rb.iter_records(batch):
                    image.apply(decode_record(rec.value), rec.offset)
                    count += 1
                offset = header.next_offset
        return count

    def append(self, records: list, now_ms: int) -> int:
        """Durably append ``records`` as one batch; returns the offset of the last one."""
        base = self.log.log_end_offset
        batch = rb.build_batch([(now_ms, None, encode_record(r), ()) for r in records],
                               base_offset=base)
        last = base + len(records) - 1
        self.log.append(batch, last_offset=last, max_timestamp=now_ms, offset_of_max_timestamp=last,
                        now_ms=now_ms)
        self.log.flush()
        return last

    def close(self) -> None:
        self.log.close()
