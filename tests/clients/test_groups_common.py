"""Shared machinery of the consumer-group tests (``tests/clients/test_groups_*.py``); pytest collects
no tests from this module.

A :class:`Member` is one real group consumer that subscribes to a topic and consumes in its own
thread (:class:`CkMember`: confluent-kafka, :class:`KpMember`: kafka-python) or in a child process
(:class:`ProcMember`, which runs one of those in ``python -m tests.clients.test_groups_common`` and
mirrors its state from JSON lines on the child's stdout, so that a test can ``kill -9`` it). Every
member records what it reads, every rebalance callback (with the partitions it was given: with
cooperative rebalancing only the incremental changes), its commits and its errors.

Members commit synchronously (explicit offsets: last record processed + 1) after every batch they
process, and the confluent member also in ``on_revoke``: a partition that moves to another member
was committed up to the last record its previous owner processed, so "every record read exactly
once across the group" is an exact assertion (:func:`assert_exactly_once`) whenever members change
while nothing is in flight, or with confluent members at any time. A kafka-python member cannot
commit from its rebalance listener (it runs on the client's IO loop), so tests change kafka-python
groups only while every member is idle and committed.

Every wait has a deadline; :class:`Members` stops (or kills) every member it started when the test
ends, pass or fail.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import confluent_kafka as ck
from confluent_kafka import KafkaException
from confluent_kafka.admin import NewTopic
from kafka import KafkaAdminClient, KafkaConsumer, OffsetAndMetadata
from kafka import TopicPartition as KpTopicPartition
from kafka.consumer.subscription_state import ConsumerRebalanceListener

from conformance.clients.kafka_python import subscribe_when_known
from tests.clients.common import Rec, Sent, ck_admin, ck_produce, ck_producer, close_ck_producer, wait_until

ROOT = Path(__file__).resolve().parents[2]


# -- records -----------------------------------------------------------------------------------------


def group_records(n: int, tag: str) -> list[Rec]:
    """``n`` keyed records with unique values; the keys spread them over the partitions (the
    partitioner is deterministic, so the spread is the same on every run)."""
    return [Rec(f"key-{tag}-{i}".encode(), f"{tag}-{i}".encode()) for i in range(n)]


def produce(bootstrap: str, topic: str, n: int, tag: str, partitions: int | None = None) -> list[Sent]:
    """Produce ``n`` keyed records (acks=all, idempotent: librdkafka's defaults) and return what
    was acknowledged; with ``partitions`` check that every partition got some."""
    sent = ck_produce(bootstrap, topic, group_records(n, tag))
    if partitions is not None:
        got = Counter(s.partition for s in sent)
        assert set(got) == set(range(partitions)), f"records of {tag} reached partitions {sorted(got)} only"
    return sent


def end_offsets(sent: list[Sent]) -> dict[int, int]:
    """Per partition: the offset after the last record in ``sent``."""
    ends: dict[int, int] = {}
    for s in sent:
        ends[s.partition] = max(ends.get(s.partition, 0), s.offset + 1)
    return ends


# -- members -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Read:
    member: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True)
class Event:
    """A rebalance callback: ``kind`` is assign, revoke or lost; ``t`` is ``time.monotonic()``
    (system-wide on Linux, so comparable between processes)."""

    t: float
    kind: str
    partitions: tuple[int, ...]


class Member:
    """State shared by every kind of member; changed only through :meth:`_apply` (under a lock)."""

    kind = "?"

    def __init__(self, name: str, bootstrap: str, group: str, topic: str, config: dict | None = None,
                 metadata: str = "") -> None:
        self.name = name
        self.bootstrap = bootstrap
        self.group = group
        self.topic = topic
        self.config = dict(config or {})
        self.metadata = metadata  # commits carry metadata f"{metadata}p{partition}@{offset}" if set
        self.lock = threading.Lock()
        self.reads: list[Read] = []
        self.events: list[Event] = []
        self.owned: set[int] = set()
        self.commits: list[tuple[float, dict[int, int]]] = []  # successful commits: (time, {partition: offset})
        self.last_commit: dict[int, tuple[int, str, int]] = {}  # partition -> (offset, metadata, leader epoch)
        self.errors: list[str] = []
        self.member_ids: list[str] = []
        self.fatal: str | None = None
        self.closed = False
        self.sink = None  # in a child process: forwards every change to the parent

    # state changes (also replayed from a child's stdout) -------------------------------------------

    def _apply(self, kind: str, data, t: float | None = None) -> None:
        t = time.monotonic() if t is None else t
        with self.lock:
            if kind == "read":
                p, off, key, value = data
                self.reads.append(Read(self.name, p, off, None if key is None else bytes.fromhex(key),
                                       None if value is None else bytes.fromhex(value)))
            elif kind in ("assign", "revoke", "lost"):
                parts = tuple(sorted(data))
                self.events.append(Event(t, kind, parts))
                if kind == "assign":
                    self.owned |= set(parts)
                else:
                    self.owned -= set(parts)
            elif kind == "commit":
                self.commits.append((t, {int(p): off for p, (off, _, _) in data.items()}))
                self.last_commit.update({int(p): tuple(v) for p, v in data.items()})
            elif kind == "error":
                self.errors.append(data)
            elif kind == "member_id":
                if not self.member_ids or self.member_ids[-1] != data:
                    self.member_ids.append(data)
            elif kind == "fatal":
                self.fatal = data
            elif kind == "closed":
                self.closed = True
        if self.sink is not None:
            self.sink(kind, data, t)

    def _read(self, partition: int, offset: int, key: bytes | None, value: bytes | None) -> None:
        self._apply("read", (partition, offset, None if key is None else key.hex(),
                             None if value is None else value.hex()))

    def metadata_for(self, partition: int, offset: int) -> str:
        return f"{self.metadata}p{partition}@{offset}" if self.metadata else ""

    # views -----------------------------------------------------------------------------------------

    def owned_now(self) -> set[int]:
        with self.lock:
            return set(self.owned)

    def events_now(self) -> list[Event]:
        with self.lock:
            return list(self.events)

    def reads_now(self) -> list[Read]:
        with self.lock:
            return list(self.reads)

    def committed_now(self) -> dict[int, int]:
        """Latest offset this member committed per partition."""
        out: dict[int, int] = {}
        with self.lock:
            for _, offsets in self.commits:
                out.update(offsets)
        return out

    def check_healthy(self) -> None:
        assert self.fatal is None, f"member {self.name} failed: {self.fatal}"

    def describe(self) -> str:
        with self.lock:
            events = ", ".join(f"{e.kind}{list(e.partitions)}@{e.t:.1f}" for e in self.events)
            return (f"{self.name} ({self.kind}): owns {sorted(self.owned)}, read {len(self.reads)}, "
                    f"events [{events}], errors {self.errors[-5:]}, fatal {self.fatal}")


class _ThreadMember(Member):
    """A member consuming in a thread of this process."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str, config: dict | None = None,
                 metadata: str = "") -> None:
        super().__init__(name, bootstrap, group, topic, config, metadata)
        self._thread = threading.Thread(target=self._main, name=f"member-{name}", daemon=True)
        self._stopping = threading.Event()
        self.pending: dict[int, int] = {}  # processed, not yet committed: partition -> next offset
        self.leader_epochs: dict[int, int] = {}  # partition -> leader epoch of the last record read
        self.consumer = None

    def start(self) -> None:
        self._thread.start()

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        self._stopping.set()

    def join_stopped(self, timeout: float = 30.0) -> None:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"member {self.name} did not stop within {timeout}s"

    def _main(self) -> None:
        try:
            self._run()
        except BaseException as e:  # noqa: BLE001 - reported to the test through check_healthy()
            self._apply("fatal", f"{type(e).__name__}: {e}")
        finally:
            self._apply("closed", None)


class CkMember(_ThreadMember):
    """A confluent-kafka (librdkafka) member."""

    kind = "confluent"

    def _conf(self) -> dict:
        conf = {"bootstrap.servers": self.bootstrap, "group.id": self.group, "enable.auto.commit": False,
                "auto.offset.reset": "earliest"}
        conf.update(self.config)
        return conf

    def _on_assign(self, consumer, partitions) -> None:
        self._apply("assign", [tp.partition for tp in partitions])
        self._apply("member_id", consumer.memberid())

    def _on_revoke(self, consumer, partitions) -> None:
        revoked = {tp.partition for tp in partitions}
        self._commit({p: off for p, off in self.pending.items() if p in revoked})
        for p in revoked:
            self.pending.pop(p, None)
        self._apply("revoke", sorted(revoked))

    def _on_lost(self, consumer, partitions) -> None:
        for tp in partitions:
            self.pending.pop(tp.partition, None)
        self._apply("lost", [tp.partition for tp in partitions])

    def _commit(self, offsets: dict[int, int]) -> bool:
        if not offsets:
            return True
        tps = []
        for p, off in sorted(offsets.items()):
            extra = {"metadata": self.metadata_for(p, off)} if self.metadata else {}
            if p in self.leader_epochs:
                extra["leader_epoch"] = self.leader_epochs[p]
            tps.append(ck.TopicPartition(self.topic, p, off, **extra))
        try:
            result = self.consumer.commit(offsets=tps, asynchronous=False)
        except KafkaException as e:
            self._apply("error", f"commit {offsets}: {e.args[0]}")
            return False
        failed = {tp.partition: str(tp.error) for tp in result if tp.error is not None}
        if failed:
            self._apply("error", f"commit {offsets}: {failed}")
            return False
        self._apply("commit", {str(p): (off, self.metadata_for(p, off), self.leader_epochs.get(p, -1))
                               for p, off in offsets.items()})
        for p, off in offsets.items():
            if self.pending.get(p) == off:
                del self.pending[p]
        return True

    def _run(self) -> None:
        c = self.consumer = ck.Consumer(self._conf())
        try:
            c.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost)
            while not self._stopping.is_set():
                for m in c.consume(num_messages=500, timeout=0.2):
                    if m.error() is not None:
                        self._apply("error", f"consume: {m.error()}")
                        continue
                    self._read(m.partition(), m.offset(), m.key(), m.value())
                    self.pending[m.partition()] = m.offset() + 1
                    epoch = m.leader_epoch()
                    if epoch is not None:
                        self.leader_epochs[m.partition()] = epoch
                owned = self.owned_now()
                self._commit({p: off for p, off in self.pending.items() if p in owned})
            self._commit(dict(self.pending))
        finally:
            c.close()


class _KpListener(ConsumerRebalanceListener):
    def __init__(self, member: "KpMember") -> None:
        self.member = member

    def on_partitions_revoked(self, revoked):
        self.member._on_revoked([tp.partition for tp in revoked], "revoke")

    def on_partitions_assigned(self, assigned):
        self.member._apply("assign", [tp.partition for tp in assigned])

    def on_partitions_lost(self, lost):
        self.member._on_revoked([tp.partition for tp in lost], "lost")


class KpMember(_ThreadMember):
    """A kafka-python member. Its rebalance listener runs on the client's IO thread and cannot
    commit there: offsets processed but not committed when a partition is revoked are dropped (and
    reported as an error, so that a test knows why records were read twice)."""

    kind = "kafka-python"

    def __init__(self, name: str, bootstrap: str, group: str, topic: str, config: dict | None = None,
                 metadata: str = "") -> None:
        super().__init__(name, bootstrap, group, topic, config, metadata)
        self._pending_lock = threading.Lock()

    def _on_revoked(self, partitions: list[int], kind: str) -> None:
        with self._pending_lock:
            dropped = {p: self.pending.pop(p) for p in partitions if p in self.pending}
        if dropped:
            self._apply("error", f"{kind} partitions with uncommitted offsets {dropped}")
        self._apply(kind, partitions)

    def _commit(self) -> bool:
        with self._pending_lock:
            offsets = dict(self.pending)
            epochs = {p: self.leader_epochs.get(p, -1) for p in offsets}
        if not offsets:
            return True
        try:
            self.consumer.commit({KpTopicPartition(self.topic, p): OffsetAndMetadata(off, self.metadata_for(p, off),
                                                                                     epochs[p])
                                  for p, off in offsets.items()})
        except Exception as e:  # noqa: BLE001 - CommitFailedError, RebalanceInProgressError, ...
            self._apply("error", f"commit {offsets}: {type(e).__name__}: {e}")
            return False
        self._apply("commit", {str(p): (off, self.metadata_for(p, off), epochs[p]) for p, off in offsets.items()})
        with self._pending_lock:
            for p, off in offsets.items():
                if self.pending.get(p) == off:
                    del self.pending[p]
        return True

    def _run(self) -> None:
        config = {"group_id": self.group, "enable_auto_commit": False, "auto_offset_reset": "earliest"}
        config.update(self.config)
        c = self.consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, **config)
        try:
            subscribe_when_known(c, [self.topic], listener=_KpListener(self))
            while not self._stopping.is_set():
                for tp, records in c.poll(timeout_ms=200).items():
                    for r in records:
                        self._read(r.partition, r.offset, r.key, r.value)
                    if records:
                        with self._pending_lock:
                            self.pending[tp.partition] = records[-1].offset + 1
                            if records[-1].leader_epoch is not None:
                                self.leader_epochs[tp.partition] = records[-1].leader_epoch
                member_id = _kp_member_id(c)
                if member_id:
                    self._apply("member_id", member_id)
                self._commit()
            self._commit()
        finally:
            c.close()


def _kp_member_id(consumer: KafkaConsumer) -> str | None:
    """The member id kafka-python's coordinator holds (no public API; for comparing with
    DescribeGroups only)."""
    generation = getattr(getattr(consumer, "_coordinator", None), "_generation", None)
    return getattr(generation, "member_id", None)


MEMBER_KINDS = {"confluent": CkMember, "kafka-python": KpMember}


class ProcMember(Member):
    """A member in a child process (``kind`` confluent or kafka-python), so that it can be killed."""

    def __init__(self, kind: str, name: str, bootstrap: str, group: str, topic: str, config: dict | None = None,
                 metadata: str = ""):
        super().__init__(name, bootstrap, group, topic, config, metadata)
        self.kind = kind
        spec = {"kind": kind, "name": name, "bootstrap": bootstrap, "group": group, "topic": topic,
                "config": self.config, "metadata": metadata}
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.clients.test_groups_common", json.dumps(spec)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, errors="replace", cwd=str(ROOT), env=env)
        self.stderr_tail: list[str] = []
        self._reader = threading.Thread(target=self._read_child, name=f"reader-{name}", daemon=True)
        self._stderr_reader = threading.Thread(target=self._read_stderr, name=f"stderr-{name}", daemon=True)
        self._reader.start()
        self._stderr_reader.start()

    def _read_child(self) -> None:
        for line in self.proc.stdout:
            try:
                kind, data, t = json.loads(line)
            except ValueError:
                continue
            self._apply(kind, data, t)

    def _read_stderr(self) -> None:
        for line in self.proc.stderr:
            self.stderr_tail = (self.stderr_tail + [line.rstrip()])[-20:]

    def describe(self) -> str:
        text = super().describe()
        code = self.proc.poll()
        if code not in (None, 0, -signal.SIGKILL):
            text += f"; process exited with {code}, stderr:\n    " + "\n    ".join(self.stderr_tail)
        return text

    def start(self) -> None:  # already running
        pass

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("stop\n")
                self.proc.stdin.flush()
            except OSError:
                pass

    def join_stopped(self, timeout: float = 30.0) -> None:
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill9()
            raise AssertionError(f"member process {self.name} did not stop within {timeout}s")
        self._reader.join(5)
        self._stderr_reader.join(5)

    def kill9(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self._reader.join(5)
        self._stderr_reader.join(5)

    def kill_now(self) -> float:
        """SIGKILL the member's process; returns ``time.monotonic()`` of the kill."""
        assert self.proc.poll() is None, f"member process {self.name} already exited"
        t = time.monotonic()
        self.kill9()
        return t

    def is_alive(self) -> bool:
        return self.proc.poll() is None


def _child_main(spec_json: str) -> None:
    """Entry point of a :class:`ProcMember`'s process: run the member, forward its changes as JSON
    lines, stop when the parent writes ``stop`` (or closes stdin)."""
    spec = json.loads(spec_json)
    out_lock = threading.Lock()

    def sink(kind, data, t):
        line = json.dumps([kind, data, t])
        with out_lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    member = MEMBER_KINDS[spec["kind"]](spec["name"], spec["bootstrap"], spec["group"], spec["topic"], spec["config"],
                                        spec["metadata"])
    member.sink = sink
    member.start()
    sys.stdin.readline()  # "stop" or EOF
    member.stop()
    member.join_stopped(60)


class Members:
    """The members a test starts; ``with Members() as ms``: every one is stopped (processes killed
    if they do not stop) at the end."""

    def __init__(self) -> None:
        self.all: list[Member] = []

    def add(self, member: Member) -> Member:
        self.all.append(member)
        member.start()
        return member

    def new(self, kind: str, name, bootstrap, group, topic, config=None, metadata: str = "") -> Member:
        """A member of ``kind`` (confluent or kafka-python) consuming in a thread."""
        return self.add(MEMBER_KINDS[kind](name, bootstrap, group, topic, config, metadata))

    def proc(self, kind: str, name, bootstrap, group, topic, config=None, metadata: str = "") -> ProcMember:
        """A member of ``kind`` consuming in a child process."""
        return self.add(ProcMember(kind, name, bootstrap, group, topic, config, metadata))

    def stop(self, *members: Member, timeout: float = 30.0) -> None:
        """Stop the given members (all at once, so their LeaveGroups do not each start a rebalance
        the others must join), then wait for each."""
        for m in members:
            m.stop()
        for m in members:
            m.join_stopped(timeout)

    def __enter__(self) -> "Members":
        return self

    def __exit__(self, *exc) -> None:
        running = [m for m in self.all if m.is_alive()]
        for m in running:
            m.stop()
        for m in running:
            try:
                m.join_stopped(30)
            except AssertionError:
                if isinstance(m, ProcMember):
                    m.kill9()
        if exc[0] is None:
            stuck = [m.name for m in self.all if m.is_alive()]
            assert not stuck, f"members still running: {stuck}"


# -- waiting and checking ----------------------------------------------------------------------------


def describe_members(members) -> str:
    return "\n  " + "\n  ".join(m.describe() for m in members)


def balanced(members, partitions: int, counts: dict[str, int] | None = None) -> bool:
    """The members own disjoint sets covering every partition, each as many as ``counts`` says
    (default: an even split, as the range and sticky assignors give)."""
    owned = [m.owned_now() for m in members]
    if sum(len(o) for o in owned) != partitions or set().union(*owned) != set(range(partitions)):
        return False
    if counts is None:
        low = partitions // len(members)
        return all(low <= len(o) <= low + (1 if partitions % len(members) else 0) for o in owned)
    return all(len(o) == counts[m.name] for m, o in zip(members, owned))


def wait_balanced(members, partitions: int, timeout: float = 30.0, counts: dict[str, int] | None = None) -> float:
    """Wait until :func:`balanced`; returns ``time.monotonic()`` then."""
    deadline = time.monotonic() + timeout
    while not balanced(members, partitions, counts):
        for m in members:
            m.check_healthy()
        if time.monotonic() > deadline:
            raise AssertionError(f"the group did not settle within {timeout}s:{describe_members(members)}")
        time.sleep(0.05)
    return time.monotonic()


def wait_read(sent: list[Sent], members, timeout: float = 30.0) -> None:
    """Wait until the members together read every record of ``sent``."""
    want = {(s.partition, s.offset) for s in sent}

    def done():
        have = {(r.partition, r.offset) for m in members for r in m.reads_now()}
        return want <= have or any(m.fatal for m in members)

    try:
        wait_until(done, timeout, what="every record to be read")
        for m in members:
            m.check_healthy()
    except AssertionError:
        have = {(r.partition, r.offset) for m in members for r in m.reads_now()}
        missing = sorted(want - have)
        raise AssertionError(f"{len(missing)} of {len(want)} records not read within {timeout}s, e.g. "
                             f"{missing[:10]}:{describe_members(members)}") from None


def wait_committed(members, ends: dict[int, int], timeout: float = 20.0) -> None:
    """Wait until the members committed (successfully) offset ``ends[p]`` for every partition."""

    def committed():
        out: dict[int, int] = {}
        for m in members:
            with m.lock:
                for t, offsets in m.commits:
                    for p, off in offsets.items():
                        if off >= out.get(p, -1):
                            out[p] = off
        return out

    try:
        wait_until(lambda: all(committed().get(p, -1) >= e for p, e in ends.items()) or any(m.fatal for m in members),
                   timeout, what="commits up to the end offsets")
        for m in members:
            m.check_healthy()
    except AssertionError:
        raise AssertionError(f"committed {committed()} != ends {ends}:{describe_members(members)}") from None


def assert_exactly_once(sent: list[Sent], members) -> None:
    """Across the members, every record of ``sent`` was read exactly once (same key and value),
    and nothing else was read."""
    want = {(s.partition, s.offset): s for s in sent}
    by_pos: dict[tuple[int, int], list[Read]] = defaultdict(list)
    for m in members:
        for r in m.reads_now():
            by_pos[(r.partition, r.offset)].append(r)
    problems = []
    missing = sorted(want.keys() - by_pos.keys())
    if missing:
        problems.append(f"{len(missing)} records never read, e.g. {missing[:10]}")
    extra = sorted(by_pos.keys() - want.keys())
    if extra:
        problems.append(f"{len(extra)} records read that were not expected, e.g. "
                        f"{[(pos, by_pos[pos][0].member) for pos in extra[:10]]}")
    twice = {pos: [r.member for r in reads] for pos, reads in by_pos.items() if len(reads) > 1}
    if twice:
        problems.append(f"{len(twice)} records read more than once, e.g. {sorted(twice.items())[:10]}")
    for pos, s in want.items():
        for r in by_pos.get(pos, ()):
            if (r.key, r.value) != (s.key, s.value):
                problems.append(f"record at {pos} read as {r.key!r}={r.value!r}, produced {s.key!r}={s.value!r}")
                break
        if len(problems) > 10:
            break
    assert not problems, "\n".join(problems) + describe_members(members)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"



# -- configuration and administration ----------------------------------------------------------------

KINDS = ["confluent", "kafka-python"]


def client_config(kind: str, settings: dict) -> dict:
    """Consumer settings under Kafka's names (``session.timeout.ms``) for ``kind``: confluent-kafka
    takes them as they are, kafka-python with underscores (``session_timeout_ms``)."""
    if kind == "confluent":
        return dict(settings)
    return {k.replace(".", "_"): v for k, v in settings.items()}


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = ck_admin(bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result(timeout=20)


def broker_committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, tuple[int, str, int]]:
    """What OffsetFetch returns for ``group`` (kafka-python KafkaAdminClient.list_group_offsets):
    partition -> (offset, metadata, leader epoch), for partitions with a committed offset.

    (Not confluent's AdminClient.list_consumer_group_offsets: confluent-kafka reads the metadata of
    the result as a NUL-terminated C string, so metadata committed by another client, without the
    trailing NUL byte confluent-kafka itself appends, comes back with garbage after it.)"""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        res = admin.list_group_offsets({group: [KpTopicPartition(topic, p) for p in range(partitions)]})[group]
    finally:
        admin.close()
    return {tp.partition: (om.offset, om.metadata, -1 if om.leader_epoch is None else om.leader_epoch)
            for tp, om in res.items() if om.offset >= 0}


class BackgroundProducer:
    """Produces keyed records (``tag``-numbered) in small batches until stopped, so that a group
    rebalances while records keep arriving; ``sent`` holds what was acknowledged."""

    def __init__(self, bootstrap: str, topic: str, tag: str, batch: int = 20, pause: float = 0.05) -> None:
        self.bootstrap, self.topic, self.tag, self.batch, self.pause = bootstrap, topic, tag, batch, pause
        self.sent: list[Sent] = []
        self.error: BaseException | None = None
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"producer-{tag}", daemon=True)

    def _run(self) -> None:
        i = 0
        producer = ck_producer(self.bootstrap, **{"linger.ms": 1})
        try:
            while not self._stopping.is_set():
                recs = [Rec(f"key-{self.tag}-{j}".encode(), f"{self.tag}-{j}".encode()) for j in range(i, i + self.batch)]
                self.sent += ck_produce(self.bootstrap, self.topic, recs, producer=producer)
                i += self.batch
                time.sleep(self.pause)
        except BaseException as e:  # noqa: BLE001 - reported by stop()
            self.error = e
        finally:
            close_ck_producer(producer)

    def __enter__(self) -> "BackgroundProducer":
        self._thread.start()
        return self

    def stop(self) -> list[Sent]:
        self._stopping.set()
        self._thread.join(60)
        assert not self._thread.is_alive(), "background producer did not stop"
        if self.error is not None:
            raise self.error
        return self.sent

    def __exit__(self, *exc) -> None:
        if self._thread.is_alive():
            self._stopping.set()
            self._thread.join(60)


if __name__ == "__main__":
    _child_main(sys.argv[1])
