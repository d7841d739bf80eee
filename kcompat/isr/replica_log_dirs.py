"""The log dirs of a broker's replicas: moves between dirs and failed dirs (JBOD).

- AlterReplicaLogDirs (KIP-113), as Kafka's ``ReplicaManager.alterReplicaLogDirs``: per partition,
  LOG_DIR_NOT_FOUND for a path that is not one of ``log.dirs``, KAFKA_STORAGE_ERROR for an offline
  dir or a partition whose dir is offline, INVALID_REPLICA_ASSIGNMENT for a cordoned dir (KIP-1066), REPLICA_NOT_AVAILABLE for a partition this broker does
  not host (the dir is remembered and used if it comes to host it later), UNKNOWN_TOPIC_OR_PARTITION
  for one the cluster does not have. Otherwise a future log is created in the destination dir
  (nothing if the replica is already there; a move to another dir is cancelled first) and
  :meth:`ReplicaLogDirs.step` copies into it until it swaps in (:mod:`kcompat.isr.future_replica`).
- A failed log dir (Kafka ``ReplicaManager.handleLogDirFailure``, KIP-112): an I/O error other than
  a full disk takes the dir offline; its partitions stop (fetchers removed, waiting acks=all
  produces answered KAFKA_STORAGE_ERROR) and answer KAFKA_STORAGE_ERROR until the broker restarts;
  ``dir_failure_listener(dir)`` tells the broker, which reports the dir to the controller.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable

from kcompat.isr.future_replica import COPY_STEP_BYTES, FutureReplica
from kcompat.log import LogStorageError
from kcompat.protocol.errors import ErrorCode

log = logging.getLogger("kcompat.isr")


class ReplicaLogDirs:
    """JBOD operations over ``replica_manager`` (a :class:`kcompat.isr.replica_manager.ReplicaManager`)."""

    def __init__(self, replica_manager) -> None:
        self.replica_manager = replica_manager
        self.log_manager = replica_manager.log_manager
        self.moves: dict[tuple[str, int], FutureReplica] = {}
        # log dir -> None: a log dir went offline (the broker tells the controller, or halts)
        self.dir_failure_listener: Callable[[Path], None] | None = None
        # () -> None: a move was added (wake the task that calls step)
        self.move_listener: Callable[[], None] | None = None
        # (partition) -> None: the partition's log is now in another dir (tell the controller)
        self.moved_listener: Callable[[object], None] | None = None

    # -- AlterReplicaLogDirs ----------------------------------------------------------------------
    def alter_replica_log_dir(self, topic: str, partition: int, path: str, *, in_metadata: bool,
                              now_ms: int) -> ErrorCode:
        """Move ``topic``-``partition`` to the log dir ``path``; the per-partition error code."""
        d = self.log_manager.find_log_dir(path)
        if d is None:
            return ErrorCode.LOG_DIR_NOT_FOUND
        if not self.log_manager.is_online(d):
            return ErrorCode.KAFKA_STORAGE_ERROR
        if d in self.log_manager.cordoned_dirs:   # Kafka 4.3: "Log directory <d> is cordoned" (KIP-1066)
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT
        key = (topic, partition)
        p = self.replica_manager.get(topic, partition)
        if p is not None and p.offline:
            return ErrorCode.KAFKA_STORAGE_ERROR
        if p is None:
            if not in_metadata:
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            self.log_manager.preferred_dirs[key] = d
            return ErrorCode.REPLICA_NOT_AVAILABLE
        if self.log_manager.future_dir_of(topic, partition) not in (None, d):
            self.cancel(topic, partition)
        if self.log_manager.log_dir_of(topic, partition) == d:
            return ErrorCode.NONE
        if self.log_manager.offline_dirs:
            # Kafka: no future log while a dir is offline (the partition might have a log there)
            return ErrorCode.KAFKA_STORAGE_ERROR
        try:
            future = self.log_manager.create_future(topic, partition, d, p.log.config, p.topic_id, now_ms)
        except LogStorageError as e:
            log.warning("cannot move %s to %s: %s", p, d, e)
            return ErrorCode.KAFKA_STORAGE_ERROR
        if key not in self.moves:
            self.moves[key] = FutureReplica(p, future)
            log.info("%s: moving to log dir %s", p, d)
            if self.move_listener is not None:
                self.move_listener()
        return ErrorCode.NONE

    def on_hosted(self, p) -> None:
        """A partition is hosted here: resume its move if a future log was loaded at start-up."""
        future = self.log_manager.future_log(p.topic, p.partition_id)
        key = (p.topic, p.partition_id)
        if future is not None and key not in self.moves:
            self.moves[key] = FutureReplica(p, future)
            log.info("%s: resuming the move to log dir %s", p, self.log_manager.future_dir_of(*key))
            if self.move_listener is not None:
                self.move_listener()

    def cancel(self, topic: str, partition: int) -> None:
        """Stop moving the partition and remove its future log."""
        self.moves.pop((topic, partition), None)
        self.log_manager.abort_future(topic, partition)

    def future_lag(self, topic: str, partition: int) -> int:
        """DescribeLogDirs ``offset_lag`` of the partition's future log (-1 if not moving)."""
        move = self.moves.get((topic, partition))
        return -1 if move is None else move.lag

    def step(self, now_ms: int, max_bytes: int = COPY_STEP_BYTES) -> tuple[bool, int]:
        """Copy up to ``max_bytes`` (at least one batch) into every moving partition's future log,
        swapping in those that caught up. Returns (some move is still in progress, bytes copied)."""
        copied = 0
        for key, move in list(self.moves.items()):
            p = move.partition
            if self.replica_manager.get(*key) is not p or p.offline:
                self.moves.pop(key, None)
                continue
            if p.log.cleaning is not None:
                continue   # Kafka pauses cleaning of a moving log; here the swap waits for it
            before = move.log.size_in_bytes
            try:
                done = move.copy_step(now_ms, max_bytes)
                copied += max(move.log.size_in_bytes - before, 0)
                if done:
                    self._swap(key, move, now_ms)
            except LogStorageError as e:
                self.moves.pop(key, None)
                self._fail_for(e, p, move)
        return bool(self.moves), copied

    def _swap(self, key, move: FutureReplica, now_ms: int) -> None:
        p = move.partition
        new_log = self.log_manager.replace_current_with_future(key[0], key[1], now_ms)
        self.moves.pop(key, None)
        p.replace_log(new_log)
        if self.moved_listener is not None:
            self.moved_listener(p)

    def _fail_for(self, e: LogStorageError, p, move: FutureReplica) -> None:
        """An I/O error while moving: fail the dir it came from (the future log's, unless the
        current log's own I/O failed)."""
        if e.disk_full:
            log.warning("%s: move to another log dir stopped: %s", p, e)
            self.cancel(p.topic, p.partition_id)
            return
        future_dir = self.log_manager.future_dir_of(p.topic, p.partition_id)
        failed = future_dir if getattr(e, "in_future_log", False) else self.log_manager.log_dir_of(p.topic, p.partition_id)
        if failed is not None:
            self.handle_log_dir_failure(failed, str(e))

    # -- failed log dirs ----------------------------------------------------------------------------
    def on_storage_failure(self, p, e: LogStorageError) -> None:
        """``Partition.storage_failure_listener``: the partition's log failed with an I/O error."""
        d = self.log_manager.log_dir_of(p.topic, p.partition_id)
        if d is not None:
            self.handle_log_dir_failure(d, str(e))

    def handle_log_dir_failure(self, d: Path, reason: str) -> None:
        """Take log dir ``d`` offline with its partitions (see the module docstring)."""
        lost = self.log_manager.fail_dir(d, reason)
        if not lost and d not in self.log_manager.offline_dirs:
            return
        for key in lost:
            self.moves.pop(key, None)
            p = self.replica_manager.get(*key)
            if p is None:
                continue
            p.go_offline()
            if self.replica_manager.follower_listener is not None:
                self.replica_manager.follower_listener(p, -1, p.leader_epoch)
        for key in [k for k in self.moves if self.log_manager.future_log(*k) is None]:
            del self.moves[key]   # futures in the failed dir
        if self.dir_failure_listener is not None:
            self.dir_failure_listener(d)
