"""Broker CPU per GB consumed: two source trees of kcompat, compared in pairs of passes.

    python3 bench/consume_cpu.py BEFORE_TREE AFTER_TREE [--pairs 20] [--large 1000000]
                                 [--small 3000000]

For work on the consume path (issue 20's consume figures). A change of a few percent in the
broker's CPU per fetch is lost in one run against another on a shared 2-core machine: from run to
run the same code measured 0.32-0.65 s/GB. So both brokers run at once, each from its own tree
(``PYTHONPATH=TREE python -m kcompat serve``) on its own copy of the same data, and consume passes
alternate between them, A B B A A B ...; each pass is compared with its neighbour of the other tree.

The data: ``--large`` records of 1 KiB and ``--small`` of 100 B, one partition each, written
once with ``bench/c/rdkbench.c`` (as ``bench/vs_kafka.py``: batches of up to 1 MB). Each broker
first reads every topic twice, unmeasured (the first read after a start CRC-checks the segments,
:mod:`kcompat.log.verify`). Then ``--pairs`` pairs of passes per topic, each a consume from the
beginning with rdkbench.

Per pass: MB/s of record values; the broker's CPU seconds per GB of values (its threads' time on
a CPU, ``/proc/PID/task/*/schedstat``: ``stat``'s 10 ms ticks are too coarse for a pass of a few
hundred ms); the client's (rdkbench's rusage). Printed: the medians for each tree, the median of
the paired ratios AFTER/BEFORE and in how many pairs AFTER was lower. The two positions are not
quite equal (same code in both measured up to 10% apart in the paired broker CPU at 100 B), so
run it a second time with the trees swapped: the effect of the change is the geometric mean of
the ratio and the inverse of the swapped run's. No target is asserted; exit 0.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
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
from proc_stats import proc_run_seconds  # noqa: E402
from vs_kafka import driver, run_driver  # noqa: E402

from kcompat.testing.ports import free_ports  # noqa: E402

TOPICS = (("large", 1024), ("small", 100))
FIGURES = ("MB/s", "broker s/GB", "client s/GB")


class TreeBroker:
    """A kcompat broker started from the source tree ``tree`` over ``data`` (a context manager)."""

    def __init__(self, tree: Path, data: Path, port: int) -> None:
        self.bootstrap = f"127.0.0.1:{port}"
        self.log = open(data.parent / f"{data.name}.log", "a")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kcompat", "serve", "--override", f"log.dirs={data}",
             "--override", f"listeners=PLAINTEXT://{self.bootstrap}", "--override", "http.listeners=",
             "--log-level", "WARNING"],
            cwd=data.parent, env=dict(os.environ, PYTHONPATH=str(tree)), stdout=self.log,
            stderr=subprocess.STDOUT, start_new_session=True)

    def __enter__(self) -> "TreeBroker":
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the broker exited ({self.proc.returncode}); see {self.log.name}")
            try:
                socket.create_connection(self.bootstrap.split(":"), 0.5).close()
                return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("the broker did not listen within 120 s")

    def __exit__(self, *exc) -> None:
        os.killpg(self.proc.pid, signal.SIGTERM)
        self.proc.wait(60)
        self.log.close()


def print_paired(label: str, got: dict[str, list[dict[str, float]]]) -> None:
    """Medians of each figure for both trees, the median of the paired ratios AFTER/BEFORE and in
    how many pairs AFTER was lower; then the load average."""
    for fig in FIGURES:
        before = [r[fig] for r in got["before"]]
        after = [r[fig] for r in got["after"]]
        ratios = [y / x for x, y in zip(before, after)]
        print(f"{label:5s} {fig:12s} before {statistics.median(before):8.3f}  after "
              f"{statistics.median(after):8.3f}  after/before (paired) {statistics.median(ratios):.3f}, "
              f"after lower in {sum(r < 1 for r in ratios)}/{len(ratios)}", flush=True)
    print(f"# load average {os.getloadavg()[0]:.2f}", flush=True)


def consume_pass(rdk: Path, broker: TreeBroker, topic: str, count: int) -> dict[str, float]:
    """One consume of ``topic`` from the beginning: MB/s, broker and client CPU s per GB."""
    before = proc_run_seconds(broker.proc.pid)
    r = run_driver(rdk, "consume", broker.bootstrap, topic, 1, count)
    cpu = proc_run_seconds(broker.proc.pid) - before
    gb = r["bytes"] / 1e9
    return {"MB/s": r["bytes"] / 1e6 / r["seconds"], "broker s/GB": cpu / gb,
            "client s/GB": r["client_cpu_s"] / gb}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before", type=Path, help="kcompat source tree (repository root) A")
    ap.add_argument("after", type=Path, help="kcompat source tree B")
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--large", type=int, default=1_000_000, help="records of 1 KiB")
    ap.add_argument("--small", type=int, default=3_000_000, help="records of 100 B")
    args = ap.parse_args(argv)
    rdk = driver(Path(tempfile.gettempdir()) / "kcompat-rdkbench")
    counts = {"large": args.large, "small": args.small}
    with tempfile.TemporaryDirectory(prefix="consume-cpu-") as tmp:
        data_a, data_b = Path(tmp) / "a", Path(tmp) / "b"
        port_a, port_b = free_ports(2)
        with TreeBroker(args.before, data_a, port_a) as b:
            for topic, size in TOPICS:
                cc.create_topic(b.bootstrap, topic, 1, 1, {})
                run_driver(rdk, "produce", b.bootstrap, topic, counts[topic], size, 1)
        shutil.copytree(data_a, data_b)
        with TreeBroker(args.before, data_a, port_a) as a, TreeBroker(args.after, data_b, port_b) as b:
            for topic, _size in TOPICS:
                for broker in (a, b, a, b):   # warm-up: CRC checks after a start, page cache
                    consume_pass(rdk, broker, topic, counts[topic])
                got: dict[str, list] = {"before": [], "after": []}
                for i in range(args.pairs):
                    order = (("before", a), ("after", b)) if i % 2 == 0 else (("after", b), ("before", a))
                    for name, broker in order:
                        got[name].append(consume_pass(rdk, broker, topic, counts[topic]))
                print_paired(topic, got)
    return 0


if __name__ == "__main__":
    sys.exit(main())
