"""Where a consumer fetch's time goes in the broker: microseconds per Fetch, by component.

    python3 bench/fetch_breakdown.py [TREE] [--records 1000000] [--size 1024] [--passes 4]
                                     [--added-us 0]

For work on the consume path (issue 20's consume figures). One kcompat broker from the source tree
``TREE`` (default: this repository) runs with timers wrapped around the functions a Fetch passes
through; ``--records`` records of ``--size`` bytes go to a one-partition topic with
``bench/c/rdkbench.c`` (batches of up to 1 MB, as ``bench/vs_kafka.py``), which then reads the topic
from the beginning ``--passes`` times (after two unmeasured passes).

Printed: the consume rate and the broker's CPU seconds per GB, then for each timed function its
calls per Fetch and its wall time per Fetch in microseconds. The rows nest (``handler`` includes
``ReplicaManager.fetch_messages``, which includes ``Log.read``; ``request`` includes everything
below it except ``stats``, which runs after the send). ``python`` is ``request`` less the two
send syscalls: the interpreter's share of a Fetch. Each timer adds about a microsecond.

``--added-us N`` makes the Fetch handler busy-wait N microseconds first: the consume rate's
response to it shows how much of the broker's time per Fetch is on the consumer's critical path
(librdkafka sends the next Fetch only after parsing the previous response, so with one partition
every microsecond of broker time is waited for).

Numbers only; nothing is asserted. The timers make the broker slower than without them: compare
rows within one run, not with ``consume_cpu.py``'s figures.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))

# (row label, module, class or None, function); the order of the printed table
TIMED = (
    ("request", "kcompat.broker.connection", "KafkaConnection", "buffer_updated"),
    ("  decode", "kcompat.protocol.messages.fetch", "FetchRequest", "read"),
    ("  handler", "kcompat.broker.handlers.fetch", None, "handle"),
    ("    ReplicaManager.fetch_messages", "kcompat.isr.replica_manager", "ReplicaManager", "fetch_messages"),
    ("      Log.read", "kcompat.log.reads", "LogReads", "read"),
    ("  encode", "kcompat.protocol.messages.fetch", "FetchResponse", "write"),
    ("  send: sendmsg", "kcompat.broker.sendfile_writer", "SendfileWriter", "_send_buffers"),
    ("  send: sendfile", "kcompat.broker.sendfile_writer", "SendfileWriter", "_send_range"),
    ("stats", "kcompat.broker.request_stats", "RequestStats", "record"),
)
SEND_ROWS = ("  send: sendmsg", "  send: sendfile")


def _install_timers(out_path: str, added_us: int) -> None:
    """In the broker process: wrap every TIMED function with a wall-clock timer; SIGUSR1 writes
    ``{label: [calls, seconds]}`` to ``out_path`` and resets the counts."""
    import importlib
    from time import perf_counter
    totals: dict[str, list] = {}

    def timed(label: str, fn):
        cell = totals.setdefault(label, [0, 0.0])

        def wrapper(*args, **kwargs):
            t0 = perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                cell[0] += 1
                cell[1] += perf_counter() - t0
        return wrapper

    for label, module, cls, name in TIMED:
        owner = importlib.import_module(module)
        if cls is not None:
            owner = getattr(owner, cls)
        raw = owner.__dict__[name]
        if isinstance(raw, classmethod):
            setattr(owner, name, classmethod(timed(label, raw.__func__)))
        else:
            setattr(owner, name, timed(label, raw))
    if added_us:
        fetch = importlib.import_module("kcompat.broker.handlers.fetch")
        handle = fetch.handle

        def spinning(ctx, req):
            until = perf_counter() + added_us / 1e6
            while perf_counter() < until:
                pass
            return handle(ctx, req)
        fetch.handle = spinning

    def dump(_sig, _frame) -> None:
        with open(out_path, "w") as f:
            json.dump(totals, f)
        for cell in totals.values():
            cell[0], cell[1] = 0, 0.0
    signal.signal(signal.SIGUSR1, dump)


def _serve(argv: list[str]) -> int:
    """``--serve OUT ADDED_US ARGS...``: run ``kcompat serve ARGS`` with the timers installed."""
    out_path, added_us, rest = argv[0], int(argv[1]), argv[2:]
    _install_timers(out_path, added_us)
    from kcompat.cli import main as kcompat_main
    sys.argv = ["kcompat", "serve", *rest]
    return kcompat_main()


def _cpu_seconds(pid: int) -> float:
    from proc_stats import proc_run_seconds
    return proc_run_seconds(pid)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--serve"]:
        return _serve(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tree", type=Path, nargs="?", default=ROOT, help="kcompat source tree (repository root)")
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=1024, help="record value size (bytes)")
    ap.add_argument("--passes", type=int, default=4)
    ap.add_argument("--added-us", type=int, default=0, help="busy-wait per Fetch (microseconds)")
    args = ap.parse_args(argv)

    import cluster_clients as cc
    from vs_kafka import driver, run_driver
    sys.path.insert(0, str(ROOT))
    from kcompat.testing.ports import free_ports

    rdk = driver(Path(tempfile.gettempdir()) / "kcompat-rdkbench")
    with tempfile.TemporaryDirectory(prefix="fetch-breakdown-") as tmp:
        (port,) = free_ports(1)
        bootstrap = f"127.0.0.1:{port}"
        out_path = Path(tmp) / "timers.json"
        log = open(Path(tmp) / "broker.log", "w")
        proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--serve", str(out_path), str(args.added_us),
             "--override", f"log.dirs={tmp}/data", "--override", f"listeners=PLAINTEXT://{bootstrap}",
             "--override", "http.listeners=", "--log-level", "WARNING"],
            env=dict(os.environ, PYTHONPATH=str(args.tree.resolve())), stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
        try:
            deadline = time.monotonic() + 120
            while True:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    raise SystemExit("the broker did not start:\n" + (Path(tmp) / "broker.log").read_text()[-3000:])
                try:
                    socket.create_connection(("127.0.0.1", port), 0.5).close()
                    break
                except OSError:
                    time.sleep(0.1)
            cc.create_topic(bootstrap, "t", 1, 1, {})
            run_driver(rdk, "produce", bootstrap, "t", args.records, args.size, 1)
            for _ in range(2):   # unmeasured: the first read after a start CRC-checks the segments
                run_driver(rdk, "consume", bootstrap, "t", 1, args.records)
            os.kill(proc.pid, signal.SIGUSR1)   # reset the timers
            time.sleep(0.5)
            cpu0, total_bytes, seconds = _cpu_seconds(proc.pid), 0.0, 0.0
            for _ in range(args.passes):
                r = run_driver(rdk, "consume", bootstrap, "t", 1, args.records)
                total_bytes += r["bytes"]
                seconds += r["seconds"]
            cpu = _cpu_seconds(proc.pid) - cpu0
            out_path.unlink(missing_ok=True)
            os.kill(proc.pid, signal.SIGUSR1)
            while not out_path.exists() or not out_path.stat().st_size:
                time.sleep(0.05)
            time.sleep(0.1)
            totals = json.loads(out_path.read_text())
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(60)
            log.close()

    gb = total_bytes / 1e9
    fetches = totals["  handler"][0] or 1
    print(f"# {args.passes} passes of {args.records} x {args.size} B, added {args.added_us} us per Fetch; "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"consume {total_bytes / 1e6 / seconds:.0f} MB/s, broker CPU {cpu / gb:.3f} s/GB, {fetches} fetches "
          f"({total_bytes / fetches / 1e6:.2f} MB each)")
    print(f"{'':36s} {'calls/fetch':>11s} {'us/fetch':>9s}")
    for label, *_ in TIMED:
        calls, secs = totals.get(label, (0, 0.0))
        print(f"{label:36s} {calls / fetches:11.2f} {secs / fetches * 1e6:9.1f}")
    python = totals["request"][1] - sum(totals[r][1] for r in SEND_ROWS)
    print(f"{'python (request less the sends)':36s} {'':11s} {python / fetches * 1e6:9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
