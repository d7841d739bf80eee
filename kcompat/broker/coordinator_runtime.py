"""Runs an I/O-free coordinator inside the broker (Kafka's ``CoordinatorRuntime`` in miniature).

The group and transaction coordinators share the mechanics; a subclass says which internal topic
and coordinator it drives:

- the internal topic (``__consumer_offsets``, ``__transaction_state``) is created on first use,
  compacted, with replication factor ``min(<topic>.replication.factor, live brokers)`` so that a
  single-node development broker works out of the box;
- each partition of it that this broker leads is loaded by replaying its log, a chunk at a time
  so the event loop keeps serving (requests meanwhile get COORDINATOR_LOAD_IN_PROGRESS);
- results are applied in order: records appended (one batch per partition), replayed into the
  coordinator, then the replies sent — a reply never precedes its records;
- the coordinator's timers fire at its ``next_deadline``.
"""

from __future__ import annotations

import asyncio
import logging

from kcompat.kraft.controller import NewTopic
from kcompat.protocol import records as rb
from kcompat.protocol.errors import ErrorCode

log = logging.getLogger("kcompat.coordinator")

LOAD_CHUNK_BYTES = 1 << 20


class CoordinatorRuntime:
    """Base of the broker-side runtimes: a subclass sets ``TOPIC``, passes its coordinator to
    ``__init__`` and implements :meth:`topic_spec`; the broker calls :meth:`start` once its
    partitions are hosted."""

    TOPIC = ""

    def __init__(self, broker, coordinator) -> None:
        self.broker = broker
        self.coordinator = coordinator
        self._wakeup = asyncio.Event()
        self._timer_task: asyncio.Task | None = None
        self._loads: dict[int, asyncio.Task] = {}

    # -- subclass hooks --------------------------------------------------------------------------

    def topic_spec(self) -> tuple[int, str, dict[str, str]]:
        """(partitions, replication factor config key, topic configs) of the internal topic."""
        raise NotImplementedError

    def load_entry(self, rec: rb.Record, header: rb.BatchHeader):
        """What :meth:`coordinator.load` gets for one stored record (None to skip it)."""
        return (rec.offset, rec.key, rec.value) if rec.key is not None else None

    def load_control(self, partition: int, header: rb.BatchHeader, rec: rb.Record, entries: list) -> None:
        """A control record met while loading (transaction markers); ignored by default."""

    def load_coordinator(self, partition: int, entries: list):
        """Hand the partition's stored records to the coordinator."""
        return self.coordinator.load(partition, entries, self.broker.now_ms())

    def after_load(self, partition: int, result) -> None:
        """Handle what ``coordinator.load`` returned (a Result for coordinators that return one)."""
        if result is not None:
            self.apply(result)

    def append_records(self, partition: int, records: list, now: int) -> None:
        """Append a result's records for one partition (one batch)."""
        target = self.broker.replica_manager.get(self.TOPIC, partition)
        target.append_internal(rb.build_batch([(now, r.key, r.value, ()) for r in records]), now)

    def after_append(self, result) -> None:
        """Extra work after records and before replies (transaction markers)."""

    def on_append_failure(self, result, error: Exception) -> None:
        """The result's records were not (all) written: answer every waiting request with an
        error rather than leave it (and every later response on its connection) hanging."""
        for fut, _response in result.replies:
            if not fut.done():
                fut.set_exception(error)

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        self._timer_task = asyncio.ensure_future(self._timers())
        for p in self.broker.replica_manager.topic_partitions(self.TOPIC):
            self.on_partition_hosted(p.partition_id)

    def stop(self) -> None:
        for task in self._loads.values():
            task.cancel()
        if self._timer_task is not None:
            self._timer_task.cancel()
        self._deliver(self.coordinator.shutdown())

    def wake(self) -> None:
        self._wakeup.set()

    # -- the internal topic ----------------------------------------------------------------------

    async def ensure_topic(self) -> bool:
        """Create the internal topic (through the active controller) if it does not exist yet;
        True if it exists now."""
        broker = self.broker
        if self.TOPIC in broker.image.topics:
            return True
        partitions, rf_key, configs = self.topic_spec()
        wanted = broker.config.get(rf_key)
        live = len(broker.live_broker_ids())
        rf = min(wanted, live)
        if rf < wanted:
            log.warning("creating %s with replication factor %d: %s=%d but only %d broker(s) are registered",
                        self.TOPIC, rf, rf_key, wanted, live)
        topic = NewTopic(self.TOPIC, num_partitions=partitions, replication_factor=rf, configs=configs)
        result = (await broker.controller_service.create_topics([topic]))[0]
        if result.error not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            log.error("could not create %s: %s %s", self.TOPIC, result.error.name, result.message)
            return False
        if result.error == ErrorCode.NONE:
            log.info("created %s with %d partitions", self.TOPIC, partitions)
        return self.TOPIC in broker.image.topics

    async def coordinator_node(self, key: str) -> int | None:
        """The broker leading the internal partition of ``key`` (creating the topic if needed)."""
        if self.TOPIC not in self.broker.image.topics and not await self.ensure_topic():
            return None
        partition = self.coordinator.partition_for(key)
        return self.broker.image.topics[self.TOPIC].partitions[partition].leader

    def on_partition_hosted(self, partition: int) -> None:
        """This broker now leads ``<topic>-<partition>``: load the coordinator state stored there."""
        if partition in self._loads or self.coordinator.owns(partition):
            return
        self.coordinator.begin_loading(partition)
        self._loads[partition] = asyncio.ensure_future(self._load(partition))

    async def _load(self, partition: int) -> None:
        p = self.broker.replica_manager.get(self.TOPIC, partition)
        entries: list = []
        offset = p.log_start_offset
        try:
            while offset < p.high_watermark:
                data = p.read(offset, LOAD_CHUNK_BYTES)
                if not data:
                    break
                for pos, h in rb.iter_batches(data):
                    for rec in rb.iter_records(memoryview(data)[pos:pos + h.size]):
                        if h.is_control:
                            self.load_control(partition, h, rec, entries)
                            continue
                        entry = self.load_entry(rec, h)
                        if entry is not None:
                            entries.append(entry)
                    offset = h.next_offset
                await asyncio.sleep(0)  # let requests in between chunks
            result = self.load_coordinator(partition, entries)
            log.info("loaded %s-%d: %d records", self.TOPIC, partition, len(entries))
            self.after_load(partition, result)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading %s-%d failed", self.TOPIC, partition)
        finally:
            self._loads.pop(partition, None)
            self._wakeup.set()

    # -- results ---------------------------------------------------------------------------------

    def apply(self, result) -> None:
        """Append the result's records, replay them, do the subclass's extra work, then reply."""
        if result.records:
            by_partition: dict[int, list] = {}
            for r in result.records:
                by_partition.setdefault(r.partition, []).append(r)
            now = self.broker.now_ms()
            try:
                for partition, records in by_partition.items():
                    self.append_records(partition, records, now)
                    for r in records:
                        self.coordinator.replay(r)
            except Exception as e:
                log.exception("appending to %s failed", self.TOPIC)
                self.on_append_failure(result, e)
                return
        self.after_append(result)
        self._deliver(result)

    @staticmethod
    def _deliver(result) -> None:
        for fut, response in result.replies:
            if not fut.done():
                fut.set_result(response)

    def submit(self, method: str, ctx, req, *extra) -> asyncio.Future:
        """Run coordinator ``method(reply_to, req, version, *extra, now_ms)``; the returned future
        resolves to the response."""
        fut = asyncio.get_running_loop().create_future()
        result = getattr(self.coordinator, method)(fut, req, ctx.api_version, *extra, self.broker.now_ms())
        self.apply(result)
        self._wakeup.set()
        return fut

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
                log.exception("%s coordinator timers failed", self.TOPIC)
                await asyncio.sleep(0.1)
