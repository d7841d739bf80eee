"""Time from asking for a broker to a produce acknowledged: kcompat's test fixtures against the fastest
start of Apache Kafka on this machine (issue 22).

    python3 bench/fixture_start.py [--rounds 5] [--kafka-version 3.9.2]

Per round, alternating, each a fresh broker with fresh data, measured from the request until a
confluent-kafka producer (acks=all) has its first record to a new (auto-created) topic acknowledged:

- ``kcompat``: ``kcompat.testing.Broker()`` (what the ``kafka_broker`` fixture does) - a child
  ``python -m kcompat serve`` process;
- ``kcompat-inproc``: ``Broker(in_process=True)`` in a fresh Python process that has imported
  ``kcompat.testing`` (as pytest has with the plugin), so the broker's own imports are counted;
- ``kcompat-3``: ``kcompat.testing.Cluster(3)`` (the ``kafka_cluster`` fixture), RF 3;
- ``kcompat-3-inproc``: ``Cluster(3, in_process=True)`` in a fresh Python process, as ``kcompat-inproc``;
- ``kafka``: Apache Kafka ``--kafka-version`` in KRaft single-node mode from the reference jars
  (the conformance suite's Maven cache): ``StorageTool format`` with a cluster id made here (no JVM
  for ``random-uuid``), then ``kafka.Kafka``, both with the JVM's fast-start flags (serial GC, C1
  only, class-data sharing) - the fastest way Kafka allows here; the time of ``format`` is given too.

``ready`` is when the fixture would hand the broker to the test (kcompat: its ``start`` returned;
Kafka: the process launched - Kafka's readiness is the produce itself). Python children run with
their bytecode cached (``PYTHONPYCACHEPREFIX`` under ``bench/results``), as in any installed
environment; the first round is a warm-up (not counted) for every system.

``reset`` (kcompat broker only): after the acknowledged record, a group commits an offset; then
``Broker.reset()`` deletes the topic and the group, as ``kcompat_reset`` does between tests that share
a broker - what a test suite pays per test instead of a new broker.

Prints medians (min-max) with the 1-minute load average, and a JSON line. No target, exit 0.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))

import confluent_kafka  # noqa: E402

from kcompat.broker.cluster_id import new_cluster_id  # noqa: E402
from kcompat.testing import Broker, Cluster  # noqa: E402
from kcompat.testing.ports import free_ports  # noqa: E402

SYSTEMS = ("kcompat", "kcompat-inproc", "kcompat-3", "kcompat-3-inproc", "kafka")
PRODUCER = {"acks": "all", "log_level": 2, "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 100,
            "message.timeout.ms": 120000, "topic.metadata.refresh.interval.ms": 100}

# the client is imported with the test module, kcompat.testing with the plugin, before any
# fixture is requested; what the fixture imports (the broker) is counted
INPROC = """
import sys, time, json
import confluent_kafka
import kcompat.testing
t_import = time.monotonic()
sys.path.insert(0, {bench!r})
from fixture_start import produce_one
with kcompat.testing.{make} as b:
    t_ready = time.monotonic()
    produce_one(b.bootstrap_servers)
    t_ack = time.monotonic()
print(json.dumps({{"ready": t_ready - t_import, "ack": t_ack - t_import}}))
"""


def produce_one(bootstrap: str, topic: str = "first") -> None:
    """One record, acks=all, to an auto-created topic; returns once it is acknowledged."""
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, **PRODUCER})
    errors: list = []
    p.produce(topic, b"x", on_delivery=lambda e, m: errors.append(e))
    while not errors:
        p.poll(0.005)
    if errors[0] is not None:
        raise RuntimeError(f"produce failed: {errors[0]}")


def commit_offset(bootstrap: str, topic: str = "first", group: str = "g") -> None:
    """Group ``group`` commits offset 1 of ``topic``-0 (a group for the reset to delete)."""
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 2})
    try:
        c.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 1)], asynchronous=False)
    finally:
        c.close()


def run_kcompat() -> dict:
    """``Broker()``: seconds to ready and to the first ack, then the reset's seconds."""
    t0 = time.monotonic()
    with Broker() as b:
        t_ready = time.monotonic()
        produce_one(b.bootstrap_servers)
        t_ack = time.monotonic()
        commit_offset(b.bootstrap_servers)
        t_reset0 = time.monotonic()
        left = b.reset()
        t_reset = time.monotonic()
        if left or b.list_topics():
            raise RuntimeError(f"reset left groups {left} or topics {b.list_topics()}")
    return {"ready": t_ready - t0, "ack": t_ack - t0, "reset": t_reset - t_reset0}


def run_kcompat_inproc(make: str = "Broker(in_process=True)") -> dict:
    """``kcompat.testing.<make>`` in a fresh Python process (:data:`INPROC`)."""
    out = subprocess.run([sys.executable, "-c", INPROC.format(bench=str(BENCH), make=make)], capture_output=True,
                         text=True, timeout=120, cwd=str(ROOT),
                         env=dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")))
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_kcompat_cluster() -> dict:
    """``Cluster(3)``: seconds to ready and to the first ack (RF 3, acks=all)."""
    t0 = time.monotonic()
    with Cluster(3) as c:
        t_ready = time.monotonic()
        produce_one(c.bootstrap_servers)
        t_ack = time.monotonic()
    return {"ready": t_ready - t0, "ack": t_ack - t0}


def run_kafka(lib: Path) -> dict:
    """Kafka from the jars in ``lib``: seconds of ``StorageTool format`` and to the first ack."""
    from conformance.reference import LOG4J, java_command

    with tempfile.TemporaryDirectory(prefix="kafka-start-") as tmp:
        work = Path(tmp)
        port, cport = free_ports(2)
        props = {"process.roles": "broker,controller", "node.id": "1",
                 "controller.quorum.voters": f"1@127.0.0.1:{cport}",
                 "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}",
                 "controller.listener.names": "CONTROLLER", "log.dirs": str(work / "data"),
                 "offsets.topic.replication.factor": "1", "transaction.state.log.replication.factor": "1",
                 "transaction.state.log.min.isr": "1", "group.initial.rebalance.delay.ms": "0"}
        (work / "server.properties").write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (work / "log4j.properties").write_text(LOG4J.format(log=work / "server.log"))
        log4j = work / "log4j.properties"
        t0 = time.monotonic()
        fmt = subprocess.run(java_command(lib, "kafka.tools.StorageTool", ["format", "-t", new_cluster_id(), "-c",
                                                                        str(work / "server.properties")],
                                          log4j=log4j), capture_output=True, text=True, timeout=120)
        if fmt.returncode != 0:
            raise RuntimeError(f"format failed: {fmt.stderr[-2000:]}")
        t_format = time.monotonic()
        with open(work / "stdout.log", "w") as out:
            proc = subprocess.Popen(java_command(lib, "kafka.Kafka", [str(work / "server.properties")], heap="512m",
                                                 log4j=log4j), stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        try:
            produce_one(f"127.0.0.1:{port}")
            t_ack = time.monotonic()
        finally:
            proc.terminate()
            proc.wait(60)
    return {"format": t_format - t0, "ready": t_format - t0, "ack": t_ack - t0}


def loadavg() -> float:
    """The 1-minute load average."""
    return os.getloadavg()[0]


def main() -> int:
    """Run the rounds and print the figures."""
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--rounds", type=int, default=5, help="measured rounds (after one warm-up round)")
    ap.add_argument("--kafka-version", default="3.9.2")
    ap.add_argument("--json", type=Path, help="write every run here")
    args = ap.parse_args()
    cache = BENCH / "results" / "pycache"
    cache.mkdir(parents=True, exist_ok=True)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(cache)
    from conformance import maven   # here: the in-process runs import this module

    lib = maven.resolve_kafka(args.kafka_version)
    runners = {"kcompat": run_kcompat, "kcompat-inproc": run_kcompat_inproc, "kcompat-3": run_kcompat_cluster,
               "kcompat-3-inproc": lambda: run_kcompat_inproc("Cluster(3, in_process=True)"),
               "kafka": lambda: run_kafka(lib)}
    runs: dict[str, list[dict]] = {s: [] for s in SYSTEMS}
    for r in range(args.rounds + 1):
        for system in SYSTEMS:
            load = loadavg()
            result = runners[system]()
            result["load"] = load
            reset = f"  reset {result['reset']:6.3f} s" if "reset" in result else ""
            print(f"round {r}{' (warm-up)' if r == 0 else ''} {system:16s} ready {result['ready']:6.3f} s  "
                  f"acked {result['ack']:6.3f} s{reset}  load {load:.2f}", flush=True)
            if r > 0:
                runs[system].append(result)
    print("\nmedian (min-max) over", args.rounds, "rounds; seconds from the request:")
    summary = {}
    for system in SYSTEMS:
        acks = [x["ack"] for x in runs[system]]
        readies = [x["ready"] for x in runs[system]]
        summary[system] = {"ack_median_s": round(statistics.median(acks), 3), "ready_median_s":
                           round(statistics.median(readies), 3), "load": round(statistics.mean(x["load"] for x in runs[system]), 2)}
        extra = ""
        if system == "kafka":
            fmt = statistics.median(x["format"] for x in runs[system])
            summary[system]["format_median_s"] = round(fmt, 3)
            extra = f"  (of which StorageTool format {fmt:.3f})"
        if "reset" in runs[system][0]:
            resets = [x["reset"] for x in runs[system]]
            summary[system]["reset_median_s"] = round(statistics.median(resets), 3)
            extra = f"  reset {statistics.median(resets):.3f} ({min(resets):.3f}-{max(resets):.3f})"
        print(f"  {system:16s} ready {statistics.median(readies):6.3f} ({min(readies):.3f}-{max(readies):.3f})  "
              f"acked {statistics.median(acks):6.3f} ({min(acks):.3f}-{max(acks):.3f}){extra}")
    kafka = summary["kafka"]["ack_median_s"]
    for system in SYSTEMS[:-1]:
        summary[system]["vs_kafka"] = round(summary[system]["ack_median_s"] / kafka, 3)
    print(json.dumps({"bench": "fixture_start", "rounds": args.rounds, **summary}))
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
