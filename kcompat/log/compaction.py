"""The log cleaner's work on one log: compact its inactive segments into ``.cleaned`` files
(Kafka's ``Cleaner``). Pure file I/O on data no one else writes, so it runs in a worker process
(:func:`run_clean_task` takes a picklable :class:`CleanTask` and returns a picklable
:class:`CleanResult`); :mod:`kcompat.log.cleaner` plans the task and installs the result.

The algorithm, as Kafka's:

1. Offset map. Over the dirty section ``[first_dirty, upper)`` (``upper`` is the first
   uncleanable offset, a segment base), map every key to its latest offset. The map has a memory
   budget (``log.cleaner.dedupe.buffer.size``); when it fills, the dirty section is cut at the end
   of the last whole batch mapped (``end_offset``) and the rest waits for the next pass.
2. Rewrite. Every segment from the start of the log up to ``end_offset``, in groups whose total
   size fits ``segment.bytes`` (and the index size), is copied into one new segment named after
   the group's first base offset, keeping a record if its offset is past the map's end, or it has
   no key (Kafka drops those; the produce path rejects them on compacted topics, so any found
   predate the policy and are kept), or its offset is the latest for its key (records of the
   clean section whose key reappears in the dirty section are dropped too) - except tombstones
   (null value) whose batch's delete horizon has passed. Offsets never change: consumers see
   gaps. In the dirty section a batch none of whose offsets is a key's latest is dropped from
   its header alone (the map says so), one whose offsets all are is copied without decoding.
3. Batches. A batch whose records all survive is copied byte for byte. Otherwise it is rebuilt
   with the same base offset, last offset delta, producer id/epoch/base sequence, partition
   leader epoch, timestamp type, transactional/control flags and compression codec; the first
   time a batch with a surviving tombstone is rebuilt it gets the delete-horizon attribute (bit 6)
   with ``baseTimestamp = now + delete.retention.ms`` (KIP-534); record timestamps are re-based
   so every record keeps its own timestamp. A batch left without records is dropped unless it is
   the last batch of its producer (kept as an empty header so the producer's last sequence and
   epoch survive) or the last batch before ``upper``. Control batches and transactional batches
   are kept whole and are not put in the offset map (no transaction state here yet).
"""

from __future__ import annotations

import os
import signal
import struct
import sys
import time
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from kcompat.log.config import LogConfig
from kcompat.log.fileio import MAX_RELATIVE_OFFSET, pwrite_all, unlink_quiet
from kcompat.log.log_cleaning import CleanedGroup, delete_cleaned_files
from kcompat.log.offset_map import OffsetMap, batch_body, iter_batches, uvarint_rest
from kcompat.log.segment import IndexBuilder, segment_name
from kcompat.protocol import compression
from kcompat.protocol.records import (
    ATTR_CONTROL, ATTR_DELETE_HORIZON, ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL, HEADER_SIZE, LOG_OVERHEAD, MAGIC, BatchHeader, CorruptRecordError,
    compute_crc, crc_valid, parse_header,
)

_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC = struct.Struct(">I")
WRITE_CHUNK = 4 << 20         # bytes buffered before a pwrite to the cleaned segment
PARENT_CHECK_BATCHES = 4096   # batches between checks that the broker process is alive


@dataclass(frozen=True)
class CleanTask:
    """Everything a worker needs to clean one log (picklable; built by ``LogCleaner``).

    ``segments``: ``(base offset, .log size)`` of every segment with base offset < ``upper``, in
    order (inactive, so immutable until the cleaner's own install). ``first_dirty``: the cleaner
    checkpoint (first offset not yet cleaned). ``upper``: first uncleanable offset (a segment
    base). ``producer_last_offsets``: producer id -> last offset of its last data batch, from the
    producer state; None means "retain the last batch of each producer id found in the log".
    """

    topic: str
    partition: int
    directory: str
    segments: tuple[tuple[int, int], ...]
    first_dirty: int
    upper: int
    now_ms: int
    delete_retention_ms: int
    segment_bytes: int
    segment_index_bytes: int
    index_interval_bytes: int
    map_budget_bytes: int
    producer_last_offsets: Mapping[int, int] | None = None


@dataclass
class CleanStats:
    """What one cleaning did (Kafka ``CleanerStats``)."""

    map_records: int = 0          # records read to build the offset map
    map_keys: int = 0             # distinct keys in the map
    map_bytes_read: int = 0
    records_read: int = 0         # records in the rewritten segments
    records_retained: int = 0
    batches_read: int = 0
    batches_retained: int = 0     # including empty headers kept for producers
    empty_batches: int = 0
    tombstones_removed: int = 0
    bytes_read: int = 0           # size of the rewritten segments before
    bytes_written: int = 0        # ... and after
    map_seconds: float = 0.0
    clean_seconds: float = 0.0

    def __str__(self) -> str:
        return (f"{self.records_read} records/{self.bytes_read} bytes -> {self.records_retained} "
                f"records/{self.bytes_written} bytes; map {self.map_keys} keys from "
                f"{self.map_records} records in {self.map_seconds:.2f}s; rewrite "
                f"{self.clean_seconds:.2f}s")


@dataclass
class CleanResult:
    """Cleaned segments written as ``<base>.{log,index,timeindex}.cleaned`` (fsynced), to be
    installed in order; ``end_offset`` becomes the cleaner checkpoint once they are."""

    groups: list[CleanedGroup]
    end_offset: int
    stats: CleanStats = field(default_factory=CleanStats)


class CleaningAbandoned(Exception):
    """The worker stopped because the broker process that started it is gone."""


_parent_pid: int | None = None


def worker_init() -> None:
    """Process-pool initializer: a worker must not outlive the broker (after a ``kill -9`` it
    would linger, or write files a restarted broker owns). On Linux the kernel kills it when the
    thread that started it exits (``PR_SET_PDEATHSIG``: start the pool from the broker's
    long-lived thread); everywhere the work loops check that the parent is still there."""
    global _parent_pid
    _parent_pid = os.getppid()
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)        # PR_SET_PDEATHSIG
        except Exception:  # pragma: no cover - no libc/prctl: the polling below remains
            pass
    if os.getppid() != _parent_pid:                       # the parent died before prctl
        os._exit(0)


def _check_parent() -> None:
    if _parent_pid is not None and os.getppid() != _parent_pid:
        raise CleaningAbandoned("the broker process is gone")


# ------------------------------------------------------------------------------------------------
# varints (zigzag, as RecordBatch v2 records)
# ------------------------------------------------------------------------------------------------

def _w_varint(out: bytearray, v: int) -> None:
    v = (v << 1) ^ (v >> 63)
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


# ------------------------------------------------------------------------------------------------
# pass 1: the offset map
# ------------------------------------------------------------------------------------------------

def build_offset_map(task: CleanTask, stats: CleanStats) -> OffsetMap:
    """Kafka ``buildOffsetMap``: scan the dirty segments (and, with no producer state given,
    the batch headers of the clean ones for each producer's last batch)."""
    t0 = time.monotonic()
    om = OffsetMap(task.map_budget_bytes)
    track_producers = task.producer_last_offsets is None
    d = Path(task.directory)
    segs = task.segments
    start = task.first_dirty
    n = 0
    for i, (base, size) in enumerate(segs):
        next_start = segs[i + 1][0] if i + 1 < len(segs) else task.upper
        if next_start <= start and not track_producers:
            continue
        path = d / f"{segment_name(base)}.log"
        for _pos, h, batch in iter_batches(path, size):
            n += 1
            if n % PARENT_CHECK_BATCHES == 0:
                _check_parent()
            if track_producers and h.producer_id >= 0:
                om.producer_last[h.producer_id] = h.last_offset
            if h.last_offset < start:
                continue
            stats.map_bytes_read += h.size
            if not h.attributes & (ATTR_CONTROL | ATTR_TRANSACTIONAL):
                if not crc_valid(batch, 0, h):
                    raise CorruptRecordError(f"{path}: CRC mismatch in batch at offset {h.base_offset}")
                if not om.add_batch(h, batch, start):
                    break
            om.latest_offset = max(om.latest_offset, h.last_offset)
        if om.full:
            break
        if next_start > start:
            om.latest_offset = max(om.latest_offset, next_start - 1)   # gaps at the segment end
    om.keyless.sort()
    stats.map_records = om.records
    stats.map_keys = len(om.map)
    stats.map_seconds = time.monotonic() - t0
    return om


# ------------------------------------------------------------------------------------------------
# pass 2: rewriting
# ------------------------------------------------------------------------------------------------

def _empty_batch(h: BatchHeader) -> bytes:
    """Kafka ``DefaultRecordBatch.writeEmptyHeader``: the header alone, no records, uncompressed,
    base and max timestamp = the original max timestamp."""
    attrs = h.attributes & (ATTR_TIMESTAMP_TYPE | ATTR_TRANSACTIONAL | ATTR_CONTROL)
    out = bytearray(_HEADER.pack(h.base_offset, HEADER_SIZE - LOG_OVERHEAD, h.partition_leader_epoch,
                                 MAGIC, 0, attrs, h.last_offset_delta, h.max_timestamp,
                                 h.max_timestamp, h.producer_id, h.producer_epoch, h.base_sequence, 0))
    _CRC.pack_into(out, 17, compute_crc(out, 0, len(out)))
    return bytes(out)


def _rebuild_batch(h: BatchHeader, body: bytes, kept: list, horizon: int | None) -> bytes:
    """A batch with the ``kept`` records ``(attr, timestamp, offset delta, rest start, end)`` of
    ``body``, as Kafka's ``buildRetainedRecordsInto`` + ``overrideLastOffset``."""
    base_ts = horizon if horizon is not None else kept[0][1]
    records = bytearray()
    for attr, ts, od, rest, end in kept:
        inner = bytearray((attr,))
        _w_varint(inner, ts - base_ts)
        _w_varint(inner, od)
        inner += body[rest:end]
        _w_varint(records, len(inner))
        records += inner
    if h.attributes & ATTR_TIMESTAMP_TYPE:
        max_ts = h.max_timestamp
    else:
        max_ts = max(k[1] for k in kept)
    codec = h.compression
    payload = compression.compress(codec, records) if codec != compression.NONE else records
    attrs = h.attributes & ~ATTR_DELETE_HORIZON
    if horizon is not None:
        attrs |= ATTR_DELETE_HORIZON
    out = bytearray(_HEADER.pack(h.base_offset, HEADER_SIZE - LOG_OVERHEAD + len(payload),
                                 h.partition_leader_epoch, MAGIC, 0, attrs, h.last_offset_delta,
                                 base_ts, max_ts, h.producer_id, h.producer_epoch, h.base_sequence,
                                 len(kept)))
    out += payload
    _CRC.pack_into(out, 17, compute_crc(out, 0, len(out)))
    return bytes(out)


class _Filter:
    """Kafka's ``RecordFilter`` of the cleaner: what each batch becomes."""

    def __init__(self, task: CleanTask, om: OffsetMap, stats: CleanStats) -> None:
        self.om = om
        self.map = om.map
        self.latest = om.latest_offset
        self.first_dirty = task.first_dirty
        self.upper = task.upper
        self.now = task.now_ms
        self.new_horizon = task.now_ms + task.delete_retention_ms
        self.producer_last = (task.producer_last_offsets if task.producer_last_offsets is not None
                              else om.producer_last)
        self.stats = stats
        # offsets that survive in the fully mapped dirty section: the latest offset of each key,
        # and keyless records
        self.retained = sorted(list(om.map.values()) + om.keyless)

    def batch(self, h: BatchHeader, batch: memoryview) -> bytes | memoryview | None:
        stats = self.stats
        stats.records_read += h.records_count
        if h.attributes & (ATTR_CONTROL | ATTR_TRANSACTIONAL):
            stats.records_retained += h.records_count
            return batch
        retain_empty = ((h.producer_id >= 0 and self.producer_last.get(h.producer_id) == h.last_offset)
                        or h.next_offset == self.upper)
        if h.base_offset >= self.first_dirty and h.last_offset <= self.latest:
            # every record was seen by the map: it survives iff its offset is its key's latest
            r = self.retained
            hits = bisect_right(r, h.last_offset) - bisect_left(r, h.base_offset)
            if hits == 0:
                return self._empty(h) if retain_empty else None
            if hits == h.records_count and h.base_offset not in self.om.tombstone_batches:
                stats.records_retained += hits
                return batch
        return self._decode(h, batch, retain_empty)

    def _empty(self, h: BatchHeader) -> bytes:
        self.stats.empty_batches += 1
        return _empty_batch(h)

    def _decode(self, h: BatchHeader, batch: memoryview, retain_empty: bool) -> bytes | memoryview | None:
        if not crc_valid(batch, 0, h):
            raise CorruptRecordError(f"CRC mismatch in batch at offset {h.base_offset}")
        body = batch_body(h, batch)
        base, base_ts = h.base_offset, h.base_timestamp
        has_horizon = bool(h.attributes & ATTR_DELETE_HORIZON)
        expired = has_horizon and self.now >= base_ts
        latest, omap = self.latest, self.map
        kept = []
        kept_tombstone = False
        pos = 0
        try:
            for _ in range(h.records_count):
                b = body[pos]
                pos += 1
                if b & 0x80:
                    ln, pos = uvarint_rest(body, pos, b)
                else:
                    ln = b
                ln = (ln >> 1) ^ -(ln & 1)
                end = pos + ln
                if ln < 0 or end > len(body):
                    raise CorruptRecordError(f"record of batch {base} out of range")
                attr = body[pos]
                p = pos + 1
                b = body[p]
                p += 1
                if b & 0x80:
                    tsd, p = uvarint_rest(body, p, b)
                else:
                    tsd = b
                b = body[p]
                p += 1
                if b & 0x80:
                    od, p = uvarint_rest(body, p, b)
                else:
                    od = b
                od = (od >> 1) ^ -(od & 1)
                rest = p
                b = body[p]
                p += 1
                if b & 0x80:
                    kl, p = uvarint_rest(body, p, b)
                else:
                    kl = b
                kl = (kl >> 1) ^ -(kl & 1)
                pos = end
                offset = base + od
                tombstone = kl >= 0 and body[p + kl] == 1
                if offset <= latest and kl >= 0:
                    if offset < omap.get(body[p:p + kl], -1):
                        continue
                    if tombstone and expired:
                        self.stats.tombstones_removed += 1
                        continue
                kept_tombstone |= tombstone
                kept.append((attr, base_ts + ((tsd >> 1) ^ -(tsd & 1)), od, rest, end))
        except IndexError:
            raise CorruptRecordError(f"truncated record in batch at offset {base}") from None
        if pos != len(body):
            raise CorruptRecordError(f"batch at offset {base}: record count does not match its bytes")
        if not kept:
            return self._empty(h) if retain_empty else None
        self.stats.records_retained += len(kept)
        set_horizon = kept_tombstone and not has_horizon
        if len(kept) == h.records_count and not set_horizon:
            return batch
        horizon = self.new_horizon if set_horizon else (base_ts if has_horizon else None)
        return _rebuild_batch(h, body, kept, horizon)


class _CleanedWriter:
    """Writes one cleaned segment: ``<base>.log.cleaned`` and its indexes. Files are created
    exclusively (after removing leftovers), so a stray writer from a killed broker's orphaned
    worker can never interleave with this one."""

    def __init__(self, directory: Path, base: int, config: LogConfig) -> None:
        self.directory = directory
        self.base = base
        self.stem = segment_name(base)
        self.path = directory / f"{self.stem}.log.cleaned"
        unlink_quiet(self.path)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        self.index = IndexBuilder(base, config)
        self.buf = bytearray()
        self.flushed = 0
        self.size = 0

    def append(self, h: BatchHeader, data) -> None:
        if h.last_offset - self.base > MAX_RELATIVE_OFFSET:
            raise CorruptRecordError(f"offset {h.last_offset} overflows cleaned segment {self.base}")
        self.index.add(self.size, h.last_offset, h.max_timestamp)
        self.buf += data
        self.size += len(data)
        if len(self.buf) >= WRITE_CHUNK:
            self._flush_buf()

    def _flush_buf(self) -> None:
        pwrite_all(self.fd, self.buf, self.flushed)
        self.flushed += len(self.buf)
        self.buf = bytearray()

    def finish(self, mtime_ns: int | None) -> tuple[int, int]:
        """Write the rest and the indexes, fsync all three files, keep the old segments' mtime
        (Kafka ``setLastModified``); returns the index file sizes."""
        self._flush_buf()
        os.fsync(self.fd)
        if mtime_ns is not None:
            os.utime(self.fd, ns=(mtime_ns, mtime_ns))
        os.close(self.fd)
        self.fd = -1
        off_entries, time_entries = self.index.finish()
        for ext, data in (("index", off_entries), ("timeindex", time_entries)):
            path = self.directory / f"{self.stem}.{ext}.cleaned"
            unlink_quiet(path)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
            try:
                pwrite_all(fd, data, 0)
                os.fsync(fd)
            finally:
                os.close(fd)
        return len(off_entries), len(time_entries)

    def abandon(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        delete_cleaned_files(self.directory, self.base)


def group_segments(task: CleanTask, end_offset: int) -> list[list[tuple[int, int]]]:
    """Kafka ``groupSegmentsBySize``: consecutive segments with base offset < ``end_offset``
    whose total ``.log`` size fits ``segment.bytes``, total index sizes fit
    ``segment.index.bytes``, and offsets fit one segment (relative offsets are int32)."""
    d = Path(task.directory)

    def index_sizes(base: int) -> tuple[int, int]:
        out = []
        for ext in ("index", "timeindex"):
            try:
                out.append(os.stat(d / f"{segment_name(base)}.{ext}").st_size)
            except FileNotFoundError:
                out.append(0)
        return out[0], out[1]

    segs = [s for s in task.segments if s[0] < end_offset]
    groups: list[list[tuple[int, int]]] = []
    i = 0
    while i < len(segs):
        group = [segs[i]]
        log_size = segs[i][1]
        isz, tsz = index_sizes(segs[i][0])
        i += 1
        while i < len(segs):
            base, size = segs[i]
            nisz, ntsz = index_sizes(base)
            last = (segs[i + 1][0] if i + 1 < len(segs) else task.upper) - 1
            if (log_size + size > task.segment_bytes or isz + nisz > task.segment_index_bytes
                    or tsz + ntsz > task.segment_index_bytes
                    or (size > 0 and last - group[0][0] > MAX_RELATIVE_OFFSET)):
                break
            group.append(segs[i])
            log_size += size
            isz += nisz
            tsz += ntsz
            i += 1
        groups.append(group)
    return groups


def _carry_txn_index(d: Path, group, stem: str) -> None:
    """The cleaned segment keeps the aborted-transaction entries of the segments it replaces
    (``<stem>.txnindex.cleaned``), so read-committed fetches still filter aborted records that
    survive cleaning."""
    data = bytearray()
    for base, _size in group:
        try:
            data += (d / f"{segment_name(base)}.txnindex").read_bytes()
        except FileNotFoundError:
            pass
    if not data:
        return
    path = d / f"{stem}.txnindex.cleaned"
    unlink_quiet(path)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        pwrite_all(fd, data, 0)
        os.fsync(fd)
    finally:
        os.close(fd)


def run_clean_task(task: CleanTask) -> CleanResult:
    """Clean one log (in a worker process, or in-process in tests/tools). Writes and fsyncs the
    cleaned files and returns what to install; on any error removes what it wrote and raises."""
    stats = CleanStats()
    om = build_offset_map(task, stats)
    end_offset = om.latest_offset + 1
    if end_offset <= task.first_dirty:
        return CleanResult([], task.first_dirty, stats)     # nothing mapped: the budget is too small
    t0 = time.monotonic()
    config = LogConfig(segment_bytes=max(14, task.segment_bytes),
                       segment_index_bytes=max(4, task.segment_index_bytes),
                       index_interval_bytes=task.index_interval_bytes)
    flt = _Filter(task, om, stats)
    d = Path(task.directory)
    written: list[CleanedGroup] = []
    try:
        n = 0
        for group in group_segments(task, end_offset):
            _check_parent()
            writer = _CleanedWriter(d, group[0][0], config)
            try:
                for base, size in group:
                    stats.bytes_read += size
                    for _pos, h, batch in iter_batches(d / f"{segment_name(base)}.log", size):
                        n += 1
                        if n % PARENT_CHECK_BATCHES == 0:
                            _check_parent()
                        stats.batches_read += 1
                        out = flt.batch(h, batch)
                        if out is None:
                            continue
                        if out is not batch:
                            h = parse_header(out)
                        writer.append(h, out)
                        stats.batches_retained += 1
                mtime = os.stat(d / f"{segment_name(group[-1][0])}.log").st_mtime_ns
                isz, tsz = writer.finish(mtime)
                _carry_txn_index(d, group, writer.stem)
            except BaseException:
                writer.abandon()
                raise
            stats.bytes_written += writer.size
            written.append(CleanedGroup(tuple(b for b, _ in group), group[0][0], writer.size, isz, tsz))
    except BaseException:
        for g in written:
            delete_cleaned_files(d, g.base)
        raise
    stats.clean_seconds = time.monotonic() - t0
    return CleanResult(written, end_offset, stats)
