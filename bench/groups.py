"""Consumer-group benchmarks against a real kcompat broker.

    python3 bench/groups.py [--consumers 10] [--partitions 30] [--records-per-partition 100]
                            [--delays 0,3000] [--commit-seconds 10] [--check]

(a) Join to first record. For each ``group.initial.rebalance.delay.ms`` in ``--delays`` (the first,
    0, is kcompat's default, as in Kafka's shipped ``server.properties``; 3000, Kafka's built-in
    default, for comparison), always set explicitly, a broker starts with
    a topic of ``--partitions`` partitions that already holds ``--records-per-partition`` records in
    each. ``--consumers`` confluent-kafka consumers, each in its own process, are created and
    connected first, then subscribe at the same moment (a group of fresh consumers starting
    together). Per consumer: the time from its first JoinGroup (librdkafka's debug line "Joining
    group", timestamped by librdkafka) to its first record. For the group: the time from the first
    JoinGroup of any member to the moment every member is consuming in the final generation (its
    first record after its last assignment); the group must also be Stable with every member
    assigned (DescribeGroups). Target: the group is stable and consuming within 5 s (PASS/FAIL).
    Consumers do not commit (enable.auto.commit=false) and start from the earliest offset, so there
    is a record to read right after every assignment.

(b) Offset commits per second from one consumer with synchronous commits, for ``--commit-seconds``
    each: confluent-kafka ``commit(offsets=[one partition], asynchronous=False)`` in a loop and
    kafka-python ``commit({one partition: OffsetAndMetadata})`` in a loop, both from a subscribed
    group member (so every commit carries the member id and generation, and the broker appends it to
    ``__consumer_offsets`` before answering). Latency percentiles and the broker's CPU time too.

The last line of output is a one-line JSON summary. Exit status 0 unless ``--check`` is given and a
target is missed.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout: tests.support.broker_process

from bench.proc_stats import proc_cpu_seconds  # noqa: E402

TARGET_GROUP_READY_S = 5.0
# the broker's default (kcompat.config.definitions.KCOMPAT_DEFAULTS), read so the label stays true
from kcompat.config.definitions import KCOMPAT_DEFAULTS  # noqa: E402

DEFAULT_DELAY_MS = KCOMPAT_DEFAULTS["group.initial.rebalance.delay.ms"]
# librdkafka's log line (debug=consumer) right before it sends a JoinGroup request
_JOIN_LINE = re.compile(r"^%\d\|(\d+\.\d+)\|JOIN\|.*Joining group")


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


# -- (a) join to first record ------------------------------------------------------------------------


def _member(idx: int, bootstrap: str, group: str, topic: str, log_path: str, ready, go, stop, results) -> None:
    """One consumer process: connect, wait for ``go``, subscribe, consume until ``stop``; report the
    time of its first record, and of every assignment with the first record after it."""
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 2)  # librdkafka logs (with its own timestamps) go to stderr
    os.close(fd)
    import confluent_kafka as ck

    assigns: list[list] = []  # [time of assignment, partitions, time of the first record after it]

    def on_assign(consumer, partitions):
        assigns.append([time.time(), len(partitions), None])

    def on_revoke(consumer, partitions):
        pass

    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "debug": "consumer"})
    c.list_topics(topic, timeout=30)  # connected, metadata known: the clock starts at subscribe()
    ready.put(idx)
    go.wait(60)
    t_subscribe = time.time()
    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    first_record = None
    records = 0
    while not stop.is_set():
        for m in c.consume(num_messages=1000, timeout=0.05):
            if m.error() is not None:
                continue
            now = time.time()
            records += 1
            if first_record is None:
                first_record = now
                results.put(("first", idx, now))
            if assigns and assigns[-1][2] is None:
                assigns[-1][2] = now
    c.close()
    results.put(("done", idx, {"subscribe": t_subscribe, "first_record": first_record, "assigns": assigns,
                               "records": records}))


def _first_join(log_path: str) -> float | None:
    with open(log_path, errors="replace") as f:
        for line in f:
            m = _JOIN_LINE.match(line)
            if m:
                return float(m.group(1))
    return None


def join_phase(delay_ms: int, consumers: int, partitions: int, per_partition: int, workdir: Path) -> dict:
    import confluent_kafka as ck
    from confluent_kafka import ConsumerGroupState
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.support.broker_process import BrokerProcess

    overrides = {"group.initial.rebalance.delay.ms": str(delay_ms)}
    (workdir / f"join-{delay_ms}").mkdir(parents=True)
    broker = BrokerProcess(workdir / f"join-{delay_ms}" / "data", overrides=overrides)
    broker.start()
    ctx = mp.get_context("spawn")
    procs = []
    try:
        topic, group = "bench-groups", f"bench-group-{delay_ms}"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result(30)
        p = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
        for part in range(partitions):
            for i in range(per_partition):
                p.produce(topic, value=b"x" * 100, key=b"%d" % i, partition=part)
            p.poll(0)
        assert p.flush(30) == 0, "records not delivered"
        # warm up the group coordinator (__consumer_offsets is created on the first FindCoordinator)
        warm = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "bench-warm-up"})
        warm.committed([ck.TopicPartition(topic, 0)], timeout=30)
        warm.close()

        ready, results = ctx.Queue(), ctx.Queue()
        go, stop = ctx.Event(), ctx.Event()
        logs = [str(workdir / f"join-{delay_ms}" / f"consumer-{i}.log") for i in range(consumers)]
        for i in range(consumers):
            proc = ctx.Process(target=_member, args=(i, broker.bootstrap, group, topic, logs[i], ready, go, stop,
                                                     results), daemon=True)
            proc.start()
            procs.append(proc)
        for _ in range(consumers):
            ready.get(timeout=120)
        go.set()
        t_go = time.time()
        firsts = {}
        while len(firsts) < consumers:
            kind, idx, t = results.get(timeout=120)
            firsts[idx] = t
        # the group must be Stable with every member assigned; then watch a little longer for late
        # rebalances, so that "the final generation" is final
        stable_at = None
        deadline = time.time() + 60
        while time.time() < deadline:
            d = admin.describe_consumer_groups([group], request_timeout=10)[group].result(15)
            if (d.state == ConsumerGroupState.STABLE and len(d.members) == consumers
                    and all(m.assignment.topic_partitions for m in d.members)):
                stable_at = time.time()
                break
            time.sleep(0.05)
        time.sleep(max(0.0, 4.0 - (time.time() - (stable_at or time.time()))))
        d = admin.describe_consumer_groups([group], request_timeout=10)[group].result(15)
        stable_members = len(d.members) if d.state == ConsumerGroupState.STABLE else 0
        stop.set()
        done = {}
        while len(done) < consumers:
            kind, idx, info = results.get(timeout=60)
            if kind == "done":
                done[idx] = info
        for proc in procs:
            proc.join(30)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
                proc.join()
        broker.stop()

    joins = [_first_join(logs[i]) for i in range(consumers)]
    if None in joins:
        raise RuntimeError("no 'Joining group' line in a consumer's librdkafka log: " + logs[joins.index(None)])
    per_consumer = [done[i]["first_record"] - joins[i] for i in range(consumers)]
    final_consuming = []
    for i in range(consumers):
        last = done[i]["assigns"][-1] if done[i]["assigns"] else None
        final_consuming.append(last[2] if last and last[2] is not None else float("nan"))
    group_ready = max(final_consuming) - min(joins)
    rebalances = [len(done[i]["assigns"]) for i in range(consumers)]
    return {
        "group.initial.rebalance.delay.ms": delay_ms,
        "consumers": consumers,
        "partitions": partitions,
        "join_to_first_record_s": [round(x, 3) for x in per_consumer],
        "join_to_first_record_max_s": round(max(per_consumer), 3),
        "subscribe_to_first_join_max_s": round(max(j - done[i]["subscribe"] for i, j in enumerate(joins)), 3),
        "join_spread_s": round(max(joins) - min(joins), 3),
        "group_ready_s": round(group_ready, 3),
        "assignments_per_consumer": rebalances,
        "stable_members": stable_members,
        "go_to_first_join_s": round(min(joins) - t_go, 3),
        "pass": group_ready <= TARGET_GROUP_READY_S and stable_members == consumers,
    }


# -- (b) synchronous commits -------------------------------------------------------------------------


def commit_phase(seconds: float, workdir: Path) -> dict:
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition

    from tests.support.broker_process import BrokerProcess

    (workdir / "commit").mkdir(parents=True)
    broker = BrokerProcess(workdir / "commit" / "data")
    broker.start()
    out = {}
    try:
        topic = "bench-commits"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(30)

        # confluent-kafka
        c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "bench-commit-ck",
                         "enable.auto.commit": False})
        c.subscribe([topic])
        deadline = time.time() + 30
        while not c.assignment():
            assert time.time() < deadline, "confluent consumer got no assignment"
            c.consume(1, 0.1)
        lat = []
        cpu0, t0 = proc_cpu_seconds(broker.proc.pid), time.monotonic()
        i = 0
        while time.monotonic() - t0 < seconds:
            i += 1
            s = time.monotonic()
            res = c.commit(offsets=[ck.TopicPartition(topic, 0, i)], asynchronous=False)
            lat.append(time.monotonic() - s)
            assert res[0].error is None, res[0].error
        elapsed = time.monotonic() - t0
        cpu = proc_cpu_seconds(broker.proc.pid) - cpu0
        got = c.committed([ck.TopicPartition(topic, 0)], timeout=10)[0].offset
        assert got == i, f"committed {got}, expected {i}"
        c.close()
        out["confluent"] = {"commits": i, "seconds": round(elapsed, 2), "commits_per_s": round(i / elapsed),
                            "p50_ms": round(1000 * _pct(lat, 0.5), 3), "p99_ms": round(1000 * _pct(lat, 0.99), 3),
                            "broker_cpu_s": round(cpu, 2)}

        # kafka-python
        k = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id="bench-commit-kp",
                          enable_auto_commit=False)
        deadline = time.time() + 30
        while not k.assignment():
            assert time.time() < deadline, "kafka-python consumer got no assignment"
            k.poll(timeout_ms=100)
        tp = TopicPartition(topic, 0)
        lat = []
        cpu0, t0 = proc_cpu_seconds(broker.proc.pid), time.monotonic()
        i = 0
        while time.monotonic() - t0 < seconds:
            i += 1
            s = time.monotonic()
            k.commit({tp: OffsetAndMetadata(i, "", -1)})
            lat.append(time.monotonic() - s)
        elapsed = time.monotonic() - t0
        cpu = proc_cpu_seconds(broker.proc.pid) - cpu0
        assert k.committed(tp) == i
        k.close()
        out["kafka-python"] = {"commits": i, "seconds": round(elapsed, 2), "commits_per_s": round(i / elapsed),
                               "p50_ms": round(1000 * _pct(lat, 0.5), 3), "p99_ms": round(1000 * _pct(lat, 0.99), 3),
                               "broker_cpu_s": round(cpu, 2)}
    finally:
        broker.stop()
    return out


# -- main --------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--consumers", type=int, default=10)
    ap.add_argument("--partitions", type=int, default=30)
    ap.add_argument("--records-per-partition", type=int, default=100)
    ap.add_argument("--delays", default=f"{DEFAULT_DELAY_MS},3000",
                    help="group.initial.rebalance.delay.ms values (the target applies to kcompat's default)")
    ap.add_argument("--commit-seconds", type=float, default=10.0)
    ap.add_argument("--skip-join", action="store_true")
    ap.add_argument("--skip-commits", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the brokers' data and logs")
    ap.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    args = ap.parse_args(argv)

    import confluent_kafka
    import kafka

    workdir = Path(tempfile.mkdtemp(prefix="kcompat-bench-groups-"))
    print(f"kcompat consumer-group benchmark: confluent-kafka {confluent_kafka.__version__} "
          f"(librdkafka {confluent_kafka.libversion()[0]}), kafka-python {kafka.__version__}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; work dir {workdir}")
    summary: dict = {"join": [], "commits": None}
    ok = True
    try:
        if not args.skip_join:
            for delay in [int(x) for x in args.delays.split(",") if x]:
                r = join_phase(delay, args.consumers, args.partitions, args.records_per_partition, workdir)
                summary["join"].append(r)
                ok &= r["pass"] or delay != DEFAULT_DELAY_MS
                print(f"\n(a) {args.consumers} consumers, {args.partitions}-partition topic holding "
                      f"{args.records_per_partition} records per partition, group.initial.rebalance.delay.ms={delay}"
                      f"{' (kcompat default)' if delay == DEFAULT_DELAY_MS else ''}"
                      f"{' (Kafka built-in default)' if delay == 3000 else ''}")
                print("    first JoinGroup -> first record, per consumer (s): "
                      + " ".join(f"{x:.2f}" for x in r["join_to_first_record_s"]))
                print(f"    max {r['join_to_first_record_max_s']:.2f} s, median "
                      f"{statistics.median(r['join_to_first_record_s']):.2f} s; first JoinGroups spread over "
                      f"{r['join_spread_s']:.2f} s; assignments per consumer {r['assignments_per_consumer']}")
                print(f"    group stable and every member consuming in the final generation "
                      f"{r['group_ready_s']:.2f} s after the first JoinGroup (target <= {TARGET_GROUP_READY_S:.0f} s; "
                      f"Stable with {r['stable_members']}/{args.consumers} members): "
                      f"{'PASS' if r['pass'] else 'FAIL'}")
        if not args.skip_commits:
            r = commit_phase(args.commit_seconds, workdir)
            summary["commits"] = r
            print(f"\n(b) synchronous offset commits from one group member, {args.commit_seconds:.0f} s each")
            for client, x in r.items():
                print(f"    {client:12s} {x['commits_per_s']:6d} commits/s  (p50 {x['p50_ms']:.2f} ms, "
                      f"p99 {x['p99_ms']:.2f} ms; broker CPU {x['broker_cpu_s']:.1f} s)")
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps(summary, separators=(",", ":")))
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
