"""The share partitions this broker leads, and ShareFetch / ShareAcknowledge over them (Kafka's
``SharePartitionManager``, ``DelayedShareFetch`` and the persister calls of ``SharePartition``,
KIP-932).

For each (share group, topic-partition) a consumer fetches from this leader there is a
:class:`kcompat.share.partition.SharePartition`, loaded on first use from the share coordinator
(ReadShareGroupState through the :class:`SharePersister`). A partition whose share state was never
initialized starts at ``share.auto.offset.reset`` (the group config; Kafka's default ``latest``:
the high watermark; ``earliest``: the log start offset; ``by_duration:<ISO-8601>``: the first
offset with a timestamp at or after now minus the duration), and that start is written at once.

- Fetch: records are read from the log from the share partition's fetch offset below the high
  watermark (the LSO for ``share.isolation.level=read_committed``, whose aborted batches are
  archived, never delivered), and acquired for the member; the response carries the read batches
  and the acquired ranges (the client skips records outside them). With nothing acquired the
  request waits up to its ``max_wait_ms`` for an append, a high-watermark move or records coming
  back (a release, an expired lock).
- Acknowledgements (ACCEPT, RELEASE, REJECT, RENEW, GAP) change the share partition at once; their
  response waits for the share coordinator to have the new state durably (WriteShareGroupState),
  so an acknowledged record is never delivered again after a crash.
- Lock expiry, releases of a closed session and the log start moving past the share-partition
  start are written the same way, in the background.
- Leadership: a share partition is dropped at its next use once this broker no longer leads its
  topic-partition at the epoch it was loaded at (or when the share coordinator fences its
  write); the next leader loads the state from the share coordinator.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from dataclasses import dataclass, field
from typing import Callable

from kcompat.protocol import records as rb
from kcompat.protocol.errors import ErrorCode, KafkaError
from kcompat.share.partition import AcquiredRecords, SharePartition, SharePartitionConfig

log = logging.getLogger("kcompat.share")

READ_COMMITTED = 1
PARTITION_READ_BYTES = 1 << 20   # at most this much of one partition's log is read per acquisition
Key = tuple[str, uuid.UUID, int]   # (group id, topic id, partition)


@dataclass
class FetchedPartition:
    """One partition's ShareFetch answer: error, record bytes and acquired ranges."""

    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    records: bytes = b""
    acquired: list[AcquiredRecords] = field(default_factory=list)


class _Entry:
    """A loaded share partition: the state machine, the leader epoch it was loaded at, and the
    writes of its state to the share coordinator (one at a time, coalesced)."""

    __slots__ = ("key", "sp", "partition", "leader_epoch", "state_epoch", "version", "written", "writer",
                 "waiters")

    def __init__(self, key: Key, sp: SharePartition, partition, state_epoch: int) -> None:
        self.key = key
        self.sp = sp
        self.partition = partition
        self.leader_epoch = partition.leader_epoch
        self.state_epoch = state_epoch
        self.version = 0          # bumped on every change of sp
        self.written = 0          # the last version the share coordinator has
        self.writer: asyncio.Task | None = None
        self.waiters: list[tuple[int, asyncio.Future]] = []


_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$", re.IGNORECASE)


def parse_duration_ms(text: str) -> int | None:
    """An ISO-8601 duration as ``share.auto.offset.reset=by_duration:`` takes it (``PnDTnHnMnS``), in
    ms; None if malformed."""
    m = _DURATION.match(text.strip())
    if m is None or not any(m.groups()):
        return None
    d, h, mi, s = m.groups()
    return int(((int(d or 0) * 24 + int(h or 0)) * 60 + int(mi or 0)) * 60_000 + float(s or 0) * 1000)


class SharePartitionManager:
    """Share partitions of this broker. Dependencies: ``partition_of(topic id, partition)`` -> the
    local :class:`kcompat.isr.partition.Partition` (or None), ``persister`` (the share coordinator
    client), ``group_config(group id)`` -> the group's dynamic configs (name -> value),
    ``defaults``: the broker's ``group.share.*`` values, ``now_ms()``."""

    def __init__(self, *, partition_of: Callable[[uuid.UUID, int], object], persister,
                 group_config: Callable[[str], dict[str, str]], defaults: dict[str, int],
                 now_ms: Callable[[], int]) -> None:
        self._partition_of = partition_of
        self._persister = persister
        self._group_config = group_config
        self._defaults = defaults
        self._now = now_ms
        self._entries: dict[Key, _Entry] = {}
        self._loading: dict[Key, asyncio.Future] = {}
        self._draining: dict[Key, asyncio.Task] = {}   # running writers of dropped share partitions
        self._available = asyncio.Event()     # set when records may have become acquirable
        self._timer: asyncio.Task | None = None
        self._closed = False
        # share partitions of groups without sessions here, dropped once their locks run out
        # unless the callable says the group is back
        self._idle: dict[Key, Callable[[], bool]] = {}

    # ------------------------------------------------------------------ configs

    def _config(self, group_id: str) -> SharePartitionConfig:
        cfg = self._group_config(group_id)

        def get(name: str, broker_name: str) -> int:
            try:
                return int(cfg[name]) if name in cfg else int(self._defaults[broker_name])
            except (TypeError, ValueError):
                return int(self._defaults[broker_name])

        return SharePartitionConfig(
            record_lock_duration_ms=get("share.record.lock.duration.ms", "group.share.record.lock.duration.ms"),
            delivery_count_limit=get("share.delivery.count.limit", "group.share.delivery.count.limit"),
            max_record_locks=get("share.partition.max.record.locks", "group.share.partition.max.record.locks"))

    def record_lock_duration_ms(self, group_id: str) -> int:
        return self._config(group_id).record_lock_duration_ms

    def _isolation(self, group_id: str) -> int:
        return READ_COMMITTED if self._group_config(group_id).get("share.isolation.level") == "read_committed" else 0

    # ------------------------------------------------------------------ loading

    async def _entry(self, key: Key) -> _Entry:
        """The loaded share partition of ``key``; raises KafkaError (NOT_LEADER_OR_FOLLOWER,
        UNKNOWN_TOPIC_OR_PARTITION, or the share coordinator's error) if it cannot be had."""
        group_id, topic_id, index = key
        p = self._partition_of(topic_id, index)
        if p is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This broker has no such partition.")
        if not p.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "This broker is not the leader of the partition.")
        entry = self._entries.get(key)
        if entry is not None:
            if entry.partition is p and entry.leader_epoch == p.leader_epoch:
                entry.sp.config = self._config(group_id)
                return entry
            self._drop(key)
        pending = self._loading.get(key)
        if pending is None:
            pending = asyncio.get_running_loop().create_future()
            self._loading[key] = pending
            try:
                entry = await self._load(key, p)
                self._entries[key] = entry
                pending.set_result(entry)
            except BaseException as e:
                pending.set_exception(e)
                pending.exception()   # retrieved: other waiters re-raise it
                raise
            finally:
                self._loading.pop(key, None)
            self._ensure_timer()
            return entry
        return await asyncio.shield(pending)

    async def _load(self, key: Key, p) -> _Entry:
        group_id, topic_id, index = key
        draining = self._draining.get(key)
        if draining is not None:   # the dropped copy's last writes go first (see _drop)
            await asyncio.wait([draining])
        read = await self._persister.read_state(group_id, topic_id, index, p.leader_epoch)
        code = ErrorCode(read.error)
        # never initialized: the share coordinator refuses to read it (INVALID_REQUEST, Kafka's
        # "Read operation on uninitialized share partition not allowed")
        uninitialized = code in (ErrorCode.INVALID_REQUEST, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if code != ErrorCode.NONE and not uninitialized:
            raise KafkaError(code, f"Reading the share state failed: {code.name}.")
        config = self._config(group_id)
        state_epoch, start_offset, batches = max(read.state_epoch, 0), read.start_offset, read.batches
        if uninitialized or start_offset < 0:
            start_offset, batches = self._reset_offset(group_id, p), []
            if uninitialized:
                code = await self._persister.initialize_state(group_id, topic_id, index, state_epoch, start_offset)
            else:
                code = await self._persister.write_state(group_id, topic_id, index, state_epoch, p.leader_epoch,
                                                         start_offset, [])
            code = ErrorCode(code)
            if code != ErrorCode.NONE:
                raise KafkaError(code, f"Initializing the share state failed: {code.name}.")
        else:
            start_offset = max(start_offset, p.log_start_offset)
        sp = SharePartition(config, start_offset, batches)
        entry = _Entry(key, sp, p, state_epoch)
        log.info("share partition %s %s-%d loaded at %d (%d in flight)", group_id, p.topic, index,
                 sp.start_offset, sp.in_flight_count)
        return entry

    def _reset_offset(self, group_id: str, p) -> int:
        """Where a share partition without state starts (``share.auto.offset.reset``)."""
        reset = (self._group_config(group_id).get("share.auto.offset.reset") or "latest").strip().lower()
        if reset == "earliest":
            return p.log_start_offset
        if reset.startswith("by_duration:"):
            ms = parse_duration_ms(reset.split(":", 1)[1])
            if ms is not None:
                found = p.log.offset_for_timestamp(self._now() - ms)
                return found[0] if found is not None else p.high_watermark   # (offset, timestamp)
        return p.high_watermark

    def _drop(self, key: Key, *, finish_writes: bool = False) -> None:
        """Forget a share partition; its pending acknowledgements fail with
        NOT_LEADER_OR_FOLLOWER, unless ``finish_writes`` (an idle group: the writes in flight
        complete and answer as usual, and the partition is not loaded again before they have:
        loaded from the share coordinator's older state, it would hand out again the records
        they acknowledge)."""
        self._idle.pop(key, None)
        entry = self._entries.pop(key, None)
        if entry is None:
            return
        if finish_writes:
            writer = entry.writer
            if writer is not None and not writer.done():
                self._draining[key] = writer

                def written(w: asyncio.Task) -> None:
                    if self._draining.get(key) is w:
                        del self._draining[key]
                writer.add_done_callback(written)
            return
        for _v, fut in entry.waiters:
            if not fut.done():
                fut.set_result(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        entry.waiters.clear()

    def drop_group(self, group_id: str, still_active: Callable[[], bool]) -> None:
        """Drop ``group_id``'s share partitions that hold no acquired records; the others are
        dropped when their locks have run out, unless ``still_active()`` by then."""
        for key, entry in list(self._entries.items()):
            if key[0] == group_id:
                if entry.sp.next_deadline() is None:
                    self._drop(key, finish_writes=True)
                else:
                    self._idle[key] = still_active
        self._ensure_timer()

    # ------------------------------------------------------------------ writes to the share coordinator

    def _changed(self, entry: _Entry) -> int:
        entry.version += 1
        if entry.writer is None or entry.writer.done():
            entry.writer = asyncio.get_running_loop().create_task(self._write(entry))
        return entry.version

    async def _write(self, entry: _Entry) -> None:
        """Write the state until the share coordinator has the latest version; complete the
        waiters of each version written."""
        group_id, topic_id, index = entry.key
        while entry.written < entry.version:   # a dropped entry finishes its writes too (fenced if stale)
            version = entry.version
            start, batches = entry.sp.persisted_state()
            try:
                code = await self._persister.write_state(group_id, topic_id, index, entry.state_epoch,
                                                         entry.leader_epoch, start, batches,
                                                         entry.sp.delivery_complete_count)
            except Exception as e:   # the persister's own failure: report, keep serving
                log.warning("share state write of %s %s-%d failed: %r", group_id, topic_id, index, e)
                code = ErrorCode.UNKNOWN_SERVER_ERROR
            code = ErrorCode(code)
            if code == ErrorCode.NONE:
                entry.written = version
            else:
                log.warning("share state write of %s %s-%d: %s", group_id, topic_id, index, code.name)
            done = [w for w in entry.waiters if w[0] <= version or code != ErrorCode.NONE]
            entry.waiters = [w for w in entry.waiters if w not in done]
            for _v, fut in done:
                if not fut.done():
                    fut.set_result(code)
            if code != ErrorCode.NONE:
                if code in (ErrorCode.FENCED_STATE_EPOCH, ErrorCode.FENCED_LEADER_EPOCH):
                    # the state was re-initialized (AlterShareGroupOffsets) or a newer leader took
                    # it over: drop this copy; the next fetch loads the state again
                    log.info("share partition %s %s-%d fenced (%s); reloading on next use", group_id, topic_id,
                             index, code.name)
                    self._drop(entry.key)
                return

    def _durable(self, entry: _Entry, version: int) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        if entry.written >= version:
            fut.set_result(ErrorCode.NONE)
        else:
            entry.waiters.append((version, fut))
            if entry.writer is None or entry.writer.done():
                entry.writer = asyncio.get_running_loop().create_task(self._write(entry))
        return fut

    # ------------------------------------------------------------------ acknowledgements

    async def acknowledge(self, group_id: str, member_id: str,
                          acks: dict[tuple[uuid.UUID, int], list[tuple[int, int, list[int]]]]
                          ) -> dict[tuple[uuid.UUID, int], ErrorCode]:
        """Apply each partition's acknowledgement batches for ``member_id`` and wait until the
        share coordinator has them. Per partition: NONE, INVALID_RECORD_STATE (records not
        acquired by this member), INVALID_REQUEST, NOT_LEADER_OR_FOLLOWER, or the write's error."""
        return await self.acknowledged(await self.apply_acknowledgements(group_id, member_id, acks))

    async def apply_acknowledgements(self, group_id: str, member_id: str,
                                     acks: dict[tuple[uuid.UUID, int], list[tuple[int, int, list[int]]]]
                                     ) -> tuple[dict, list]:
        """The first half of :meth:`acknowledge`: the share partitions change now (a released
        record may be fetched at once); returns ``(results, pending writes)`` for
        :meth:`acknowledged`. ShareFetch fetches in between, so the write to the share
        coordinator overlaps the fetch (as Kafka's piggybacked acknowledgements do)."""
        results: dict[tuple[uuid.UUID, int], ErrorCode] = {}
        waits = []
        now = self._now()
        for (topic_id, index), batches in acks.items():
            try:
                entry = await self._entry((group_id, topic_id, index))
            except KafkaError as e:
                results[(topic_id, index)] = e.code
                continue
            code = entry.sp.acknowledge(member_id, batches, now)
            results[(topic_id, index)] = code
            if code == ErrorCode.NONE:
                waits.append(((topic_id, index), self._durable(entry, self._changed(entry))))
                self._available.set()
        self._ensure_timer()
        return results, waits

    @staticmethod
    async def acknowledged(applied: tuple[dict, list]) -> dict[tuple[uuid.UUID, int], ErrorCode]:
        """The second half of :meth:`acknowledge`: wait for the writes; a failed one is the
        partition's error."""
        results, waits = applied
        for tp, fut in waits:
            code = await fut
            if code != ErrorCode.NONE:
                results[tp] = code
        return results

    def release_member(self, group_id: str, member_id: str, partitions) -> None:
        """A closed share session: the member's acquired records of ``partitions`` go back."""
        now = self._now()
        for topic_id, index in partitions:
            entry = self._entries.get((group_id, topic_id, index))
            if entry is not None and entry.sp.release_member(member_id, now):
                self._changed(entry)
                self._available.set()

    # ------------------------------------------------------------------ fetch

    def _acquire(self, entry: _Entry, member_id: str, max_records: int, max_bytes: int, batch_size: int,
                 record_limit: bool, isolation: int) -> FetchedPartition:
        sp, p = entry.sp, entry.partition
        if p.log_start_offset > sp.start_offset and sp.move_start(p.log_start_offset):
            self._changed(entry)
        offset = sp.fetch_offset()
        if offset is None:
            return FetchedPartition()
        try:
            data = p.read(offset, min(max_bytes, PARTITION_READ_BYTES), isolation_level=isolation,
                          min_one_batch=True)
        except KafkaError as e:
            if e.code != ErrorCode.OFFSET_OUT_OF_RANGE:
                return FetchedPartition(e.code, e.message)
            if sp.move_start(p.log_start_offset):
                self._changed(entry)
            return FetchedPartition()
        if not data:
            return FetchedPartition()
        aborted: dict[int, int] = {}
        if isolation == READ_COMMITTED:
            aborted = dict(p.aborted_transactions(offset, p.last_stable_offset))
        batches = []
        spans = []
        for pos, h in rb.iter_batches(data):
            skip = h.is_control or (h.is_transactional and h.producer_id in aborted
                                    and aborted[h.producer_id] <= h.last_offset)
            batches.append((h.base_offset, h.last_offset, skip))
            spans.append((pos, pos + h.size, h.base_offset, h.last_offset))
        acquired = sp.acquire(member_id, batches, max_records, self._now(), record_limit_mode=record_limit,
                              batch_size=batch_size or None, fetch_offset=offset)
        # an acquisition is not written: Kafka never persists ACQUIRED (a record acquired when
        # the leader fails is delivered again with the same delivery count)
        if not acquired:
            return FetchedPartition()
        # only the batches holding acquired records go back (the read may run past max_records)
        first, last = acquired[0].first_offset, acquired[-1].last_offset
        used = [(lo, hi) for lo, hi, base, end in spans if end >= first and base <= last]
        return FetchedPartition(records=memoryview(data)[used[0][0]:used[-1][1]], acquired=acquired)

    async def fetch(self, group_id: str, member_id: str, partitions: list[tuple[uuid.UUID, int]], *,
                    max_records: int, batch_size: int, record_limit: bool, max_bytes: int, max_wait_ms: int,
                    is_shutting_down: Callable[[], bool] = lambda: False
                    ) -> dict[tuple[uuid.UUID, int], FetchedPartition]:
        """Acquire records of ``partitions`` for ``member_id``: up to ``max_records`` in all
        (whole batches in batch-optimized mode), ``max_bytes`` in all (at least one batch); waits
        up to ``max_wait_ms`` when nothing could be acquired and no partition failed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(max_wait_ms, 0) / 1000.0
        isolation = self._isolation(group_id)
        out: dict[tuple[uuid.UUID, int], FetchedPartition] = {}
        entries: dict[tuple[uuid.UUID, int], _Entry] = {}
        for tp in partitions:
            try:
                entries[tp] = await self._entry((group_id, tp[0], tp[1]))
            except KafkaError as e:
                out[tp] = FetchedPartition(e.code, e.message)
        while True:
            self._available.clear()
            remaining_records = max(max_records, 1)
            remaining_bytes = max(max_bytes, 1)
            got = False
            for tp, entry in entries.items():
                if remaining_records <= 0 or remaining_bytes <= 0:
                    out.setdefault(tp, FetchedPartition())
                    continue
                if self._entries.get(entry.key) is not entry:
                    out[tp] = FetchedPartition(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                    continue
                r = self._acquire(entry, member_id, remaining_records, remaining_bytes, 0, record_limit, isolation)
                out[tp] = r
                if r.acquired:
                    got = True
                    remaining_records -= sum(a.last_offset - a.first_offset + 1 for a in r.acquired)
                    remaining_bytes -= len(r.records)
            self._ensure_timer()
            if got or any(r.error != ErrorCode.NONE for r in out.values()) or not entries or is_shutting_down():
                return out
            remaining = deadline - loop.time()
            if remaining <= 0:
                return out
            wake = self._available.set
            for entry in entries.values():
                entry.partition.add_waiter(wake)
            try:
                await asyncio.wait_for(self._available.wait(), remaining)
            except asyncio.TimeoutError:
                return out
            finally:
                for entry in entries.values():
                    entry.partition.remove_waiter(wake)

    # ------------------------------------------------------------------ lock expiry

    def _ensure_timer(self) -> None:
        if self._closed or (self._timer is not None and not self._timer.done()):
            return
        if any(e.sp.next_deadline() is not None for e in self._entries.values()):
            self._timer = asyncio.get_running_loop().create_task(self._expire_loop())

    async def _expire_loop(self) -> None:
        """Release records whose acquisition lock ran out, at the earliest lock deadline."""
        while not self._closed:
            deadlines = [d for d in (e.sp.next_deadline() for e in self._entries.values()) if d is not None]
            if not deadlines:
                return
            delay = max(0, min(deadlines) - self._now())
            await asyncio.sleep(min(delay, 1000) / 1000.0)
            now = self._now()
            for entry in list(self._entries.values()):
                deadline = entry.sp.next_deadline()
                if deadline is not None and deadline <= now and entry.sp.expire_locks(now):
                    self._changed(entry)
                    self._available.set()
                active = self._idle.get(entry.key)
                if active is not None and entry.sp.next_deadline() is None:
                    del self._idle[entry.key]
                    if not active():
                        self._drop(entry.key, finish_writes=True)

    def close(self) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        for key in list(self._entries):
            self._drop(key)
