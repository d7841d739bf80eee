"""The REST Proxy's consumer instances (``/consumers``, Confluent REST Proxy API v2): each one is a
Kafka consumer living in the broker process that talks to the cluster over the Kafka protocol
(:class:`.kafka_client.ClusterClient`), so it works whatever node leads its partitions or
coordinates its group. The HTTP side is :mod:`.rest_v2_consumers`.

How it consumes, as the Java consumer behind Confluent's proxy would:

- subscribe (topic list or regex): the consumer group protocol of KIP-848. The instance generates
  its member id, joins with ConsumerGroupHeartbeat v1 at epoch 0, then heartbeats every
  ``heartbeat_interval_ms`` the coordinator asks for, in a background task, reporting the
  partitions it owns. An assignment (by topic id) is adopted at once: partitions taken away are
  dropped (their consumed position committed first when auto commit is on) and the next heartbeat
  acknowledges it immediately. UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH drop everything and rejoin
  at epoch 0; another error (a classic group with members, an invalid regex...) stops the
  membership and is answered to the next request of the instance. Leaving (unsubscribe, delete,
  idle timeout, broker shutdown) is a heartbeat at epoch -1.
- assign: the given partitions, no group membership (commits as a non-member: generation -1,
  accepted by the coordinator while the group has no members, as Kafka does).
- positions: a partition without a position starts at the group's committed offset (OffsetFetch,
  require_stable), else at ``auto.offset.reset`` (earliest / latest with ListOffsets; ``none``:
  500 50002); OFFSET_OUT_OF_RANGE resets the same way.
- records: Fetch (read_uncommitted, no fetch session) to the leader of each partition, from the
  metadata image; the read returns as soon as some records arrived (or at the timeout with
  none), at most ``max_bytes`` of keys and values; control batches are skipped.
- commits: OffsetCommit v9 with the member id and member epoch, to the coordinator found with
  FindCoordinator; explicit offsets are committed + 1 (the REST Proxy's convention: the request
  names the last record consumed), "commit all" commits the consumed positions. Auto commit
  (``auto.commit.enable``, default true as the Java consumer's ``enable.auto.commit``) commits
  the consumed positions every 5 s when records are read, before partitions are given up and when
  the instance is closed.
- idle instances (no request for ``consumer.instance.timeout.ms``, default 300000 ms as
  Confluent's) are closed as by DELETE.

Limits: formats ``binary`` and ``json`` only (avro, jsonschema, protobuf need a Schema Registry);
no static membership, no rack, no fetch from followers, no isolation.level=read_committed, no
fetch sessions; a ``json`` record whose key or value is not JSON fails the read (500 50002) at its
offset, as a deserializer error does in the REST Proxy (seek past it to go on).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import re
import uuid
from typing import TYPE_CHECKING

from kcompat.broker.http.kafka_client import (
    COORDINATOR_ERRORS, EARLIEST, HEARTBEAT_VERSION, LATEST, LEADER_ERRORS, TP, ClusterClient,
)
from kcompat.broker.http.rest_common import (
    ILLEGAL_STATE, KAFKA_ERROR, RestError, error_name, kafka_error, parse_json,
)
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest as HB
from kcompat.protocol.records import CorruptRecordError, iter_batches, iter_records

if TYPE_CHECKING:   # types only: built by kcompat.broker.broker
    from kcompat.broker.http.services import HttpServices

log = logging.getLogger("kcompat.http.rest")

REBALANCE_TIMEOUT_MS = 300000       # the Java consumer's max.poll.interval.ms
AUTO_COMMIT_INTERVAL_S = 5.0        # auto.commit.interval.ms
FETCH_MAX_BYTES = 52428800          # fetch.max.bytes
PARTITION_MAX_BYTES = 1048576       # max.partition.fetch.bytes
LEAVE_TIMEOUT_S = 3.0


def new_member_id() -> str:
    """A member id as the Java client makes one (``Uuid.randomUuid().toString()``: 22 base64url chars)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def illegal_state(message: str) -> RestError:
    return RestError(409, ILLEGAL_STATE, f"Illegal state: {message}")


class ConsumerInstance:
    """One consumer instance of group ``group`` named ``name``. ``fmt``: ``binary`` or ``json``;
    ``reset``: ``earliest``, ``latest`` or ``none``; ``auto_commit``; ``request_timeout_ms``: the
    default wait of a read (``consumer.request.timeout.ms`` of the create request, else 1000)."""

    def __init__(self, services: HttpServices, group: str, name: str, fmt: str, reset: str, auto_commit: bool,
                 request_timeout_ms: int) -> None:
        self.services = services
        self.group = group
        self.name = name
        self.format = fmt
        self.reset = reset
        self.auto_commit = auto_commit
        self.request_timeout_ms = request_timeout_ms
        self.client = ClusterClient(services, name)     # heartbeats, commits, offsets
        self.fetcher = ClusterClient(services, name)    # long-polling fetches, on their own connections
        self.member_id = new_member_id()
        self.epoch = 0
        self.sent_join = False
        self.subscription: list[str] | None = None
        self.pattern: str | None = None
        self.manual: list[TP] | None = None
        self.owned: dict[uuid.UUID, frozenset[int]] = {}
        self.positions: dict[TP, int] = {}
        self.to_reset: set[TP] = set()
        self.fatal: RestError | None = None
        self.lock = asyncio.Lock()         # state changes (short)
        self.reading = asyncio.Lock()      # one read at a time
        self._wake = asyncio.Event()
        self._sub_changed = False
        self._hb_task: asyncio.Task | None = None
        self._interval_s = 1.0
        loop = asyncio.get_running_loop()
        self.last_used = loop.time()
        self._last_auto_commit = loop.time()
        self.closed = False

    def touch(self) -> None:
        """The instance was used now (the idle timeout starts again)."""
        self.last_used = asyncio.get_running_loop().time()

    # -- assignment -----------------------------------------------------------------------------

    def assigned(self) -> list[TP]:
        """The partitions the instance consumes now: its manual assignment, or what the group gave
        it (those whose topic this node's image knows)."""
        if self.manual is not None:
            return list(self.manual)
        out = []
        for tid, ps in self.owned.items():
            name = self.client.topic_name(tid)
            if name is not None:
                out.extend((name, p) for p in sorted(ps))
        return sorted(out)

    def subscribed_topics(self) -> list[str]:
        """The subscribed topics (for a pattern: the topics of the image it matches now)."""
        if self.subscription is not None:
            return list(self.subscription)
        if self.pattern is not None:
            try:
                rx = re.compile(self.pattern)
            except re.error:
                return []
            return sorted(t for t in self.services.image.topics if rx.fullmatch(t))
        return []

    async def subscribe(self, topics: list[str] | None, pattern: str | None) -> None:
        """Subscribe to ``topics`` or to the topics matching ``pattern`` (409 40903 while
        partitions are assigned manually or when switching between a list and a pattern)."""
        if self.manual is not None:
            raise illegal_state("Subscription to topics, partitions and pattern are mutually exclusive")
        if (topics is not None and self.pattern is not None) or (pattern is not None and self.subscription is not None):
            raise illegal_state("Subscription to topics, partitions and pattern are mutually exclusive")
        if topics is not None and not topics:
            await self.unsubscribe()
            return
        self.subscription, self.pattern = (sorted(set(topics)), None) if topics is not None else (None, pattern)
        self.fatal = None
        self._sub_changed = True
        if self._hb_task is None or self._hb_task.done():
            self._hb_task = asyncio.ensure_future(self._membership())
        else:
            self._wake.set()

    async def unsubscribe(self) -> None:
        """Give up the subscription or the manual assignment (leaving the group)."""
        await self._stop_membership(commit=True)
        async with self.lock:
            self.subscription = self.pattern = self.manual = None
            self.owned = {}
            self.positions.clear()
            self.to_reset.clear()

    async def assign(self, partitions: list[TP]) -> None:
        """Consume exactly ``partitions`` (409 40903 while subscribed)."""
        if self.subscription is not None or self.pattern is not None:
            raise illegal_state("Subscription to topics, partitions and pattern are mutually exclusive")
        async with self.lock:
            keep = set(partitions)
            self.manual = sorted(keep)
            for tp in list(self.positions):
                if tp not in keep:
                    del self.positions[tp]
            self.to_reset &= keep

    # -- group membership ---------------------------------------------------------------------

    async def _membership(self) -> None:
        """The heartbeat task while subscribed."""
        while not self.closed and (self.subscription is not None or self.pattern is not None):
            again = False
            try:
                again = await self._heartbeat()
                delay = 0 if again else self._interval_s
            except asyncio.CancelledError:
                raise
            except RestError as e:
                log.info("consumer %s of group %s: heartbeat failed: %s", self.name, self.group, e.message)
                delay = 0.2
            except Exception:
                log.exception("consumer %s of group %s: heartbeat failed", self.name, self.group)
                delay = 1.0
            if self.fatal is not None:
                return
            if delay:
                try:
                    await asyncio.wait_for(self._wake.wait(), delay)
                except asyncio.TimeoutError:
                    pass
            self._wake.clear()

    async def _heartbeat(self) -> bool:
        """One ConsumerGroupHeartbeat; True if another should follow at once (an assignment to
        acknowledge)."""
        joining = self.epoch == 0
        full = joining or self._sub_changed
        self._sub_changed = False
        req = HB(group_id=self.group, member_id=self.member_id, member_epoch=self.epoch,
                 rebalance_timeout_ms=REBALANCE_TIMEOUT_MS if full else -1,
                 subscribed_topic_names=(self.subscription or []) if full and self.pattern is None else None,
                 subscribed_topic_regex=self.pattern if full and self.pattern is not None else None,
                 topic_partitions=[] if joining else [HB.TopicPartitions(topic_id=t, partitions=sorted(ps))
                                                      for t, ps in sorted(self.owned.items(), key=lambda i: str(i[0]))])
        self.sent_join = True
        try:
            resp = await self.client.to_coordinator(self.group, req, HEARTBEAT_VERSION, lambda r: r.error_code)
        except RestError:
            self._sub_changed = self._sub_changed or full
            raise
        code = resp.error_code
        if code == ErrorCode.NONE:
            self.epoch = resp.member_epoch
            if resp.heartbeat_interval_ms > 0:
                self._interval_s = resp.heartbeat_interval_ms / 1000.0
            if resp.assignment is not None:
                return await self._adopt({tp.topic_id: frozenset(tp.partitions)
                                          for tp in resp.assignment.topic_partitions})
            return False
        if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH):
            log.info("consumer %s of group %s: %s; rejoining", self.name, self.group, ErrorCode(code).name)
            async with self.lock:
                self.owned = {}
                self.positions.clear()
            self.epoch = 0
            return True
        if code in COORDINATOR_ERRORS:
            self.client.forget_coordinator(self.group)
            self._sub_changed = self._sub_changed or full
            raise kafka_error(code, resp.error_message)
        self.fatal = kafka_error(code, resp.error_message)
        log.warning("consumer %s of group %s stops its membership: %s", self.name, self.group, self.fatal.message)
        return False

    async def _adopt(self, assignment: dict[uuid.UUID, frozenset[int]]) -> bool:
        """Take the assignment the coordinator sent; True if it changed what the instance owns."""
        async with self.lock:
            if assignment == self.owned:
                return False
            revoked = []
            for tid, ps in self.owned.items():
                name = self.client.topic_name(tid)
                gone = ps - assignment.get(tid, frozenset())
                if name is not None:
                    revoked.extend((name, p) for p in gone)
            if revoked and self.auto_commit:
                await self._commit_positions([tp for tp in revoked if tp in self.positions], quiet=True)
            for tp in revoked:
                self.positions.pop(tp, None)
                self.to_reset.discard(tp)
            self.owned = dict(assignment)
            return True

    async def _stop_membership(self, commit: bool) -> None:
        task, self._hb_task = self._hb_task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        if commit and self.auto_commit:
            async with self.lock:
                try:
                    await asyncio.wait_for(self._commit_positions(None, quiet=True), LEAVE_TIMEOUT_S)
                except asyncio.TimeoutError:
                    log.info("consumer %s of group %s: the commit before leaving timed out", self.name, self.group)
        if self.sent_join:
            req = HB(group_id=self.group, member_id=self.member_id, member_epoch=-1)
            try:
                await self.client.to_coordinator(self.group, req, HEARTBEAT_VERSION, lambda r: r.error_code,
                                                 timeout_s=LEAVE_TIMEOUT_S)
            except RestError as e:
                log.info("consumer %s of group %s could not leave: %s", self.name, self.group, e.message)
        self.sent_join = False
        self.epoch = 0

    async def close(self) -> None:
        """Commit (auto commit), leave the group, close the connections."""
        if self.closed:
            return
        try:
            await self._stop_membership(commit=True)
        finally:
            self.closed = True
            self.fatal = RestError(404, 40403, "Consumer instance not found.")
            self.client.close()
            self.fetcher.close()

    # -- positions -------------------------------------------------------------------------------

    async def _ensure_positions(self, tps: list[TP]) -> None:
        """Give each of ``tps`` a position: committed offset, else ``auto.offset.reset``. Under
        ``self.lock``."""
        missing = [tp for tp in tps if tp not in self.positions and tp not in self.to_reset]
        if missing:
            committed = await self.client.offset_fetch(self.group, missing)
            for tp in missing:
                if tp in committed:
                    self.positions[tp] = committed[tp][0]
                else:
                    self.to_reset.add(tp)
        reset = [tp for tp in tps if tp in self.to_reset]
        if reset:
            if self.reset == "none":
                raise RestError(500, KAFKA_ERROR, "Kafka error: Undefined offset with no reset policy for partitions: "
                                + ", ".join(f"{t}-{p}" for t, p in reset))
            offsets = await self.client.list_offsets({tp: EARLIEST if self.reset == "earliest" else LATEST
                                                      for tp in reset})
            for tp, off in offsets.items():
                self.positions[tp] = off
                self.to_reset.discard(tp)

    def _require_assigned(self, tps) -> None:
        assigned = set(self.assigned())
        for t, p in tps:
            if (t, p) not in assigned:
                raise illegal_state(f"No current assignment for partition {t}-{p}")

    async def seek(self, offsets: dict[TP, int]) -> None:
        """Read next from these offsets (409 40903 for a partition not assigned)."""
        async with self.lock:
            self._require_assigned(offsets)
            for tp, off in offsets.items():
                self.positions[tp] = off
                self.to_reset.discard(tp)

    async def seek_to(self, tps: list[TP], where: int) -> None:
        """Seek to EARLIEST, LATEST or the first offset at or after a timestamp (epoch ms)."""
        async with self.lock:
            self._require_assigned(tps)
            if not tps:
                return
            offsets = await self.client.list_offsets({tp: where for tp in tps})
            for tp, off in offsets.items():
                if off >= 0:
                    self.positions[tp] = off
                    self.to_reset.discard(tp)

    # -- commits ---------------------------------------------------------------------------------

    async def commit(self, offsets: dict[TP, tuple[int, str | None]] | None) -> None:
        """Commit ``offsets`` as given, or (None) the consumed positions of the assignment."""
        async with self.lock:
            if offsets is None:
                await self._commit_positions(None, quiet=False)
            else:
                await self._commit(offsets)

    async def _commit_positions(self, tps: list[TP] | None, quiet: bool) -> None:
        """Commit the positions of ``tps`` (None: every assigned partition with a position). Under
        ``self.lock``."""
        if tps is None:
            assigned = set(self.assigned())
            tps = [tp for tp in self.positions if tp in assigned]
        offsets = {tp: (self.positions[tp], "") for tp in tps if tp in self.positions}
        if not offsets:
            return
        try:
            await self._commit(offsets)
        except RestError as e:
            if not quiet:
                raise
            log.info("consumer %s of group %s: commit failed: %s", self.name, self.group, e.message)

    async def _commit(self, offsets: dict[TP, tuple[int, str | None]]) -> None:
        for attempt in range(3):
            member, epoch = (self.member_id, self.epoch) if self.epoch > 0 else ("", -1)
            errors = await self.client.offset_commit(self.group, member, epoch, offsets)
            codes = [c for c in errors.values() if c != ErrorCode.NONE]
            if not codes:
                self._last_auto_commit = asyncio.get_running_loop().time()
                return
            if ErrorCode.STALE_MEMBER_EPOCH in codes and attempt < 2:
                # the epoch moved on between the last heartbeat and this commit: heartbeat first
                self._wake.set()
                await asyncio.sleep(0.2)
                continue
            raise kafka_error(codes[0], "OffsetCommit")

    async def committed(self, tps: list[TP]) -> dict[TP, tuple[int, str | None]]:
        """The group's committed ``(offset, metadata)`` of those of ``tps`` that have one."""
        return await self.client.offset_fetch(self.group, tps)

    # -- reading -------------------------------------------------------------------------------

    async def read(self, timeout_ms: int, max_bytes: int) -> list[dict]:
        """Records from the current positions: as soon as a fetch brings some, or [] after
        ``timeout_ms``; at most ``max_bytes`` of keys and values (the first record that would
        pass the limit stays for the next read)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000.0
        async with self.reading:
            if self.fatal is not None:
                raise self.fatal
            if self.subscription is None and self.pattern is None and self.manual is None:
                raise illegal_state("Consumer is not subscribed to any topics or assigned any partitions")
            if self.auto_commit and loop.time() - self._last_auto_commit >= AUTO_COMMIT_INTERVAL_S:
                async with self.lock:
                    await self._commit_positions(None, quiet=True)
                    self._last_auto_commit = loop.time()
            while True:
                async with self.lock:
                    tps = self.assigned()
                    await self._ensure_positions(tps)
                    snapshot = {tp: self.positions[tp] for tp in tps if tp in self.positions}
                remaining = deadline - loop.time()
                if snapshot:
                    responses = await self._fetch(snapshot, max(0.0, remaining))
                    async with self.lock:
                        records = self._take(responses, snapshot, max_bytes)
                    if records:
                        return records
                    if loop.time() >= deadline:
                        return []
                    if not responses:
                        await asyncio.sleep(min(0.1, max(0.0, deadline - loop.time())))
                else:
                    if remaining <= 0:
                        return []
                    await asyncio.sleep(min(0.05, remaining))
                if self.fatal is not None:
                    raise self.fatal

    async def _fetch(self, snapshot: dict[TP, int], wait_s: float) -> list:
        """Fetch from the leaders of ``snapshot``'s partitions; the responses that arrived first
        (the other requests are dropped as soon as one brings records)."""
        by_leader: dict[int, dict[TP, int]] = {}
        for tp, off in snapshot.items():
            leader = self.fetcher.leader(*tp)
            if leader is not None and leader >= 0:
                by_leader.setdefault(leader, {})[tp] = off
        if not by_leader:
            return []
        wait_ms = int(wait_s * 1000)
        pending = {asyncio.ensure_future(self.fetcher.fetch(
            node, parts, max_wait_ms=wait_ms, max_bytes=FETCH_MAX_BYTES,
            partition_max_bytes=PARTITION_MAX_BYTES)) for node, parts in by_leader.items()}
        out = []
        try:
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    try:
                        out.append(task.result())
                    except RestError as e:
                        log.info("consumer %s of group %s: fetch failed: %s", self.name, self.group, e.message)
                if any(pd.records for r in out for t in r.responses for pd in t.partitions):
                    break
        finally:
            for task in pending:
                task.cancel()
        return out

    def _take(self, responses: list, snapshot: dict[TP, int], max_bytes: int) -> list[dict]:
        """The records of fetch ``responses`` past each partition's position, advancing the
        positions (only of partitions whose position is still the one fetched from). Under
        ``self.lock``."""
        out: list[dict] = []
        used = 0
        for resp in responses:
            for t in resp.responses:
                for pd in t.partitions:
                    tp = (t.topic, pd.partition_index)
                    if tp not in snapshot or self.positions.get(tp) != snapshot[tp]:
                        continue
                    if pd.error_code != ErrorCode.NONE:
                        if pd.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                            log.info("consumer %s of group %s: offset %d out of range for %s-%d; resetting to %s",
                                     self.name, self.group, snapshot[tp], *tp, self.reset)
                            self.positions.pop(tp, None)
                            self.to_reset.add(tp)
                        elif pd.error_code not in LEADER_ERRORS:
                            log.info("consumer %s of group %s: fetch of %s-%d: %s", self.name, self.group, *tp,
                                     error_name(pd.error_code))
                        continue
                    if not pd.records:
                        continue
                    try:
                        pos, used, full = self._records_of(tp, pd.records, snapshot[tp], out, used, max_bytes)
                    except RestError:
                        if out:   # what was taken is answered; the error comes with the next read
                            return out
                        raise
                    self.positions[tp] = pos
                    if full:
                        return out
        return out

    def _records_of(self, tp: TP, data, pos: int, out: list, used: int, max_bytes: int) -> tuple[int, int, bool]:
        for off, h in iter_batches(data):
            if h.last_offset < pos:
                continue
            if h.is_control:
                pos = h.next_offset
                continue
            try:
                for rec in iter_records(data[off:off + h.size]):
                    if rec.offset < pos:
                        continue
                    size = len(rec.key or b"") + len(rec.value or b"")
                    if used + size >= max_bytes:
                        return pos, used, True
                    try:
                        out.append(self._render(tp, rec))
                    except RestError:
                        if out:
                            return pos, used, True
                        raise
                    used += size
                    pos = rec.offset + 1
            except CorruptRecordError as e:
                if out:
                    return pos, used, True
                raise kafka_error(ErrorCode.CORRUPT_MESSAGE, f"{tp[0]}-{tp[1]} at offset {pos}: {e}") from None
            pos = max(pos, h.next_offset)
        return pos, used, False

    def _render(self, tp: TP, rec) -> dict:
        if self.format == "json":
            try:
                key = None if rec.key is None else parse_json(rec.key)
                value = None if rec.value is None else parse_json(rec.value)
            except (ValueError, UnicodeDecodeError) as e:
                raise RestError(500, KAFKA_ERROR, f"Kafka error: Error deserializing the record of {tp[0]}-{tp[1]} "
                                f"at offset {rec.offset} as JSON: {e}") from None
        else:
            key = None if rec.key is None else base64.b64encode(rec.key).decode("ascii")
            value = None if rec.value is None else base64.b64encode(rec.value).decode("ascii")
        return {"topic": tp[0], "key": key, "value": value, "partition": tp[1], "offset": rec.offset}

