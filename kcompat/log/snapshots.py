"""Producer-state snapshot files ``<20-digit offset>.snapshot`` in a partition directory.

The content belongs to the producer-state layer (Kafka's ``ProducerStateManager``, format in
``kafka-specs/storage``); this module only stores, lists and deletes the files. A snapshot at
offset N describes the producer state of the log up to, not including, offset N.
"""

from __future__ import annotations

import bisect
import re
from pathlib import Path

from kcompat.log.fileio import atomic_write, logger, unlink_quiet

_SNAPSHOT = re.compile(r"^(\d{20})\.snapshot$")


def snapshot_path(directory: Path, offset: int) -> Path:
    """``<directory>/<20-digit offset>.snapshot``."""
    return directory / f"{offset:020d}.snapshot"


class SnapshotStore:
    """The snapshot files of one partition; offsets kept sorted in memory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        offsets = []
        for p in directory.iterdir():
            m = _SNAPSHOT.match(p.name)
            if m:
                offsets.append(int(m.group(1)))
        self._offsets = sorted(offsets)

    @property
    def offsets(self) -> list[int]:
        """Offsets of the stored snapshots, ascending."""
        return list(self._offsets)

    def write(self, offset: int, data: bytes) -> None:
        """Store ``data`` as the snapshot at ``offset`` atomically (tmp, fsync, rename, fsync
        dir), replacing an existing one."""
        atomic_write(snapshot_path(self.directory, offset), data)
        i = bisect.bisect_left(self._offsets, offset)
        if i == len(self._offsets) or self._offsets[i] != offset:
            self._offsets.insert(i, offset)

    def latest(self, max_offset: int) -> tuple[int, bytes] | None:
        """``(offset, data)`` of the newest snapshot with offset <= ``max_offset``, or None.
        A snapshot that vanished or cannot be read is skipped (and logged); an empty one is
        deleted and skipped. (Checking the content is the producer-state layer's job.)"""
        i = bisect.bisect_right(self._offsets, max_offset)
        while i > 0:
            i -= 1
            off = self._offsets[i]
            path = snapshot_path(self.directory, off)
            try:
                data = path.read_bytes()
            except OSError as e:
                logger.warning("cannot read producer snapshot %s: %s", path, e)
                del self._offsets[i]
                continue
            if not data:
                # never written so by kcompat or Kafka (a snapshot has at least its version and CRC):
                # a file cut to nothing. Kafka deletes a snapshot it cannot read and tries the older
                # one (ProducerStateManager.loadFromSnapshot); an empty file would read as "no producers"
                logger.warning("producer snapshot %s is empty; deleting it", path)
                unlink_quiet(path)
                del self._offsets[i]
                continue
            return off, data
        return None

    def delete_after(self, offset: int) -> int:
        """Delete snapshots with offset > ``offset``; returns how many."""
        i = bisect.bisect_right(self._offsets, offset)
        doomed = self._offsets[i:]
        del self._offsets[i:]
        for off in doomed:
            unlink_quiet(snapshot_path(self.directory, off))
        return len(doomed)

    def delete_before(self, offset: int) -> int:
        """Delete snapshots with offset < ``offset``; returns how many."""
        i = bisect.bisect_left(self._offsets, offset)
        doomed = self._offsets[:i]
        del self._offsets[:i]
        for off in doomed:
            unlink_quiet(snapshot_path(self.directory, off))
        return len(doomed)
