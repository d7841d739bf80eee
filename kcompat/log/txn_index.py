"""The aborted-transaction index of a segment: ``<base>.txnindex`` (Kafka's ``TransactionIndex``).

Each entry is 34 bytes: version int16 (0), producerId int64, firstOffset int64, lastOffset int64,
lastStableOffset int64 — an aborted transaction of ``producerId`` spanning
[firstOffset, lastOffset] (lastOffset is the ABORT marker's offset), recorded in the segment that
holds the marker. ``lastStableOffset`` is the partition's first unstable offset just after the
abort completed: a read that ends below it needs no later entries (the collection is complete).
Read-committed fetches return the entries overlapping the fetched range so that consumers drop
aborted records (KIP-98). The file is created on the first entry; segments without aborted
transactions have none.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import NamedTuple

from kcompat.log.fileio import atomic_write, logger, unlink_quiet

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def parse_txn_index(data: bytes, source: str = "txn index") -> list[AbortedTxn]:
    """The entries of ``.txnindex`` content (34-byte entries; a partial trailing entry and
    everything from an entry of an unknown version on are ignored, the latter logged)."""
    entries = []
    for off in range(0, len(data) - len(data) % ENTRY_SIZE, ENTRY_SIZE):
        version, pid, first, last, lso = _ENTRY.unpack_from(data, off)
        if version != VERSION:
            logger.warning("%s: unknown entry version %d; ignoring the rest", source, version)
            break
        entries.append(AbortedTxn(pid, first, last, lso))
    return entries


class TransactionIndex:
    """Entries of one segment's ``.txnindex``, loaded lazily; appends go straight to the file."""

    __slots__ = ("path", "_entries", "_unwritten")

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[AbortedTxn] | None = None
        self._unwritten = False   # the file lacks entries held in memory (a write failed)

    def entries(self) -> list[AbortedTxn]:
        """All entries (a partial trailing entry from a crash is cut off and logged)."""
        if self._entries is None:
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                data = b""
            whole = len(data) - len(data) % ENTRY_SIZE
            if whole != len(data):
                logger.warning("%s: cutting a partial entry of %d bytes", self.path, len(data) - whole)
                os.truncate(self.path, whole)
            self._entries = parse_txn_index(data[:whole], str(self.path))
        return self._entries

    def sanity_check(self, base_offset: int, end_offset: int | None) -> str | None:
        """What is wrong with the file, None if nothing (Kafka ``TransactionIndex.sanityCheck``,
        run at start-up for every segment, plus kcompat's checks): whole 34-byte entries of
        version 0, a producer id >= 0, firstOffset <= lastOffset, every ABORT marker
        (lastOffset) inside the segment ``[base_offset, end_offset)`` (``end_offset`` None: no
        upper bound) and in non-decreasing order. A damaged file cannot say which records a
        read_committed consumer must drop, so the log rebuilds it (see ``load_segments``)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        if len(data) % ENTRY_SIZE:
            return f"size {len(data)} is not a multiple of {ENTRY_SIZE}"
        prev = base_offset
        for off in range(0, len(data), ENTRY_SIZE):
            version, pid, first, last, _lso = _ENTRY.unpack_from(data, off)
            if version != VERSION:
                return f"entry {off // ENTRY_SIZE} has version {version}"
            if pid < 0 or first < 0 or first > last or last < prev or (end_offset is not None and last >= end_offset):
                return f"entry {off // ENTRY_SIZE} (producer {pid}, offsets {first}-{last}) is not possible here"
            prev = last
        return None

    def append(self, entry: AbortedTxn) -> bool:
        """Add an entry (its lastOffset must not be below the last entry's, as Kafka requires).
        Returns False if it could not be written to the file (ENOSPC...): it is kept in memory,
        reads see it, and :meth:`persist` writes the file again later (the owning log keeps the
        producer-state replay able to rebuild it meanwhile)."""
        entries = self.entries()
        if entries and entry.last_offset < entries[-1].last_offset:
            raise ValueError(f"aborted transaction {entry} ends before the last entry {entries[-1]}")
        entries.append(entry)
        if self._unwritten:
            return False
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
            try:
                view = memoryview(_ENTRY.pack(VERSION, *entry))
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
        except OSError as e:
            self._unwritten = True
            try:   # no partial entry left behind
                os.truncate(self.path, (len(entries) - 1) * ENTRY_SIZE)
            except OSError:
                pass
            logger.error("%s: cannot write an aborted-transaction entry (kept in memory, written later): %s",
                         self.path, e)
            return False
        return True

    @property
    def unwritten(self) -> bool:
        """True while the file lacks entries held in memory."""
        return self._unwritten

    def persist(self) -> bool:
        """Write the whole file from memory if an append could not (atomically); True if the file
        is up to date."""
        if not self._unwritten:
            return True
        try:
            atomic_write(self.path, b"".join(_ENTRY.pack(VERSION, *e) for e in self.entries()))
        except OSError:
            return False
        self._unwritten = False
        logger.info("%s written again", self.path)
        return True

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping [fetch_offset, upper_bound) and whether the search may stop here
        (an entry's lastStableOffset reached ``upper_bound``): Kafka's ``collectAbortedTxns``."""
        found = []
        for e in self.entries():
            if e.last_offset >= fetch_offset and e.first_offset < upper_bound:
                found.append(e)
            if e.last_stable_offset >= upper_bound:
                return found, True
        return found, False

    def truncate_to(self, offset: int) -> int:
        """Drop entries whose lastOffset >= ``offset``; returns how many were dropped."""
        entries = self.entries()
        keep = [e for e in entries if e.last_offset < offset]
        dropped = len(entries) - len(keep)
        if dropped and self._unwritten:
            self._entries = keep          # the file is rewritten from memory by persist()
        elif dropped:
            if keep:
                os.truncate(self.path, len(keep) * ENTRY_SIZE)
            else:
                unlink_quiet(self.path)
            self._entries = keep
        return dropped

    def exists(self) -> bool:
        return self.path.exists()

    def delete(self) -> None:
        unlink_quiet(self.path)
        self._entries = []

    def fsync(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
