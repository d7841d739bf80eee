"""A byte range of a segment's ``.log`` file, for zero-copy fetch responses (Kafka's
``FileRecords`` slice, which ``KafkaApis`` hands to the socket with ``FileChannel.transferTo``,
i.e. ``sendfile``).

:meth:`kcompat.log.Log.read` returns one with ``zero_copy`` when the range is at least
:data:`ZERO_COPY_MIN_BYTES` and its CRCs were checked already; the broker's writer sends it with
``os.sendfile`` from :attr:`FileRecords.fd` at :attr:`FileRecords.position`.

Safety of the range until it is sent:

- the range holds its own duplicate of the segment's fd, so retention, DeleteRecords, the cleaner
  (which renames cleaned files over the old ones) and segment fd eviction do not affect it:
  unlinked or replaced files stay readable through an open fd;
- appends only add bytes after the range;
- a truncation (a follower truncating a divergent log, :meth:`LogSegment.truncate_to`) would cut
  the file under it, so the segment first calls :meth:`FileRecords.detach` on every live range it
  is about to cut: the range's bytes are copied into memory and sent from there.
"""

from __future__ import annotations

import os

from kcompat.log.fileio import pread_full

# ranges smaller than this are read into memory at once: dup + sendfile + close cost more
ZERO_COPY_MIN_BYTES = 16384


class FileRecords:
    """``size`` bytes at ``position`` of the file open as ``fd`` (duplicated here; the caller
    keeps its own). ``len()`` is the size; :attr:`data` holds the bytes once detached (then
    :attr:`fd` is -1). Close it after sending (it also closes itself when collected)."""

    __slots__ = ("fd", "position", "size", "data", "__weakref__")

    def __init__(self, fd: int, position: int, size: int) -> None:
        self.fd = os.dup(fd)
        self.position = position
        self.size = size
        self.data: bytes | None = None

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"FileRecords(fd={self.fd}, position={self.position}, size={self.size})"

    def read_bytes(self) -> bytes:
        """The range's bytes (pread, or the detached copy)."""
        if self.data is not None:
            return self.data
        return pread_full(self.fd, self.size, self.position)

    def overlaps_from(self, file_position: int) -> bool:
        """True if the range reaches ``file_position`` or beyond (a truncation there cuts it)."""
        return self.data is None and self.position + self.size > file_position

    def detach(self) -> None:
        """Copy the range into memory and close the fd: the file is about to be truncated."""
        if self.data is None and self.fd >= 0:
            self.data = pread_full(self.fd, self.size, self.position)
            self.close()

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)

    def __del__(self) -> None:
        self.close()
