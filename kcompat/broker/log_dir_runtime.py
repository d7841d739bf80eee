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
- Cordoned log dirs (KIP-1066): ``cordoned.log.dirs`` (static, or dynamic per broker) is applied
  to the log manager (new logs avoid those dirs, DescribeLogDirs reports ``IsCordoned``) and its
  directory ids go to the controller in every heartbeat once the broker has caught up, at once
  when it changes (Kafka's ``DynamicLogConfig.reconfigure`` -> ``BrokerLifecycleManager.
  propagateDirectoryCordoned``), so that new replicas avoid a broker whose every dir is cordoned.
- Fault injection for tests: every second :meth:`kcompat.log.LogManager.poll_injected_faults`.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from kcompat.broker.handlers import assign_replicas_to_dirs
from kcompat.config.cordoned import cordoned_entries
from kcompat.isr.future_replica import COPY_STEP_BYTES
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.assign_replicas_to_dirs import AssignReplicasToDirsRequest as Req

if TYPE_CHECKING:   # types only: the objects are built by kcompat.broker.broker
    from kcompat.broker.api_services import ApiServices
    from kcompat.broker.broker_context import BrokerContext
    from kcompat.broker.controller_service import ControllerService
    from kcompat.broker.lifecycle import BrokerLifecycle
    from kcompat.isr.replica_manager import ReplicaManager
    from kcompat.log import LogManager

log = logging.getLogger("kcompat.broker.log_dirs")

POLL_S = 1.0
ASSIGNMENT_RETRY_MS = 5000
UNLIMITED = 2**63 - 1   # Long.MAX_VALUE: no quota


class LogDirRuntime:
    """JBOD duties of one broker.

    - ``context``: this node's id, config (``replica.alter.log.dirs.io.max.bytes.per.second``),
      metadata image (the replicas' directories, KIP-858) and clock (ms);
    - ``replica_manager``: the hosted partitions and their log dirs (moves, failures);
    - ``log_manager``: the log dirs, their directory ids and injected faults;
    - ``metadata_dir``: the metadata log's directory (its failure halts the broker);
    - ``controller_service``: sends AssignReplicasToDirs to the active controller, or runs it here.

    Set by the broker once they exist: ``api_services`` (what AssignReplicasToDirs runs against
    on the active controller) and ``lifecycle`` (the broker epoch, and a heartbeat to report a
    failed dir at once); while ``lifecycle`` is None nothing is sent.
    """

    def __init__(self, context: BrokerContext, *, replica_manager: ReplicaManager, log_manager: LogManager,
                 metadata_dir: Path, controller_service: ControllerService) -> None:
        self.context = context
        self.replica_manager = replica_manager
        self.log_manager = log_manager
        self.metadata_dir = metadata_dir
        self.controller_service = controller_service
        self.api_services: ApiServices | None = None
        self.lifecycle: BrokerLifecycle | None = None
        jbod = replica_manager.log_dirs
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
        lm = self.log_manager
        return [lm.directory_id_of(d) for d in lm.online_dirs if lm.directory_id_of(d) is not None]

    def offline_dir_ids(self) -> list:
        """Directory ids of the offline log dirs (BrokerHeartbeat ``offline_log_dirs``)."""
        lm = self.log_manager
        return [lm.directory_id_of(d) for d in sorted(lm.offline_dirs) if lm.directory_id_of(d) is not None]

    def cordoned_dir_ids(self) -> list:
        """Directory ids of the cordoned log dirs (BrokerHeartbeat v2 ``cordoned_log_dirs``)."""
        lm = self.log_manager
        return [lm.directory_id_of(d) for d in lm.log_dirs
                if d in lm.cordoned_dirs and lm.directory_id_of(d) is not None]

    def refresh_cordoned(self) -> None:
        """Apply the effective ``cordoned.log.dirs`` (after a config change); when it changed and
        the broker is registered, heartbeat now so the controller learns it."""
        lm = self.log_manager
        dirs = {d for d in (lm.find_log_dir(entry) for entry in cordoned_entries(self.context.config)) if d is not None}
        if not lm.set_cordoned(dirs):
            return
        log.info("cordoned log dirs: %s", ", ".join(sorted(map(str, dirs))) or "none")
        lifecycle = self.lifecycle
        if lifecycle is not None and lifecycle.broker_epoch >= 0:
            lifecycle.heartbeat_soon()

    async def _run(self) -> None:
        last_poll = -POLL_S * 1000
        next_copy = 0   # ms: when the copy quota allows the next round
        while True:
            now = self.context.now_ms()
            try:
                if self._assign_due or now - last_poll >= POLL_S * 1000:
                    last_poll, self._assign_due = now, False
                    self.log_manager.poll_injected_faults()
                    await self._send_assignments()
                if self.replica_manager.log_dirs.moves and now >= next_copy:
                    delay = self._copy_round(now)
                    next_copy = now + int(delay * 1000) if delay is not None else 0
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("log dir task failed; retrying")
            if self.replica_manager.log_dirs.moves:
                # one chunk per moving partition, then serve requests again
                await asyncio.sleep(min(POLL_S, max(next_copy - self.context.now_ms(), 0) / 1000))
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
        rate = self.context.config.get("replica.alter.log.dirs.io.max.bytes.per.second")
        limited = 0 < rate < UNLIMITED
        chunk = min(COPY_STEP_BYTES, rate) if limited else COPY_STEP_BYTES
        busy, copied = self.replica_manager.log_dirs.step(now, max_bytes=chunk)
        if not busy:
            return None
        return copied / rate if limited else 0.0

    # -- failed dirs ------------------------------------------------------------------------------
    def _on_dir_failure(self, d: Path) -> None:
        lm = self.log_manager
        if os.path.abspath(d) == os.path.abspath(self.metadata_dir) or not lm.online_dirs:
            why = "it holds the metadata log" if lm.online_dirs else "every log dir has failed"
            log.critical("log dir %s failed and %s: halting the broker (as Kafka does)", d, why)
            logging.shutdown()
            os._exit(1)
        lifecycle = self.lifecycle
        if lifecycle is not None and lifecycle.broker_epoch >= 0:
            lifecycle.heartbeat_soon()   # tell the controller now

    # -- directory assignment ---------------------------------------------------------------------
    def _pending_assignments(self, now: int) -> list[tuple]:
        node_id = self.context.node_id
        lm = self.log_manager
        if len(lm.log_dirs) < 2:
            return []
        out = []
        for (topic, index), p in list(self.replica_manager.partitions.items()):
            d = lm.log_dir_of(topic, index)
            dir_id = lm.directory_id_of(d) if d is not None else None
            t = self.context.image.topics.get(topic)
            image_p = t.partitions.get(index) if t is not None else None
            if p.offline or dir_id is None or image_p is None or node_id not in image_p.replicas:
                continue
            key = (dir_id, t.topic_id, index)
            if image_p.directories.get(node_id) != dir_id and now - self._sent.get(key, -ASSIGNMENT_RETRY_MS) >= \
                    ASSIGNMENT_RETRY_MS:
                out.append(key)
        return out

    async def _send_assignments(self) -> None:
        lifecycle = self.lifecycle
        if lifecycle is None or lifecycle.broker_epoch < 0:
            return
        now = self.context.now_ms()
        pending = self._pending_assignments(now)
        if not pending:
            return
        dirs: dict = {}
        for dir_id, topic_id, index in pending:
            dirs.setdefault(dir_id, {}).setdefault(topic_id, []).append(Req.PartitionData(partition_index=index))
            self._sent[(dir_id, topic_id, index)] = now
        req = Req(broker_id=self.context.node_id, broker_epoch=lifecycle.broker_epoch, directories=[
            Req.DirectoryData(id=dir_id, topics=[Req.TopicData(topic_id=tid, partitions=parts)
                                                 for tid, parts in topics.items()])
            for dir_id, topics in dirs.items()])
        resp = await self.controller_service.call(
            req, 0, lambda: assign_replicas_to_dirs.local(self.api_services, req),
            assign_replicas_to_dirs.error_response)
        if resp.error_code != ErrorCode.NONE:
            log.info("AssignReplicasToDirs: %s (sent again later)", ErrorCode(resp.error_code).name)
