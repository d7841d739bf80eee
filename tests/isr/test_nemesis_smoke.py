"""A short run of the nemesis soak (bench/nemesis.py, issue 25): a 3-node cluster under an
idempotent acks=all producer, a consumer group of two and a transactional copy, through kill -9 of
the active controller, SIGSTOP of a partition leader past the session and ISR lag timeouts, and a
node cut off from the others with its links silently stalled; afterwards no acknowledged record is
lost, duplicated or reordered, no committed offset went backwards, the group read nothing that is
not in the final log and missed nothing acknowledged, and the read_committed copy holds each input
record exactly once. The full soak (100 runs of seeded schedules) is a bench/ job."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

spec = importlib.util.spec_from_file_location("nemesis", Path(__file__).resolve().parents[2] / "bench" / "nemesis.py")
nemesis = importlib.util.module_from_spec(spec)
sys.modules["nemesis"] = nemesis  # dataclasses look their module up
spec.loader.exec_module(nemesis)


def test_nemesis_smoke_run_finds_no_violation(tmp_path):
    faults = [nemesis.Fault(gap=1.0, kind="kill", target="controller", node=1, partition=0, peer=0,
                            mode=nemesis.CUT, hold=1.0),
              nemesis.Fault(gap=1.0, kind="pause", target="leader", node=2, partition=1, peer=0,
                            mode=nemesis.CUT, hold=4.0),
              nemesis.Fault(gap=1.0, kind="isolate", target="leader", node=3, partition=2, peer=0,
                            mode=nemesis.BLACKHOLE, hold=4.0)]
    result = nemesis.run_once(7, 0, 2, tmp_path, print, faults=faults)
    print(result)
    assert sum(result["faults"].values()) == 3
    assert result["records"]["acked"] > 0 and result["records"]["copied"] == result["records"]["read"]
    assert not any(result["violations"].values()), result["examples"]
