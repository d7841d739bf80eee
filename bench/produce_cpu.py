"""Broker CPU per GB produced: two source trees of kcompat, compared in pairs of passes.

    python3 bench/produce_cpu.py BEFORE_TREE AFTER_TREE [--pairs 8] [--count 2000000]
                                 [--size 100] [--acks 1]

For work on the produce path, as ``bench/consume_cpu.py`` is for the consume path: both brokers
run at once, each from its own tree (``PYTHONPATH=TREE python -m kcompat serve``), and produce
passes alternate between them, A B B A A B ...; each pass is compared with its neighbour of the
other tree. A pass creates a topic of one partition and writes ``--count`` records of ``--size``
bytes with ``bench/c/rdkbench.c`` (acks ``--acks``, batches of up to 1 MB, as
``bench/vs_kafka.py``); one pair first, unmeasured, warms both up.

Per pass: MB/s of record values; the broker's CPU seconds per GB of values (its threads' time on
a CPU, ``/proc/PID/task/*/schedstat``); the client's (rdkbench's rusage). Printed as
``consume_cpu.py`` does. Run it a second time with the trees swapped. No target is asserted;
exit 0.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
sys.path.insert(0, str(BENCH))

import cluster_clients as cc  # noqa: E402
from consume_cpu import TreeBroker, print_paired  # noqa: E402
from proc_stats import proc_run_seconds  # noqa: E402
from vs_kafka import driver, run_driver  # noqa: E402

from kcompat.testing.ports import free_ports  # noqa: E402


def produce_pass(rdk: Path, broker: TreeBroker, topic: str, count: int, size: int, acks: int) -> dict[str, float]:
    """One produce of ``count`` records of ``size`` B into a new topic: MB/s, broker and client
    CPU s per GB."""
    cc.create_topic(broker.bootstrap, topic, 1, 1, {})
    before = proc_run_seconds(broker.proc.pid)
    r = run_driver(rdk, "produce", broker.bootstrap, topic, count, size, acks)
    cpu = proc_run_seconds(broker.proc.pid) - before
    gb = count * size / 1e9
    return {"MB/s": gb * 1e3 / r["seconds"], "broker s/GB": cpu / gb, "client s/GB": r["client_cpu_s"] / gb}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before", type=Path, help="kcompat source tree (repository root) A")
    ap.add_argument("after", type=Path, help="kcompat source tree B")
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--count", type=int, default=2_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--acks", type=int, default=1, choices=(-1, 1))
    args = ap.parse_args(argv)
    rdk = driver(Path(tempfile.gettempdir()) / "kcompat-rdkbench")
    with tempfile.TemporaryDirectory(prefix="produce-cpu-") as tmp:
        (Path(tmp) / "a").mkdir()
        (Path(tmp) / "b").mkdir()
        port_a, port_b = free_ports(2)
        with TreeBroker(args.before, Path(tmp) / "a", port_a) as a, TreeBroker(args.after, Path(tmp) / "b", port_b) as b:
            got: dict[str, list] = {"before": [], "after": []}
            for i in range(args.pairs + 1):
                order = (("before", a), ("after", b)) if i % 2 == 0 else (("after", b), ("before", a))
                for name, broker in order:
                    r = produce_pass(rdk, broker, f"p{i}", args.count, args.size, args.acks)
                    if i:   # pair 0 warms both up
                        got[name].append(r)
            print_paired(f"{args.size}B", got)
    return 0


if __name__ == "__main__":
    sys.exit(main())
