"""File helpers shared by the log modules: unbuffered fds, exact preads/pwrites, atomic writes,
directory fsync, and batch-header scans over a segment file.

All segment I/O goes through ``os.pread``/``os.pwrite`` on raw fds: an append is in the OS page
cache when the call returns (it survives ``kill -9`` of the process; surviving power loss needs
an fsync, see ``flush.messages``/``flush.ms``).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Iterator

from kcompat.protocol.records import (
    HEADER_SIZE, BatchHeader, CorruptRecordError, crc_valid, parse_header,
)

logger = logging.getLogger("kcompat.log")

HEADER_CHUNK = 8192          # bytes read per pread when walking batch headers
RECOVERY_CHUNK = 4 << 20     # bytes read per pread when validating a segment
MAX_RELATIVE_OFFSET = 2**31 - 1


def open_rw(path: Path | str, *, truncate: bool = False) -> int:
    """Open (creating if needed) ``path`` read-write, unbuffered; returns the fd."""
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | (os.O_TRUNC if truncate else 0)
    return os.open(path, flags, 0o644)


def open_ro(path: Path | str) -> int:
    """Open ``path`` read-only; raises FileNotFoundError if it does not exist."""
    return os.open(path, os.O_RDONLY | os.O_CLOEXEC)


def pread_full(fd: int, n: int, pos: int) -> bytes:
    """Read ``n`` bytes at ``pos`` (fewer only at end of file)."""
    data = os.pread(fd, n, pos)
    if len(data) == n or not data:
        return data
    parts = [data]
    got = len(data)
    while got < n:
        chunk = os.pread(fd, n - got, pos + got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def pwrite_all(fd: int, data, pos: int) -> None:
    """Write all of ``data`` (bytes-like) at ``pos``; raises OSError (e.g. ENOSPC)."""
    mv = memoryview(data)
    while mv:
        n = os.pwrite(fd, mv, pos)
        mv = mv[n:]
        pos += n


def fsync_path(path: Path | str) -> None:
    """fsync a file by path (a closed segment or index); a missing file is ignored."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path | str) -> None:
    """fsync a directory so that creates, renames and unlinks in it are durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, tmp_suffix: str = ".tmp") -> None:
    """Replace ``path`` with ``data`` atomically: write ``<path><tmp_suffix>``, fsync, rename,
    fsync the directory (Kafka's ``Utils.atomicMoveWithFallback`` after a flushed temp file).

    On an OSError before the rename (ENOSPC...) the temporary file is removed and ``path`` keeps
    its previous content; the OSError propagates."""
    tmp = path.with_name(path.name + tmp_suffix)
    try:
        fd = open_rw(tmp, truncate=True)
        try:
            pwrite_all(fd, data, 0)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        unlink_quiet(tmp)
        raise
    fsync_dir(path.parent)


def close_abandoned(fd: int | None) -> None:
    """Close ``fd`` (None: nothing to close) from a finalizer: an object dropped without its
    ``close()`` gives its descriptor back. An OSError (already closed) is ignored."""
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass


def unlink_quiet(path: Path | str) -> bool:
    """Remove ``path``; True if it existed."""
    try:
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False


def scan_headers(fd: int, start: int, end: int, chunk: int = HEADER_CHUNK
                 ) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for each batch in ``[start, end)`` of a segment file, reading
    headers in ``chunk``-byte preads (no CRC check: the data was validated on append/recovery).

    Raises CorruptRecordError on a malformed header or a batch that runs past ``end``.
    """
    buf = b""
    buf_pos = start
    pos = start
    while pos < end:
        rel = pos - buf_pos
        if rel < 0 or rel + HEADER_SIZE > len(buf):
            buf = pread_full(fd, min(max(chunk, HEADER_SIZE), end - pos), pos)
            buf_pos = pos
            rel = 0
            if len(buf) < HEADER_SIZE:
                raise CorruptRecordError(f"truncated batch header at position {pos}")
        h = parse_header(buf, rel)
        if pos + h.size > end:
            raise CorruptRecordError(f"batch at position {pos} of {h.size} bytes runs past {end}")
        yield pos, h
        pos += h.size


class ValidScan:
    """Iterate the valid batches of a segment file from ``start``, as Kafka's
    ``LogSegment.recover``: framing, magic 2, CRC32C, offsets increasing and representable
    relative to ``base_offset``. Stops at the first invalid or torn batch; afterwards
    ``valid_end`` is the position after the last valid batch and ``problem`` says why it stopped
    (None at a clean end)."""

    def __init__(self, fd: int, start: int, end: int, base_offset: int,
                 chunk: int = RECOVERY_CHUNK) -> None:
        self.fd, self.start, self.end, self.base_offset = fd, start, end, base_offset
        self.chunk = chunk
        self.valid_end = start
        self.problem: str | None = None

    def __iter__(self) -> Iterator[tuple[int, BatchHeader]]:
        fd, end = self.fd, self.end
        buf = b""
        buf_pos = pos = self.start
        expected = self.base_offset
        while pos < end:
            rel = pos - buf_pos
            if rel + HEADER_SIZE > len(buf):
                buf = pread_full(fd, min(self.chunk, end - pos), pos)
                buf_pos, rel = pos, 0
                if len(buf) < HEADER_SIZE:
                    self.problem = f"torn batch header ({len(buf)} bytes) at position {pos}"
                    return
            try:
                h = parse_header(buf, rel)
            except CorruptRecordError as e:
                self.problem = f"invalid batch header at position {pos}: {e}"
                return
            if pos + h.size > end:
                self.problem = f"torn batch at position {pos}: {h.size} bytes, {end - pos} remain"
                return
            if rel + h.size > len(buf):
                buf = pread_full(fd, min(max(self.chunk, h.size), end - pos), pos)
                buf_pos, rel = pos, 0
            if not crc_valid(buf, rel, h):
                self.problem = f"CRC mismatch in batch at position {pos} (offset {h.base_offset})"
                return
            if h.base_offset < expected:
                self.problem = (f"batch at position {pos} has base offset {h.base_offset}, "
                                f"expected >= {expected}")
                return
            if h.last_offset - self.base_offset > MAX_RELATIVE_OFFSET:
                self.problem = f"offset {h.last_offset} overflows segment {self.base_offset}"
                return
            yield pos, h
            expected = h.next_offset
            pos += h.size
            self.valid_end = pos
