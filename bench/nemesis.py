"""Nemesis soak (issue 25): a seeded schedule of faults on a 3-node kcompat cluster under load, then
checks that nothing Kafka guarantees was broken.

    python3 bench/nemesis.py [--runs N] [--seed S] [--fault-seconds F] [--members M] [--keep]

Each run starts a fresh :class:`tests.support.cluster.ProxiedCluster` (3 nodes, each broker and
controller voter, every node-to-node link through a switchable proxy) and two topics of 3
partitions, replication factor 3, ``min.insync.replicas=2``: ``nemesis-in`` and ``nemesis-out``.
Load, all confluent-kafka:

- an idempotent acks=all producer (:class:`tests.support.replication_load.SequentialProducer`)
  writing ``b"<partition>:<seq>"`` to every partition of ``nemesis-in``;
- a consumer group of ``--members`` consumers of ``nemesis-in``, each committing synchronously
  after every batch (:class:`tests.support.group_load.GroupReader`);
- a transactional copy ``nemesis-in`` -> ``nemesis-out`` (consume-transform-produce,
  ``send_offsets_to_transaction``, 10 % of transactions aborted on purpose;
  :func:`tests.support.txn_copy.copy_loop`) in group ``nemesis-copy``;
- both groups' committed offsets polled every 100 ms (:class:`tests.support.group_load.OffsetMonitor`).

The nemesis then runs the run's :func:`schedule` (from the seed alone), one fault at a time with a
gap before each: ``kill`` (kill -9, down for the hold time, then restarted over its data),
``pause`` (SIGSTOP, SIGCONT after the hold time), ``isolate`` (every link of a node cut, both ways)
and ``partition`` (the links between two nodes cut); network faults reset connections (CUT) or
silently stall them (BLACKHOLE). A fault's victim is the active controller (DescribeQuorum), the
leader of a partition of ``nemesis-in`` or a fixed node. Then everything heals, the cluster must
come back in sync, the producer stops, the group and the copy catch up with the end of the input,
and the run checks (each a count of violations):

- ``lost``: an acknowledged record not in the log at its acknowledged offset;
- ``duplicated``: a value stored twice; ``reordered``: a partition not in produce order;
- ``offsets_backwards``: a group's committed offset (OffsetFetch) lower than one seen earlier or
  than a commit acknowledged before the fetch was sent (both groups);
- ``phantom_read``: a record the group consumed that is not in the final log at that offset (a
  read above the high watermark of data truncated later); ``group_missed``: an acknowledged record
  the group never consumed;
- ``copy_missing`` / ``copy_duplicated`` / ``copy_extra``: read_committed ``nemesis-out`` against
  the input log (each input value exactly once as ``b"T:" + value``; nothing else, nothing aborted);
- ``client_fatal``: the idempotent producer failed fatally (e.g. an out-of-order sequence);
- ``stuck``: the cluster or a client did not recover within the generous time bounds (a node that
  does not restart, an ISR that does not refill, a consumer or the copy that does not catch up, a
  transaction left hanging).

Per run and in total it prints the seed, faults by kind, records sent / acked / read and the count
of each violation; the last line is a one-line JSON summary. Exit status 1 if any violation.
The schedule is a function of the seed (``--print-schedule`` shows it); the victims the schedule
names by role and the interleaving with the load depend on timing, so a seed reproduces the same
faults, not the same microsecond. A run with violations keeps its data and broker logs (the
directory is printed); ``--keep`` keeps every run's.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import shutil
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.support.cluster import ProxiedCluster, wait_until  # noqa: E402
from tests.support.group_load import GroupReader, OffsetMonitor, committed_offset_violations  # noqa: E402
from tests.support.link_proxy import BLACKHOLE, CUT  # noqa: E402
from tests.support.replication_load import (  # noqa: E402
    SequentialProducer, decode, in_sync, log_violations, partition_states, read_partitions,
)
from tests.support.txn_copy import PREFIX, ConfluentCopyApp, copy_loop, new_stats  # noqa: E402

SRC, DST, GROUP, COPY_GROUP, TID = "nemesis-in", "nemesis-out", "nemesis-group", "nemesis-copy", "nemesis-copy-tid"
PARTS = [0, 1, 2]
NODES = [1, 2, 3]
OVERRIDES = {"replica.lag.time.max.ms": "3000", "default.replication.factor": "3", "min.insync.replicas": "2",
             "group.initial.rebalance.delay.ms": "0"}
VIOLATIONS = ("lost", "duplicated", "reordered", "offsets_backwards", "phantom_read", "group_missed",
              "copy_missing", "copy_duplicated", "copy_extra", "client_fatal", "stuck")
RECOVERY_S = 120  # liveness bound of every wait after the faults (a bound, never a speed target)
QUIET = {"log_level": 3}


@dataclass
class Fault:
    """One fault: ``gap`` seconds after the previous one ends, ``kind`` (kill / pause / isolate /
    partition) on the victim ``target`` ("controller": the active controller, "leader": the leader
    of partition ``partition`` of the input, "node": node ``node``) for ``hold`` seconds; ``peer``
    is the other end of a ``partition`` (a node other than the victim, by its rank ``peer`` among
    them); ``mode``: the proxies' mode for network faults."""
    gap: float
    kind: str
    target: str
    node: int
    partition: int
    peer: int
    mode: str
    hold: float


def schedule(seed: int, seconds: float) -> list[Fault]:
    """The faults of a run of ``seconds`` (their gaps and holds, plus ~3 s per restart, add up to
    at least ``seconds``), a pure function of ``seed``."""
    rng = random.Random(seed)
    faults: list[Fault] = []
    total = 0.0
    while total < seconds:
        kind = rng.choices(["kill", "pause", "isolate", "partition"], weights=[3, 2, 2, 2])[0]
        target = rng.choices(["controller", "leader", "node"], weights=[2, 2, 1])[0]
        hold = {"kill": rng.uniform(0.2, 6.0), "pause": rng.uniform(0.5, 8.0)}.get(kind, rng.uniform(1.0, 10.0))
        f = Fault(gap=round(rng.uniform(0.5, 4.0), 2), kind=kind, target=target, node=rng.choice(NODES),
                  partition=rng.choice(PARTS), peer=rng.randrange(2), mode=rng.choice([CUT, BLACKHOLE]),
                  hold=round(hold, 2))
        faults.append(f)
        total += f.gap + f.hold + (3.0 if kind == "kill" else 0.0)
    return faults


class Nemesis:
    """Applies faults to ``cluster`` and undoes them; ``counts``: Counter of applied faults by kind
    (``kill``, ``kill/controller``, ...: the victim was the active controller at that moment)."""

    def __init__(self, cluster: ProxiedCluster, log) -> None:
        self.cluster, self.log = cluster, log
        self.counts: Counter = Counter()
        self.restart_failures: list[str] = []
        self._killed: set[int] = set()

    def _addr(self, node: int) -> str:
        return f"127.0.0.1:{self.cluster.client_ports[node - 1]}"

    def victim(self, f: Fault, controller: int | None) -> int:
        if f.target == "controller" and controller is not None:
            return controller
        if f.target == "leader":
            for node in NODES:
                st = partition_states(self._addr(node), SRC, timeout=2.0).get(f.partition)
                if st is not None and st.leader in NODES:
                    return st.leader
        return f.node

    def apply(self, f: Fault) -> None:
        c = self.cluster
        controller = c.leader_id()
        v = self.victim(f, controller)
        tag = f.kind + ("/controller" if v == controller else "")
        self.counts[tag] += 1
        if f.kind == "kill":
            self.log(f"  kill -9 node {v} for {f.hold:.1f}s ({tag})")
            c.kill9(v)
            self._killed.add(v)
            time.sleep(f.hold)
            self.restart(v)
        elif f.kind == "pause":
            self.log(f"  SIGSTOP node {v} for {f.hold:.1f}s ({tag})")
            c.pause(v)
            try:
                time.sleep(f.hold)
            finally:
                c.resume(v)
        else:
            if f.kind == "isolate":
                self.log(f"  isolate node {v} ({f.mode}) for {f.hold:.1f}s ({tag})")
                c.mesh.isolate(v, f.mode)
            else:
                peer = [n for n in NODES if n != v][f.peer]
                self.log(f"  partition {v} <-> {peer} ({f.mode}) for {f.hold:.1f}s ({tag})")
                c.mesh.partition(v, peer, f.mode)
            try:
                time.sleep(f.hold)
            finally:
                c.mesh.heal()

    def restart(self, node: int) -> None:
        for attempt in range(3):
            try:
                self.cluster.restart(node, timeout=60)
                self._killed.discard(node)
                return
            except Exception as e:  # noqa: BLE001 - reported as "stuck" by the run
                self.restart_failures.append(f"node {node} restart attempt {attempt + 1}: {e}"[:2000])
                self.cluster.node(node).kill9()

    def heal_all(self) -> None:
        self.cluster.mesh.heal()
        for n in list(self.cluster._paused):
            self.cluster.resume(n)
        for n in list(self._killed):
            self.restart(n)


def sync_report(cluster: ProxiedCluster) -> str:
    """Per running node: the quorum leader it reports and the partitions of both topics whose ISR
    is not every replica (for a ``stuck`` message)."""
    out = []
    for n in NODES:
        if cluster.node(n).proc is None:
            out.append(f"node {n}: down")
            continue
        q = cluster.quorum(via=n)
        lag = []
        for topic in (SRC, DST):
            states = partition_states(f"127.0.0.1:{cluster.client_ports[n - 1]}", topic)
            lag += [f"{topic}-{p} leader {st.leader} epoch {st.leader_epoch} isr {st.isr}"
                    for p, st in sorted(states.items()) if sorted(st.isr) != sorted(st.replicas) or st.leader < 0]
            lag += [f"{topic}-{p} missing" for p in PARTS if p not in states]
        out.append(f"node {n}: quorum leader {q.leader_id if q else None} epoch {q.leader_epoch if q else None}; "
                   f"not in sync: {lag or 'none'}")
    return "; ".join(out)


def create_topics(bootstrap: str, timeout: float = 90.0) -> None:
    """Both topics; retried while the answer is retriable (NOT_CONTROLLER: the quorum of a new
    cluster on a loaded machine may elect again right after start-up)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    todo = [SRC, DST]
    deadline = time.monotonic() + timeout
    while todo:
        futures = admin.create_topics([NewTopic(t, len(PARTS), 3, config={"min.insync.replicas": "2"})
                                       for t in todo], operation_timeout=30, request_timeout=30)
        for t, f in futures.items():
            try:
                f.result(60)
                todo.remove(t)
            except KafkaException as e:
                err = e.args[0]
                if err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    todo.remove(t)
                elif not err.retriable() and err.code() != KafkaError.NOT_CONTROLLER or time.monotonic() > deadline:
                    raise
        if todo:
            time.sleep(0.5)


def high_watermarks(bootstrap: str, topic: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "nemesis-watermarks", **QUIET})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1] for p in PARTS}
    finally:
        c.close()


def run_once(seed: int, fault_seconds: float, members: int, root: Path, log,
             faults: list[Fault] | None = None) -> dict:
    """One run (see the module docstring) in directory ``root``, of ``faults`` (default
    ``schedule(seed, fault_seconds)``); ``log(line)`` prints progress. Returns its numbers:
    ``faults`` {kind: n}, ``records`` {sent, acked, read, group_read, copied, copy_txns,
    copy_failed_txns}, ``violations`` {kind: n} for every kind of :data:`VIOLATIONS`, ``examples``
    {kind: [text]}, ``seconds``."""
    t0 = time.monotonic()
    violations: dict[str, list[str]] = {k: [] for k in VIOLATIONS}
    records = {"sent": 0, "acked": 0, "read": 0, "group_read": 0, "copied": 0, "copy_txns": 0, "copy_failed_txns": 0}
    root.mkdir(parents=True, exist_ok=True)
    cluster = ProxiedCluster(root, overrides=OVERRIDES)
    nemesis = Nemesis(cluster, log)
    writer = reader = copy_monitor = copy_thread = app = handler = None
    copy_stats = new_stats()
    copy_errors: list[str] = []
    ends: dict[int, int] = {}
    stop = threading.Event()  # the copy gives up at its next idle poll
    try:
        cluster.start()
        bs = cluster.bootstrap
        create_topics(bs)
        wait_until(lambda: in_sync(cluster, SRC, PARTS) and in_sync(cluster, DST, PARTS), 60, "topics in sync")
        writer = SequentialProducer(bs, SRC, PARTS, interval=0.01).start()
        reader = GroupReader(bs, SRC, GROUP, PARTS, members=members).start()
        copy_monitor = OffsetMonitor(bs, COPY_GROUP, SRC, PARTS).start()
        client_log = logging.getLogger(f"nemesis-copy-{seed}")
        client_log.propagate = False
        client_log.setLevel(logging.DEBUG)
        handler = logging.FileHandler(root / "copy-clients.log")
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        client_log.addHandler(handler)
        # librdkafka's transaction and consumer-group debug lines of the copy go to the run directory
        app = ConfluentCopyApp(bs, SRC, COPY_GROUP, TID, consumer_conf={"debug": "cgrp", "log_level": 7, "logger": client_log},
                               producer_conf={"debug": "eos", "log_level": 7, "logger": client_log})

        def copy_main():
            try:
                copy_loop(app, DST, lambda: stop.is_set() or (bool(ends) and app.committed() == ends), copy_stats,
                          time.monotonic() + fault_seconds + 6 * RECOVERY_S, random.Random(seed), abort_ratio=0.1,
                          batch=(20, 150), on_commit=lambda offs: copy_monitor.acknowledged(time.monotonic(), offs))
            except BaseException:  # noqa: BLE001 - reported as "stuck"
                copy_errors.append(traceback.format_exc()[-3000:])
        copy_thread = threading.Thread(target=copy_main, name="txn-copy", daemon=True)
        copy_thread.start()
        wait_until(lambda: reader.commits and copy_stats["committed"] > 0, 60, "the group and the copy committing")

        for f in faults if faults is not None else schedule(seed, fault_seconds):
            time.sleep(f.gap)
            nemesis.apply(f)
        log(f"  faults done after {time.monotonic() - t0:.1f}s; healing")
        nemesis.heal_all()
        violations["stuck"] += nemesis.restart_failures

        def bounded(what: str, fn) -> bool:
            try:
                fn()
                return True
            except Exception as e:  # noqa: BLE001 - a liveness failure
                violations["stuck"].append(f"{what}: {e}"[:3000] + f" | {sync_report(cluster)}")
                return False
        log(f"  healed after {time.monotonic() - t0:.1f}s")
        bounded("ISR refilled after the heal", lambda: wait_until(
            lambda: in_sync(cluster, SRC, PARTS) and in_sync(cluster, DST, PARTS), RECOVERY_S, "full ISR",
            interval=0.2))
        bounded("acks=all produce after the heal", lambda: writer.wait_progress(RECOVERY_S, "after the heal"))
        writer.stop(flush_timeout=RECOVERY_S)
        records.update(sent=writer.sent, acked=sum(len(v) for v in writer.acked.values()),
                       acked_no_offset=sum(1 for v in writer.acked.values() for _s, o in v if o < 0))
        if writer.fatal is not None:
            violations["client_fatal"].append(f"idempotent producer: {writer.fatal}")
        if writer.unflushed:
            violations["stuck"].append(f"{writer.unflushed} records without a delivery report")
        top = {p: max((o for _s, o in writer.acked[p]), default=-1) + 1 for p in PARTS}
        bounded("high watermark past every acknowledged offset", lambda: wait_until(
            lambda: all(h >= top[p] for p, h in high_watermarks(bs, SRC).items()), RECOVERY_S, f"HW >= {top}"))
        bounded("ISR in sync before reading back", lambda: wait_until(
            lambda: in_sync(cluster, SRC, PARTS), RECOVERY_S, "full ISR", interval=0.2))
        log(f"  producer stopped after {time.monotonic() - t0:.1f}s: {writer.summary()}")
        the_log = read_partitions(bs, SRC, PARTS, timeout=RECOVERY_S, conf=QUIET)
        records["read"] = sum(len(v) for v in the_log.values())
        for kind, found in log_violations(the_log, writer.acked).items():
            violations[kind] += found
        end = {p: (the_log[p][-1][0] + 1 if the_log[p] else 0) for p in PARTS}
        ends.update(end)  # the copy may finish now

        bounded("the group committing up to the end of the input", lambda: wait_until(
            lambda: all(reader.committed_now().get(p, -1) >= end[p] for p in PARTS), RECOVERY_S,
            f"group committed {end}"))
        log(f"  group caught up after {time.monotonic() - t0:.1f}s")
        copy_thread.join(2 * RECOVERY_S)
        log(f"  copy caught up after {time.monotonic() - t0:.1f}s")
        if copy_thread.is_alive():
            call = copy_stats["in_call"]
            violations["stuck"].append(
                f"the transactional copy did not reach {end}: {copy_stats['committed']} records committed, last "
                f"errors {copy_stats['errors'][-5:]}, retried {copy_stats['retried']} times (last: "
                f"{copy_stats['last_retry_error']}), in {call[0] if call else None} for "
                f"{time.monotonic() - call[1] if call else 0:.0f}s")
        violations["stuck"] += copy_errors
        reader.stop()
        copy_monitor.stop()
        for m in (reader.monitor, copy_monitor):
            violations["offsets_backwards"] += [f"{m.group}: {v}" for v in committed_offset_violations(m)]

        at = {p: dict(the_log[p]) for p in PARTS}
        consumed = list(reader.consumed)
        records["group_read"] = len(consumed)
        violations["phantom_read"] += [f"partition {p} offset {o}: consumed {v!r}, log has {at[p].get(o)!r}"
                                       for p, o, v in consumed if at[p].get(o) != v]
        seen = {(p, decode(v)[1]) for p, _o, v in consumed}
        violations["group_missed"] += [f"partition {p} seq {s}" for p in PARTS for s, _o in writer.acked[p]
                                       if (p, s) not in seen]

        if not copy_thread.is_alive() and not copy_errors:  # an unfinished copy is "stuck", not compared
            out = read_partitions(bs, DST, PARTS, timeout=RECOVERY_S,
                                  conf={"isolation.level": "read_committed", **QUIET})
            got = Counter(v for recs in out.values() for _o, v in recs)
            want = Counter(PREFIX + v for recs in the_log.values() for _o, v in recs)
            records["copied"] = sum(got.values())
            violations["copy_missing"] += [f"{v!r}: {got[v]} of {n}" for v, n in want.items() if got[v] < n]
            violations["copy_duplicated"] += [f"{v!r}: {n} for {want[v]}" for v, n in got.items()
                                              if v in want and n > want[v]]
            violations["copy_extra"] += [f"{v!r} x{n}" for v, n in got.items() if v not in want]
        records["copy_txns"] = copy_stats["transactions"]
        records["copy_failed_txns"] = copy_stats["abort"] + copy_stats["fatal"]
        records["copy_consumer_renewals"] = app.renewed_consumers
    except Exception:  # noqa: BLE001 - the run could not go on: a liveness failure
        violations["stuck"].append(traceback.format_exc()[-3000:])
    finally:
        if writer is not None:
            writer.stop(flush_timeout=5)
        if reader is not None:
            reader.stop()
        if copy_monitor is not None:
            copy_monitor.stop()
        stop.set()
        if copy_thread is not None:
            copy_thread.join(15)
        try:
            nemesis.heal_all()
        except Exception:  # noqa: BLE001
            pass
        cluster.close()
        if handler is not None:
            handler.close()
        if app is not None and (copy_thread is None or not copy_thread.is_alive()):
            try:
                app.close()
            except Exception:  # noqa: BLE001
                pass
    return {"seed": seed, "faults": dict(nemesis.counts), "records": records,
            "violations": {k: len(v) for k, v in violations.items()},
            "examples": {k: v[:5] for k, v in violations.items() if v}, "seconds": round(time.monotonic() - t0, 1)}


def fmt_counts(d: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(d.items())) or "-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--seed", type=int, default=None, help="seed of the first run (run i: seed + i); "
                    "default: from the clock, printed")
    ap.add_argument("--fault-seconds", type=float, default=45.0, help="length of each run's fault schedule")
    ap.add_argument("--members", type=int, default=3, help="consumers in the group")
    ap.add_argument("--work-dir", default=None, help="where runs keep data (default: a new temporary directory)")
    ap.add_argument("--keep", action="store_true", help="keep every run's data and broker logs")
    ap.add_argument("--print-schedule", action="store_true", help="print the first run's schedule and exit")
    args = ap.parse_args()
    seed0 = args.seed if args.seed is not None else int(time.time()) % 1_000_000
    if args.print_schedule:
        for f in schedule(seed0, args.fault_seconds):
            print(json.dumps(asdict(f)))
        return 0
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="kcompat-nemesis-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"nemesis: {args.runs} run(s) from seed {seed0}, {args.fault_seconds:.0f}s of faults each, "
          f"{args.members} group members; data under {work}", flush=True)

    def log(line: str) -> None:
        print(line, flush=True)
    totals = {"faults": Counter(), "records": Counter(), "violations": Counter(), "runs": 0, "failed_runs": [],
              "seconds": 0.0}
    for i in range(args.runs):
        seed = seed0 + i
        root = work / f"run-{seed}"
        log(f"run {i + 1}/{args.runs} seed {seed}")
        r = run_once(seed, args.fault_seconds, args.members, root, log)
        bad = sum(r["violations"].values())
        log(f"run {i + 1} seed {seed}: {r['seconds']:.0f}s | faults {fmt_counts(r['faults'])} | records "
            f"{fmt_counts(r['records'])} | violations {fmt_counts(r['violations'])}")
        for kind, examples in r["examples"].items():
            for e in examples:
                log(f"  {kind}: {e}")
        if bad:
            log(f"  data and broker logs kept in {root}")
            totals["failed_runs"].append(seed)
        elif not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        totals["runs"] += 1
        totals["seconds"] += r["seconds"]
        totals["faults"].update(r["faults"])
        totals["records"].update(r["records"])
        totals["violations"].update({k: v for k, v in r["violations"].items()})
    log(f"total: {totals['runs']} runs from seed {seed0}, {totals['seconds'] / max(1, totals['runs']):.0f}s per run"
        f" | faults {fmt_counts(totals['faults'])} (total {sum(totals['faults'].values())}) | records "
        f"{fmt_counts(totals['records'])} | violations {fmt_counts(totals['violations'])} | runs with violations "
        f"{totals['failed_runs'] or 'none'}")
    print(json.dumps({"runs": totals["runs"], "seed": seed0, "fault_seconds": args.fault_seconds,
                      "faults": dict(totals["faults"]), "records": dict(totals["records"]),
                      "violations": {k: totals["violations"].get(k, 0) for k in VIOLATIONS},
                      "failed_runs": totals["failed_runs"], "seconds_per_run":
                      round(totals["seconds"] / max(1, totals["runs"]), 1)}), flush=True)
    if not args.keep and not totals["failed_runs"] and args.work_dir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if totals["failed_runs"] else 0


if __name__ == "__main__":
    sys.exit(main())
