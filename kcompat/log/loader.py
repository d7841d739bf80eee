"""Loading one partition directory at start-up (Kafka's ``LogLoader``).

Cost model: names and sizes of every file (one ``scandir``), then reads only what may be
unflushed. Segments wholly below the recovery point are neither opened nor read; after a clean
shutdown only the tail of the active segment after its last index entry is read and checked.
"""

from __future__ import annotations

import bisect
import os
import re
from dataclasses import dataclass
from pathlib import Path

from kcompat.log.config import LogConfig
from kcompat.log.fileio import ValidScan, logger, open_rw, unlink_quiet
from kcompat.log.segment import LogSegment

_SEGMENT_FILE = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex)$")
_TEMP_SUFFIXES = (".deleted", ".tmp", ".cleaned")


@dataclass
class LoadResult:
    """Segments in offset order (the last one active) and the recovered offsets."""

    segments: list[LogSegment]
    next_offset: int
    recovery_point: int
    log_start_offset: int
    txn_index_lost_from: int | None = None   # a damaged .txnindex was removed from this segment on


def _base_of(name: str) -> int | None:
    m = _SEGMENT_FILE.match(name)
    return int(m.group(1)) if m else None


def _remove_temp_files(directory: Path, names: dict[str, int]) -> None:
    """Kafka ``removeTempFilesAndCollectSwapFiles``: delete ``.deleted``/``.cleaned``/``.tmp``
    files; complete valid ``.log.swap`` files (replacing the segments they cover) and delete
    the rest (index swaps are rebuilt, swaps above a ``.cleaned`` file belong to an unfinished
    clean or split)."""
    min_cleaned = None
    swaps = []
    for name in list(names):
        if name.endswith(_TEMP_SUFFIXES):
            if name.endswith(".cleaned"):
                base = _base_of(name[: -len(".cleaned")])
                if base is not None:
                    min_cleaned = base if min_cleaned is None else min(min_cleaned, base)
            logger.info("%s: deleting stray file %s", directory, name)
            unlink_quiet(directory / name)
            del names[name]
        elif name.endswith(".swap"):
            swaps.append(name)
            del names[name]
    completed_txn_swaps = []
    for name in sorted(swaps):
        inner = name[: -len(".swap")]
        base = _base_of(inner)
        if inner.endswith(".txnindex") and base is not None and (min_cleaned is None or base < min_cleaned) \
                and f"{base:020d}.log.swap" in swaps:
            # the aborted-transaction entries of a completed swap cannot be rebuilt from the .log
            completed_txn_swaps.append((name, inner))
            continue
        if base is None or not inner.endswith(".log") or (min_cleaned is not None and base >= min_cleaned):
            logger.info("%s: deleting swap file %s", directory, name)
            unlink_quiet(directory / name)
            continue
        fd = open_rw(directory / name)
        try:
            size = os.fstat(fd).st_size
            scan = ValidScan(fd, 0, size, base)
            next_offset = base
            for _pos, h in scan:
                next_offset = h.next_offset
            if scan.valid_end < size:
                logger.warning("%s: swap file %s: %s; truncating", directory, name, scan.problem)
                os.ftruncate(fd, scan.valid_end)
                size = scan.valid_end
        finally:
            os.close(fd)
        for other in list(names):
            ob = _base_of(other)
            if ob is not None and base <= ob < max(next_offset, base + 1):
                logger.info("%s: swap %s replaces %s", directory, name, other)
                unlink_quiet(directory / other)
                del names[other]
        os.replace(directory / name, directory / inner)
        names[inner] = size
    for name, inner in completed_txn_swaps:
        os.replace(directory / name, directory / inner)
        names[inner] = os.stat(directory / inner).st_size


def load_segments(directory: Path, config: LogConfig, *, recovery_point: int,
                  log_start_offset: int, clean_shutdown: bool, now_ms: int) -> LoadResult:
    """Open the segments of ``directory`` (Kafka ``LogLoader.load``).

    - stray temp/swap files are cleaned up, orphan index files deleted;
    - a segment missing an index is recovered (rebuilt from its ``.log``);
    - if not ``clean_shutdown``: every segment from the one containing ``recovery_point`` on is
      recovered (CRC-validated, indexes rebuilt, torn tail truncated) and everything after the
      first corruption is deleted;
    - the last segment is activated (its tail after the last index entry is validated; a damaged
      index or tail triggers a recovery of that segment);
    - ``log_start_offset`` beyond the log end deletes everything; an empty directory gets one
      empty segment at ``log_start_offset``.
    """
    names: dict[str, int] = {}
    for entry in os.scandir(directory):
        if entry.is_file(follow_symlinks=False):
            names[entry.name] = entry.stat(follow_symlinks=False).st_size
    _remove_temp_files(directory, names)

    files: dict[int, dict[str, int]] = {}
    for name, size in names.items():
        m = _SEGMENT_FILE.match(name)
        if m:
            files.setdefault(int(m.group(1)), {})[m.group(2)] = size
    segments: list[LogSegment] = []
    for base in sorted(files):
        kinds = files[base]
        if "log" not in kinds:
            for kind in kinds:
                logger.warning("%s: deleting orphaned index file %020d.%s", directory, base, kind)
                unlink_quiet(directory / f"{base:020d}.{kind}")
            continue
        segments.append(LogSegment(directory, base, config, size=kinds["log"], created_ms=now_ms,
                                   roll_jitter_ms=config.random_segment_jitter(),
                                   index_size=kinds.get("index"),
                                   timeindex_size=kinds.get("timeindex")))

    txn_lost = _check_txn_indexes(directory, segments, files)
    truncated: dict[int, int] = {}
    for seg in segments:
        kinds = files[seg.base_offset]
        if "index" not in kinds or "timeindex" not in kinds:
            logger.warning("%s: segment %d has no %s; rebuilding it", directory, seg.base_offset,
                           "offset index" if "index" not in kinds else "time index")
            truncated[seg.base_offset] = seg.recover()

    if not clean_shutdown and segments:
        bases = [s.base_offset for s in segments]
        first = max(0, bisect.bisect_right(bases, recovery_point) - 1)
        logger.info("%s: unclean shutdown; recovering %d segment(s) from offset %d",
                    directory, len(segments) - first, bases[first])
        for i in range(first, len(segments)):
            seg = segments[i]
            if seg.base_offset not in truncated:
                truncated[seg.base_offset] = seg.recover()
            if truncated[seg.base_offset] > 0 and i < len(segments) - 1:
                logger.warning("%s: corruption in segment %d; deleting %d later segment(s)",
                               directory, seg.base_offset, len(segments) - 1 - i)
                for later in segments[i + 1:]:
                    later.delete()
                del segments[i + 1:]
                break

    next_offset = log_start_offset
    if segments:
        last = segments[-1]
        if last.base_offset in truncated:
            last.make_active()
        elif not last.activate():
            last.recover()
            last.make_active()
        for seg in segments[:-1]:
            seg.release()  # drop index copies built by a recovery; reloaded lazily
        next_offset = last.next_offset  # type: ignore[assignment]
        if log_start_offset > next_offset:
            logger.warning("%s: log end offset %d is below the log start offset %d; deleting all "
                           "segments", directory, next_offset, log_start_offset)
            for seg in segments:
                seg.delete()
            segments = []
    if not segments:
        segments = [LogSegment.create(directory, log_start_offset, config, created_ms=now_ms)]
        next_offset = log_start_offset
    return LoadResult(
        segments=segments,
        next_offset=next_offset,
        recovery_point=next_offset if clean_shutdown else min(recovery_point, next_offset),
        # a tiered log's earlier offsets live in remote storage (Kafka's UnifiedLog keeps the
        # checkpointed log start offset when remote storage is enabled)
        log_start_offset=(log_start_offset if config.remote_storage_enable
                          else max(log_start_offset, segments[0].base_offset)),
        txn_index_lost_from=txn_lost,
    )


def _check_txn_indexes(directory: Path, segments: list[LogSegment],
                       files: dict[int, dict[str, int]]) -> int | None:
    """Sanity-check every ``.txnindex`` (Kafka runs ``TransactionIndex.sanityCheck`` for each
    segment at load and recovers the segment if it fails); a damaged one is removed. Returns the
    base offset of the first segment that lost its index, None if none did: the caller makes the
    producer-state replay start at or below it, which writes the entries again (Kafka rebuilds
    them the same way, by replaying producer state through the segment)."""
    lost = None
    for i, seg in enumerate(segments):
        if not files[seg.base_offset].get("txnindex"):
            continue
        end = segments[i + 1].base_offset if i + 1 < len(segments) else None
        problem = seg.txn_index.sanity_check(seg.base_offset, end)
        if problem is not None:
            logger.warning("%s: %s is damaged (%s); removing it, the producer-state replay rebuilds it",
                           directory, seg.txn_index.path.name, problem)
            seg.txn_index.delete()
            lost = seg.base_offset if lost is None else lost
    return lost
