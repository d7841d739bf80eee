"""Runs the group coordinator inside the broker: its log, its timers, its replies.

The coordinator (:mod:`kcompat.group`) is I/O free: every call returns records for
``__consumer_offsets`` and replies. This runtime (Kafka's ``CoordinatorRuntime`` in miniature):

- creates ``__consumer_offsets`` on first use (``offsets.topic.num.partitions``, compacted, as
  Kafka's FindCoordinator does), with replication factor ``min(offsets.topic.replication.factor,
  live brokers)`` so that a single-node development broker has working groups;
- loads each ``__consumer_offsets`` partition this broker leads by replaying its log (requests
  meanwhile get COORDINATOR_LOAD_IN_PROGRESS), a chunk at a time so the event loop keeps serving;
- applies results: appends the records (one batch per partition), replays them into the
  coordinator, then completes the reply futures — a reply never precedes its records;
- fires the coordinator's timers (session expiry, rebalance timeouts, offset expiry) at its
  ``next_deadline``.
"""

from __future__ import annotations

import asyncio
import logging

from kcompat.group import GroupConfig, GroupCoordinator, Record, Result
from kcompat.kraft.controller import NewTopic
from kcompat.protocol import records as rb
from kcompat.protocol.errors import ErrorCode

log = logging.getLogger("kcompat.group")

OFFSETS_TOPIC = "__consumer_offsets"
LOAD_CHUNK_BYTES = 1 << 20


def group_config(cfg) -> GroupConfig:
    return GroupConfig(
        min_session_timeout_ms=cfg.get("group.min.session.timeout.ms"),
        max_session_timeout_ms=cfg.get("group.max.session.timeout.ms"),
        initial_rebalance_delay_ms=cfg.get("group.initial.rebalance.delay.ms"),
        max_size=cfg.get("group.max.size"),
        offsets_retention_ms=cfg.get("offsets.retention.minutes") * 60_000,
        offsets_retention_check_interval_ms=cfg.get("offsets.retention.check.interval.ms"),
        offset_metadata_max_bytes=cfg.get("offset.metadata.max.bytes"),
        num_partitions=cfg.get("offsets.topic.num.partitions"))


class GroupRuntime:
    """The broker's group coordinator service. ``broker`` is the :class:`Broker`."""

    def __init__(self, broker) -> None:
        self.broker = broker
        self.config = group_config(broker.config)
        self.coordinator = GroupCoordinator(self.config, partition_exists=self._partition_exists)
        self._wakeup = asyncio.Event()
        self._timer_task: asyncio.Task | None = None
        self._loads: dict[int, asyncio.Task] = {}

    def _partition_exists(self, topic: str, partition: int) -> bool:
        t = self.broker.image.topics.get(topic)
        return t is not None and partition in t.partitions

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        self._timer_task = asyncio.ensure_future(self._timers())
        for p in self.broker.replica_manager.topic_partitions(OFFSETS_TOPIC):
            self.on_partition_hosted(p.partition_id)

    def stop(self) -> None:
        for task in self._loads.values():
            task.cancel()
        if self._timer_task is not None:
            self._timer_task.cancel()
        self._deliver(self.coordinator.shutdown())

    # -- __consumer_offsets ----------------------------------------------------------------------

    def ensure_offsets_topic(self) -> bool:
        """Create ``__consumer_offsets`` if it does not exist yet; True if it exists now."""
        broker = self.broker
        if OFFSETS_TOPIC in broker.image.topics:
            return True
        cfg = broker.config
        live = len(broker.live_broker_ids())
        rf = min(cfg.get("offsets.topic.replication.factor"), live)
        if rf < cfg.get("offsets.topic.replication.factor"):
            log.warning("creating %s with replication factor %d: offsets.topic.replication.factor=%d but "
                        "only %d broker(s) are registered", OFFSETS_TOPIC, rf,
                        cfg.get("offsets.topic.replication.factor"), live)
        topic = NewTopic(OFFSETS_TOPIC, num_partitions=self.config.num_partitions, replication_factor=rf,
                         configs={"cleanup.policy": "compact", "compression.type": "producer",
                                  "segment.bytes": str(cfg.get("offsets.topic.segment.bytes"))})
        result = broker.controller.create_topics([topic], validate_only=False, now_ms=broker.now_ms())[0]
        if result.error not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            log.error("could not create %s: %s %s", OFFSETS_TOPIC, result.error.name, result.message)
            return False
        log.info("created %s with %d partitions", OFFSETS_TOPIC, self.config.num_partitions)
        return True

    def on_partition_hosted(self, partition: int) -> None:
        """This broker now leads ``__consumer_offsets``-``partition``: load its groups."""
        if partition in self._loads or self.coordinator.owns(partition):
            return
        self.coordinator.begin_loading(partition)
        self._loads[partition] = asyncio.ensure_future(self._load(partition))

    async def _load(self, partition: int) -> None:
        p = self.broker.replica_manager.get(OFFSETS_TOPIC, partition)
        entries = []
        offset = p.log_start_offset
        try:
            while offset < p.high_watermark:
                data = p.read(offset, LOAD_CHUNK_BYTES)
                if not data:
                    break
                for pos, h in rb.iter_batches(data):
                    if not h.is_control:
                        for rec in rb.iter_records(memoryview(data)[pos:pos + h.size]):
                            if rec.key is not None:
                                entries.append((rec.offset, rec.key, rec.value))
                    offset = h.next_offset
                await asyncio.sleep(0)  # let requests in between chunks
            self.coordinator.load(partition, entries, self.broker.now_ms())
            log.info("loaded %s-%d: %d records", OFFSETS_TOPIC, partition, len(entries))
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading %s-%d failed", OFFSETS_TOPIC, partition)
        finally:
            self._loads.pop(partition, None)
            self._wakeup.set()

    # -- requests --------------------------------------------------------------------------------

    def submit(self, method: str, ctx, req) -> asyncio.Future:
        """Run coordinator ``method`` for a request; the future resolves to its response."""
        fut = asyncio.get_running_loop().create_future()
        now = self.broker.now_ms()
        fn = getattr(self.coordinator, method)
        if method == "join_group":
            host = ctx.peer.rsplit(":", 1)[0]
            result = fn(fut, req, ctx.api_version, ctx.client_id or "", f"/{host}", now)
        else:
            result = fn(fut, req, ctx.api_version, now)
        self.apply(result)
        self._wakeup.set()
        return fut

    def apply(self, result: Result) -> None:
        """Append the result's records, replay them, then send its replies."""
        if result.records:
            by_partition: dict[int, list[Record]] = {}
            for r in result.records:
                by_partition.setdefault(r.partition, []).append(r)
            now = self.broker.now_ms()
            try:
                for partition, records in by_partition.items():
                    target = self.broker.replica_manager.get(OFFSETS_TOPIC, partition)
                    batch = rb.build_batch([(now, r.key, r.value, ()) for r in records])
                    target.append_internal(batch, now)
                    for r in records:
                        self.coordinator.replay(r)
            except Exception as e:
                # The writes did not happen: answer every waiting request with an error rather than
                # leave it (and every later response on its connection) hanging.
                log.exception("appending to %s failed", OFFSETS_TOPIC)
                for fut, _response in result.replies:
                    if not fut.done():
                        fut.set_exception(e)
                return
        self._deliver(result)

    @staticmethod
    def _deliver(result: Result) -> None:
        for fut, response in result.replies:
            if not fut.done():
                fut.set_result(response)

    def on_partitions_deleted(self, partitions: list[tuple[str, int]]) -> None:
        self.apply(self.coordinator.on_partitions_deleted(partitions, self.broker.now_ms()))

    # -- timers ----------------------------------------------------------------------------------

    async def _timers(self) -> None:
        while True:
            deadline = self.coordinator.next_deadline()
            timeout = None if deadline is None else max(0.0, (deadline - self.broker.now_ms()) / 1000.0)
            try:
                await asyncio.wait_for(self._wakeup.wait(), timeout)
            except asyncio.TimeoutError:
                pass
            self._wakeup.clear()
            try:
                self.apply(self.coordinator.poll(self.broker.now_ms()))
            except Exception:
                log.exception("group coordinator timers failed")
                await asyncio.sleep(0.1)
