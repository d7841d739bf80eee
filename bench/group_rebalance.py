"""Group join time and rolling-restart pause: classic eager, classic cooperative-sticky, KIP-848 consumer.

Consumer groups of librdkafka (confluent-kafka) consumers with the classic protocol (eager and
cooperative-sticky assignment) against the KIP-848 consumer protocol, on one kcompat broker.

    python3 bench/group_rebalance.py [--rounds 3] [--consumers 10] [--partitions 30] [--rate 2000]

One kcompat broker (``kcompat.testing.Broker``, child process) with
``group.initial.rebalance.delay.ms=0``, ``group.consumer.heartbeat.interval.ms=500`` and
``group.consumer.session.timeout.ms=10000``; one topic of ``--partitions`` partitions; a producer
thread writing ``--rate`` small records a second, round-robin over every partition, for the whole
run. Per run, a fresh group of ``--consumers`` confluent-kafka consumers, each in its own thread
polling its own ``Consumer`` (``poll(0.1)``) and recording the monotonic time of every record it
gets, in one of three modes:

- ``classic-eager``: ``group.protocol=classic``, ``partition.assignment.strategy=range``;
- ``classic-coop``: ``group.protocol=classic``, ``partition.assignment.strategy=cooperative-sticky``;
- ``consumer``: ``group.protocol=consumer`` (KIP-848; the group's timing comes from the broker).

Classic modes use ``session.timeout.ms=10000``, ``heartbeat.interval.ms=500``. Every mode uses
``auto.offset.reset=latest`` (a new group starts at the end; the producer keeps records coming) and
auto-commit (librdkafka's defaults). A consumer is "consuming" once it has received a record since
it was started. Figures per run:

- ``join``: from starting all the consumers (each thread creates its consumer and subscribes) until
  every one is consuming;
- ``baseline gaps``: a control, the summed gaps longer than ``--gap-ms`` in the group's merged
  stream of receive times over ``--settle`` seconds of steady state after the join (should be 0);
- ``restart``: wall time of a rolling restart: for each consumer in turn, ``close()`` it (it leaves
  the group), create a new consumer with the same configuration and group, subscribe, and wait until
  it is consuming before moving to the next;
- ``pause``: over the restart, the summed gaps longer than ``--gap-ms`` (default 200) in the
  merged stream of receive times of the whole group (from the restart's start to its end);
  ``longest gap``: the longest single gap there, whatever its length. The line of each run also
  gives the longest gap of a single consumer over the restart (its own records only: how long a
  consumer stopped while the rest of the group went on), for comparison.

Modes alternate within each round (eager, coop, consumer; eager, coop, consumer; ...). Every wait has
a timeout (``--join-timeout``, ``--restart-timeout``, ``--close-timeout``); a run that does not
converge is reported as such (what was waited for, and the group as DescribeConsumerGroups sees it)
and leaves no number. Consumers are closed at the end of every run, the broker at the end.

Prints one line per run, then the median and max of each figure per mode, the load average before
and after, the warnings and errors librdkafka and the broker logged (per mode), and a JSON line.
No target, no assertion on timing; exit status 0 unless the broker or the topic cannot be set up.
With the defaults it takes about 3-5 minutes on a 2-core machine.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import logging
import os
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import confluent_kafka as ck  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from kcompat.testing import Broker  # noqa: E402

BROKER_CONFIG = {"group.initial.rebalance.delay.ms": "0", "group.consumer.heartbeat.interval.ms": "500",
                 "group.consumer.min.heartbeat.interval.ms": "500", "group.consumer.session.timeout.ms": "10000",
                 "group.consumer.min.session.timeout.ms": "10000"}
CLASSIC = {"group.protocol": "classic", "session.timeout.ms": 10000, "heartbeat.interval.ms": 500}
MODES = {
    "classic-eager": {**CLASSIC, "partition.assignment.strategy": "range"},
    "classic-coop": {**CLASSIC, "partition.assignment.strategy": "cooperative-sticky"},
    # librdkafka rejects session.timeout.ms, heartbeat.interval.ms and partition.assignment.strategy here
    "consumer": {"group.protocol": "consumer"},
}
COMMON = {"auto.offset.reset": "latest", "enable.auto.commit": True}
TOPIC = "rebalance"
FIGURES = (("join", "join s"), ("baseline", "baseline gaps s"), ("restart", "restart s"), ("pause", "pause s"),
           ("longest_gap", "longest gap s"), ("member_gap", "1-consumer stall s"))


def loadavg() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


class LogSink(logging.Handler):
    """librdkafka's log lines (through confluent-kafka's ``logger``) and error callbacks, warnings
    and worse, counted per mode."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        self.mode = "-"
        self._lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:   # pragma: no cover - a malformed record still counts
            text = str(record.msg)
        self.add(f"log {record.levelname}: {text}")

    def add(self, text: str) -> None:
        with self._lock:
            self.lines[self.mode][text] += 1

    def error_cb(self, err: ck.KafkaError) -> None:
        self.add(f"error_cb: {err.name()}: {err.str()}")

    def logger(self) -> logging.Logger:
        log = logging.Logger("rdkafka")   # not registered: nothing else sees these lines
        log.addHandler(self)
        log.propagate = False
        return log


class Member(threading.Thread):
    """One consumer in its own thread: create, subscribe, poll(0.1) until told to stop, close."""

    def __init__(self, name: str, conf: dict, sink: LogSink) -> None:
        super().__init__(name=name, daemon=True)
        self.conf = conf
        self.sink = sink
        self.times: list[float] = []   # appended by this thread only
        self.t_first: float | None = None
        self.first = threading.Event()
        self.stopping = threading.Event()
        self.closed = threading.Event()
        self.close_s: float | None = None
        self.assigned = 0              # partitions assigned, refreshed every 0.5 s (for diagnostics)
        self.error: str | None = None

    def run(self) -> None:
        try:
            c = ck.Consumer({**self.conf, "client.id": self.name, "error_cb": self.sink.error_cb,
                             "logger": self.sink.logger()})
            c.subscribe([TOPIC])
            next_check = 0.0
            while not self.stopping.is_set():
                m = c.poll(0.1)
                now = time.monotonic()
                if now >= next_check:
                    self.assigned = len(c.assignment())
                    next_check = now + 0.5
                if m is None:
                    continue
                if m.error() is not None:
                    self.sink.add(f"message error: {m.error().name()}: {m.error().str()}")
                    continue
                self.times.append(now)
                if self.t_first is None:
                    self.t_first = now
                    self.first.set()
            t = time.monotonic()
            c.close()
            self.close_s = time.monotonic() - t
        except Exception as e:
            self.error = f"{type(e).__name__}: {e}"
            self.sink.add(f"consumer thread {self.name}: {self.error}")
        finally:
            self.closed.set()


class ProducerThread(threading.Thread):
    """``rate`` records/s of 16 bytes, round-robin over the partitions, in 10 ms ticks."""

    def __init__(self, bootstrap: str, partitions: int, rate: int) -> None:
        super().__init__(name="producer", daemon=True)
        self.p = ck.Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5})
        self.partitions = partitions
        self.rate = rate
        self.stopping = threading.Event()
        self.produced = 0
        self.failed = 0
        self.errors: collections.Counter = collections.Counter()

    def _report(self, err, _msg) -> None:
        if err is not None:
            self.failed += 1
            self.errors[str(err)] += 1

    def run(self) -> None:
        tick = 0.01
        per_tick = self.rate * tick
        owed = 0.0
        nxt = time.monotonic()
        value = b"x" * 16
        while not self.stopping.is_set():
            owed += per_tick
            while owed >= 1:
                try:
                    self.p.produce(TOPIC, value, partition=self.produced % self.partitions, on_delivery=self._report)
                    self.produced += 1
                    owed -= 1
                except BufferError:
                    break
            self.p.poll(0)
            nxt += tick
            delay = nxt - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                nxt = time.monotonic()   # behind: do not burst to catch up
        self.p.flush(10)


def gaps(times: list[float], start: float, end: float, limit: float) -> tuple[float, float]:
    """The summed gaps longer than ``limit`` in ``times`` within [start, end], and the longest gap
    (of any length), counting from ``start`` (the window's start is a point of the stream) to ``end``."""
    points = [start] + sorted(t for t in times if start < t <= end) + [end]
    spans = [b - a for a, b in zip(points, points[1:])]
    return sum(x for x in spans if x > limit), max(spans, default=0.0)


def member_gap(members: list[Member], start: float, end: float) -> float:
    """The longest gap between two records of one consumer within [start, end] (any consumer)."""
    longest = 0.0
    for m in members:
        ts = [t for t in list(m.times) if start < t <= end]
        longest = max([longest, *(b - a for a, b in zip(ts, ts[1:]))])
    return longest


def describe_group(bootstrap: str, group: str) -> str:
    """The group as DescribeConsumerGroups sees it, one line (for a run that did not converge)."""
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        d = admin.describe_consumer_groups([group], request_timeout=10)[group].result(15)
        members = ", ".join(f"{m.client_id}:{len(m.assignment.topic_partitions) if m.assignment else 0}"
                            for m in sorted(d.members, key=lambda m: m.client_id))
        gtype = getattr(d, "type", None)
        return (f"state {d.state.name}, type {gtype.name if gtype is not None else '?'}, "
                f"{len(d.members)} members (client:partitions) [{members}]")
    except Exception as e:
        return f"describe failed: {type(e).__name__}: {e}"


def run_once(bootstrap: str, mode: str, rnd: int, args, sink: LogSink) -> dict:
    sink.mode = mode
    group = f"bench-{mode}-{rnd}-{uuid.uuid4().hex[:8]}"
    conf = {"bootstrap.servers": bootstrap, "group.id": group, **COMMON, **MODES[mode]}
    result: dict = {"mode": mode, "round": rnd, "group": group, "failed": None, "wall_start": time.time(),
                    "load_before": os.getloadavg()[0]}
    gap = args.gap_ms / 1000
    n = args.consumers
    everyone: list[Member] = []

    def member(i: int, gen: int) -> Member:
        m = Member(f"{mode}-c{i}-g{gen}", conf, sink)
        everyone.append(m)
        m.start()
        return m

    def consuming_state(ms: list[Member]) -> str:
        return (f"{sum(m.first.is_set() for m in ms)}/{len(ms)} consuming, assigned partitions "
                f"{[m.assigned for m in ms]}")

    members: list[Member] = []
    try:
        t0 = time.monotonic()
        members = [member(i, 0) for i in range(n)]
        deadline = t0 + args.join_timeout
        while not all(m.first.is_set() for m in members) and time.monotonic() < deadline:
            time.sleep(0.01)
        if not all(m.first.is_set() for m in members):
            result["failed"] = f"join: after {args.join_timeout:g} s {consuming_state(members)}"
            return result
        result["join"] = max(m.t_first for m in members) - t0

        t_settle = time.monotonic()
        time.sleep(args.settle)
        t_r0 = time.monotonic()
        result["baseline"] = gaps([t for m in members for t in list(m.times)], t_settle, t_r0, gap)[0]

        steps = []
        for i in range(n):
            t_step = time.monotonic()
            old = members[i]
            old.stopping.set()
            if not old.closed.wait(args.close_timeout):
                result["failed"] = f"restart {i + 1}/{n}: close() did not return within {args.close_timeout:g} s"
                return result
            new = members[i] = member(i, 1)
            if not new.first.wait(args.restart_timeout):
                result["failed"] = (f"restart {i + 1}/{n}: the new consumer received no record within "
                                    f"{args.restart_timeout:g} s; {consuming_state(members)} (since their start)")
                return result
            steps.append({"close": old.close_s, "step": time.monotonic() - t_step})
        t_r1 = time.monotonic()
        result["restart"] = t_r1 - t_r0
        result["pause"], result["longest_gap"] = gaps([t for m in everyone for t in list(m.times)], t_r0, t_r1, gap)
        result["member_gap"] = member_gap(everyone, t_r0, t_r1)
        result["steps"] = steps
        return result
    finally:
        if result["failed"]:
            result["describe"] = describe_group(bootstrap, group)
        for m in members:
            m.stopping.set()
        deadline = time.monotonic() + args.close_timeout
        stuck = [m.name for m in members if not m.closed.wait(max(0.0, deadline - time.monotonic()))]
        if stuck:
            result["stuck"] = stuck
            sink.add(f"close() did not return within {args.close_timeout:g} s at the end of a run")
        result["close_max"] = max((m.close_s for m in everyone if m.close_s is not None), default=0.0)
        result["wall_end"] = time.time()


def print_run(r: dict) -> None:
    head = f"round {r['round'] + 1} {r['mode']:13s}"
    if r["failed"]:
        print(f"{head} DID NOT CONVERGE: {r['failed']}\n{' ' * len(head)} group: {r.get('describe')}"
              + (f"; close() stuck: {r['stuck']}" if r.get("stuck") else ""), flush=True)
        return
    slowest = max(r["steps"], key=lambda s: s["step"])
    print(f"{head} join {r['join']:6.2f} s  baseline gaps {r['baseline']:5.2f} s  restart {r['restart']:6.2f} s  "
          f"pause {r['pause']:6.2f} s  longest gap {r['longest_gap']:5.3f} s  (of one consumer {r['member_gap']:.2f} s, slowest step {slowest['step']:.2f} s, "
          f"longest close {r['close_max']:.2f} s)  load {r['load_before']:.2f}"
          + (f"; close() stuck: {r['stuck']}" if r.get("stuck") else ""), flush=True)


def broker_warnings(log: str, runs: list[dict]) -> dict[str, collections.Counter]:
    """The broker's WARNING/ERROR lines, by the mode whose run was going on (by wall clock)."""
    out: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for line in log.splitlines():
        parts = line.split(" ", 3)
        if len(parts) < 4 or parts[1] not in ("WARNING", "ERROR", "CRITICAL"):
            continue
        try:
            ts = datetime.datetime.fromisoformat(parts[0].replace("Z", "+00:00")).timestamp()
        except ValueError:
            ts = None
        mode = next((r["mode"] for r in runs if ts is not None and r["wall_start"] <= ts <= r["wall_end"] + 1), "-")
        out[mode][f"{parts[1]} {parts[2]} {parts[3]}"] += 1
    return out


def print_lines(title: str, lines: dict[str, collections.Counter], limit: int = 8) -> None:
    total = sum(sum(c.values()) for c in lines.values())
    print(f"\n{title}: {total}" + ("" if total else " (none)"))
    for mode, counter in lines.items():
        if not counter:
            continue
        print(f"  {mode}: {sum(counter.values())} lines, {len(counter)} distinct")
        for text, count in counter.most_common(limit):
            print(f"    {count:5d} x {text[:300]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="runs of each mode (modes alternate within a round)")
    ap.add_argument("--consumers", type=int, default=10)
    ap.add_argument("--partitions", type=int, default=30)
    ap.add_argument("--rate", type=int, default=2000, help="records produced per second")
    ap.add_argument("--gap-ms", type=float, default=200, help="a gap in the group's records longer than this counts")
    ap.add_argument("--settle", type=float, default=2.0, help="seconds of steady state between join and restart")
    ap.add_argument("--join-timeout", type=float, default=60)
    ap.add_argument("--restart-timeout", type=float, default=30, help="per restarted consumer")
    ap.add_argument("--close-timeout", type=float, default=30)
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    ap.add_argument("--broker-log", type=Path, help="copy the broker's log here at the end")
    args = ap.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for m in modes:
        if m not in MODES:
            ap.error(f"unknown mode {m!r}")

    t_begin = time.monotonic()
    load_before = loadavg()
    print(f"confluent-kafka {ck.__version__}, librdkafka {ck.libversion()[0]}; {args.consumers} consumers, "
          f"{args.partitions} partitions, {args.rate} records/s, gaps > {args.gap_ms:.0f} ms; load {load_before}",
          flush=True)
    sink = LogSink()
    runs: list[dict] = []
    with Broker(BROKER_CONFIG) as broker:
        bootstrap = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, args.partitions, 1)])[TOPIC].result(60)
        deadline = time.monotonic() + 60
        while True:
            parts = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions
            if len(parts) == args.partitions and all(p.leader >= 0 for p in parts.values()):
                break
            if time.monotonic() > deadline:
                print("the topic's partitions have no leader after 60 s", file=sys.stderr)
                return 1
            time.sleep(0.1)
        producer = ProducerThread(bootstrap, args.partitions, args.rate)
        producer.start()
        t_prod = time.monotonic()
        time.sleep(1)
        try:
            for rnd in range(args.rounds):
                for mode in modes:
                    r = run_once(bootstrap, mode, rnd, args, sink)
                    runs.append(r)
                    print_run(r)
        finally:
            producer.stopping.set()
            producer.join(30)
            prod_s = time.monotonic() - t_prod
            producer.p = admin = None   # let the clients go before the broker stops (no disconnect noise)
            log = broker.log_text()
            if args.broker_log:
                args.broker_log.write_text(log)
    load_after = loadavg()
    elapsed = time.monotonic() - t_begin

    print(f"\nmedian / max over {args.rounds} round(s), seconds ({args.consumers} consumers, {args.partitions} "
          f"partitions; pause = summed gaps > {args.gap_ms:.0f} ms in the group's records during the rolling restart)")
    header = f"{'mode':13s} {'converged':>9s}" + "".join(f"  {label:>15s}" for _, label in FIGURES)
    print(header)
    summary = {}
    for mode in modes:
        rs = [r for r in runs if r["mode"] == mode]
        ok = [r for r in rs if not r["failed"]]
        row = f"{mode:13s} {f'{len(ok)}/{len(rs)}':>9s}"
        summary[mode] = {"converged": len(ok), "runs": len(rs)}
        for key, _ in FIGURES:
            values = [r[key] for r in ok]
            if values:
                med, mx = statistics.median(values), max(values)
                row += f"  {med:7.3f} {mx:7.3f}" if key == "longest_gap" else f"  {med:7.2f} {mx:7.2f}"
                summary[mode][key] = {"median": round(med, 3), "max": round(mx, 3)}
            else:
                row += f"  {'-':>7s} {'-':>7s}"
        print(row)
    print(f"load average (1/5/15 min) before {load_before}, after {load_after}; producer {producer.produced} records "
          f"in {prod_s:.0f} s ({producer.produced / prod_s:.0f}/s), {producer.failed} failed"
          + (f" {dict(producer.errors)}" if producer.failed else "") + f"; total {elapsed:.0f} s")
    for r in runs:
        if r["failed"]:
            print(f"did not converge: round {r['round'] + 1} {r['mode']}: {r['failed']}; group: {r.get('describe')}")
    print_lines("librdkafka warnings/errors", sink.lines)
    print_lines("broker WARNING/ERROR lines", broker_warnings(log, runs))
    print(json.dumps({"bench": "group_rebalance", "rounds": args.rounds, "consumers": args.consumers,
                      "partitions": args.partitions, "rate": args.rate, "gap_ms": args.gap_ms, **summary,
                      "load_before": load_before, "load_after": load_after, "seconds": round(elapsed, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
