"""A crash at any step of cleaning loses nothing: every step of the install is interrupted in
turn (the on-disk state then is what ``kill -9`` leaves: the log layer only uses pwrite, rename
and unlink, all in the page cache when they return) and the log is reopened as after an unclean
shutdown; plus real ``kill -9`` of a process that appends and cleans."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from kcompat.log import Log, LogCleaner, run_clean_task

from .cleaner_helpers import (
    NOW, TP, append_random, check_kafka_python, compact_config, latest, open_log, read_all,
)


class SimulatedCrash(Exception):
    pass


def _config():
    return compact_config(segment_bytes=1500, index_interval_bytes=200, delete_retention_ms=10**9)


def _prepare(d: Path) -> dict:
    log = open_log(d, _config())
    expected = append_random(log, 45, keys=12, tombstone_rate=0.05, codecs=(0, 2))
    log.roll(NOW)
    log.close()
    return expected


def _reopen_and_check(d: Path, expected: dict) -> Log:
    log = Log.open(d, _config(), recovery_point=0, clean_shutdown=False, now_ms=NOW)
    leftovers = [p.name for p in d.iterdir() if p.suffix in (".cleaned", ".swap", ".deleted")]
    assert not leftovers, leftovers
    assert latest(log) == expected
    check_kafka_python(log)
    return log


def _install_steps(d: Path) -> list[str]:
    """The names of the install steps, from a run without a crash."""
    steps: list[str] = []
    log = open_log(d, _config())
    cleaner = LogCleaner()
    job = cleaner.start(cleaner.grab_filthiest({TP: log}, NOW), NOW)
    result = run_clean_task(job.task)
    assert len(result.groups) >= 3
    log._fault_hook = steps.append
    assert log.replace_segments(job.lease, result.groups, now_ms=NOW)
    log.close()
    return steps


def _crash_at(d: Path, step: str | None) -> None:
    """Clean the log in ``d`` and stop dead at ``step`` (None: right after the worker wrote the
    cleaned files). The Log object is abandoned, not closed, as a killed process would."""
    log = open_log(d, _config())
    cleaner = LogCleaner()
    job = cleaner.start(cleaner.grab_filthiest({TP: log}, NOW), NOW)
    result = run_clean_task(job.task)
    if step is None:
        return

    def hook(name: str) -> None:
        if name == step:
            raise SimulatedCrash(name)
    log._fault_hook = hook
    try:
        log.replace_segments(job.lease, result.groups, now_ms=NOW)
    except SimulatedCrash:
        return
    raise AssertionError(f"step {step} not reached")


def test_crash_at_every_install_step_loses_nothing(tmp_path, monkeypatch):
    # kill -9 semantics need no fsync (the page cache survives); skipping them keeps this fast
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    pristine = tmp_path / "pristine" / "t-0"
    expected = _prepare(pristine)
    probe = tmp_path / "probe" / "t-0"
    shutil.copytree(pristine, probe)
    steps = _install_steps(probe)
    kinds = {s.split()[0] for s in steps}
    assert kinds == {"swap", "deleted", "renamed", "installed"}
    for i, step in enumerate([None] + steps):
        d = tmp_path / f"crash{i}" / "t-0"
        shutil.copytree(pristine, d)
        _crash_at(d, step)
        log = _reopen_and_check(d, expected)
        # and the cleaner carries on from there
        if (out := LogCleaner().clean_now({TP: log}, NOW)) is not None:
            assert out.installed, out.error
        assert latest(log) == expected
        log.close()


def test_crash_with_a_torn_cleaned_file(tmp_path):
    d = tmp_path / "t-0"
    expected = _prepare(d)
    _crash_at(d, None)
    cleaned = sorted(d.glob("*.log.cleaned"))
    with open(cleaned[0], "r+b") as f:
        f.truncate(os.path.getsize(cleaned[0]) // 2)
    _reopen_and_check(d, expected).close()


def test_crash_after_swap_of_some_groups_only(tmp_path):
    """Cleaned files renamed to .swap for the first groups only: the later ones are incomplete
    (a .cleaned file remains below them) and the earlier ones complete at start-up."""
    d = tmp_path / "t-0"
    expected = _prepare(d)
    log = open_log(d, _config())
    cleaner = LogCleaner()
    job = cleaner.start(cleaner.grab_filthiest({TP: log}, NOW), NOW)
    result = run_clean_task(job.task)
    second = result.groups[1].base

    def hook(name: str) -> None:
        if name == f"swap {second} timeindex":
            raise SimulatedCrash(name)
    log._fault_hook = hook
    try:
        log.begin_swap(job.lease, result.groups)
    except SimulatedCrash:
        pass
    assert list(d.glob("*.log.swap")) and list(d.glob("*.cleaned"))
    old_second = [s.size for s in log.segments if s.base_offset in result.groups[1].old_bases]
    reopened = _reopen_and_check(d, expected)
    assert reopened.segments[0].size == result.groups[0].size            # first group swapped in
    assert [s.size for s in reopened.segments[1:1 + len(old_second)]] == old_second   # not the second
    reopened.close()


CHILD = textwrap.dedent("""
    import sys
    from pathlib import Path
    from kcompat.log import Log, LogCleaner, LogConfig
    from kcompat.protocol.records import build_batch
    d = Path(sys.argv[1])
    cfg = LogConfig(segment_bytes=3000, index_interval_bytes=300, cleanup_policy="compact",
                    min_cleanable_dirty_ratio=0.2, delete_retention_ms=10**12)
    log = Log.open(d, cfg, recovery_point=0, clean_shutdown=False, now_ms=1)
    cleaner = LogCleaner()
    n = 0
    while True:
        base = log.log_end_offset
        recs = [(1000 + base + j, b"k%d" % ((base + j) * 7 % 40), b"v%d" % (base + j), ())
                for j in range(4)]
        log.append(build_batch(recs, base_offset=base), last_offset=base + 3,
                   max_timestamp=1003 + base, offset_of_max_timestamp=base + 3, now_ms=1000)
        sys.stdout.write(f"{log.log_end_offset}\\n")
        sys.stdout.flush()
        n += 1
        if n % 25 == 0:
            cleaner.clean_now({("t", 0): log}, 10**6)
""")


def test_kill9_while_appending_and_cleaning_loses_nothing(tmp_path):
    d = tmp_path / "t-0"
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=str(root))
    rnd = random.Random(5)
    for _round in range(3):
        proc = subprocess.Popen([sys.executable, "-c", CHILD, str(d)], stdout=subprocess.PIPE,
                                env=env, text=True)
        acked = 0
        deadline = None
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                acked = int(line)
                if deadline is None:
                    deadline = time.monotonic() + rnd.uniform(0.3, 0.8)
                elif time.monotonic() >= deadline:
                    break
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        assert acked > 0
        log = Log.open(d, compact_config(segment_bytes=3000, index_interval_bytes=300),
                       recovery_point=0, clean_shutdown=False, now_ms=NOW)
        assert log.log_end_offset >= acked
        got = latest(log)
        expected_last: dict[bytes, int] = {}
        for o in range(acked):
            expected_last[b"k%d" % (o * 7 % 40)] = o
        for key, o in expected_last.items():
            off, value = got[key]
            assert off >= o and value == b"v%d" % off and key == b"k%d" % (off * 7 % 40)
        assert read_all(log)[0]
        log.close()
