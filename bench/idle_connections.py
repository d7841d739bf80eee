"""Broker memory per idle connection, for one or more kcompat source trees.

    python3 bench/idle_connections.py TREE [TREE ...] [--connections 3000]

Each tree's broker (``PYTHONPATH=TREE python -m kcompat serve``, as ``bench/consume_cpu.py``
starts it) gets ``--connections`` client connections, each of which sends one ApiVersions
request, reads the answer and then stays open and silent, as a pooled client connection does.
Printed per tree: the broker's resident memory (VmRSS, MB) before and after, and the growth per
connection (KiB). The trees run one after the other. No target is asserted; exit 0.

Kafka keeps 4 bytes (the next request's size) per idle connection on top of its socket and
selector state; kcompat keeps its asyncio transport and protocol objects, and a receive buffer
only while a request is partly received (``kcompat/broker/frame_buffer.py``).
"""

from __future__ import annotations

import argparse
import resource
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
sys.path.insert(0, str(BENCH))

from consume_cpu import TreeBroker  # noqa: E402

from kcompat.testing.ports import free_ports  # noqa: E402

API_VERSIONS_V0 = struct.pack(">hh", 18, 0)


def rss_mb(pid: int) -> float:
    """VmRSS of ``pid`` in MB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def open_idle(bootstrap: str, n: int) -> list[socket.socket]:
    """``n`` connections that have each had one ApiVersions v0 answered."""
    host, port = bootstrap.split(":")
    socks = []
    for i in range(n):
        s = socket.create_connection((host, int(port)))
        body = API_VERSIONS_V0 + struct.pack(">ih", i, 5) + b"bench"
        s.sendall(struct.pack(">i", len(body)) + body)
        socks.append(s)
    for s in socks:
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        if len(s.recv(size, socket.MSG_WAITALL)) != size:
            raise RuntimeError("short ApiVersions answer")
    return socks


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trees", type=Path, nargs="+", help="kcompat source trees (repository roots)")
    ap.add_argument("--connections", type=int, default=3000)
    args = ap.parse_args(argv)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = args.connections + 256
    if soft < need:   # the broker inherits the limit: both ends need a descriptor per connection
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))
    for tree in args.trees:
        with tempfile.TemporaryDirectory(prefix="idle-conns-") as tmp:
            (Path(tmp) / "data").mkdir()
            with TreeBroker(tree, Path(tmp) / "data", free_ports(1)[0]) as broker:
                time.sleep(1)
                before = rss_mb(broker.proc.pid)
                socks = open_idle(broker.bootstrap, args.connections)
                time.sleep(1)
                after = rss_mb(broker.proc.pid)
                for s in socks:
                    s.close()
            print(f"{str(tree):40s} RSS {before:6.1f} -> {after:6.1f} MB with {args.connections} idle "
                  f"connections: {(after - before) * 1024 / args.connections:5.1f} KiB each", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
