"""A 3-node kcompat cluster against a 3-node Apache Kafka KRaft cluster, side by side (issue 25).

    python3 bench/cluster_compare.py [--pairs 3] [--seconds 40] [--records 600000] ...

Both clusters: three nodes on 127.0.0.1, each a broker and a controller voter, Kafka's default
quorum/session timeouts on both (``--test-timeouts``: the test suite's), ``min.insync.replicas=2``,
topics of ``--partitions`` (3) partitions with replication factor 3. kcompat is
``tests.support.cluster.Cluster`` from ``--kcompat-root`` (default this checkout; point it at an
export of an older commit for before/after numbers); Kafka is ``bench/kafka_cluster.py`` (jars from
the conformance suite's Maven cache, ``-Xmx/-Xms --heap`` per node). Runs alternate kcompat, Kafka,
kcompat, Kafka, ...; each starts a fresh cluster, measures, and stops it: one cluster up at a time.

Per run, in this order (the bulk load and the reads warm the brokers and the JVMs up before the
latency run):

a. **Consume rate**: ``--records`` (600,000) records of ``--record-size`` (1 KiB) produced
   round-robin with acks=all into full ~1 MB batches (the same batches on both clusters), the
   brokers left to go quiet, one unmeasured warm-up read, then ``--passes`` (2) reads of the whole
   topic from the beginning by a new consumer (``assign``) per consume mode: ``default``
   (librdkafka's defaults) and ``bigq`` (a prefetch queue larger than the topic, so the fetchers
   never pause for a full queue). Per read: MB/s taken by the application, MB/s fetched (until
   librdkafka had fetched the last record), broker CPU seconds per GB, the partition leaders, and
   librdkafka's fetch statistics per broker (requests, bytes per response, round trips).
b. **End-to-end latency**: a producer process at ``--rate`` (2,000) records/s of ``--size`` (100) B,
   acks=all, ``linger.ms=0``, ``max.in.flight=5``, and a consumer process (librdkafka defaults,
   ``fetch.wait.max.ms=500``), ``--warmup`` (10) s not counted, then ``--seconds`` (40) s:
   p50/p99/p99.9/max of send-to-receive latency, the records over 400 ms grouped into episodes,
   and how long after its acks=all acknowledgement the consumer got each record (over 300 ms: read
   late although the high watermark had passed it, the signature of a missed fetch wake-up).
   ``--client-debug`` keeps the consumer's librdkafka fetch log per run.

Every measurement carries the load: 1-minute loadavg, CPU seconds of each broker (its process
group), of the clients and of everything else on the machine, and (latency) the late wake-ups of a
sleeping probe process. The summary gives the ratios kcompat/Kafka per pair and their medians. The
last line is a one-line JSON summary; ``--json FILE`` writes every run in full. No target; exit 0.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))

import cluster_clients as cc  # noqa: E402
from kafka_cluster import KafkaCluster  # noqa: E402  (this checkout's conformance, before --kcompat-root)

SYSTEMS = ("kcompat", "kafka")
# quorum and session timeouts: Kafka's defaults, on both clusters (the test suite's fast ones, 3 s
# sessions and 1 s quorum fetch timeouts, fence brokers and re-elect controllers on a loaded machine,
# in Kafka as in kcompat, and a fenced leader's partitions stay on other brokers for minutes)
KAFKA_TIMEOUTS = {"broker.session.timeout.ms": "9000", "broker.heartbeat.interval.ms": "2000",
                  "controller.quorum.election.timeout.ms": "1000", "controller.quorum.fetch.timeout.ms": "2000"}
TEST_TIMEOUTS = {"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "300",
                 "controller.quorum.election.timeout.ms": "500", "controller.quorum.fetch.timeout.ms": "1000"}
COMMON = {"min.insync.replicas": "2", "default.replication.factor": "3",
          "offsets.topic.num.partitions": "3", "transaction.state.log.num.partitions": "3"}
TOPIC_CONFIG = {"min.insync.replicas": "2"}
# consumer settings per consume mode: librdkafka's defaults, and a prefetch queue larger than the
# topic, so the fetchers never pause for a full queue and fetch as fast as the brokers answer
CONSUME_MODES = {"default": {},
                 "bigq": {"queued.max.messages.kbytes": 2_097_151, "queued.min.messages": 10_000_000}}


def start_cluster(system: str, root: Path, args):
    """(cluster, {label: pid of the node's process group}, bootstrap)."""
    if system == "kcompat":
        from tests.support.cluster import Cluster   # from --kcompat-root (first on sys.path)
        c = Cluster(root, 3, {**COMMON, **args.timeouts})
        c.start(timeout=120)
        return c, {f"node{i + 1}": n.proc.pid for i, n in enumerate(c.nodes)}, c.bootstrap
    c = KafkaCluster(root, args.kafka_version, 3, {**COMMON, **args.timeouts}, heap=args.heap)
    c.start()
    return c, {f"node{i + 1}": pid for i, pid in enumerate(c.pids)}, c.bootstrap


def run_system(system: str, index: int, args) -> dict:
    root = Path(tempfile.mkdtemp(prefix=f"{system}{index}-", dir=args.work_dir))
    t0 = time.monotonic()
    cluster, pids, bootstrap = start_cluster(system, root, args)
    out: dict = {"system": system, "run": index, "pids": pids, "start_s": round(time.monotonic() - t0, 1)}
    meter = cc.LoadMeter(pids)
    try:
        if not args.skip_consume:
            cc.create_topic(bootstrap, "bulk", args.partitions, 3, TOPIC_CONFIG)
            out["load"] = cc.load_topic(bootstrap, "bulk", args.partitions, args.records, args.record_size, meter)
            out["quiet_wait_s"] = cc.wait_quiet(meter)
            print(f"  {system}#{index} loaded {args.records} x {args.record_size} B at {out['load']['mb_s']} MB/s "
                  f"(acks=all), quiet after {out['quiet_wait_s']} s", flush=True)
            out["consume"] = {}
            for mode in args.consume_modes:
                conf = {**CONSUME_MODES[mode], **args.consumer_conf}
                passes = []
                for k in range(args.passes + (0 if out["consume"] else 1)):   # one warm-up read in all
                    r = cc.consume_pass(bootstrap, "bulk", args.partitions, args.records, meter, conf)
                    r["warmup"] = not out["consume"] and k == 0
                    passes.append(r)
                    _show_consume(system, index, mode, r)
                out["consume"][mode] = passes
        if not args.skip_latency:
            cc.create_topic(bootstrap, "latency", args.partitions, 3, TOPIC_CONFIG)
            out["latency"] = cc.latency_run(bootstrap, "latency", args.partitions, rate=args.rate, size=args.size,
                                            warmup_s=args.warmup, seconds=args.seconds, meter=meter,
                                            debug_log=str(root / "latency-consumer.log") if args.client_debug else None)
            _show_latency(system, index, out["latency"])
    finally:
        cluster.stop()
    return out


def _load_text(load: dict) -> str:
    nodes = " ".join(f"{v:.1f}" for v in load["broker_cpu"].values())
    return (f"loadavg {load['loadavg'][0]:.1f}->{load['loadavg'][1]:.1f}, cpu s: brokers {load['brokers_cpu_s']:.1f} "
            f"({nodes}), clients {load['clients_cpu_s']:.1f}, other {load['other_cpu_s']:.1f}, "
            f"machine busy {load['machine_busy']:.0%}")


def _show_latency(system: str, index: int, r: dict) -> None:
    print(f"  {system}#{index} latency: {r['records']} records, p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms, "
          f"p99.9 {r['p999_ms']} ms, max {r['max_ms']} ms, >400 ms: {r['over_400ms']} in {len(r['stalls'])} episodes "
          f"{r['stalls'][:3]}; read after the ack: p99 {r['read_after_ack_p99_ms']} ms, max "
          f"{r['read_after_ack_max_ms']} ms, {r['read_over_300ms_after_ack']} records > 300 ms; sleep probe late max {r['probe_late_max_ms']} ms ({r['probe_late_over_100ms']} > 100 ms), "
          f"missing {r['missing']}, dup {r['duplicates']}, late sends {r['producer']['late_sends']}; "
          f"{_load_text(r['load'])}", flush=True)


def _show_consume(system: str, index: int, mode: str, r: dict) -> None:
    fetch = "; ".join(f"node{n}: {f['fetches']} fetches x {f['bytes_per_response'] / 1e3:.0f} kB, rtt p50 "
                      f"{f['rtt_p50_ms']} p99 {f['rtt_p99_ms']} max {f['rtt_max_ms']} ms" for n, f in r["fetch"].items())
    print(f"  {system}#{index} consume ({mode}{', warm-up' if r['warmup'] else ''}): {r['records']} records, "
          f"first after {r['first_record_ms']} ms, {r['mb_s']} MB/s (fetched at {r['fetch_mb_s']} MB/s), broker {r['broker_cpu_s_per_gb']} CPU s/GB; {_load_text(r['load'])}\n    {fetch}",
          flush=True)


def _median(values):
    values = [v for v in values if v is not None and v == v]
    return round(statistics.median(values), 3) if values else None


def _per_run(run: dict) -> dict:
    """The numbers a run is compared on."""
    m: dict = {}
    if "latency" in run:
        lat = run["latency"]
        m.update({"p50_ms": lat["p50_ms"], "p99_ms": lat["p99_ms"], "max_ms": lat["max_ms"],
                  "over_400ms": lat["over_400ms"], "read_over_300ms_after_ack": lat["read_over_300ms_after_ack"],
                  "read_after_ack_max_ms": lat["read_after_ack_max_ms"]})
    for mode, passes in run.get("consume", {}).items():
        passes = [p for p in passes if not p["warmup"]]
        prefix = "consume" if mode == "default" else f"consume_{mode}"
        if passes:
            m[f"{prefix}_mb_s"] = _median([p["mb_s"] for p in passes])
            m[f"{prefix}_fetch_mb_s"] = _median([p["fetch_mb_s"] for p in passes])
            m[f"{prefix}_cpu_s_per_gb"] = _median([p["broker_cpu_s_per_gb"] for p in passes])
    if "load" in run:
        m["load_mb_s"] = run["load"]["mb_s"]
    return m


def summarize(runs: list[dict]) -> dict:
    by = {s: [_per_run(r) for r in runs if r["system"] == s] for s in SYSTEMS}
    pairs = list(zip(by["kcompat"], by["kafka"]))
    keys = sorted({k for r in by["kcompat"] + by["kafka"] for k in r})
    summary: dict = {"pairs": len(pairs), "median": {}, "ratio_median": {}, "ratios": {}}
    for s in SYSTEMS:
        summary["median"][s] = {k: _median([r.get(k) for r in by[s]]) for k in keys}
        summary[f"{s}_runs"] = by[s]
    for k in keys:
        if k in ("over_400ms", "read_over_300ms_after_ack", "read_after_ack_max_ms"):
            continue
        ratios = [a[k] / b[k] for a, b in pairs if a.get(k) and b.get(k)]
        summary["ratios"][k] = [round(x, 3) for x in ratios]
        summary["ratio_median"][k] = _median(ratios)
    summary["over_400ms"] = {s: [r.get("over_400ms") for r in by[s]] for s in SYSTEMS}
    for k in ("read_over_300ms_after_ack", "read_after_ack_max_ms"):
        summary[k] = {s: [r.get(k) for r in by[s]] for s in SYSTEMS}
    return summary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=3, help="kcompat/Kafka run pairs (default 3)")
    ap.add_argument("--rate", type=float, default=2000.0, help="latency: records/s (2000)")
    ap.add_argument("--size", type=int, default=100, help="latency: record value bytes (100)")
    ap.add_argument("--warmup", type=float, default=10.0, help="latency: seconds not counted (10)")
    ap.add_argument("--seconds", type=float, default=40.0, help="latency: seconds measured (40)")
    ap.add_argument("--records", type=int, default=600_000, help="consume: records (600,000)")
    ap.add_argument("--record-size", type=int, default=1024, help="consume: record value bytes (1024)")
    ap.add_argument("--passes", type=int, default=2, help="consume: measured reads after the warm-up read (2)")
    ap.add_argument("--consume-modes", default="default,bigq",
                    help="consumer settings to read with, comma-separated: default (librdkafka's), bigq "
                         "(prefetch queue larger than the topic); default: both")
    ap.add_argument("--consumer-conf", action="append", default=[], metavar="KEY=VALUE",
                    help="consume: librdkafka consumer setting (repeatable)")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--heap", default="768m", help="Kafka JVM heap per node (768m)")
    ap.add_argument("--test-timeouts", action="store_true",
                    help="the test suite's session/quorum timeouts (3 s session, 1 s quorum fetch) instead of Kafka's")
    ap.add_argument("--kafka-version", default="3.9.2")
    ap.add_argument("--kcompat-root", type=Path, default=ROOT,
                    help="checkout whose kcompat and tests/support the kcompat cluster runs (default: this one)")
    ap.add_argument("--only", choices=SYSTEMS, help="run one system only (no ratios)")
    ap.add_argument("--skip-latency", action="store_true")
    ap.add_argument("--client-debug", action="store_true",
                    help="latency: write the consumer's librdkafka fetch/protocol debug log into the run's directory")
    ap.add_argument("--skip-consume", action="store_true")
    ap.add_argument("--work-dir", default=None, help="where the clusters' data go (a temporary directory)")
    ap.add_argument("--json", type=Path, help="write every run's numbers to this file")
    args = ap.parse_args(argv)
    args.consumer_conf = dict(kv.split("=", 1) for kv in args.consumer_conf)
    args.timeouts = TEST_TIMEOUTS if args.test_timeouts else KAFKA_TIMEOUTS
    args.consume_modes = [m for m in args.consume_modes.split(",") if m]
    unknown = set(args.consume_modes) - set(CONSUME_MODES)
    if unknown:
        ap.error(f"unknown consume mode(s) {sorted(unknown)}; known: {sorted(CONSUME_MODES)}")
    from conformance.targets import git_revision
    sys.path.insert(0, str(args.kcompat_root.resolve()))
    args.work_dir = args.work_dir or tempfile.mkdtemp(prefix="cluster-compare-")
    print(f"kcompat {args.kcompat_root} ({git_revision(args.kcompat_root)}) vs Apache Kafka {args.kafka_version}; "
          f"latency {args.rate:.0f}/s x {args.size} B for {args.warmup:.0f}+{args.seconds:.0f} s "
          f"(producer {json.dumps(cc.LATENCY_PRODUCER)}); consume {args.records} x {args.record_size} B, "
          f"{args.passes} passes per mode {args.consume_modes} ({CONSUME_MODES}), extra consumer conf "
          f"{args.consumer_conf or 'none'}; timeouts {args.timeouts}; data in {args.work_dir}", flush=True)
    order = [args.only] if args.only else list(SYSTEMS)
    runs = []
    for i in range(args.pairs):
        for system in order:
            print(f"run {i + 1}/{args.pairs}: {system}", flush=True)
            runs.append(run_system(system, i + 1, args))
            if args.json:
                args.json.write_text(json.dumps(runs, indent=1))
    summary = summarize(runs)
    print("\nmedians per system:")
    for s in order:
        print(f"  {s}: {summary['median'][s]}")
    if not args.only:
        print("ratios kcompat/Kafka per pair (median):")
        for k, v in summary["ratios"].items():
            print(f"  {k}: {v} ({summary['ratio_median'][k]})")
    print(f"records over 400 ms end to end, per run: {summary['over_400ms']}")
    print(f"records read > 300 ms after their acks=all acknowledgement (the high watermark had passed "
          f"them), per run: {summary['read_over_300ms_after_ack']}; longest (ms): {summary['read_after_ack_max_ms']}")
    print(json.dumps({k: summary[k] for k in ("ratio_median", "median", "over_400ms", "read_over_300ms_after_ack",
                                              "read_after_ack_max_ms")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
