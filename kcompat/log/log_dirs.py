"""JBOD parts of the log manager: future logs (AlterReplicaLogDirs) and offline log dirs.

Kafka's ``LogManager`` keeps, besides the current log of each partition, at most one *future*
log per partition: ``<dest dir>/<topic>-<partition>.<uuid hex>-future``, created by
AlterReplicaLogDirs (KIP-113) and filled from the current log by the broker's
ReplicaAlterLogDirs task; once it has caught up, :meth:`LogDirsMixin.replace_current_with_future`
swaps it in (``LogManager.replaceCurrentWithFutureLog``). Future logs found at start-up are loaded,
so a move resumes after a restart.

A log dir whose I/O fails (anything but a full disk, see
:attr:`kcompat.log.LogStorageError.disk_full`) goes offline as in Kafka's
``LogManager.handleLogDirFailure``: its logs are closed and forgotten, nothing is written to it
again (checkpoints, clean-shutdown marker), new partitions go to the other dirs, DescribeLogDirs
reports it with KAFKA_STORAGE_ERROR, until the broker restarts.
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from pathlib import Path

from kcompat.log.checkpoint import PARTITION_METADATA, TopicPartition, write_partition_metadata
from kcompat.log.config import LogConfig
from kcompat.log.errors import LogDirError, LogStorageError
from kcompat.log.fileio import fsync_dir, logger
from kcompat.log.log import Log

FUTURE_DIR = re.compile(r"^(.+)-(\d+)\.([0-9a-f]{32})-future$")
# fault injection for tests: with KCOMPAT_FAULT_INJECTION=1 in the environment, a log dir holding
# this file fails every I/O from the next poll on (:meth:`LogDirsMixin.poll_injected_faults`)
IO_FAULT_MARKER = ".kcompat-inject-io-error"


class LogDirsMixin:
    """Future logs and offline dirs of :class:`kcompat.log.LogManager` (whose attributes
    ``log_dirs``, ``logs``, ``_dir_of``, ``_pending_deletes`` and methods ``_register``,
    ``_set_aside``, ``_checkpoint_dir`` it uses)."""

    log_dirs: list[Path]
    logs: dict[TopicPartition, Log]
    _dir_of: dict[TopicPartition, Path]
    future_logs: dict[TopicPartition, Log]
    _future_dir_of: dict[TopicPartition, Path]
    offline_dirs: set[Path]
    cordoned_dirs: set[Path]   # no new logs unless every online dir is cordoned (KIP-1066)
    directory_ids: dict[Path, uuid.UUID]
    preferred_dirs: dict[TopicPartition, Path]

    # -- log dirs -----------------------------------------------------------------------------------
    def find_log_dir(self, path: str) -> Path | None:
        """The configured log dir whose absolute path is ``path`` (Kafka compares
        ``File.getAbsolutePath``), or None."""
        wanted = os.path.abspath(path)
        for d in self.log_dirs:
            if os.path.abspath(d) == wanted:
                return d
        return None

    def is_online(self, d: Path) -> bool:
        return d not in self.offline_dirs

    @property
    def online_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def directory_id_of(self, d: Path) -> uuid.UUID | None:
        """The ``directory.id`` of a log dir's ``meta.properties`` (KIP-858)."""
        return self.directory_ids.get(d)

    def fail_dir(self, d: Path, reason: str) -> list[TopicPartition]:
        """Take log dir ``d`` offline (Kafka ``LogManager.handleLogDirFailure``): close and forget
        its current and future logs, and the future logs of partitions whose current log was
        there. Returns the partitions whose current log was in ``d`` (empty if ``d`` was already
        offline). Nothing is written to ``d``."""
        if d in self.offline_dirs:
            return []
        self.offline_dirs.add(d)
        lost = sorted(tp for tp, where in self._dir_of.items() if where == d)
        for tp in lost:
            _close_quietly(self.logs.pop(tp))
            del self._dir_of[tp]
            self._rolled.discard(tp)   # type: ignore[attr-defined]
        for tp in [tp for tp, where in self._future_dir_of.items() if where == d or tp in lost]:
            _close_quietly(self.future_logs.pop(tp))
            del self._future_dir_of[tp]
        self._pending_deletes = [item for item in self._pending_deletes if Path(item[0]).parent != d]
        logger.error("log dir %s is offline (%s): %d partition(s) lost on this broker until it restarts: %s",
                     d, reason, len(lost), ", ".join(f"{t}-{p}" for t, p in lost[:20]))
        return lost

    def poll_injected_faults(self) -> list[Path]:
        """Fault injection for tests (``KCOMPAT_FAULT_INJECTION=1``): every online log dir holding
        an ``.kcompat-inject-io-error`` file makes each of its logs fail its next I/O with EIO, so
        that the normal failure path takes the dir offline. Returns the dirs so armed."""
        if os.environ.get("KCOMPAT_FAULT_INJECTION") != "1":
            return []
        armed = []
        for d in self.online_dirs:
            if (d / IO_FAULT_MARKER).exists():
                error = OSError(5, "Input/output error (injected)")
                for tp, log in list(self.logs.items()) + list(self.future_logs.items()):
                    if self._dir_of.get(tp) == d or self._future_dir_of.get(tp) == d:
                        if log._io_fault is None:
                            logger.warning("fault injection: %s fails every I/O from now on", log.directory)
                        log.inject_io_fault(error)
                armed.append(d)
        return armed

    # -- future logs --------------------------------------------------------------------------------
    def _load_future(self, tp: TopicPartition, path: Path, d: Path, config: LogConfig, now_ms: int,
                     clean: bool) -> None:
        """Start-up: a future log left by a move that had not finished."""
        if tp in self.future_logs:
            raise LogDirError(f"partition {tp[0]}-{tp[1]} has two future logs: "
                              f"{self.future_logs[tp].directory} and {path}")
        log = Log.open(path, config, clean_shutdown=clean, now_ms=now_ms)
        self.future_logs[tp] = log
        self._future_dir_of[tp] = d

    def future_log(self, topic: str, partition: int) -> Log | None:
        """The partition's future log (being filled for a move to another dir), or None."""
        return self.future_logs.get((topic, partition))

    def future_dir_of(self, topic: str, partition: int) -> Path | None:
        return self._future_dir_of.get((topic, partition))

    def create_future(self, topic: str, partition: int, dest: Path, config: LogConfig,
                      topic_id: uuid.UUID | None, now_ms: int) -> Log:
        """Create the future log of a partition in log dir ``dest``:
        ``<dest>/<topic>-<partition>.<uuid hex>-future`` with its ``partition.metadata``
        (Kafka ``LogManager.getOrCreateLog(isFuture=true)``). An existing future log in another
        dir is removed first. Raises LogStorageError if the directory cannot be made (nothing
        is left then)."""
        tp = (topic, partition)
        if tp in self.future_logs:
            if self._future_dir_of[tp] == dest:
                return self.future_logs[tp]
            self.abort_future(topic, partition)
        path = dest / f"{topic}-{partition}.{uuid.uuid4().hex}-future"
        try:
            path.mkdir()
            if topic_id is not None:
                write_partition_metadata(path / PARTITION_METADATA, topic_id)
            log = Log.open(path, config, clean_shutdown=True, now_ms=now_ms)
            fsync_dir(dest)
        except OSError as e:
            shutil.rmtree(path, ignore_errors=True)
            raise LogStorageError(f"creating the future log of {topic}-{partition} in {dest}", e) from e
        self.future_logs[tp] = log
        self._future_dir_of[tp] = dest
        logger.info("created future log %s for %s-%d", path, topic, partition)
        return log

    def abort_future(self, topic: str, partition: int) -> None:
        """Remove the partition's future log, if any (a move cancelled or redirected)."""
        tp = (topic, partition)
        log = self.future_logs.pop(tp, None)
        d = self._future_dir_of.pop(tp, None)
        if log is None or d is None:
            return
        log.close_without_flush()
        target = d / log.directory.name.replace("-future", "-delete")
        try:
            os.rename(log.directory, target)
        except OSError as e:
            logger.error("cannot remove the future log %s: %s", log.directory, e)
            return
        self._pending_deletes.append([target, None, log.config.file_delete_delay_ms])
        logger.info("future log %s removed", log.directory)

    def replace_current_with_future(self, topic: str, partition: int, now_ms: int) -> Log:
        """Make the future log the partition's log (Kafka ``replaceCurrentWithFutureLog``): it is
        flushed and closed, its dir renamed ``<dest>/<topic>-<partition>`` and opened again there;
        the old log is set aside as ``-delete`` and removed after ``file.delete.delay.ms``; both
        dirs' checkpoints are written. The caller has checked that the future log has caught up
        and holds the partition still (no append in between). Returns the new current log;
        raises LogStorageError (the current log then stays, the future log is dropped)."""
        tp = (topic, partition)
        future = self.future_logs.pop(tp)
        dest = self._future_dir_of.pop(tp)
        start, end = future.log_start_offset, future.log_end_offset
        target = dest / f"{topic}-{partition}"
        try:
            if not future.close():
                raise OSError(5, "the future log could not be made durable")
            os.rename(future.directory, target)
            fsync_dir(dest)
            log = Log.open(target, future.config, recovery_point=end, log_start_offset=start,
                           clean_shutdown=True, now_ms=now_ms)
        except OSError as e:
            logger.error("cannot swap in the future log of %s-%d: %s", topic, partition, e)
            shutil.rmtree(future.directory if future.directory.exists() else target, ignore_errors=True)
            raise LogStorageError(f"swapping in the future log of {topic}-{partition} in {dest}", e) from e
        old, aside = self._set_aside(topic, partition, "delete", flush=False)   # type: ignore[attr-defined]
        self._pending_deletes.append([aside, now_ms + old.config.file_delete_delay_ms,
                                      old.config.file_delete_delay_ms])
        self._register(tp, log, dest)   # type: ignore[attr-defined]
        self._checkpoint_dir(dest, force=False)   # type: ignore[attr-defined]
        logger.info("partition %s-%d moved to log dir %s (offsets %d-%d); old log %s scheduled for deletion",
                    topic, partition, dest, start, end, aside)
        return log

    def placement_dir(self, tp: TopicPartition) -> Path:
        """Where a new log of ``tp`` goes: the dir an AlterReplicaLogDirs named for it before it
        existed (Kafka's preferred log dir), else the online, not cordoned dir holding the fewest
        partitions (Kafka ``LogManager.nextLogDirs``); when every online dir is cordoned (the
        replica was placed here just before), the first online dir, as Kafka does (KIP-1066).
        LogStorageError if every dir is offline."""
        online = self.online_dirs
        if not online:
            raise LogStorageError("every log dir is offline", errno=5)
        preferred = self.preferred_dirs.pop(tp, None)
        if preferred is not None and preferred in online:
            return preferred
        candidates = [d for d in online if d not in self.cordoned_dirs] or online[:1]
        counts = {d: 0 for d in candidates}
        for d in list(self._dir_of.values()) + list(self._future_dir_of.values()):
            if d in counts:
                counts[d] += 1
        return min(candidates, key=lambda x: counts[x])

    def set_cordoned(self, dirs: set[Path]) -> bool:
        """Make ``dirs`` (configured log dirs) the cordoned ones (Kafka ``LogManager.
        updateCordonedLogDirs``, KIP-1066); True if that changed anything."""
        changed = set(dirs) != self.cordoned_dirs
        self.cordoned_dirs = set(dirs)
        return changed


def _close_quietly(log: Log) -> None:
    try:
        log.close_without_flush()
    except OSError as e:
        logger.warning("%s: closing after its log dir failed: %s", log.directory, e)
