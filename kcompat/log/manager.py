"""All partition logs of a broker across its log dirs (Kafka's ``LogManager``)."""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from kcompat.log.checkpoint import (
    CLEAN_SHUTDOWN, CLEANER_OFFSET_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, META_PROPERTIES, PARTITION_METADATA,
    RECOVERY_POINT_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT, TopicPartition, read_meta_properties,
    read_offset_checkpoint, read_partition_metadata, topic_id_from_str, topic_id_to_str, unreadable,
    write_meta_properties,
    write_offset_checkpoint, write_partition_metadata,
)
from kcompat.log.config import LogConfig
from kcompat.log.errors import CheckpointError, LogDirError, LogStorageError
from kcompat.log.fileio import atomic_write, fsync_dir, logger, unlink_quiet
from kcompat.log.leader_epoch import check_leader_epoch_checkpoint
from kcompat.log.log import Log
from kcompat.log.log_dirs import FUTURE_DIR, LogDirsMixin

_DELETE_DIR = re.compile(r"^(.+)-(\d+)\.([0-9a-f]{32})-delete$")
# what start-up does when a checkpoint file is missing (the hint of a malformed-checkpoint error)
_IF_REMOVED = {
    RECOVERY_POINT_CHECKPOINT: "without it every partition of the dir is recovered from its first segment "
                               "after an unclean shutdown",
    LOG_START_OFFSET_CHECKPOINT: "without it each log starts at its first segment",
    REPLICATION_OFFSET_CHECKPOINT: "without it high watermarks start at the log start and catch up",
    CLEANER_OFFSET_CHECKPOINT: "without it compacted logs are cleaned again from their start",
}
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


def parse_topic_partition(name: str) -> TopicPartition | None:
    """``"my-topic-3"`` -> ``("my-topic", 3)``: the partition follows the *last* ``-`` (Kafka
    ``UnifiedLog.parseTopicPartitionName``). None for names that are not partition dirs."""
    topic, sep, part = name.rpartition("-")
    if not sep or not part.isdigit() or not _LEGAL_TOPIC.match(topic) or topic in (".", ".."):
        return None
    return topic, int(part)


def validate_topic(topic: str) -> None:
    """Kafka's ``Topic.validate``: 1-249 chars of ``[a-zA-Z0-9._-]``, not ``.``/``..``."""
    if not _LEGAL_TOPIC.match(topic) or topic in (".", ".."):
        raise ValueError(f"illegal topic name {topic!r}")


@dataclass
class LogDirDescription:
    """One log dir as DescribeLogDirs reports it: its absolute path (Kafka's ``toAbsolutePath``,
    symlinks not resolved), the total and usable bytes of its filesystem (Java's ``FileStore``
    ``getTotalSpace``/``getUsableSpace``: blocks and blocks available to unprivileged users), the
    logs it holds, or the OSError that kept the filesystem from being read."""

    path: str
    total_bytes: int = -1
    usable_bytes: int = -1
    logs: dict[TopicPartition, Log] = field(default_factory=dict)
    error: OSError | None = None
    future_logs: dict[TopicPartition, Log] = field(default_factory=dict)   # moving here (is_future_key)
    is_cordoned: bool = False   # cordoned.log.dirs names it (KIP-1066)


class LogManager(LogDirsMixin):
    """Owns every :class:`Log` under ``log_dirs`` (``<dir>/<topic>-<partition>``), and the future
    logs of replicas moving between dirs (:mod:`kcompat.log.log_dirs`).

    ``config_for(topic)`` gives a topic's LogConfig at start-up. ``high_watermark_of`` may be set
    to ``(topic, partition) -> HW | None`` so retention never deletes at or above the HW.
    ``skip_topics`` are partition dirs left alone (Kafka skips ``__cluster_metadata``, owned by
    the Raft layer). Not thread-safe.
    """

    def __init__(self, log_dirs: list[Path], config_for: Callable[[str], LogConfig], *,
                 skip_topics: frozenset[str] = frozenset({"__cluster_metadata"})) -> None:
        if not log_dirs:
            raise ValueError("at least one log dir is required")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.config_for = config_for
        self.skip_topics = skip_topics
        self.logs: dict[TopicPartition, Log] = {}
        self.high_watermark_of: Callable[[str, int], int | None] | None = None
        self.directory_ids: dict[Path, uuid.UUID] = {}
        self.had_clean_shutdown: dict[Path, bool] = {}
        self.high_watermarks: dict[TopicPartition, int] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self._topic_ids: dict[TopicPartition, uuid.UUID | None] = {}
        self._pending_deletes: list[list] = []   # [path, due_ms | None, delay_ms]
        self._rolled: set[TopicPartition] = set()
        self._last_retention = self._last_flush = self._last_checkpoint = 0
        self._written: dict[tuple[Path, str], dict[TopicPartition, int]] = {}
        self._write_errors: dict[Path, str] = {}
        self.future_logs: dict[TopicPartition, Log] = {}
        self._future_dir_of: dict[TopicPartition, Path] = {}
        self.offline_dirs: set[Path] = set()
        self.cordoned_dirs: set[Path] = set()
        self.preferred_dirs: dict[TopicPartition, Path] = {}

    # -- start-up -----------------------------------------------------------------------------------
    def startup(self, now_ms: int, cluster_id: str, node_id: int) -> None:
        """Create the log dirs, check or write ``meta.properties`` (LogDirError if it names
        another cluster or node), load every partition dir (recovering unflushed segments unless
        ``.kafka_cleanshutdown`` is present, then removing that marker), finish deleting
        ``-delete`` dirs.

        Raises LogDirError, naming the file, for what Kafka fails the log dir for
        (``LogDirFailureChannel``; a broker halts when its metadata log dir fails): a malformed
        ``meta.properties``, offset checkpoint (``recovery-point-offset-checkpoint``,
        ``log-start-offset-checkpoint``, ``replication-offset-checkpoint``,
        ``cleaner-offset-checkpoint``), ``leader-epoch-checkpoint`` or ``partition.metadata``,
        or an I/O error reading them. Nothing is changed on disk before the checks pass for a
        partition. A missing or empty checkpoint reads as no entries, as in Kafka."""
        plans = []
        new_dirs: set[Path] = set()   # no meta.properties yet: formatted by this start
        seen: dict[TopicPartition, Path] = {}
        for d in self.log_dirs:   # first every check, so that a refusal changes nothing on disk
            d.mkdir(parents=True, exist_ok=True)
            if self._check_meta(d, cluster_id, node_id):
                new_dirs.add(d)
            rps = self._read_checkpoint(d / RECOVERY_POINT_CHECKPOINT)
            lsos = self._read_checkpoint(d / LOG_START_OFFSET_CHECKPOINT)
            hws = self._read_checkpoint(d / REPLICATION_OFFSET_CHECKPOINT)
            self._read_checkpoint(d / CLEANER_OFFSET_CHECKPOINT)   # read by the cleaner later
            parts, deleted, futures = [], [], []
            for entry in sorted(os.scandir(d), key=lambda e: e.name):
                if not entry.is_dir(follow_symlinks=False):
                    continue
                path = Path(entry.path)
                if _DELETE_DIR.match(entry.name):
                    deleted.append(path)
                    continue
                future = FUTURE_DIR.match(entry.name)
                if future is not None:
                    check_leader_epoch_checkpoint(path)
                    futures.append(((future.group(1), int(future.group(2))), path))
                    continue
                tp = parse_topic_partition(entry.name)
                if tp is None:
                    logger.warning("ignoring %s: not a <topic>-<partition> directory", path)
                    continue
                if tp[0] in self.skip_topics:
                    continue
                if tp in seen:
                    raise LogDirError(f"partition {tp[0]}-{tp[1]} is in both {seen[tp]} and {d}: likely a crash "
                                      f"or a log dir failure while a move between log dirs swapped them in; "
                                      f"delete one of the two (Kafka: preferably the one in the dir that "
                                      f"failed recently)")
                seen[tp] = d
                check_leader_epoch_checkpoint(path)
                parts.append((tp, path, self._read_topic_id(path / PARTITION_METADATA)))
            plans.append((d, rps, lsos, hws, parts, deleted, futures))
        for d, rps, lsos, hws, parts, deleted, futures in plans:
            marker = d / CLEAN_SHUTDOWN
            clean = marker.exists()
            self.had_clean_shutdown[d] = clean
            self.high_watermarks.update(hws)
            for path in deleted:
                logger.info("removing deleted partition dir %s", path)
                shutil.rmtree(path, ignore_errors=True)
            for tp, path, topic_id in parts:
                log = Log.open(path, self.config_for(tp[0]), recovery_point=rps.get(tp, 0),
                               log_start_offset=lsos.get(tp, 0), clean_shutdown=clean,
                               now_ms=now_ms)
                self._register(tp, log, d)
                if topic_id is not None:
                    self._topic_ids[tp] = topic_id
            for tp, path in futures:
                self._load_future(tp, path, d, self.config_for(tp[0]), now_ms, clean)
            if clean:
                unlink_quiet(marker)
                fsync_dir(d)
            count = sum(1 for v in self._dir_of.values() if v == d)
            if d in new_dirs and not count:
                logger.info("log dir %s: new, formatted for cluster %s", d, cluster_id)
            else:
                logger.info("log dir %s: %s shutdown, %d partition(s)", d, "clean" if clean else "unclean", count)
        self._last_retention = self._last_flush = self._last_checkpoint = now_ms

    def _check_meta(self, d: Path, cluster_id: str, node_id: int) -> bool:
        """Check ``meta.properties`` of ``d`` (LogDirError if it names another cluster or node),
        writing it if missing; returns True for a new dir (there was none)."""
        path = d / META_PROPERTIES
        try:
            props = read_meta_properties(path)
        except (CheckpointError, OSError) as e:
            raise LogDirError(unreadable(path, e)) from None
        if props is not None and props.get("version", "0") not in ("0", "1"):
            # Kafka MetaProperties: only versions 0 (ZooKeeper era) and 1 (KRaft) exist
            raise LogDirError(f"{path}: unsupported version {props.get('version')!r}")
        if props is None:
            dir_id = uuid.uuid4()
            write_meta_properties(path, {"version": "1", "cluster.id": cluster_id,
                                         "node.id": str(node_id),
                                         "directory.id": topic_id_to_str(dir_id)})
            self.directory_ids[d] = dir_id
            return True
        stored_node = props.get("node.id", props.get("broker.id"))
        if props.get("cluster.id") != cluster_id:
            raise LogDirError(f"{path}: cluster.id {props.get('cluster.id')!r} does not match "
                              f"{cluster_id!r}")
        if stored_node != str(node_id):
            raise LogDirError(f"{path}: node.id {stored_node!r} does not match {node_id}")
        if "directory.id" not in props:
            props["directory.id"] = topic_id_to_str(uuid.uuid4())
            props["version"] = "1"
            props.setdefault("node.id", str(node_id))
            write_meta_properties(path, props)
        try:
            self.directory_ids[d] = topic_id_from_str(props["directory.id"])
        except CheckpointError as e:   # Kafka: Uuid.fromString fails the start-up
            raise LogDirError(f"{path}: directory.id: {e}") from None
        return False

    @staticmethod
    def _read_checkpoint(path: Path) -> dict[TopicPartition, int]:
        """An offset checkpoint of a log dir; LogDirError if malformed or unreadable (Kafka's
        ``CheckpointFileWithFailureHandler.read`` marks the log dir offline - also for the
        recovery-point and log-start-offset files, whose values ``LogManager.loadLogs`` then
        resets - and the broker halts when that dir holds the metadata log)."""
        try:
            return read_offset_checkpoint(path)
        except (CheckpointError, OSError) as e:
            raise LogDirError(f"{unreadable(path, e)} (Kafka fails the log dir for a malformed "
                              f"checkpoint: remove or repair the file; {_IF_REMOVED[path.name]})") from None

    @staticmethod
    def _read_topic_id(path: Path) -> uuid.UUID | None:
        """The topic id in a partition's ``partition.metadata``, None if there is none;
        LogDirError if it is malformed (Kafka ``PartitionMetadataFile.read`` fails the log dir)."""
        try:
            return read_partition_metadata(path)
        except (CheckpointError, OSError) as e:
            raise LogDirError(f"{unreadable(path, e)} (Kafka fails the log dir for a malformed "
                              f"partition.metadata: remove the file to take the topic id from the "
                              f"cluster metadata)") from None

    def _register(self, tp: TopicPartition, log: Log, d: Path) -> None:
        self.logs[tp] = log
        self._dir_of[tp] = d
        log.add_roll_listener(lambda _log, tp=tp: self._rolled.add(tp))
        if log.pending_roll_flush:
            self._rolled.add(tp)

    # -- partitions ---------------------------------------------------------------------------------
    def get(self, topic: str, partition: int) -> Log | None:
        """The partition's Log, None if this broker has none."""
        return self.logs.get((topic, partition))

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        """The log dir (not the partition dir) holding the partition."""
        return self._dir_of.get((topic, partition))

    def describe_dirs(self, partitions: set[TopicPartition] | None = None) -> list[LogDirDescription]:
        """Every log dir with its filesystem's space and its logs (those in ``partitions``, all
        when None), in ``log.dirs`` order: what Kafka's ``ReplicaManager.describeLogDirs`` reads
        from its LogManager. A log's size is :attr:`Log.size_in_bytes`."""
        out = []
        for d in self.log_dirs:
            desc = LogDirDescription(os.path.abspath(d))
            if d in self.offline_dirs:
                desc.error = OSError(5, f"log dir {d} is offline")
                out.append(desc)
                continue
            try:
                usage = shutil.disk_usage(d)
            except OSError as e:
                desc.error = e
                out.append(desc)
                continue
            desc.total_bytes, desc.usable_bytes = usage.total, usage.free
            desc.is_cordoned = d in self.cordoned_dirs
            desc.logs = {tp: log for tp, log in sorted(self.logs.items())
                         if self._dir_of.get(tp) == d and (partitions is None or tp in partitions)}
            desc.future_logs = {tp: log for tp, log in sorted(self.future_logs.items())
                                if self._future_dir_of.get(tp) == d and (partitions is None or tp in partitions)}
            out.append(desc)
        return out

    def create(self, topic: str, partition: int, config: LogConfig, topic_id: uuid.UUID,
               now_ms: int) -> Log:
        """Get or create the log of a partition in the log dir holding the fewest partitions,
        writing ``partition.metadata``. Raises ValueError for an illegal topic name,
        LogDirError if the partition exists with another topic id, LogStorageError if the
        directory or its files cannot be created (nothing is left behind then)."""
        validate_topic(topic)
        tp = (topic, partition)
        existing = self.logs.get(tp)
        if existing is not None:
            stored = self.topic_id_of(topic, partition)
            if stored is not None and stored != topic_id:
                raise LogDirError(f"partition {topic}-{partition} exists with topic id "
                                  f"{topic_id_to_str(stored)}, not {topic_id_to_str(topic_id)}")
            if stored is None:
                write_partition_metadata(existing.directory / PARTITION_METADATA, topic_id)
                self._topic_ids[tp] = topic_id
            return existing
        d = self.placement_dir(tp)
        path = d / f"{topic}-{partition}"
        created = not path.exists()
        try:
            path.mkdir(parents=True, exist_ok=True)
            write_partition_metadata(path / PARTITION_METADATA, topic_id)
            log = Log.open(path, config, clean_shutdown=True, now_ms=now_ms)
            fsync_dir(d)
        except OSError as e:   # a full disk: leave no half-made partition dir behind
            if created:
                shutil.rmtree(path, ignore_errors=True)
            raise LogStorageError(f"creating the log of {topic}-{partition} in {d}", e) from e
        self._register(tp, log, d)
        self._topic_ids[tp] = topic_id
        return log

    def topic_id_of(self, topic: str, partition: int) -> uuid.UUID | None:
        """Topic id from the partition's ``partition.metadata`` (cached); None if unknown."""
        tp = (topic, partition)
        if tp not in self._topic_ids:
            log = self.logs.get(tp)
            if log is None:
                return None
            try:
                self._topic_ids[tp] = read_partition_metadata(log.directory / PARTITION_METADATA)
            except CheckpointError as e:
                logger.error("%s", e)
                return None
        return self._topic_ids[tp]

    def delete(self, topic: str, partition: int, *, now_ms: int | None = None) -> None:
        """Close the log and rename its dir to ``<topic>-<partition>.<uuid hex>-delete``; the dir
        is removed by ``run_periodic`` after ``file.delete.delay.ms`` (counted from ``now_ms``,
        or from the next ``run_periodic`` call). KeyError if the partition has no log."""
        log, target = self._set_aside(topic, partition, "delete", flush=False)
        delay = log.config.file_delete_delay_ms
        self._pending_deletes.append([target, None if now_ms is None else now_ms + delay, delay])
        logger.info("partition %s-%d scheduled for deletion as %s", topic, partition, target)

    def mark_stray(self, topic: str, partition: int) -> Path:
        """Set aside a log the cluster metadata does not assign to this broker: close it and
        rename its dir to ``<topic>-<partition>.<uuid hex>-stray`` (Kafka 3.7+, KAFKA-15813).
        Stray dirs are never loaded or deleted automatically. Returns the new path."""
        _log, target = self._set_aside(topic, partition, "stray", flush=True)
        logger.warning("partition %s-%d set aside as stray: %s", topic, partition, target)
        return target

    def _set_aside(self, topic: str, partition: int, suffix: str, *, flush: bool) -> tuple[Log, Path]:
        """Forget a partition's log, close it and rename its dir ``<tp>.<uuid hex>-<suffix>``
        (a name start-up does not load). KeyError if the partition has no log."""
        tp = (topic, partition)
        log = self.logs.pop(tp)
        d = self._dir_of.pop(tp)
        self._topic_ids.pop(tp, None)
        self._rolled.discard(tp)
        if flush:
            log.close()
        else:
            log.close_without_flush()
        target = d / f"{topic}-{partition}.{uuid.uuid4().hex}-{suffix}"
        os.rename(log.directory, target)
        fsync_dir(d)
        self._checkpoint_dir(d, force=False)
        return log, target

    # -- periodic work ------------------------------------------------------------------------------
    def run_periodic(self, now_ms: int, *, retention_check_interval_ms: int,
                     flush_check_ms: int, checkpoint_interval_ms: int) -> int:
        """Background duties, each when its interval has elapsed: fsync segments completed by a
        roll (every call), retention (``log.retention.check.interval.ms``), time-based flush
        (``log.flush.scheduler.interval.ms``), recovery-point/log-start checkpoints
        (``log.flush.offset.checkpoint.interval.ms``), removal of ``-delete`` dirs. Returns the
        number of segments deleted by retention. Everything runs on the calling thread; a server
        uses :meth:`flush_plans` + :meth:`maintain` to run the fsyncs and directory removals on a
        worker thread instead."""
        for plan in self.flush_plans(now_ms, flush_check_ms=flush_check_ms):
            plan.sync()
            plan.log.complete_flush(plan)
        deleted, removals = self.maintain(now_ms, retention_check_interval_ms=retention_check_interval_ms,
                                          checkpoint_interval_ms=checkpoint_interval_ms)
        for path in removals:
            remove_tree(path)
        return deleted

    def flush_plans(self, now_ms: int, *, flush_check_ms: int) -> list:
        """Flush work that is due: segments completed by a roll, and logs whose ``flush.ms``
        elapsed (checked every ``log.flush.scheduler.interval.ms``). Returns
        :class:`kcompat.log.log.FlushPlan` objects: run ``plan.sync()`` on any thread, then
        ``plan.log.complete_flush(plan)`` on this one."""
        rolled, self._rolled = self._rolled, set()
        check_all = not 0 <= now_ms - self._last_flush < flush_check_ms   # also after the clock stepped back
        if check_all:
            self._last_flush = now_ms
        plans = []
        for tp in (list(self.logs) if check_all else rolled):
            log = self.logs.get(tp)
            if log is None or log.closed:
                continue
            plan = log.due_flush_plan(now_ms)
            if plan is not None:
                plans.append(plan)
        return plans

    def maintain(self, now_ms: int, *, retention_check_interval_ms: int,
                 checkpoint_interval_ms: int) -> tuple[int, list[Path]]:
        """Retention and checkpoints when due; returns (segments deleted by retention, ``-delete``
        dirs now due for removal — remove them with :func:`remove_tree`, on any thread)."""
        deleted = 0
        if not 0 <= now_ms - self._last_retention < retention_check_interval_ms:   # or the clock stepped back
            self._last_retention = now_ms
            for (topic, partition), log in list(self.logs.items()):
                hw = self.high_watermark_of(topic, partition) if self.high_watermark_of else None
                try:
                    deleted += log.apply_retention(now_ms, high_watermark=hw)
                except OSError as e:   # a roll before deleting every segment, on a full disk
                    logger.error("%s: retention failed (retried at the next check): %s", log.directory, e)
        if not 0 <= now_ms - self._last_checkpoint < checkpoint_interval_ms:
            self._last_checkpoint = now_ms
            self.checkpoint(force=False)
        removals = []
        if self._pending_deletes:
            keep = []
            for item in self._pending_deletes:
                path, due, delay = item
                if due is None:
                    item[1] = now_ms + delay
                    keep.append(item)
                elif now_ms >= due:
                    removals.append(path)
                else:
                    keep.append(item)
            self._pending_deletes = keep
        return deleted, removals

    def checkpoint(self, *, force: bool = True) -> bool:
        """Write ``recovery-point-offset-checkpoint`` and ``log-start-offset-checkpoint`` in every
        log dir (skipping unchanged files unless ``force``). A write that fails (disk full) is
        logged and tried again at the next call; the previous file stays whole (Kafka marks the
        log dir offline instead). True if every file is up to date."""
        ok = True
        for d in self.online_dirs:
            ok = self._checkpoint_dir(d, force=force) and ok
        return ok

    def _checkpoint_dir(self, d: Path, *, force: bool) -> bool:
        if d in self.offline_dirs:
            return False
        logs = {tp: log for tp, log in self.logs.items() if self._dir_of[tp] == d}
        logs.update((tp, log) for tp, log in self.future_logs.items() if self._future_dir_of[tp] == d)
        ok = True
        for name, values in (
            (RECOVERY_POINT_CHECKPOINT, {tp: log.recovery_point for tp, log in logs.items()}),
            (LOG_START_OFFSET_CHECKPOINT, {tp: log.log_start_offset for tp, log in logs.items()}),
        ):
            if force or self._written.get((d, name)) != values:
                try:
                    write_offset_checkpoint(d / name, values)
                except OSError as e:
                    self._note_write_error(d / name, e)
                    ok = False
                    continue
                self._written[(d, name)] = values
                self._note_write_ok(d / name)
        return ok

    def _note_write_error(self, path: Path, e: OSError) -> None:
        if self._write_errors.get(path) != str(e):   # once per distinct error, not every interval
            logger.error("cannot write %s (the previous file stays; retried later): %s", path, e)
        self._write_errors[path] = str(e)

    def _note_write_ok(self, path: Path) -> None:
        if self._write_errors.pop(path, None) is not None:
            logger.info("%s written again", path)

    def write_high_watermarks(self, high_watermarks: dict[TopicPartition, int]) -> None:
        """Write ``replication-offset-checkpoint`` in each log dir for the partitions it holds
        (Kafka's ReplicaManager owns this file; the values come from the replication layer)."""
        for d in self.online_dirs:
            values = {tp: hw for tp, hw in high_watermarks.items() if self._dir_of.get(tp) == d}
            try:
                write_offset_checkpoint(d / REPLICATION_OFFSET_CHECKPOINT, values)
            except OSError as e:
                self._note_write_error(d / REPLICATION_OFFSET_CHECKPOINT, e)
                raise
            self._note_write_ok(d / REPLICATION_OFFSET_CHECKPOINT)

    def shutdown(self, *, broker_epoch: int = -1) -> None:
        """Flush and close every log, write the checkpoints, then ``.kafka_cleanshutdown`` in
        every log dir (Kafka 3.7+ content ``{"version":0,"brokerEpoch":N}``). A log dir where
        something could not be made durable (an fsync or a checkpoint failed, e.g. on a full
        disk) gets no marker, so that the next start-up recovers it from its recovery point."""
        unclean: set[Path] = set(self.offline_dirs)
        for tp, log, d in [(tp, log, self._dir_of[tp]) for tp, log in self.logs.items()] + \
                [(tp, log, self._future_dir_of[tp]) for tp, log in self.future_logs.items()]:
            try:
                if not log.close():
                    unclean.add(d)
            except OSError as e:
                logger.error("%s: closing failed: %s", log.directory, e)
                unclean.add(d)
        for d in self.online_dirs:
            if not self._checkpoint_dir(d, force=True):
                unclean.add(d)
        marker = json.dumps({"version": 0, "brokerEpoch": broker_epoch},
                            separators=(",", ":")).encode()
        for d in self.log_dirs:
            if d in unclean:
                logger.warning("log dir %s: not marked as cleanly shut down (see the errors above); "
                               "the next start recovers it", d)
                continue
            try:
                atomic_write(d / CLEAN_SHUTDOWN, marker)
            except OSError as e:
                logger.error("cannot write %s: %s", d / CLEAN_SHUTDOWN, e)
                unclean.add(d)
        self.logs.clear()
        self._dir_of.clear()
        self.future_logs.clear()
        self._future_dir_of.clear()
        logger.info("log manager shut down %s", "cleanly" if not unclean else
                    "(unclean: " + ", ".join(str(d) for d in sorted(unclean)) + ")")


def remove_tree(path: Path) -> None:
    """Remove a deleted partition's directory (safe on any thread: nothing refers to it)."""
    logger.info("removing deleted partition dir %s", path)
    shutil.rmtree(path, ignore_errors=True)
