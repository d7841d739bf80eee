"""kcompat/testing/ports.py: processes on one machine never share a slice of listener ports."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kcompat.testing import ports

ROOT = Path(__file__).resolve().parents[2]

CLAIM = """
import sys
sys.path.insert(0, {root!r})
from kcompat.testing import ports
ports.free_ports(1)
print(ports._slice[0], ports._claim is not None, flush=True)
sys.stdin.read()            # hold the slice until the test closes stdin
"""


def claim_slices(n: int, lock_dir: Path) -> list[tuple[int, bool]]:
    """(slice low, claimed) of ``n`` processes started at once as xdist worker gw0, their lock
    files in ``lock_dir`` (TMPDIR) so that other test runs on the machine do not count."""
    env = dict(os.environ, PYTEST_XDIST_WORKER="gw0", TMPDIR=str(lock_dir))
    procs = []
    try:
        for _ in range(n):
            procs.append(subprocess.Popen([sys.executable, "-c", CLAIM.format(root=str(ROOT))],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True))
        out = []
        for p in procs:
            low, claimed = p.stdout.readline().split()
            out.append((int(low), claimed == "True"))
        return out
    finally:
        for p in procs:
            p.stdin.close()
            p.wait(timeout=30)


def test_processes_with_the_same_worker_number_claim_different_slices(tmp_path):
    got = claim_slices(3, tmp_path)
    assert all(claimed for _, claimed in got), got
    assert len({low for low, _ in got}) == 3, got
    assert all(ports.BASE <= low < ports.LIMIT for low, _ in got)


def test_with_every_slice_claimed_a_process_shares_its_preferred_one(tmp_path):
    slices = (min(ports.LIMIT, ports._ephemeral_low()) - ports.BASE) // ports.SLICE
    got = claim_slices(slices + 1, tmp_path)
    claimed = [low for low, c in got if c]
    assert sorted(claimed) == [ports.BASE + i * ports.SLICE for i in range(slices)], got
    assert [low for low, c in got if not c] == [ports.BASE], got     # gw0's slice, shared


def test_ports_are_below_the_ephemeral_range_and_never_handed_out_twice():
    a, b = ports.free_ports(20), ports.free_ports(20)
    assert len(set(a + b)) == 40
    low, high = ports._slice
    assert all(low <= p < high for p in a + b) and high <= ports._ephemeral_low()
