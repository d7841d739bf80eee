"""kcompat against Apache Kafka 3.9, side by side, with a C client (issue 20).

    python3 bench/vs_kafka.py [--pairs 1] [--small 500000] [--large 100000] [--seconds 10]
                              [--single-only | --cluster-only] [--pin] [--json FILE]

The client is ``bench/c/rdkbench.c``, a small C driver on librdkafka, built here with ``cc`` on
first use against the librdkafka that the pinned confluent-kafka wheel ships (headers from the
``librdkafka-dev`` Debian package, installed on first use by ``tools/install_librdkafka_dev.sh``), so the client's cost is
small and the same for both brokers. (Debian's own librdkafka 2.0.2 stalls long-polling fetches
against Kafka 3.9 in the latency run.) Systems run alternately, kcompat then Kafka, ``--pairs`` times, one system up at a
time, each started fresh in a temporary directory:

- **single node**: kcompat (``python -m kcompat serve``, tests.support.broker_process) and Kafka's
  single KRaft node (conformance.reference, ``-Xmx/-Xms --heap``, Kafka's JVM flags), topics of
  one partition;
- **3 nodes**: kcompat's ``tests.support.cluster.Cluster`` and ``bench/kafka_cluster.py``, RF 3,
  ``min.insync.replicas=2``, topics of 3 partitions, Kafka's default quorum timeouts on both.

Per system, after a warm-up (a quarter of each produce phase below, into one topic, read back;
unmeasured): start-up time (process start to answering Metadata); produce ``--small`` records
of 100 B and ``--large`` of 1 KiB, each with acks=1 and acks=all (in alternating order from pair
to pair), into fresh topics (single node; the 3-node cluster: acks=all only); consume the 1 KiB topic and the 100 B topic (acks=1 ones) from
the beginning, best of ``--passes``; end-to-end latency (p50/p99/max) at ``--rate`` (2,000)
records/s of 100 B into a topic of one partition, acks=all, for ``--seconds`` after 3 s of warm-up; the broker CPU seconds
(the broker's process groups, from /proc) per GB produced and consumed, and the client's
(rdkbench's own rusage), which shows when the client sets the pace; private memory (the sum
of ``RssAnon`` over each broker's processes) at the end. As root, the page cache is written back
and dropped before each produce phase (``--no-drop-caches`` keeps it; see ``drop_page_cache``).

``--pin`` (single node only) runs the client on CPU 0 and every thread of the broker's processes
on CPU 1 (``sched_setaffinity``). Unpinned, the client's CPU per GB at 100 B moves with how the
scheduler places its threads beside the broker's (contention, not work: pinned, it is the same
against both brokers); pinned, a phase whose time equals the client's CPU time is set by the
client alone.

The table prints each figure for both and the ratio kcompat/Kafka (for times, latency, CPU and
memory: Kafka/kcompat, so that >1 always means kcompat is better), with the 1-minute load
average. MB = 10^6 bytes of record values. No target is asserted; exit 0.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))

import cluster_clients as cc  # noqa: E402
from cluster_compare import COMMON, KAFKA_TIMEOUTS, TOPIC_CONFIG  # noqa: E402
from kafka_cluster import KAFKA_JVM_OPTS, KafkaCluster  # noqa: E402

from conformance import maven  # noqa: E402
from conformance.reference import ReferenceKafka  # noqa: E402

DRIVER_SRC = BENCH / "c" / "rdkbench.c"
MB = 1_000_000


def bundled_librdkafka() -> Path:
    """The librdkafka that the confluent-kafka wheel ships (the version the tests' Python client
    uses, pinned by that package)."""
    import confluent_kafka
    libs = Path(confluent_kafka.__file__).resolve().parent.parent / "confluent_kafka.libs"
    found = sorted(libs.glob("librdkafka*.so*"))
    if not found:
        raise SystemExit(f"no librdkafka in {libs}")
    return found[0]


def driver(path: Path) -> Path:
    """Build ``rdkbench`` from its source against the wheel's librdkafka (headers: librdkafka-dev,
    installed by ``tools/install_librdkafka_dev.sh`` when missing; the ABI is stable across 2.x)
    unless it is up to date."""
    lib = bundled_librdkafka()
    if not Path("/usr/include/librdkafka/rdkafka.h").exists():
        subprocess.run(["sh", str(ROOT / "tools" / "install_librdkafka_dev.sh")], check=True)
    if not path.exists() or path.stat().st_mtime < DRIVER_SRC.stat().st_mtime:
        subprocess.run(["cc", "-O2", "-o", str(path), str(DRIVER_SRC), str(lib), f"-Wl,-rpath,{lib.parent}",
                        "-lpthread"], check=True)
    return path


CLIENT_CPU, BROKER_CPU = 0, 1   # --pin


def pin_process_group(pgid: int, cpu: int) -> None:
    """Every thread of every process in process group ``pgid`` on ``cpu`` only (threads and
    processes started later inherit it)."""
    for pid in processes_in({pgid}):
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                os.sched_setaffinity(int(tid), {cpu})
        except OSError:
            continue


def run_driver(rdk, *argv, cpu: int | None = None) -> dict[str, float]:
    """Run ``rdkbench`` with ``argv`` (on ``cpu`` only, if given); its ``key=value`` output as
    floats (RuntimeError if it failed)."""
    pin = None if cpu is None else (lambda: os.sched_setaffinity(0, {cpu}))
    out = subprocess.run([str(rdk), *map(str, argv)], capture_output=True, text=True, timeout=600, preexec_fn=pin)
    if out.returncode != 0:
        raise RuntimeError(f"rdkbench {argv[0]} failed: {out.stderr[-2000:]}")
    return {k: float(v) for k, v in (kv.split("=") for kv in out.stdout.split())}


def drop_page_cache(enabled: bool) -> None:
    """Write back and drop the page cache (root only; nothing otherwise or when disabled).

    On this VM, page-cache writes into memory the guest has not used lately cost 4-5x the CPU of
    writes into recycled memory. perf shows ``copy_folio_from_iter_atomic`` at 74% of a broker's
    samples, and a broker's system time for 1 GB produced goes from 2.5 s to 0.6 s after a drop.
    The cache only grows during a run, so whichever broker ran later paid more. Dropping it
    before each produce phase gives both brokers the same recycled memory to write into."""
    if not enabled or os.geteuid() != 0:
        return
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def processes_in(pgids) -> list[str]:
    """The pids (as /proc names) of the processes in the process groups ``pgids``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[2]) in pgids:
                    found.append(name)
        except (OSError, ValueError, IndexError):
            continue
    return found


def rss_anon_mb(leaders: list[int]) -> float:
    """Sum of RssAnon (MB) over every process in the process groups ``leaders``."""
    total_kb = 0
    for pid in processes_in(set(leaders)):
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("RssAnon:"):
                        total_kb += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return round(total_kb / 1024, 1)


class Run:
    """One system started fresh: its bootstrap, broker process groups and measurements."""

    def __init__(self, system: str, nodes: int, root: Path, args) -> None:
        self.system, self.nodes, self.args = system, nodes, args
        self.rdk = str(args.driver)
        self.partitions = 1 if nodes == 1 else 3
        self.rf = nodes
        t0 = time.monotonic()
        if system == "kcompat" and nodes == 1:
            from tests.support.broker_process import BrokerProcess
            self.handle = BrokerProcess(root / "data", {}).start()
            self.bootstrap, pids = self.handle.bootstrap, [self.handle.proc.pid]
        elif system == "kcompat":
            from tests.support.cluster import Cluster
            self.handle = Cluster(root, 3, {**COMMON, **KAFKA_TIMEOUTS})
            self.handle.start(timeout=120)
            self.bootstrap, pids = self.handle.bootstrap, [n.proc.pid for n in self.handle.nodes]
        elif nodes == 1:
            self.handle = ReferenceKafka(maven.resolve_kafka(args.kafka_version), args.kafka_version, root,
                                         heap=args.heap, jvm_opts=(f"-Xms{args.heap}", *KAFKA_JVM_OPTS))
            self.handle.start()
            self.bootstrap, pids = self.handle.bootstrap, [self.handle.proc.pid]
        else:
            self.handle = KafkaCluster(root, args.kafka_version, 3, {**COMMON, **KAFKA_TIMEOUTS}, heap=args.heap)
            self.handle.start()
            self.bootstrap, pids = self.handle.bootstrap, self.handle.pids
        self.start_s = time.monotonic() - t0
        assert all(os.getpgid(pid) == pid for pid in pids), "each broker leads its process group"
        self.pids = pids
        if args.pin:
            for pid in pids:
                pin_process_group(pid, BROKER_CPU)
        self.meter = cc.LoadMeter({f"node{i}": pid for i, pid in enumerate(pids)})
        self.figures: dict[str, float] = {"startup s": round(self.start_s, 2)}
        self.loads: list[float] = []

    def stop(self) -> None:
        self.handle.stop()

    def topic(self, name: str, partitions: int | None = None) -> str:
        cc.create_topic(self.bootstrap, name, partitions or self.partitions, self.rf,
                        TOPIC_CONFIG if self.rf > 1 else {})
        return name

    def _driver(self, *argv) -> tuple[dict, dict]:
        a = self.meter.snapshot()
        r = run_driver(self.rdk, *argv, cpu=CLIENT_CPU if self.args.pin else None)
        load = cc.LoadMeter.between(a, self.meter.snapshot())
        self.loads.append(load["loadavg"][1])
        return r, load

    def produce(self, label: str, count: int, size: int, acks: str) -> None:
        topic = self.topic(f"p-{size}-{acks.replace('-', 'm')}")
        drop_page_cache(self.args.drop_caches)
        r, load = self._driver("produce", self.bootstrap, topic, count, size, acks)
        mb = count * size / MB
        self.figures[f"produce {label} MB/s"] = round(mb / r["seconds"], 1)
        self.figures[f"produce {label} cpu s/GB"] = round(load["brokers_cpu_s"] / (mb / 1000), 2)
        self.figures[f"produce {label} client cpu s/GB"] = round(r["client_cpu_s"] / (mb / 1000), 2)
        wait = cc.wait_quiet(self.meter)   # replication and flushes settle before the next phase
        print(f"    {self.system} {label}: {mb / r['seconds']:.1f} MB/s, broker cpu {load['brokers_cpu_s']} s "
              f"(quiet after {wait} s, loadavg {load['loadavg'][1]})", flush=True)

    def consume(self, label: str, topic: str, count: int) -> None:
        best = None
        for _ in range(self.args.passes):
            r, load = self._driver("consume", self.bootstrap, topic, self.partitions, count)
            mbs = r["bytes"] / MB / r["seconds"]
            cpu = load["brokers_cpu_s"] / (r["bytes"] / 1e9)
            if best is None or mbs > best[0]:
                best = (mbs, cpu, r["client_cpu_s"] / (r["bytes"] / 1e9))
            print(f"    {self.system} consume {label}: {mbs:.1f} MB/s, broker cpu {cpu:.2f} s/GB "
                  f"(loadavg {load['loadavg'][1]})", flush=True)
        self.figures[f"consume {label} MB/s"] = round(best[0], 1)
        self.figures[f"consume {label} cpu s/GB"] = round(best[1], 2)
        self.figures[f"consume {label} client cpu s/GB"] = round(best[2], 2)

    def latency(self) -> None:
        topic = self.topic("latency", partitions=1)   # rdkbench's latency consumer reads partition 0
        r, _load = self._driver("latency", self.bootstrap, topic, self.args.rate, self.args.seconds, 100, 3)
        for q in ("p50", "p99", "max"):
            self.figures[f"e2e {q} ms @{self.args.rate:g}/s"] = round(r[f"{q}_ms"], 2)
        print(f"    {self.system} latency: p50 {r['p50_ms']} p99 {r['p99_ms']} max {r['max_ms']} ms "
              f"({int(r['count'])}/{int(r['expected'])} records, {int(r['duplicates'])} read twice)", flush=True)


def run_system(system: str, nodes: int, args, pair: int = 0) -> dict:
    root = Path(tempfile.mkdtemp(prefix=f"vs-{system}{nodes}-", dir=args.work_dir))
    run = Run(system, nodes, root, args)
    print(f"  {system} ({nodes} node{'s' if nodes > 1 else ''}) up in {run.start_s:.1f} s", flush=True)
    try:
        # warm-up, unmeasured: every produce shape the run measures, a quarter of its size, then
        # all of it read back (Kafka's JIT compiles the paths it will be measured on)
        warm = run.topic("warmup")
        warm_count = 0
        for acks in (("1", "-1") if nodes == 1 else ("-1",)):
            for size, count in ((100, args.small // 4), (1024, args.large // 4)):
                run._driver("produce", run.bootstrap, warm, count, size, acks)
                warm_count += count
        run._driver("consume", run.bootstrap, warm, run.partitions, warm_count)
        # the order of the acks levels alternates between pairs: a phase after a large write may
        # meet the kernel writing the previous one back
        acks_levels = (("1", "-1") if pair % 2 == 0 else ("-1", "1")) if nodes == 1 else ("-1",)
        for acks in acks_levels:
            name = "all" if acks == "-1" else acks
            run.produce(f"100B acks={name}", args.small, 100, acks)
            run.produce(f"1KiB acks={name}", args.large, 1024, acks)
        src = "1" if nodes == 1 else "m1"
        run.consume("1KiB", f"p-1024-{src}", args.large)
        run.consume("100B", f"p-100-{src}", args.small)
        run.latency()
        run.figures["private memory MB"] = rss_anon_mb(run.pids)
        run.figures["loadavg"] = round(statistics.mean(run.loads), 2)
    except BaseException:
        print(f"  {system}: failed; its data and logs are kept in {root}", flush=True)
        raise
    finally:
        run.stop()
    shutil.rmtree(root, ignore_errors=True)   # the next system starts with this one's data gone
    return run.figures


LOWER_IS_BETTER = ("startup", "cpu", "e2e", "memory")


def table(results: dict) -> list[str]:
    """Per setup and figure: kcompat, Kafka (medians over the pairs) and the ratio (>1: kcompat
    better)."""
    lines = []
    for setup, runs in results.items():
        lines.append(f"\n{setup}:")
        lines.append(f"  {'figure':34} {'kcompat':>10} {'Kafka':>10} {'ratio':>7}")
        keys = list(runs["kcompat"][0])
        for key in keys:
            k = round(statistics.median(r[key] for r in runs["kcompat"]), 2)
            f = round(statistics.median(r[key] for r in runs["kafka"]), 2)
            if key == "loadavg":
                lines.append(f"  {'(1-min load average)':34} {k:>10} {f:>10}")
                continue
            lower = any(w in key for w in LOWER_IS_BETTER)
            ratio = (f / k if lower else k / f) if k and f else float("nan")
            lines.append(f"  {key:34} {k:>10} {f:>10} {ratio:>6.2f}x")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=1)
    ap.add_argument("--small", type=int, default=500_000, help="100 B records per produce phase")
    ap.add_argument("--large", type=int, default=100_000, help="1 KiB records per produce phase")
    ap.add_argument("--passes", type=int, default=2, help="consume passes (the best counts)")
    ap.add_argument("--rate", type=float, default=2000.0)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--kafka-version", default="3.9.2")
    ap.add_argument("--heap", default="1g")
    ap.add_argument("--single-only", action="store_true")
    ap.add_argument("--cluster-only", action="store_true")
    ap.add_argument("--work-dir", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--no-drop-caches", dest="drop_caches", action="store_false",
                    help="keep the page cache between produce phases (see drop_page_cache)")
    ap.add_argument("--pin", action="store_true",
                    help="single node: the client on CPU 0, the broker on CPU 1 (see the module docstring)")
    args = ap.parse_args(argv)
    if args.pin and not args.single_only:
        ap.error("--pin needs --single-only (three brokers and a client do not pin onto two CPUs)")
    args.driver = driver(Path(tempfile.gettempdir()) / "kcompat-rdkbench")
    setups = [n for n in (1, 3) if not (n == 1 and args.cluster_only) and not (n == 3 and args.single_only)]
    results: dict = {}
    for nodes in setups:
        name = "single node" if nodes == 1 else "3 nodes (RF 3, min ISR 2)"
        results[name] = {"kcompat": [], "kafka": []}
        for pair in range(args.pairs):
            for system in ("kcompat", "kafka"):
                print(f"[{name}] pair {pair + 1}: {system}", flush=True)
                results[name][system].append(run_system(system, nodes, args, pair))
    print(f"\nrecords: {args.small} x 100 B, {args.large} x 1 KiB per phase; latency {args.rate:g}/s for "
          f"{args.seconds:g} s; ratio > 1 means kcompat is better (rate: kcompat/Kafka; time, CPU, "
          f"memory: Kafka/kcompat)")
    for line in table(results):
        print(line)
    print("\nuptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    print(json.dumps({"summary": {s: {sys_: runs[0] for sys_, runs in r.items()} for s, r in results.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
