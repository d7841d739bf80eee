"""The Raft log of ``__cluster_metadata-0`` on disk: :class:`kcompat.kraft.raft.log.RaftLog` over
:class:`kcompat.log.Log` (Kafka's ``KafkaMetadataLog``).

- Batches are stored by the segment log as they are (Kafka's layout, so ``kafka-dump-log
  --cluster-metadata-decoder`` can read them); every append is followed by an fsync from the core.
- The leader-epoch cache (epoch -> first offset) is rebuilt from the batch headers at open: the
  metadata log is small because snapshots truncate it.
- Snapshots are files ``<20-digit end offset>-<10-digit epoch>.checkpoint`` in the partition
  directory (Kafka's names), written atomically; the core treats their contents as opaque.
- The log is recovered fully at open (every batch's CRC is checked, a torn or damaged tail is
  truncated: Kafka's ``KafkaMetadataLog`` opens its log with recovery point 0 too), so what
  survives is exactly what was flushed and intact.
- Start-up refuses (LogDirError naming the file) a snapshot whose batches are cut short or fail
  their CRC, and a malformed ``leader-epoch-checkpoint``: Kafka stops a node that cannot load its
  metadata (``ProcessTerminatingFaultHandler``) or whose metadata log dir failed.
- A failed write (ENOSPC, EIO) raises OSError and leaves the log and the epoch cache as they were;
  the node then halts (:class:`kcompat.broker.quorum.QuorumRuntime`), as Kafka does when its
  metadata log dir fails, and recovers from what is on disk when it is started again.
"""

from __future__ import annotations

import bisect
import logging
import re
from pathlib import Path

from kcompat.kraft.raft.log import LeaderEpochCache
from kcompat.kraft.raft.types import OffsetAndEpoch, RaftInvariantError, SnapshotId
from kcompat.log import Log, LogConfig, LogDirError
from kcompat.log.fileio import atomic_write
from kcompat.log.leader_epoch import check_leader_epoch_checkpoint
from kcompat.protocol import records as rb

logger = logging.getLogger("kcompat.kraft")
_CHECKPOINT = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


def _checkpoint_name(sid: SnapshotId) -> str:
    return f"{sid.offset:020d}-{sid.epoch:010d}.checkpoint"


def check_snapshot(path: Path) -> None:
    """Raise LogDirError if the metadata snapshot at ``path`` is not whole record batches with
    valid CRCs (Kafka reads snapshots with CRC validation and stops the node if one cannot be
    loaded; a torn file cannot come from kcompat's atomic writes, so this is damage on disk)."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise LogDirError(f"cannot read {path}: {e}") from None
    pos, problem = 0, None
    try:
        while pos < len(data):
            h = rb.parse_header(data, pos)
            if pos + h.size > len(data):
                problem = f"the batch at position {pos} is cut short"
            elif not rb.crc_valid(data, pos, h):
                problem = f"CRC mismatch in the batch at position {pos}"
            if problem:
                break
            pos += h.size
    except rb.CorruptRecordError as e:
        problem = f"invalid batch at position {pos}: {e}"
    if problem:
        raise LogDirError(f"{path}: metadata snapshot is damaged: {problem} (Kafka stops a node that "
                          f"cannot load its metadata snapshot; restore the file, or on a node of a "
                          f"multi-node quorum remove it together with the rest of __cluster_metadata-0 "
                          f"so that the node fetches the metadata from the leader)")


class DiskRaftLog:
    """``__cluster_metadata-0`` in ``directory`` (created if missing). ``check_snapshots``: the
    snapshots hold record batches (the metadata quorum's do; the Raft core treats them as opaque)
    and start-up checks them with :func:`check_snapshot`. ``clean_shutdown``: the log dir's
    ``.kafka_cleanshutdown`` marker was there (the node flushed and closed this log before writing
    it), so the segments are loaded without recovery; otherwise every segment is recovered."""

    def __init__(self, directory: Path, now_ms: int, *, segment_bytes: int = 1 << 30,
                 check_snapshots: bool = False, clean_shutdown: bool = False) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._snapshots = sorted(SnapshotId(int(m.group(1)), int(m.group(2)))
                                 for m in (_CHECKPOINT.match(p.name) for p in self.directory.iterdir()) if m)
        if check_snapshots:   # every check before anything is changed on disk
            self.check(self.directory)
        else:
            check_leader_epoch_checkpoint(self.directory)
        for p in self.directory.glob("*.checkpoint.tmp"):
            p.unlink()
        start = self._snapshots[-1].offset if self._snapshots else 0
        self._log = Log.open(self.directory, LogConfig(segment_bytes=segment_bytes), recovery_point=0,
                             log_start_offset=start, clean_shutdown=clean_shutdown, now_ms=now_ms)
        if self._log.log_start_offset < start:
            self._log.delete_records_before(min(start, self._log.log_end_offset))
        if self._log.log_end_offset < start:  # the log is behind its own snapshot: start there
            self._log.truncate_fully_and_start_at(start, now_ms=now_ms)
        self._now = now_ms
        self._hw = 0
        self._start_epoch = self._snapshots[-1].epoch if self._snapshots else 0
        self._cache = LeaderEpochCache()
        self._load_epochs()
        self._flushed = self._log.log_end_offset

    def _load_epochs(self) -> None:
        """Fill the epoch cache from the batch headers. A Raft log is contiguous and its epochs
        never go down; a batch that breaks either was damaged in a field its CRC does not cover
        (baseOffset, partitionLeaderEpoch): the log is cut before it, as a torn tail is."""
        expected = None
        last_epoch = self._start_epoch
        problem = None
        for h in self._log.iter_batch_headers(self._log.log_start_offset):
            if expected is not None and h.base_offset != expected:
                problem = f"batch at offset {h.base_offset} does not follow offset {expected - 1}"
            elif h.partition_leader_epoch < last_epoch:
                problem = f"batch at offset {h.base_offset} has epoch {h.partition_leader_epoch} < {last_epoch}"
            if problem:
                break
            self._cache.assign(h.partition_leader_epoch, h.base_offset)
            last_epoch, expected = h.partition_leader_epoch, h.next_offset
        if problem:
            cut = expected if expected is not None else self._log.log_start_offset
            logger.warning("%s: %s; truncating the metadata log to offset %d", self.directory, problem, cut)
            self._log.truncate_to(cut, now_ms=self._now)
            self._cache.truncate_from_end(cut)

    @staticmethod
    def check(directory: Path) -> None:
        """Read-only checks of a ``__cluster_metadata-0`` directory before anything is loaded:
        LogDirError naming the file for a damaged snapshot (:func:`check_snapshot`) or a malformed
        ``leader-epoch-checkpoint``. A missing directory passes."""
        directory = Path(directory)
        if not directory.is_dir():
            return
        for p in sorted(directory.iterdir()):
            if _CHECKPOINT.match(p.name):
                check_snapshot(p)
        check_leader_epoch_checkpoint(directory)

    # -- offsets -----------------------------------------------------------------------------------
    @property
    def start_offset(self) -> int:
        return self._log.log_start_offset

    @property
    def end_offset(self) -> int:
        return self._log.log_end_offset

    @property
    def flushed_offset(self) -> int:
        return self._flushed

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def last_fetched_epoch(self) -> int:
        latest = self._cache.latest_epoch
        return latest if latest is not None else self._start_epoch

    # -- appends -----------------------------------------------------------------------------------
    def append_as_leader(self, records: bytes, epoch: int) -> tuple[int, int]:
        buf = bytearray(records)
        first = self.end_offset
        offset = first
        seen = 0
        max_ts = -1
        for pos, h in rb.iter_batches(buf):
            rb.set_base_offset(buf, pos, offset)
            rb.set_partition_leader_epoch(buf, pos, epoch)
            offset += h.last_offset_delta + 1
            seen += h.size
            max_ts = max(max_ts, h.max_timestamp)
        if seen != len(buf) or seen == 0:
            raise ValueError("records must be one or more complete record batches")
        if epoch < self.last_fetched_epoch:
            raise RaftInvariantError(f"batch epoch {epoch} below last epoch {self.last_fetched_epoch}")
        self._log.append(buf, last_offset=offset - 1, max_timestamp=max_ts, offset_of_max_timestamp=-1,
                         now_ms=self._now)
        self._cache.assign(epoch, first)   # after the append: a failed one changes nothing
        return first, offset - 1

    def append_as_follower(self, records: bytes) -> tuple[int, int] | None:
        view = memoryview(records)
        first = self.end_offset
        end = first
        count = 0
        max_ts = -1
        epochs = []
        last_epoch = self._cache.latest_epoch or self._start_epoch
        for _pos, h in rb.iter_batches(view):
            if h.base_offset != end:
                raise RaftInvariantError(f"follower append at {h.base_offset}, log end is {end}")
            if h.partition_leader_epoch < last_epoch:
                raise RaftInvariantError(f"batch epoch {h.partition_leader_epoch} below the last epoch")
            last_epoch = h.partition_leader_epoch
            epochs.append((h.partition_leader_epoch, h.base_offset))
            end = h.next_offset
            count += h.size
            max_ts = max(max_ts, h.max_timestamp)
        if not count:
            return None
        self._log.append(view[:count], last_offset=end - 1, max_timestamp=max_ts, offset_of_max_timestamp=-1,
                         now_ms=self._now)
        for epoch, base in epochs:   # after the append: a failed one changes nothing
            self._cache.assign(epoch, base)
        return first, end - 1

    # -- reads -------------------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int) -> bytes:
        if offset == self.end_offset:
            return b""
        if offset < self.start_offset or offset > self.end_offset:
            raise RaftInvariantError(f"read at {offset} outside log {self.start_offset}..{self.end_offset}")
        return self._log.read(offset, max_bytes, min_one_batch=True)

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        found = self._cache.end_offset_for(epoch, self.end_offset)
        if found is not None:
            return found
        if self._start_epoch <= epoch and (self.start_offset > 0 or self._snapshots):
            return OffsetAndEpoch(self.start_offset, self._start_epoch)
        if self.start_offset == 0:
            return OffsetAndEpoch(0, 0)
        return OffsetAndEpoch(-1, -1)

    def epoch_for_offset(self, offset: int) -> int:
        if offset == self.start_offset - 1:
            return self._start_epoch
        if offset < self.start_offset or offset >= self.end_offset:
            raise RaftInvariantError(f"offset {offset} outside log {self.start_offset}..{self.end_offset}")
        epoch = self._cache.epoch_for(offset)
        assert epoch is not None
        return epoch

    # -- truncation, durability ----------------------------------------------------------------------
    def truncate_to(self, offset: int) -> None:
        if offset >= self.end_offset:
            return
        if offset < self._hw:
            raise RaftInvariantError(f"truncation to {offset} below the high watermark {self._hw}")
        if offset < self.start_offset:
            raise RaftInvariantError(f"truncation to {offset} below the log start {self.start_offset}")
        self._log.truncate_to(offset, now_ms=self._now)
        if self._log.log_end_offset != offset:
            raise RaftInvariantError(f"truncation offset {offset} inside a batch")
        self._flushed = min(self._flushed, offset)
        self._cache.truncate_from_end(offset)

    def flush(self) -> None:
        self._log.flush()
        self._flushed = self.end_offset

    def update_high_watermark(self, offset: int) -> None:
        self._hw = offset

    def set_clock(self, now_ms: int) -> None:
        """The log stamps segment roll times with the caller's clock."""
        self._now = now_ms

    # -- snapshots ---------------------------------------------------------------------------------
    def latest_snapshot_id(self) -> SnapshotId | None:
        return self._snapshots[-1] if self._snapshots else None

    def earliest_snapshot_id(self) -> SnapshotId | None:
        return self._snapshots[0] if self._snapshots else None

    def create_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        sid = SnapshotId(*snapshot_id)
        atomic_write(self.directory / _checkpoint_name(sid), data)   # no .tmp left if it fails
        if sid not in self._snapshots:
            bisect.insort(self._snapshots, sid)

    def read_snapshot(self, snapshot_id: SnapshotId, position: int = 0, max_bytes: int | None = None) -> bytes | None:
        path = self.directory / _checkpoint_name(SnapshotId(*snapshot_id))
        try:
            with open(path, "rb") as f:
                f.seek(position)
                return f.read() if max_bytes is None else f.read(max_bytes)
        except FileNotFoundError:
            return None

    def snapshot_size(self, snapshot_id: SnapshotId) -> int | None:
        try:
            return (self.directory / _checkpoint_name(SnapshotId(*snapshot_id))).stat().st_size
        except FileNotFoundError:
            return None

    def _delete_snapshots_below(self, offset: int) -> None:
        for sid in [s for s in self._snapshots if s.offset < offset]:
            (self.directory / _checkpoint_name(sid)).unlink(missing_ok=True)
            self._snapshots.remove(sid)

    def delete_before_snapshot(self, snapshot_id: SnapshotId) -> bool:
        offset = snapshot_id.offset
        if offset > self.end_offset:
            return False
        if offset > self.start_offset:
            self._log.delete_records_before(offset)
            self._start_epoch = snapshot_id.epoch
            self._cache.truncate_from_start(offset)
        self._delete_snapshots_below(offset)
        return True

    def truncate_fully_to_snapshot(self, snapshot_id: SnapshotId) -> None:
        self._log.truncate_fully_and_start_at(snapshot_id.offset, now_ms=self._now)
        self._cache.clear()
        self._start_epoch = snapshot_id.epoch
        self._flushed = snapshot_id.offset
        self._delete_snapshots_below(snapshot_id.offset)

    def close(self) -> None:
        self._log.close()
