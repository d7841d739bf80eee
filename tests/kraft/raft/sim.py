"""Seeded, deterministic event simulation of a KRaft quorum built from ``kcompat.kraft.raft``.

Modelled on Kafka's ``RaftEventSimulationTest``: N voters (and, in a quarter of the seeds, an
observer) exchange the real KRaft request/response objects (optionally through the wire codecs)
with Kafka's default timeouts. Everything is driven by one ``random.Random(seed)``: a seed replays
exactly. Each seed draws a scenario (message loss 0-20%, duplication, delays up to 400 ms and so
reordering, fault rate, append rate, snapshots on or off, pre-vote on or off, snapshot chunk size)
and runs a chaos phase of 5-12 simulated seconds with faults weighted towards the harmful ones:

- crash the leader or any node (durable state kept, see below), restart a crashed node, and crash a
  node right after it persisted a vote or an epoch (restarted 1-200 ms later);
- partition the network: isolate the leader, or a random split; fail a single link one way; heal;
- graceful resignation of the leader; the application takes a snapshot at its committed position
  (the log below it is deleted, so lagging nodes must use FetchSnapshot); change the loss rate.

The application appends record batches at nodes that believe they lead (and sometimes elsewhere),
consumes committed batches and snapshot loads. Then the network is healed, every node restarted,
and liveness is checked.

What survives a crash (the durability model): the quorum-state store and the log up to its flushed
offset (``MemoryRaftLog.crash`` drops the rest — the core must have flushed everything before
returning, which is checked), and the snapshots. Lost: the role state, the high watermark, in-flight
requests, parked fetches, queued appends, a partial snapshot download and the application state
(rebuilt from snapshot + committed log after the restart).

Invariants checked after every event (a violation raises :class:`SimulationFailure` naming the seed
and the command to replay it):

- election safety: at most one leader per epoch, over the whole run;
- epochs never decrease, neither a node's current epoch (across restarts) nor the persisted one;
  a persisted vote is never changed within an epoch;
- high watermark: per node never decreases; after a restart it is unknown until rediscovered, and
  the first value rediscovered is at least the largest the node ever had (committed means committed);
- committed data is never lost or changed: every node's application sees batches in offset order,
  and each batch (and the hash chain of everything before it) equals what any node ever saw
  committed at that offset; snapshot loads carry the same hash chain;
- a batch that commits at the offsets ``append()`` returned, in the appending leader's epoch, is the
  batch that was appended;
- log matching: two logs holding a batch with the same base offset and epoch hold the same bytes
  (after the chaos phase and at the end);
- liveness: once the network is healed and every node restarted, a leader is elected, every node
  follows it, and a new append commits on every node within a bounded time.

Replay one seed: ``python -m tests.kraft.raft.sim --seed 17 --voters 3 --verbose``.
"""

from __future__ import annotations

import argparse
import collections
import heapq
import random
import struct
import sys
import zlib
from dataclasses import dataclass

from kcompat.kraft.raft import (
    CommittedBatch, LeaderChanged, MemoryQuorumStateStore, MemoryRaftLog, NotLeaderError,
    RaftClient, RaftConfig, Reply, Role, Send, SnapshotLoaded,
)
from kcompat.kraft.raft.store import ElectionState
from kcompat.protocol import records as rb


class SimulationFailure(AssertionError):
    pass


@dataclass
class Scenario:
    """The knobs of one run, drawn from the seed (see :func:`scenario_for`)."""

    voters: int = 3
    observers: int = 0
    chaos_ms: int = 6000
    liveness_ms: int = 30000
    loss: float = 0.02
    duplicate: float = 0.01
    min_delay_ms: int = 1
    max_delay_ms: int = 20
    fault_every_ms: int = 700
    append_every_ms: int = 150
    snapshots: bool = True
    pre_vote: bool = True
    snapshot_chunk: int = 7
    crash_after_persist: float = 0.05
    wire: bool = False


def scenario_for(seed: int, voters: int, wire: bool = False) -> Scenario:
    r = random.Random(seed * 7919 + voters)
    return Scenario(
        voters=voters,
        observers=1 if r.random() < 0.25 else 0,
        chaos_ms=r.choice((5000, 8000, 12000)),
        loss=r.choice((0.0, 0.01, 0.05, 0.2)),
        duplicate=r.choice((0.0, 0.01, 0.05)),
        max_delay_ms=r.choice((2, 20, 100, 400)),
        fault_every_ms=r.choice((500, 1000, 2500)),
        append_every_ms=r.choice((100, 200, 400)),
        snapshots=r.random() < 0.7,
        pre_vote=r.random() < 0.85,
        snapshot_chunk=r.choice((3, 7, 64, 1 << 20)),
        crash_after_persist=r.choice((0.0, 0.05, 0.2)),
        wire=wire,
    )


class CheckingStore(MemoryQuorumStateStore):
    """The quorum-state store, durable across crashes, checking what is written to it."""

    def __init__(self, sim: "Simulation", node_id: int) -> None:
        super().__init__()
        self.sim = sim
        self.node_id = node_id

    def write(self, state: ElectionState) -> None:
        old = self.state
        if old is not None:
            if state.epoch < old.epoch:
                self.sim.fail(f"node {self.node_id} persisted epoch {state.epoch} after {old.epoch}")
            if state.epoch == old.epoch and old.voted_id >= 0 and state.voted_id != old.voted_id:
                self.sim.fail(f"node {self.node_id} changed its vote in epoch {state.epoch}: "
                              f"{old.voted_id} -> {state.voted_id}")
        super().write(state)
        self.sim.just_persisted.add(self.node_id)


class App:
    """The replicated application: a hash chain over every committed batch. Its snapshot is
    ``(next offset, chain value)``."""

    SNAP = struct.Struct(">qI")

    def __init__(self) -> None:
        self.next_offset: int | None = None
        self.chain = 0
        self.appended = 0


class Node:
    def __init__(self, sim: "Simulation", node_id: int) -> None:
        self.id = node_id
        self.log = MemoryRaftLog()
        self.store = CheckingStore(sim, node_id)
        self.client: RaftClient | None = None
        self.incarnation = 0
        self.app = App()
        self.poll_token = 0
        self.poll_at: int | None = None
        self.max_epoch = 0
        self.max_hw = 0
        self.hw_known_since_start = False

    @property
    def alive(self) -> bool:
        return self.client is not None


class Simulation:
    def __init__(self, seed: int, scenario: Scenario, verbose: bool = False) -> None:
        self.seed = seed
        self.sc = scenario
        self.verbose = verbose
        self.rng = random.Random(seed)
        self.now = 0
        self.seq = 0
        self.queue: list = []
        voter_ids = list(range(1, scenario.voters + 1))
        self.voter_ids = frozenset(voter_ids)
        all_ids = voter_ids + list(range(scenario.voters + 1, scenario.voters + 1 + scenario.observers))
        self.nodes = {i: Node(self, i) for i in all_ids}
        self.partition: dict[int, int] = {}  # node -> group; absent = group 0
        self.blocked: set[tuple[int, int]] = set()  # one-way link failures (src, dst)
        self.loss = scenario.loss
        self.leaders: dict[int, int] = {}    # epoch -> leader
        self.committed: dict[int, tuple[int, int, int]] = {}  # base -> (last, epoch, crc)
        self.chain_at: dict[int, int] = {0: 0}  # next offset -> hash chain of everything before
        self.events = 0
        self.chaos = True
        self.just_persisted: set[int] = set()  # nodes that wrote their election state this step
        self.metrics: collections.Counter[str] = collections.Counter()
        self.appends = 0
        self.appended: dict[tuple[int, int], int] = {}  # (base offset, epoch) -> crc of the batch
        self.payload = 0

    # ------------------------------------------------------------------------------ reporting
    def fail(self, message: str) -> None:
        raise SimulationFailure(
            f"seed {self.seed} ({self.sc.voters} voters) at t={self.now}ms: {message}\n"
            f"replay: python -m tests.kraft.raft.sim --seed {self.seed} --voters {self.sc.voters}"
            f"{' --wire' if self.sc.wire else ''} --verbose")

    def trace(self, msg: str) -> None:
        if self.verbose:
            print(f"{self.now:>7} {msg}")

    # ------------------------------------------------------------------------------ scheduling
    def push(self, at: int, kind: str, *args) -> None:
        self.seq += 1
        heapq.heappush(self.queue, (at, self.seq, kind, args))

    def schedule_poll(self, node: Node, at: int) -> None:
        if node.poll_at is not None and node.poll_at <= at:
            return
        node.poll_token += 1
        node.poll_at = at
        self.push(at, "poll", node.id, node.incarnation, node.poll_token)

    def config_for(self, node_id: int) -> RaftConfig:
        return RaftConfig(node_id=node_id, voters=self.voter_ids, cluster_id="sim-cluster",
                          pre_vote=self.sc.pre_vote, fetch_snapshot_max_bytes=self.sc.snapshot_chunk,
                          fetch_max_bytes=4096)

    def start(self, node: Node) -> None:
        node.incarnation += 1
        node.app = App()
        node.poll_at = None
        node.hw_known_since_start = False
        rng = random.Random(self.seed * 1_000_003 + node.id * 1009 + node.incarnation)
        self.trace(f"node {node.id} starts (incarnation {node.incarnation})")
        node.client = RaftClient(self.config_for(node.id), node.log, node.store, rng, self.now)
        self.after_step(node)

    def crash(self, node: Node) -> None:
        if node.log.flushed_offset != node.log.end_offset:
            self.fail(f"node {node.id} left unflushed records {node.log.flushed_offset}.."
                      f"{node.log.end_offset} after returning")
        self.trace(f"node {node.id} crashes in {node.client.quorum.state!r}")
        self.metrics.update(node.client.metrics)
        self.metrics["crashes"] += 1
        node.log.crash()
        node.client = None

    # ------------------------------------------------------------------------------ network
    def connected(self, a: int, b: int) -> bool:
        """Whether a message from ``a`` reaches ``b`` (partitions, and one-way link failures)."""
        return self.partition.get(a, 0) == self.partition.get(b, 0) and (a, b) not in self.blocked

    def transmit(self, src: int, dst: int, kind: str, payload) -> None:
        part = self.partition
        if (part and part.get(src, 0) != part.get(dst, 0)) or (self.blocked and (src, dst) in self.blocked):
            return
        random_ = self.rng.random
        if random_() < self.loss:
            return
        copies = 2 if random_() < self.sc.duplicate else 1
        lo, span = self.sc.min_delay_ms, self.sc.max_delay_ms - self.sc.min_delay_ms + 1
        for _ in range(copies):
            self.push(self.now + lo + int(random_() * span), kind, src, dst, payload)

    def dispatch(self, node: Node, outbound: list) -> None:
        for msg in outbound:
            if self.verbose:
                self.trace(f"  {node.id} -> {msg.destination if type(msg) is Send else msg.reply_to[0]}: "
                           f"{describe(msg.request if type(msg) is Send else msg.response)}")
            if type(msg) is Send:
                request = encode_decode(msg.request, self.sc.wire)
                self.transmit(node.id, msg.destination, "request",
                              (node.incarnation, msg.request_id, request))
            elif type(msg) is Reply:
                src_node, src_inc, request_id = msg.reply_to
                response = encode_decode(msg.response, self.sc.wire)
                self.transmit(node.id, src_node, "response", (src_inc, request_id, response))

    # ------------------------------------------------------------------------------ one step
    def after_step(self, node: Node) -> None:
        client = node.client
        result = client.poll(self.now)
        self.dispatch(node, result.outbound)
        self.schedule_poll(node, result.deadline_ms)
        self.consume(node)
        self.check_node(node)
        if node.id in self.just_persisted:
            self.just_persisted.discard(node.id)
            # a crash right after a vote or epoch change was persisted (and answered): what was
            # promised must survive the restart
            if self.chaos and self.rng.random() < self.sc.crash_after_persist:
                self.crash(node)
                self.push(self.now + self.rng.randint(1, 200), "restart", node.id)

    def consume(self, node: Node) -> None:
        app = node.app
        for ev in node.client.take_events():
            t = type(ev)
            if t is CommittedBatch:
                if app.next_offset is None:
                    app.next_offset = 0
                if ev.base_offset != app.next_offset:
                    self.fail(f"node {node.id} got batch {ev.base_offset} while at {app.next_offset}")
                crc = zlib.crc32(ev.data)
                mine = (ev.last_offset, ev.epoch, crc)
                expected = self.appended.get((ev.base_offset, ev.epoch))
                if expected is not None and expected != crc and not ev.is_control:
                    self.fail(f"node {node.id} committed at {ev.base_offset} in epoch {ev.epoch} "
                              f"another batch than the leader's append() placed there")
                seen = self.committed.get(ev.base_offset)
                if seen is None:
                    self.committed[ev.base_offset] = mine
                elif seen != mine:
                    self.fail(f"node {node.id} committed {mine} at {ev.base_offset}, "
                              f"another node committed {seen}")
                app.chain = zlib.crc32(ev.data, app.chain)
                app.next_offset = ev.last_offset + 1
                chain = self.chain_at.setdefault(app.next_offset, app.chain)
                if chain != app.chain:
                    self.fail(f"node {node.id}: committed history up to {app.next_offset} differs")
            elif t is SnapshotLoaded:
                next_offset, chain = App.SNAP.unpack(ev.data)
                if next_offset != ev.snapshot_id.offset:
                    self.fail(f"node {node.id}: snapshot {ev.snapshot_id} holds state at {next_offset}")
                known = self.chain_at.get(next_offset)
                if known is None or known != chain:
                    self.fail(f"node {node.id}: snapshot {ev.snapshot_id} differs from committed history")
                self.trace(f"node {node.id} loads snapshot {tuple(ev.snapshot_id)}")
                app.next_offset, app.chain = next_offset, chain
            elif t is LeaderChanged:
                self.trace(f"node {node.id} sees leader {ev.leader.leader_id} epoch {ev.leader.epoch}")

    def check_node(self, node: Node) -> None:
        c = node.client
        q = c.quorum
        epoch = q.epoch
        if epoch < node.max_epoch:
            self.fail(f"node {node.id} epoch went back {node.max_epoch} -> {epoch}")
        node.max_epoch = epoch
        if q.role is Role.LEADER:
            other = self.leaders.setdefault(epoch, node.id)
            if other != node.id:
                self.fail(f"two leaders in epoch {epoch}: {other} and {node.id}")
        hw = c.high_watermark
        if hw is not None:
            if hw < node.max_hw:
                what = "after restart" if not node.hw_known_since_start else "within a run"
                self.fail(f"node {node.id} high watermark went back {node.max_hw} -> {hw} ({what})")
            node.max_hw = hw
            node.hw_known_since_start = True
            if hw > c.log.end_offset:
                self.fail(f"node {node.id} high watermark {hw} beyond its log end {c.log.end_offset}")

    def check_log_matching(self) -> None:
        seen: dict[tuple[int, int], int] = {}
        for node in self.nodes.values():
            for base, _last, epoch, data in node.log.batches():
                crc = zlib.crc32(data)
                if seen.setdefault((base, epoch), crc) != crc:
                    self.fail(f"two different batches at offset {base} in epoch {epoch}")

    # ------------------------------------------------------------------------------ events
    def handle(self, kind: str, args) -> None:
        if kind == "poll":
            node_id, incarnation, token = args
            node = self.nodes[node_id]
            if not node.alive or node.incarnation != incarnation or node.poll_token != token:
                return
            node.poll_at = None
            self.after_step(node)
        elif kind == "request":
            src, dst, (src_inc, request_id, request) = args
            node = self.nodes[dst]
            if not node.alive or not self.connected(src, dst):
                return
            node.client.handle_request(request, (src, src_inc, request_id), self.now)
            self.after_step(node)
        elif kind == "response":
            src, dst, (dst_inc, request_id, response) = args
            node = self.nodes[dst]
            if not node.alive or node.incarnation != dst_inc or not self.connected(src, dst):
                return
            node.client.handle_response(request_id, response, self.now)
            self.after_step(node)
        elif kind == "restart":
            node = self.nodes[args[0]]
            if not node.alive:
                self.start(node)
        elif kind == "fault":
            self.fault()
            self.push(self.now + self.rng.randint(1, 2 * self.sc.fault_every_ms), "fault")
        elif kind == "append":
            self.append_somewhere()
            self.push(self.now + self.rng.randint(1, 2 * self.sc.append_every_ms), "append")
        else:
            raise AssertionError(kind)

    def append_somewhere(self) -> None:
        live = [n for n in self.nodes.values() if n.alive]
        if not live:
            return
        # mostly at a node that believes it leads; sometimes anywhere (NotLeaderError)
        leaders = [n for n in live if n.client.is_leader]
        node = self.rng.choice(leaders) if leaders and self.rng.random() < 0.9 else self.rng.choice(live)
        count = self.rng.randint(1, 3)
        records = []
        for _ in range(count):
            self.payload += 1
            records.append((self.now, None, b"v%d" % self.payload, ()))
        batch = rb.build_batch(records)
        try:
            offset = node.client.append(batch, self.now)
        except NotLeaderError:
            return
        # if this batch commits, it is at the offsets append() returned, stamped with the epoch
        base = offset - count + 1
        stamped = bytearray(batch)
        rb.set_base_offset(stamped, 0, base)
        rb.set_partition_leader_epoch(stamped, 0, node.client.epoch)
        self.appended[(base, node.client.epoch)] = zlib.crc32(stamped)
        self.appends += 1
        self.trace(f"node {node.id} appends up to offset {offset}")
        self.after_step(node)

    def fault(self) -> None:
        """One fault, weighted towards the ones that hurt: the leader crashes or is cut off."""
        r = self.rng.random()
        nodes = list(self.nodes.values())
        live = [n for n in nodes if n.alive]
        leaders = [n for n in live if n.client.is_leader]
        if r < 0.30:
            victims = leaders if leaders and r < 0.20 else live
            if victims:
                self.crash(self.rng.choice(victims))
        elif r < 0.50:
            dead = [n for n in nodes if not n.alive]
            if dead:
                self.start(self.rng.choice(dead))
        elif r < 0.65 and len(nodes) > 1:
            ids = [n.id for n in nodes]
            if leaders and r < 0.58:
                cut_off = {self.rng.choice(leaders).id}   # isolate a leader
            else:
                self.rng.shuffle(ids)
                cut_off = set(ids[:self.rng.randint(1, len(ids) - 1)])
            self.partition = {i: (1 if i in cut_off else 0) for i in ids}
            self.trace(f"partition {sorted(cut_off)} | {sorted(set(ids) - cut_off)}")
        elif r < 0.70 and len(nodes) > 1:
            src, dst = self.rng.sample([n.id for n in nodes], 2)
            self.blocked.add((src, dst))
            self.trace(f"link {src} -> {dst} fails")
        elif r < 0.78:
            self.partition = {}
            self.blocked = set()
            self.trace("network healed")
        elif r < 0.88:
            if self.sc.snapshots:
                self.snapshot_somewhere()
        elif r < 0.95:
            if leaders:
                node = self.rng.choice(leaders)
                self.trace(f"node {node.id} resigns")
                node.client.resign(self.now)
                self.after_step(node)
        else:
            self.loss = self.rng.choice((0.0, self.sc.loss, 0.3))

    def snapshot_somewhere(self) -> None:
        live = [n for n in self.nodes.values() if n.alive and n.app.next_offset]
        if not live:
            return
        node = self.rng.choice(live)
        hw = node.client.high_watermark
        if hw is not None and node.app.next_offset <= hw:
            sid = node.client.create_snapshot(
                node.app.next_offset, App.SNAP.pack(node.app.next_offset, node.app.chain), self.now)
            self.trace(f"node {node.id} snapshot {tuple(sid)}, log start {node.log.start_offset}")
            self.after_step(node)

    # ------------------------------------------------------------------------------ run
    def run_until(self, t_end: int, stop=None) -> bool:
        budget = 400_000
        while self.queue and self.queue[0][0] <= t_end:
            at, _seq, kind, args = heapq.heappop(self.queue)
            self.now = at
            self.handle(kind, args)
            self.events += 1
            if self.events > budget:
                self.fail("event storm: more than 400000 events")
            if stop is not None and stop():
                return True
        self.now = max(self.now, t_end)
        return stop is not None and stop()

    def run(self) -> "Simulation":
        try:
            return self._run()
        except SimulationFailure:
            raise
        except Exception as e:  # the core refused to go on (RaftInvariantError) or crashed
            if self.verbose:
                import traceback
                traceback.print_exc()
            self.fail(f"{type(e).__name__}: {e}")

    def _run(self) -> "Simulation":
        for node in self.nodes.values():
            self.start(node)
        self.push(self.rng.randint(0, self.sc.fault_every_ms), "fault")
        self.push(self.rng.randint(0, self.sc.append_every_ms), "append")
        self.run_until(self.sc.chaos_ms)
        self.check_log_matching()
        self.heal()
        self.check_liveness()
        self.check_log_matching()
        for node in self.nodes.values():
            self.metrics.update(node.client.metrics)
        return self

    def heal(self) -> None:
        self.trace("--- heal: network repaired, every node restarted ---")
        self.partition = {}
        self.blocked = set()
        self.loss = 0.0
        self.chaos = False
        # stop faults and appends: drop their pending events
        self.queue = [e for e in self.queue if e[2] not in ("fault", "append", "restart")]
        heapq.heapify(self.queue)
        for node in self.nodes.values():
            if not node.alive:
                self.start(node)

    def agreed_leader(self) -> Node | None:
        views = {n.client.leader_and_epoch for n in self.nodes.values()}
        if len(views) != 1:
            return None
        (leader_id, _epoch), = views
        if leader_id < 0:
            return None
        leader = self.nodes[leader_id]
        return leader if leader.client.is_leader else None

    def check_liveness(self) -> None:
        """After healing: a leader that every node follows, and an append at it committed on every
        node. An append lost to a leadership change (legal: it was not committed) is retried at
        the next leader."""
        target: list = []  # [leader epoch, offset] of the append being waited for

        def progress() -> bool:
            leader = self.agreed_leader()
            if leader is None:
                return False
            epoch = leader.client.epoch
            if not target or target[0] != epoch:
                self.payload += 1
                batch = rb.build_batch([(self.now, None, b"final%d" % self.payload, ())])
                offset = leader.client.append(batch, self.now)
                self.trace(f"liveness append at node {leader.id} epoch {epoch} offset {offset}")
                target[:] = [epoch, offset]
                self.after_step(leader)
                return False
            return all(n.app.next_offset is not None and n.app.next_offset > target[1]
                       for n in self.nodes.values())

        if not self.run_until(self.now + self.sc.liveness_ms, progress):
            where = {n.id: (n.app.next_offset, n.client.high_watermark, repr(n.client.quorum.state))
                     for n in self.nodes.values()}
            self.fail(f"no commit on every node {self.sc.liveness_ms} ms after healing "
                      f"(waiting for {target}): {where}")
        leader = self.agreed_leader()
        # every committed batch is in the leader's log or below its snapshot
        batches = {b[0]: (b[1], b[2], zlib.crc32(b[3])) for b in leader.log.batches()}
        for base, seen in self.committed.items():
            if base >= leader.log.start_offset and batches.get(base) != seen:
                self.fail(f"committed batch at {base} missing from the final leader's log")


def describe(msg) -> str:
    """One line naming a KRaft message and its key fields, for --verbose."""
    name = type(msg).__name__
    try:
        if name == "FetchRequest":
            p = msg.topics[0].partitions[0]
            return f"Fetch(epoch={p.current_leader_epoch}, offset={p.fetch_offset}, last_epoch={p.last_fetched_epoch})"
        if name == "FetchResponse":
            if msg.error_code:
                return f"FetchResponse(error={msg.error_code})"
            p = msg.responses[0].partitions[0]
            extra = ""
            if p.diverging_epoch.epoch >= 0:
                extra = f", diverging=({p.diverging_epoch.end_offset}, {p.diverging_epoch.epoch})"
            if p.snapshot_id.epoch >= 0:
                extra = f", snapshot=({p.snapshot_id.end_offset}, {p.snapshot_id.epoch})"
            return (f"FetchResponse(error={p.error_code}, leader={p.current_leader.leader_id}, "
                    f"epoch={p.current_leader.leader_epoch}, hw={p.high_watermark}, "
                    f"bytes={len(p.records or b'')}{extra})")
        if name == "VoteRequest":
            p = msg.topics[0].partitions[0]
            from kcompat.kraft.raft.messages import is_pre_vote
            return (f"{'PreVote' if is_pre_vote(p) else 'Vote'}(epoch={p.candidate_epoch}, "
                    f"candidate={p.candidate_id}, last=({p.last_offset}, {p.last_offset_epoch}))")
        if name in ("VoteResponse", "BeginQuorumEpochResponse", "EndQuorumEpochResponse"):
            if msg.error_code:
                return f"{name}(error={msg.error_code})"
            p = msg.topics[0].partitions[0]
            granted = f", granted={p.vote_granted}" if name == "VoteResponse" else ""
            return f"{name}(error={p.error_code}, leader={p.leader_id}, epoch={p.leader_epoch}{granted})"
        if name in ("BeginQuorumEpochRequest", "EndQuorumEpochRequest"):
            p = msg.topics[0].partitions[0]
            return f"{name[:-7]}(leader={p.leader_id}, epoch={p.leader_epoch})"
        if name == "FetchSnapshotRequest":
            p = msg.topics[0].partitions[0]
            return f"FetchSnapshot(id=({p.snapshot_id.end_offset}, {p.snapshot_id.epoch}), position={p.position})"
        if name == "FetchSnapshotResponse":
            if msg.error_code:
                return f"FetchSnapshotResponse(error={msg.error_code})"
            p = msg.topics[0].partitions[0]
            return (f"FetchSnapshotResponse(error={p.error_code}, size={p.size}, position={p.position}, "
                    f"bytes={len(p.unaligned_records)})")
    except (IndexError, AttributeError):
        pass
    return name


def encode_decode(msg, wire: bool):
    """With ``wire``, put every message through the generated codecs at a version kcompat peers
    would use, so the simulation also checks that everything the core sends survives the wire."""
    if not wire:
        return msg
    cls = type(msg)
    version = WIRE_VERSIONS.get(cls.__name__, cls.VALID_VERSIONS[1])
    out = bytearray()
    msg.write(out, version)
    decoded, end = cls.read(memoryview(bytes(out)), 0, version)
    assert end == len(out)
    return decoded


WIRE_VERSIONS = {
    "FetchRequest": 17, "FetchResponse": 17, "VoteRequest": 1, "VoteResponse": 1,
    "BeginQuorumEpochRequest": 1, "BeginQuorumEpochResponse": 1, "EndQuorumEpochRequest": 1,
    "EndQuorumEpochResponse": 1, "FetchSnapshotRequest": 1, "FetchSnapshotResponse": 1,
}


def run_seed(seed: int, voters: int = 3, wire: bool = False, verbose: bool = False) -> Simulation:
    return Simulation(seed, scenario_for(seed, voters, wire), verbose).run()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--voters", type=int, default=3)
    ap.add_argument("--seeds", type=int, default=1, help="run this many seeds from --seed on")
    ap.add_argument("--wire", action="store_true", help="encode and decode every message")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)
    for seed in range(args.seed, args.seed + args.seeds):
        try:
            sim = run_seed(seed, args.voters, args.wire, args.verbose)
        except SimulationFailure as e:
            print(e, file=sys.stderr)
            return 1
        print(f"seed {seed}: ok — {sim.events} events, {sim.appends} appends, "
              f"{len(sim.committed)} committed batches, max epoch {max(sim.leaders, default=0)}, "
              f"simulated {sim.now} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
