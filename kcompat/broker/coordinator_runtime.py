"""Runs an I/O-free coordinator inside the broker (Kafka's ``CoordinatorRuntime`` in miniature).

The group and transaction coordinators share the mechanics; a subclass says which internal topic
and coordinator it drives:

- the internal topic (``__consumer_offsets``, ``__transaction_state``) is created on first use,
  compacted, with ``<topic>.replication.factor`` replicas. While fewer brokers are registered, a
  cluster of several controllers refuses to create it, as Kafka does (the coordinator is not
  available until enough brokers are up: an internal topic created with fewer replicas would keep
  them for good); with a single controller (the zero-config development node, or a test cluster)
  it is created with the brokers there are, so that a single node works out of the box;
- each partition of it that this broker leads is loaded by replaying its log up to the log end
  offset, a chunk at a time so the event loop keeps serving (requests meanwhile get
  COORDINATOR_LOAD_IN_PROGRESS); when this broker stops leading it the coordinator state of that
  partition is dropped (:meth:`CoordinatorRuntime.on_partition_unhosted`);
- results are applied in order: records appended to the leader's log (one batch per partition),
  then, once the partition's high watermark has passed them (Kafka's coordinators write with
  acks=-1), replayed into the coordinator, then the replies sent — a reply never precedes the
  commit of its records. On a partition whose ISR is this broker alone the HW is the log end
  offset right after the append, so all of this happens synchronously, as before replication;
- per partition, writes complete in log order; a write whose replication fails (timeout, ISR
  below ``min.insync.replicas``, leadership lost) is not replayed and the subclass turns its
  replies into errors (:meth:`CoordinatorRuntime.on_write_failure`);
- the coordinator's timers fire at its ``next_deadline``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import deque
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from kcompat.kraft.controller import NewTopic
from kcompat.protocol import records as rb
from kcompat.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:   # types only: the objects are built by kcompat.broker.broker
    from kcompat.broker.api_services import MetadataCache
    from kcompat.config.broker import BrokerConfig
    from kcompat.isr.replica_manager import ReplicaManager
    from kcompat.kraft.controller import TopicResult
    from kcompat.kraft.image import MetadataImage
    from kcompat.log import LogManager
    from kcompat.txn.producer_id_manager import ProducerIdManager

log = logging.getLogger("kcompat.coordinator")


@dataclass(eq=False)
class CoordinatorServices:
    """What the coordinator runtimes (groups, transactions, share state) use of their broker,
    instead of the broker: as Kafka builds ``GroupCoordinatorService``, ``TransactionCoordinator``
    and ``ShareCoordinatorService`` from a partition writer (the ReplicaManager), the metadata
    image, a clock and the config.

    - ``now_ms()``: the broker clock (ms);
    - ``live_broker_ids()``: ids of the registered, unfenced brokers;
    - ``voter_count()``: voters of the KRaft quorum (an internal topic waits for enough brokers
      only in a cluster of several controllers);
    - ``create_topics(new_topics)``: CreateTopics through the active controller, one
      ``TopicResult`` per topic;
    - ``log_manager``: checkpoints after the share coordinator prunes its log;
    - ``producer_id_manager``: producer ids for InitProducerId.
    """

    node_id: int
    config: BrokerConfig
    image: MetadataImage
    metadata_cache: MetadataCache
    now_ms: Callable[[], int]
    replica_manager: ReplicaManager
    log_manager: LogManager
    producer_id_manager: ProducerIdManager
    live_broker_ids: Callable[[], list[int]]
    voter_count: Callable[[], int]
    create_topics: Callable[[list[NewTopic]], Awaitable[list[TopicResult]]]


LOAD_CHUNK_BYTES = 1 << 20


class _Write:
    """Something waiting for the HW of one internal partition to reach ``required``: records to
    replay then, and ``done(code, records)`` to call (``code`` NONE once committed)."""

    __slots__ = ("required", "deadline", "records", "done")

    def __init__(self, required: int, deadline: int, records, done) -> None:
        self.required = required
        self.deadline = deadline
        self.records = records
        self.done = done


class _Queue:
    """The writes of one partition not committed yet, in log order, and the task waiting for them."""

    __slots__ = ("writes", "task")

    def __init__(self) -> None:
        self.writes: deque[_Write] = deque()
        self.task: asyncio.Task | None = None


class _Ticket:
    """One Result whose records (or replies) wait on ``waiting`` partitions."""

    __slots__ = ("result", "waiting", "error", "failed")

    def __init__(self, result, waiting: int) -> None:
        self.result = result
        self.waiting = waiting
        self.error: ErrorCode | None = None
        self.failed: list = []


def _current_task() -> asyncio.Task | None:
    try:
        return asyncio.current_task()
    except RuntimeError:
        return None


class CoordinatorRuntime:
    """Base of the broker-side runtimes: a subclass sets ``TOPIC``, passes its coordinator to
    ``__init__`` and implements :meth:`topic_spec` and :meth:`write_timeout_ms`; the broker calls
    :meth:`start` once its partitions are hosted."""

    TOPIC = ""
    # replies without records wait for the pending writes of their partition (the coordinator
    # applies some state before its record is committed: group metadata)
    REPLIES_WAIT_FOR_WRITES = False

    def __init__(self, services: CoordinatorServices, coordinator) -> None:
        self.services = services
        self.coordinator = coordinator
        self._wakeup = asyncio.Event()
        self._timer_task: asyncio.Task | None = None
        self._loads: dict[int, asyncio.Task] = {}
        self._short_of_brokers: tuple[int, int] | None = None  # (wanted, registered) last logged
        self._creating: asyncio.Future | None = None   # the internal topic being created
        self._queues: dict[int, _Queue] = {}

    # -- subclass hooks --------------------------------------------------------------------------

    def topic_spec(self) -> tuple[int, str, dict[str, str]]:
        """(partitions, replication factor config key, topic configs) of the internal topic."""
        raise NotImplementedError

    def write_timeout_ms(self, records) -> int:
        """How long a write of ``records`` (empty: a reply waiting behind writes) may wait for
        replication."""
        raise NotImplementedError

    def load_entry(self, rec: rb.Record, header: rb.BatchHeader):
        """What :meth:`coordinator.load` gets for one stored record (None to skip it)."""
        return (rec.offset, rec.key, rec.value) if rec.key is not None else None

    def load_control(self, partition: int, header: rb.BatchHeader, rec: rb.Record, entries: list) -> None:
        """A control record met while loading (transaction markers); ignored by default."""

    def load_coordinator(self, partition: int, entries: list):
        """Hand the partition's stored records to the coordinator."""
        return self.coordinator.load(partition, entries, self.services.now_ms())

    def after_load(self, partition: int, result) -> None:
        """Handle what ``coordinator.load`` returned (a Result for coordinators that return one);
        its replies and markers wait until the loaded records are committed."""
        if result is not None:
            self._apply(result, {partition}, always_wait=True)

    def append_records(self, p, records: list, now: int) -> None:
        """Append a result's records to ``p``, the leader Partition (one batch). Raises KafkaError."""
        p.append_internal(rb.build_batch([(now, r.key, r.value, ()) for r in records]), now)

    def after_append(self, result) -> None:
        """Extra work after the records are committed and before replies (transaction markers)."""

    def on_write_failure(self, result, failed: list, error: ErrorCode):
        """``failed`` (records of ``result``) were not appended or not replicated, with ``error``
        (NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS(_AFTER_APPEND), ...): return
        the Result to apply instead of ``result`` (its replies with coordinator errors), or None to
        fail every waiting request."""
        return None

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        self._timer_task = asyncio.ensure_future(self._timers())
        for p in self.services.replica_manager.topic_partitions(self.TOPIC):
            if p.is_leader:
                self.on_partition_hosted(p.partition_id)

    def stop(self) -> None:
        for task in self._loads.values():
            task.cancel()
        self._loads.clear()
        for partition in list(self._queues):
            self._fail_queue(partition, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if self._timer_task is not None:
            self._timer_task.cancel()
        self._deliver(self.coordinator.shutdown())

    def wake(self) -> None:
        self._wakeup.set()

    # -- the internal topic ----------------------------------------------------------------------

    async def ensure_topic(self) -> bool:
        """Create the internal topic (through the active controller) if it does not exist yet;
        True if it exists now. False also while fewer brokers than ``<topic>.replication.factor``
        are registered in a cluster of several controllers (Kafka's controller refuses with
        INVALID_REPLICATION_FACTOR; FindCoordinator then answers COORDINATOR_NOT_AVAILABLE)."""
        services = self.services
        if self.TOPIC in services.image.topics:
            return True
        partitions, rf_key, configs = self.topic_spec()
        wanted = services.config.get(rf_key)
        live = len(services.live_broker_ids())
        rf = min(wanted, live)
        if rf < wanted:
            if services.voter_count() > 1:
                if self._short_of_brokers != (wanted, live):  # once per change, clients retry often
                    self._short_of_brokers = (wanted, live)
                    log.warning("not creating %s yet: %s=%d but only %d broker(s) are registered; its "
                                "coordinators are not available until there are enough", self.TOPIC, rf_key,
                                wanted, live)
                return False
            log.warning("creating %s with replication factor %d: %s=%d but only %d broker(s) are registered "
                        "(a single-controller cluster)", self.TOPIC, rf, rf_key, wanted, live)
        topic = NewTopic(self.TOPIC, num_partitions=partitions, replication_factor=rf, configs=configs)
        result = (await services.create_topics([topic]))[0]
        if result.error not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            log.error("could not create %s: %s %s", self.TOPIC, result.error.name, result.message)
            return False
        if result.error == ErrorCode.NONE:
            log.info("created %s with %d partitions", self.TOPIC, partitions)
        return self.TOPIC in services.image.topics

    def coordinator_node(self, key: str) -> int | None:
        """The broker leading the internal partition of ``key``; None (the caller answers
        COORDINATOR_NOT_AVAILABLE, which clients retry) while the topic does not exist or the
        partition has no leader. A lookup of a missing topic starts creating it in the background,
        as Kafka's FindCoordinator does (``AutoTopicCreationManager``) rather than holding the
        request while 50 partitions are created."""
        topic = self.services.image.topics.get(self.TOPIC)
        if topic is None:
            if self._creating is None or self._creating.done():
                self._creating = asyncio.ensure_future(self._create_topic())
            return None
        leader = topic.partitions[self.coordinator.partition_for(key)].leader
        return leader if leader is not None and leader >= 0 else None

    async def _create_topic(self) -> None:
        try:
            await self.ensure_topic()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("creating %s failed", self.TOPIC)

    def leader_partition(self, partition: int):
        """The Partition ``<topic>-<partition>`` if this broker leads it, else None."""
        p = self.services.replica_manager.get(self.TOPIC, partition)
        return p if p is not None and p.is_leader else None

    # -- hosting ---------------------------------------------------------------------------------

    def on_partition_hosted(self, partition: int) -> None:
        """This broker now leads ``<topic>-<partition>``: load the coordinator state stored there
        (Kafka's ``onElection``). Nothing if it is loaded or loading already."""
        if partition in self._loads or self.coordinator.owns(partition) or self.leader_partition(partition) is None:
            return
        self.coordinator.begin_loading(partition)
        self._loads[partition] = asyncio.ensure_future(self._load(partition))

    def on_partition_unhosted(self, partition: int) -> None:
        """This broker no longer leads ``<topic>-<partition>`` (Kafka's ``onResignation``): a load
        in progress stops; writes waiting for replication there fail (their requests get
        NOT_COORDINATOR); the coordinator drops the partition's state, answers what waits in it
        with NOT_COORDINATOR and stops its timers. Requests for it then get NOT_COORDINATOR
        until :meth:`on_partition_hosted` loads it again from the log."""
        task = self._loads.pop(partition, None)
        if task is not None:
            task.cancel()
        self._fail_queue(partition, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        self.before_unload(partition)
        if self.coordinator.owns(partition) or task is not None:
            log.info("unloading %s-%d: this broker no longer leads it", self.TOPIC, partition)
        self._apply(self.coordinator.unload(partition), set())  # NOT_COORDINATOR answers go out now
        self._wakeup.set()

    def before_unload(self, partition: int) -> None:
        """Subclass hook: stop work of the partition about to be unloaded (marker sends)."""

    async def _load(self, partition: int) -> None:
        me = _current_task()
        try:
            p = self.leader_partition(partition)
            if p is None:
                log.info("not loading %s-%d: this broker does not lead it", self.TOPIC, partition)
                self._apply(self.coordinator.unload(partition), set())
                return
            entries: list = []
            offset = p.log_start_offset
            # up to the log end offset (the leader's log is the one that will be committed, its HW
            # may lag right after the election: replies wait for the HW below), including what is
            # appended meanwhile (transaction markers)
            while offset < p.log_end_offset:
                data = p.log.read(offset, LOAD_CHUNK_BYTES, max_offset=p.log_end_offset, min_one_batch=True)
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
            end = p.log_end_offset
            result = self.load_coordinator(partition, entries)
            log.info("loaded %s-%d: %d records", self.TOPIC, partition, len(entries))
            if p.high_watermark < end:
                self._enqueue(partition, _Write(end, self.services.now_ms() + self.write_timeout_ms(()), (), None))
            self.after_load(partition, result)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading %s-%d failed", self.TOPIC, partition)
        finally:
            if self._loads.get(partition) is me:
                del self._loads[partition]
            self._wakeup.set()

    # -- results ---------------------------------------------------------------------------------

    def apply(self, result) -> None:
        """Append the result's records, replay them once committed, do the subclass's extra work,
        then reply."""
        self._apply(result, None)

    def _apply(self, result, reply_partitions: set[int] | None, *, always_wait: bool = False) -> None:
        if not result.records:
            if not result.replies and not getattr(result, "markers", None):
                return
            waits = self._reply_waits(reply_partitions, always_wait)
            if not waits:
                self._complete(result)
                return
            ticket = _Ticket(result, len(waits))
            deadline = self.services.now_ms() + self.write_timeout_ms(())
            for q in waits:
                q.writes.append(_Write(q.writes[-1].required, deadline, (),
                                       functools.partial(self._ticket_done, ticket)))
            return
        by_partition: dict[int, list] = {}
        for r in result.records:
            by_partition.setdefault(r.partition, []).append(r)
        now = self.services.now_ms()
        ticket = _Ticket(result, len(by_partition))
        deadline = None
        for partition, records in by_partition.items():
            try:
                p = self.leader_partition(partition)
                if p is None:
                    raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                     f"this broker does not lead {self.TOPIC}-{partition}")
                self.append_records(p, records, now)
                required = p.log_end_offset
            except Exception as e:
                if isinstance(e, KafkaError):
                    log.info("appending to %s-%d failed: %s", self.TOPIC, partition, e)
                    code = e.code
                else:
                    log.exception("appending to %s-%d failed", self.TOPIC, partition)
                    code = ErrorCode.UNKNOWN_SERVER_ERROR
                self._ticket_done(ticket, code, records)
                continue
            if not self.pending_writes(partition) and p.high_watermark >= required:
                for r in records:  # committed already: the single-replica fast path
                    self._replay(r)
                self._ticket_done(ticket, ErrorCode.NONE, records)
            else:
                if deadline is None:
                    deadline = now + self.write_timeout_ms(result.records)
                self._enqueue(partition, _Write(required, deadline, records,
                                                functools.partial(self._ticket_done, ticket)))

    def _reply_waits(self, partitions: set[int] | None, always: bool) -> list[_Queue]:
        if not self._queues or not (always or self.REPLIES_WAIT_FOR_WRITES):
            return []
        if partitions is None:
            return [q for q in self._queues.values() if q.writes]
        return [q for q in (self._queues.get(p) for p in partitions) if q is not None and q.writes]

    def _replay(self, record) -> None:
        try:
            self.coordinator.replay(record)
        except Exception:
            log.exception("replaying a %s record failed", self.TOPIC)

    def _ticket_done(self, ticket: _Ticket, code: ErrorCode, records) -> None:
        if code != ErrorCode.NONE:
            if ticket.error is None:
                ticket.error = code
            ticket.failed.extend(records)
        ticket.waiting -= 1
        if ticket.waiting:
            return
        if ticket.error is None:
            self._complete(ticket.result)
            return
        try:
            replacement = self.on_write_failure(ticket.result, ticket.failed, ticket.error)
        except Exception:
            log.exception("%s: handling a failed write failed", self.TOPIC)
            replacement = None
        if replacement is not None:
            self._apply(replacement, set())
        else:
            for fut, _response in ticket.result.replies:
                if not fut.done():
                    fut.set_exception(KafkaError(ticket.error))

    def _complete(self, result) -> None:
        self.after_append(result)
        self._deliver(result)

    @staticmethod
    def _deliver(result) -> None:
        for fut, response in result.replies:
            if not fut.done():
                fut.set_result(response)

    def run(self, op: Callable[[asyncio.Future, int], object], reply_partitions: set[int] | None = None
            ) -> asyncio.Future:
        """One request on the coordinator: ``op(reply_to, now_ms)`` calls it and returns its
        Result, which is applied (records appended, replies sent once committed; a reply also waits
        for the pending writes of ``reply_partitions``, None: of every partition, when the
        subclass sets REPLIES_WAIT_FOR_WRITES). The returned future resolves to the response."""
        fut = asyncio.get_running_loop().create_future()
        self._apply(op(fut, self.services.now_ms()), reply_partitions)
        self._wakeup.set()
        return fut

    # -- waiting for replication -----------------------------------------------------------------

    def _enqueue(self, partition: int, w: _Write) -> None:
        q = self._queues.get(partition)
        if q is None:
            q = self._queues[partition] = _Queue()
        q.writes.append(w)
        if q.task is None:
            q.task = asyncio.ensure_future(self._drive(partition, q))

    def when_committed(self, partition: int, required: int, timeout_ms: int, done) -> None:
        """Call ``done(code, ())`` once the HW of ``partition`` reached ``required``, in order with
        the partition's pending writes: at once if nothing is pending and it has; else with NONE,
        or REQUEST_TIMED_OUT after ``timeout_ms``, NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        NOT_LEADER_OR_FOLLOWER."""
        if not self.pending_writes(partition):
            p = self.leader_partition(partition)
            if p is not None and p.high_watermark >= required:
                done(ErrorCode.NONE, ())
                return
        self._enqueue(partition, _Write(required, self.services.now_ms() + timeout_ms, (), done))

    def pending_writes(self, partition: int) -> int:
        """Writes (and replies) of ``partition`` waiting for replication (tests, monitoring)."""
        q = self._queues.get(partition)
        return len(q.writes) if q is not None else 0

    async def _drive(self, partition: int, q: _Queue) -> None:
        """Complete the partition's writes in log order as its HW passes them (Kafka's
        DelayedProduce / the runtime's deferred event queue)."""
        try:
            while q.writes and self._queues.get(partition) is q:
                head = q.writes[0]
                p = self.leader_partition(partition)
                if p is None:
                    code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                elif p.high_watermark >= head.required:
                    code = ErrorCode.NONE
                else:
                    code = await p.wait_for_replication(head.required, max(0, head.deadline - self.services.now_ms()))
                if self._queues.get(partition) is not q:
                    return  # unhosted meanwhile: its writes were failed there
                if code == ErrorCode.NONE:
                    hw = max(p.high_watermark, head.required)
                    while q.writes and q.writes[0].required <= hw:
                        self._resolve(q.writes.popleft(), ErrorCode.NONE)
                elif code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                    self._fail_queue(partition, code)
                    return
                elif q.writes and q.writes[0] is head:
                    log.warning("%s-%d: a coordinator write up to offset %d failed: %s", self.TOPIC, partition,
                                head.required, code.name)
                    self._resolve(q.writes.popleft(), code)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s-%d: waiting for replication failed", self.TOPIC, partition)
            self._fail_queue(partition, ErrorCode.UNKNOWN_SERVER_ERROR)
        finally:
            if q.task is _current_task():
                q.task = None
            if not q.writes and self._queues.get(partition) is q:
                del self._queues[partition]

    def _resolve(self, w: _Write, code: ErrorCode) -> None:
        if code == ErrorCode.NONE:
            for r in w.records:
                self._replay(r)
        if w.done is not None:
            try:
                w.done(code, w.records)
            except Exception:
                log.exception("%s: completing a write failed", self.TOPIC)

    def _fail_queue(self, partition: int, code: ErrorCode) -> None:
        """Every write of ``partition`` still waiting fails with ``code``, in order."""
        q = self._queues.pop(partition, None)
        if q is None:
            return
        if q.task is not None and q.task is not _current_task():
            q.task.cancel()
        q.task = None
        if q.writes:
            log.info("%s-%d: %d coordinator write(s) waiting for replication fail: %s", self.TOPIC, partition,
                     len(q.writes), code.name)
        while q.writes:
            self._resolve(q.writes.popleft(), code)

    # -- timers ----------------------------------------------------------------------------------

    async def _timers(self) -> None:
        while True:
            deadline = self.coordinator.next_deadline()
            timeout = None if deadline is None else max(0.0, (deadline - self.services.now_ms()) / 1000.0)
            try:
                await asyncio.wait_for(self._wakeup.wait(), timeout)
            except asyncio.TimeoutError:
                pass
            self._wakeup.clear()
            try:
                self.apply(self.coordinator.poll(self.services.now_ms()))
            except Exception:
                log.exception("%s coordinator timers failed", self.TOPIC)
                await asyncio.sleep(0.1)
