"""The broker side of several log dirs (JBOD): replica moves, failed dirs, directory assignment.

- Moves (AlterReplicaLogDirs): one task copies, chunk by chunk between requests, into every
  future log and swaps it in once caught up (Kafka's ReplicaAlterLogDirsThread;
  :meth:`kcompat.isr.replica_log_dirs.ReplicaLogDirs.step`), within the dynamic broker config
  ``replica.alter.log.dirs.io.max.bytes.per.second`` (``kafka-reassign-partitions.sh
  --replica-alter-log-dirs-throttle`` sets it).
- A failed log dir: the controller is told at once by a heartbeat carrying ``offline_log_dirs``
  (Kafka's ``BrokerLifecycleManager.propagateDirectoryFailure``), and by every later heartbeat;
  when the dir holds the metadata log, or no log dir is left, the broker halts as Kafka does.
- Directory assignment (KIP-858): with more than one log dir, every hosted replica whose dir
  differs from the one in the metadata image is sent to the controller in an AssignReplicasToDirs
  (again after ``ASSIGNMENT_RETRY_MS`` while the image has not caught up), as Kafka's
  ``AssignmentsManager``.
- Fault injection for tests: every second :meth:`kcompat.log.LogManager.poll_injected_faults`.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

from kcompat.broker.handlers import assign_replicas_to_dirs
from kcompat.isr.future_replica import COPY_STEP_BYTES
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.assign_replicas_to_dirs import AssignReplicasToDirsRequest as Req

log = logging.getLogger("kcompat.broker.log_dirs")

POLL_S = 1.0
ASSIGNMENT_RETRY_MS = 5000
UNLIMITED = 2**63 - 1   # Long.MAX_VALUE: no quota


class LogDirRuntime:
    """JBOD duties of ``broker`` (a :class:`kcompat.broker.broker.Broker`)."""

    def __init__(self, broker, metadata_dir: Path) -> None:
        self.broker = broker
        self.metadata_dir = metadata_dir
        jbod = broker.replica_manager.log_dirs
        jbod.move_listener = self._wake
        jbod.moved_listener = self._moved
        jbod.dir_failure_listener = self._on_dir_failure
        self._event = asyncio.Event()
        self._sent: dict[tuple, int] = {}   # assignment -> when it was last sent (ms)
        self._assign_due = False
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    def _wake(self) -> None:
        self._event.set()

    def _moved(self, _partition) -> None:
        self._assign_due = True   # the controller learns the new dir at the next round

    def online_dir_ids(self) -> list:
        """Directory ids of the online log dirs (BrokerRegistration ``log_dirs``, KIP-858)."""
        lm = self.broker.log_manager
        return [lm.directory_id_of(d) for d in lm.online_dirs if lm.directory_id_of(d) is not None]

    def offline_dir_ids(self) -> list:
        """Directory ids of the offline log dirs (BrokerHeartbeat ``offline_log_dirs``)."""
        lm = self.broker.log_manager
        return [lm.directory_id_of(d) for d in sorted(lm.offline_dirs) if lm.directory_id_of(d) is not None]

    async def _run(self) -> None:
        b = self.broker
        last_poll = -POLL_S * 1000
        next_copy = 0   # ms: when the copy quota allows the next round
        while True:
            now = b.now_ms()
            try:
                if self._assign_due or now - last_poll >= POLL_S * 1000:
                    last_poll, self._assign_due = now, False
                    b.log_manager.poll_injected_faults()
                    await self._send_assignments()
                if b.replica_manager.log_dirs.moves and now >= next_copy:
                    delay = self._copy_round(now)
                    next_copy = now + int(delay * 1000) if delay is not None else 0
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("log dir task failed; retrying")
            if b.replica_manager.log_dirs.moves:
                # one chunk per moving partition, then serve requests again
                await asyncio.sleep(min(POLL_S, max(next_copy - b.now_ms(), 0) / 1000))
                continue
            try:
                await asyncio.wait_for(self._event.wait(), POLL_S)
            except asyncio.TimeoutError:
                pass
            self._event.clear()

    def _copy_round(self, now: int) -> float | None:
        """One chunk into every future log; the seconds to wait before the next round so that the
        copying stays within ``replica.alter.log.dirs.io.max.bytes.per.second`` (Kafka's quota of
        the ReplicaAlterLogDirs threads), or None once no move is left."""
        rate = self.broker.config.get("replica.alter.log.dirs.io.max.bytes.per.second")
        limited = 0 < rate < UNLIMITED
        chunk = min(COPY_STEP_BYTES, rate) if limited else COPY_STEP_BYTES
        busy, copied = self.broker.replica_manager.log_dirs.step(now, max_bytes=chunk)
        if not busy:
            return None
        return copied / rate if limited else 0.0

    # -- failed dirs ------------------------------------------------------------------------------
    def _on_dir_failure(self, d: Path) -> None:
        lm = self.broker.log_manager
        if os.path.abspath(d) == os.path.abspath(self.metadata_dir) or not lm.online_dirs:
            why = "it holds the metadata log" if lm.online_dirs else "every log dir has failed"
            log.critical("log dir %s failed and %s: halting the broker (as Kafka does)", d, why)
            logging.shutdown()
            os._exit(1)
        lifecycle = self.broker.lifecycle
        if lifecycle is not None and lifecycle.broker_epoch >= 0:
            asyncio.ensure_future(lifecycle.heartbeat())   # tell the controller now

    # -- directory assignment ---------------------------------------------------------------------
    def _pending_assignments(self, now: int) -> list[tuple]:
        b = self.broker
        lm = b.log_manager
        if len(lm.log_dirs) < 2:
            return []
        out = []
        for (topic, index), p in list(b.replica_manager.partitions.items()):
            d = lm.log_dir_of(topic, index)
            dir_id = lm.directory_id_of(d) if d is not None else None
            t = b.image.topics.get(topic)
            image_p = t.partitions.get(index) if t is not None else None
            if p.offline or dir_id is None or image_p is None or b.node_id not in image_p.replicas:
                continue
            key = (dir_id, t.topic_id, index)
            if image_p.directories.get(b.node_id) != dir_id and now - self._sent.get(key, -ASSIGNMENT_RETRY_MS) >= \
                    ASSIGNMENT_RETRY_MS:
                out.append(key)
        return out

    async def _send_assignments(self) -> None:
        b = self.broker
        lifecycle = b.lifecycle
        if lifecycle is None or lifecycle.broker_epoch < 0:
            return
        now = b.now_ms()
        pending = self._pending_assignments(now)
        if not pending:
            return
        dirs: dict = {}
        for dir_id, topic_id, index in pending:
            dirs.setdefault(dir_id, {}).setdefault(topic_id, []).append(Req.PartitionData(partition_index=index))
            self._sent[(dir_id, topic_id, index)] = now
        req = Req(broker_id=b.node_id, broker_epoch=lifecycle.broker_epoch, directories=[
            Req.DirectoryData(id=dir_id, topics=[Req.TopicData(topic_id=tid, partitions=parts)
                                                 for tid, parts in topics.items()])
            for dir_id, topics in dirs.items()])
        resp = await b.controller_service.call(req, 0, lambda: assign_replicas_to_dirs.local(b.api_services, req),
                                               assign_replicas_to_dirs.error_response)
        if resp.error_code != ErrorCode.NONE:
            log.info("AssignReplicasToDirs: %s (sent again later)", ErrorCode(resp.error_code).name)
