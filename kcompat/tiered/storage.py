"""The remote storage interface (Kafka's ``RemoteStorageManager``, KIP-405) and the local
filesystem backend.

A remote segment is a set of objects named after its topic, partition, base offset and segment
id (a fresh UUID per copy attempt, so a retried copy never overwrites an earlier attempt's
objects)::

    <topic>-<topic id>/<partition>/<20-digit start offset>-<segment id>.<suffix>

with suffixes ``log``, ``index``, ``timeindex``, ``snapshot``, ``leader-epoch-checkpoint`` and
``txnindex`` (only when the segment has aborted transactions). Whether a segment is *visible*
is decided by its metadata (``COPY_SEGMENT_FINISHED``), never by the objects' presence, so a copy
interrupted half way leaves nothing readable (the remote log manager deletes such leftovers).
"""

from __future__ import annotations

import abc
import asyncio
import enum
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from kcompat.log.checkpoint import topic_id_to_str


class RemoteStorageError(Exception):
    """The store failed or is unreachable (Kafka ``RemoteStorageException``): the copier retries
    with back-off; a remote fetch answers ``KAFKA_STORAGE_ERROR``."""


class RemoteResourceNotFoundError(RemoteStorageError):
    """An object of the segment is missing (Kafka ``RemoteResourceNotFoundException``)."""


class IndexType(enum.Enum):
    """Kafka ``RemoteStorageManager.IndexType``, with the object-name suffix of each."""

    OFFSET = "index"
    TIMESTAMP = "timeindex"
    PRODUCER_SNAPSHOT = "snapshot"
    TRANSACTION = "txnindex"
    LEADER_EPOCH = "leader-epoch-checkpoint"


@dataclass(frozen=True)
class SegmentKey:
    """What names a remote segment's objects (a part of ``RemoteLogSegmentMetadata``)."""

    topic: str
    topic_id: uuid.UUID
    partition: int
    start_offset: int
    segment_id: uuid.UUID

    def object_name(self, suffix: str) -> str:
        """``<topic>-<topic id>/<partition>/<start offset>-<segment id>.<suffix>``."""
        return (f"{self.topic}-{topic_id_to_str(self.topic_id)}/{self.partition}/"
                f"{self.start_offset:020d}-{topic_id_to_str(self.segment_id)}.{suffix}")


@dataclass(frozen=True)
class SegmentData:
    """The files of one closed local segment to copy (Kafka ``LogSegmentData``): paths of the
    ``.log``, ``.index``, ``.timeindex``, ``.txnindex`` (None if the segment has none) and the
    producer snapshot at the segment's end, plus the leader-epoch checkpoint content covering
    the segment (text, Kafka's ``leader-epoch-checkpoint`` format)."""

    log: Path
    offset_index: Path
    time_index: Path
    txn_index: Path | None
    producer_snapshot: Path | None
    leader_epoch_checkpoint: bytes

    def objects(self) -> list[tuple[str, Path | bytes]]:
        """``(suffix, path or content)`` of every object to write, the ``.log`` last."""
        out: list[tuple[str, Path | bytes]] = [
            (IndexType.OFFSET.value, self.offset_index), (IndexType.TIMESTAMP.value, self.time_index),
            (IndexType.PRODUCER_SNAPSHOT.value, self.producer_snapshot or b""),
            (IndexType.LEADER_EPOCH.value, self.leader_epoch_checkpoint)]
        if self.txn_index is not None:
            out.append((IndexType.TRANSACTION.value, self.txn_index))
        out.append(("log", self.log))
        return out


class RemoteStorageManager(abc.ABC):
    """Kafka's ``RemoteStorageManager`` as coroutines. Every method raises
    :class:`RemoteStorageError` when the store fails (and only that: backends wrap their
    library's errors)."""

    @abc.abstractmethod
    async def copy_log_segment_data(self, key: SegmentKey, data: SegmentData) -> None:
        """Write every object of the segment (``copyLogSegmentData``)."""

    @abc.abstractmethod
    async def fetch_log_segment(self, key: SegmentKey, start_position: int, end_position: int | None = None) -> bytes:
        """Bytes ``[start_position, end_position)`` of the segment's ``.log`` (to its end when
        ``end_position`` is None), shorter if the object ends first (``fetchLogSegment``)."""

    @abc.abstractmethod
    async def fetch_index(self, key: SegmentKey, index_type: IndexType) -> bytes:
        """The whole index object; RemoteResourceNotFoundError for a missing ``TRANSACTION``
        index (segments without aborted transactions have none) (``fetchIndex``)."""

    @abc.abstractmethod
    async def delete_log_segment_data(self, key: SegmentKey) -> None:
        """Delete every object of the segment; objects already gone are no error
        (``deleteLogSegmentData``)."""

    async def close(self) -> None:
        """Release connections (nothing by default)."""


class LocalFileSystemStorage(RemoteStorageManager):
    """Remote storage in a directory of the local filesystem (Kafka's test ``LocalTieredStorage``
    plays this role): the embedded default, for tests and single-machine use. Objects are
    written to a temporary name and renamed, so an object is either whole or absent. File I/O
    runs on a worker thread."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _path(self, key: SegmentKey, suffix: str) -> Path:
        return self.root / key.object_name(suffix)

    async def copy_log_segment_data(self, key: SegmentKey, data: SegmentData) -> None:
        def copy() -> None:
            for suffix, src in data.objects():
                dst = self._path(key, suffix)
                dst.parent.mkdir(parents=True, exist_ok=True)
                tmp = dst.with_name(dst.name + ".tmp")
                if isinstance(src, bytes):
                    tmp.write_bytes(src)
                else:
                    shutil.copyfile(src, tmp)
                os.replace(tmp, dst)
        await self._run(copy, f"copying segment {key.start_offset} of {key.topic}-{key.partition}")

    async def fetch_log_segment(self, key: SegmentKey, start_position: int, end_position: int | None = None) -> bytes:
        # a read is one pread of page-cached data, done on the event loop like local log reads
        # (kcompat.log); copies run on a worker thread
        try:
            fd = os.open(self._path(key, "log"), os.O_RDONLY | os.O_CLOEXEC)
            try:
                size = os.fstat(fd).st_size if end_position is None else end_position
                return os.pread(fd, max(0, size - start_position), start_position)
            finally:
                os.close(fd)
        except FileNotFoundError as e:
            raise RemoteResourceNotFoundError(f"reading segment {key.start_offset} of {key.topic}-{key.partition}: {e}") from e
        except OSError as e:
            raise RemoteStorageError(f"reading segment {key.start_offset} of {key.topic}-{key.partition}: {e}") from e

    async def fetch_index(self, key: SegmentKey, index_type: IndexType) -> bytes:
        return await self._run(lambda: self._path(key, index_type.value).read_bytes(),
                               f"reading the {index_type.name} index of segment {key.start_offset}")

    async def delete_log_segment_data(self, key: SegmentKey) -> None:
        def delete() -> None:
            for suffix in ("log", *(t.value for t in IndexType)):
                for p in (self._path(key, suffix), self._path(key, suffix + ".tmp")):
                    try:
                        p.unlink()
                    except FileNotFoundError:
                        pass
        await self._run(delete, f"deleting segment {key.start_offset} of {key.topic}-{key.partition}")

    @staticmethod
    async def _run(fn, what: str):
        try:
            return await asyncio.to_thread(fn)
        except FileNotFoundError as e:
            raise RemoteResourceNotFoundError(f"{what}: {e}") from e
        except OSError as e:
            raise RemoteStorageError(f"{what}: {e}") from e
