"""Listener ports for test brokers, chosen outside the kernel's ephemeral range.

A port the OS picked with ``bind(port 0)`` comes from the ephemeral range
(``/proc/sys/net/ipv4/ip_local_port_range``, 32768-60999 by default), the same range every
outgoing connection takes its local port from. A test that releases such a port and binds it
later - a cluster node started on a port picked beforehand, a broker restarted on the port it had
so that clients reconnect - races with every connection opened meanwhile: now and then one of
them holds the port and the broker cannot bind it. Ports below the ephemeral range are never
handed to outgoing connections, so only listeners compete for them.

Each process takes ports from its own slice of ``BASE``-``LIMIT``, checks each with a trial bind
and does not hand a port out twice until the slice is used up, so parallel workers do not collide
either. A process claims its slice with an exclusive ``flock`` on ``<tmp>/kcompat-ports-<low>.lock``
(held until it exits), starting from the slice of its pytest-xdist worker number (else a random
one) and moving on to the next free one: two test runs on one machine (two checkouts, or the
nemesis soak beside the suite) then never share a slice, where a broker restarted on its old port
could otherwise find that the other run's broker took it meanwhile. With every slice claimed, the
process shares its preferred slice and relies on the trial bind alone.
"""

from __future__ import annotations

import fcntl
import os
import random
import socket
import tempfile
import threading
from contextlib import contextmanager

BASE = 12000
LIMIT = 32000          # below the default ephemeral range
SLICE = 4000

_lock = threading.Lock()
_given: set[int] = set()
_slice: tuple[int, int] | None = None
_next = 0
_claim = None          # the open lock file that holds this process's slice


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _my_slice() -> tuple[int, int]:
    """[low, high) of this process: the first slice, from the one of its xdist worker number (else
    a random one) onwards, that no other process holds; that one is then held until exit."""
    global _claim
    slices = max(1, (min(LIMIT, _ephemeral_low()) - BASE) // SLICE)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else random.randrange(slices)
    for k in range(slices):
        low = BASE + ((index + k) % slices) * SLICE
        f = open(os.path.join(tempfile.gettempdir(), f"kcompat-ports-{low}.lock"), "a")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            continue
        _claim = f
        return low, low + SLICE
    low = BASE + (index % slices) * SLICE
    return low, low + SLICE


def _bindable(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct ports on ``host`` that are free now, below the ephemeral range, never
    returned before by this process. Raises RuntimeError if this process's slice is used up."""
    global _slice, _next
    out: list[int] = []
    with _lock:
        if _slice is None:
            _slice = _my_slice()
            _next = _slice[0] + random.randrange(SLICE)
        low, high = _slice
        for attempt in range(2):
            for _ in range(high - low):
                port = _next
                _next = low if _next + 1 >= high else _next + 1
                if port in _given or not _bindable(port, host):
                    continue
                _given.add(port)
                out.append(port)
                if len(out) == n:
                    return out
            # every port of the slice was handed out once (a long soak): those of stopped brokers
            # are free again, which the trial bind checks
            _given.difference_update(range(low, high))
            _given.update(out)
    raise RuntimeError(f"no {n} free ports left in {low}-{high}")


@contextmanager
def machine_lock(name: str):
    """An exclusive lock shared by every process on this machine (``<tmp>/kcompat-<name>.lock``),
    for what tests cannot choose per process: a well-known port (``machine_lock("port-9092")``:
    apache/kafka's defaults advertise localhost:9092), a Docker image tag being built."""
    with open(os.path.join(tempfile.gettempdir(), f"kcompat-{name}.lock"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
