"""Committed ``__cluster_metadata`` into the metadata image and the broker, and metadata snapshots.

Kafka's ``MetadataLoader`` + ``BrokerMetadataPublisher`` + ``SnapshotGenerator``: the quorum hands
over committed batches, snapshot loads and leader changes in log order (:mod:`kcompat.broker.quorum`);
each metadata record is applied to the image (the only writer of the image) at once, and the broker
reacts to the records (hosts new partitions, deletes removed topics, applies configs) once per run
of batches handed over together (:meth:`MetadataLoader.publish`), as Kafka's loader publishes a
delta: a restarting node replays its whole metadata log in one run, so it takes each partition's
final role instead of passing through every historical leadership. After
``metadata.log.max.record.bytes.between.snapshots`` bytes of records, or
``metadata.log.max.snapshot.interval.ms`` with new records, the image is written as a snapshot
(``<end offset>-<epoch>.checkpoint``: record batches of the records that rebuild the image) and the
log below it may be deleted; a new or lagging node catches up from it (KIP-630).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from kcompat.kraft.metadata_log import decode_record, encode_record
from kcompat.kraft.raft import CommittedBatch, LeaderChanged, SnapshotLoaded
from kcompat.protocol import records as rb
from kcompat.protocol.primitives import DecodeError

if TYPE_CHECKING:   # types only: the objects are built by kcompat.broker.broker
    from kcompat.config.broker import BrokerConfig
    from kcompat.kraft.image import MetadataImage

log = logging.getLogger("kcompat.kraft.loader")

SNAPSHOT_BATCH_RECORDS = 1000
SNAPSHOT_RETRY_MS = 10_000   # after a snapshot write failed (disk full)


def snapshot_bytes(records: list, now_ms: int) -> bytes:
    """Metadata records as the record batches of a ``.checkpoint`` file."""
    out = bytearray()
    for i in range(0, len(records), SNAPSHOT_BATCH_RECORDS):
        chunk = records[i:i + SNAPSHOT_BATCH_RECORDS]
        out += rb.build_batch([(now_ms, None, encode_record(r), ()) for r in chunk], base_offset=i)
    return bytes(out)


def snapshot_records(data: bytes) -> list:
    """Inverse of :func:`snapshot_bytes` (control batches skipped). Raises DecodeError."""
    out = []
    for pos, header in rb.iter_batches(data):
        if header.is_control:
            continue
        for rec in rb.iter_records(memoryview(data)[pos:pos + header.size]):
            out.append(decode_record(rec.value))
    return out


class MetadataLoader:
    """Feeds quorum events to ``image`` and ``on_metadata(records)``; tells the broker about
    leader changes (``on_quorum_leader(leader_id, epoch)``).

    Records are applied to the image as each committed batch arrives, and handed to
    ``on_metadata`` together at :meth:`publish` (the end of the quorum's run of events), or before
    a snapshot load or leader change, so that the broker sees them in log order.

    - ``image``: the broker's :class:`~kcompat.kraft.image.MetadataImage`, reset and rebuilt in
      place when a snapshot is loaded;
    - ``config``: the broker config (``metadata.log.max.snapshot.interval.ms``,
      ``metadata.log.max.record.bytes.between.snapshots``);
    - ``now_ms()``: the broker clock (ms; the first snapshot interval starts at construction);
    - ``on_metadata(records)``: records applied to the image since the last call, in log order;
    - ``on_metadata_snapshot()``: the image was rebuilt from a snapshot;
    - ``on_quorum_leader(leader_id, epoch)``: the metadata quorum has a new leader.
    """

    def __init__(self, image: MetadataImage, config: BrokerConfig, *, now_ms: Callable[[], int],
                 on_metadata: Callable[[list], None], on_metadata_snapshot: Callable[[], None],
                 on_quorum_leader: Callable[[int, int], None]) -> None:
        self.image = image
        self.config = config
        self.on_metadata = on_metadata
        self.on_metadata_snapshot = on_metadata_snapshot
        self.on_quorum_leader = on_quorum_leader
        self._unpublished: list = []    # records applied to the image, not yet to the broker
        self.bytes_since_snapshot = 0
        self.last_snapshot_ms = now_ms()
        self.snapshots_loaded = 0
        self._retry_snapshot_ms = 0     # after a failed snapshot write

    def on_event(self, event) -> None:
        if isinstance(event, CommittedBatch):
            if event.is_control:
                self.image.offset = max(self.image.offset, event.last_offset)
                return
            records = []
            for rec in rb.iter_records(event.data):
                try:
                    record = decode_record(rec.value)
                except DecodeError as e:
                    log.error("skipping undecodable metadata record at offset %d: %s", rec.offset, e)
                    continue
                self.image.apply(record, rec.offset)
                records.append(record)
            self.image.offset = max(self.image.offset, event.last_offset)
            self.bytes_since_snapshot += len(event.data)
            self._unpublished += records
        elif isinstance(event, SnapshotLoaded):
            self.publish()
            records = snapshot_records(event.data)
            image = self.image
            image.__init__()  # the image object is shared: reset it in place
            for r in records:
                image.apply(r, event.snapshot_id.offset - 1)
            image.offset = event.snapshot_id.offset - 1
            self.snapshots_loaded += 1
            self.bytes_since_snapshot = 0
            log.info("loaded metadata snapshot %s (%d records)", event.snapshot_id, len(records))
            self.on_metadata_snapshot()
        elif isinstance(event, LeaderChanged):
            self.publish()
            self.on_quorum_leader(event.leader.leader_id, event.leader.epoch)

    def publish(self) -> None:
        """Hand the records applied since the last call to ``on_metadata`` (in log order;
        the image already holds them all, so each partition takes its latest state)."""
        if self._unpublished:
            records, self._unpublished = self._unpublished, []
            self.on_metadata(records)

    def maybe_snapshot(self, quorum, now_ms: int) -> None:
        """Write a snapshot of the image when enough has been committed since the last one."""
        cfg = self.config
        image = self.image
        if self.bytes_since_snapshot <= 0 or image.offset < 0 or now_ms < self._retry_snapshot_ms:
            return
        interval = cfg.get("metadata.log.max.snapshot.interval.ms")
        due = self.bytes_since_snapshot >= cfg.get("metadata.log.max.record.bytes.between.snapshots") or \
            (interval > 0 and now_ms - self.last_snapshot_ms >= interval)
        if not due:
            return
        end = min(image.offset + 1, quorum.raft.high_watermark or 0)
        if end <= 0:
            return
        try:
            sid = quorum.raft.create_snapshot(end, snapshot_bytes(image.to_records(), now_ms), now_ms)
        except ValueError as e:
            log.debug("no metadata snapshot now: %s", e)
            return
        except OSError as e:   # disk full: the log still holds everything; try again later
            log.error("could not write a metadata snapshot (retried in %d s): %s", SNAPSHOT_RETRY_MS // 1000, e)
            self._retry_snapshot_ms = now_ms + SNAPSHOT_RETRY_MS
            return
        self.bytes_since_snapshot = 0
        self.last_snapshot_ms = now_ms
        log.info("wrote metadata snapshot %s", sid)
