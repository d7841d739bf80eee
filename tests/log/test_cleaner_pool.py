"""The log cleaner driven as the broker drives it: ``tick()`` every so often, the work done by a
worker process while the calling thread keeps appending and reading."""

from __future__ import annotations

import time

import pytest

from kcompat.log import CLEANER_OFFSET_CHECKPOINT, LogCleaner, read_offset_checkpoint, run_clean_task
from kcompat.log import compaction
from kcompat.log.compaction import CleaningAbandoned

from .cleaner_helpers import NOW, TP, append_random, append_records, latest, open_log, read_all


def _tick_until_outcome(cleaner, logs, now, timeout=120.0, between=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        outs = cleaner.tick(logs, now)
        if outs:
            return outs
        if between is not None:
            between()
        time.sleep(0.005)
    raise AssertionError("no cleaning finished in time")


def test_tick_cleans_in_a_worker_process_while_the_log_is_used(tmp_path):
    log = open_log(tmp_path / "t-0")
    other = open_log(tmp_path / "u-0")
    expected = append_random(log, 150, keys=20)
    other_expected = append_random(other, 40, keys=3, seed=3)
    log.roll(NOW)
    logs = {TP: log, ("u", 0): other}
    cleaner = LogCleaner(threads=1, backoff_ms=0)
    try:
        appended = []

        def use_the_log():
            # the calling thread keeps serving: appends to the active segment and reads
            if len(appended) < 50:
                appended.append(append_records(log, [(b"live%d" % len(appended), ...)]))
            assert read_all(log)[0]
        outs = []
        while len(outs) < 2:
            outs += _tick_until_outcome(cleaner, logs, NOW, between=use_the_log)
        assert {o.tp for o in outs} == {TP, ("u", 0)} and all(o.installed for o in outs), outs
        got = latest(log)
        assert {k: got[k] for k in expected} == expected
        assert all(got[b"live%d" % i][0] == base for i, (base, _) in enumerate(appended))
        assert latest(other) == other_expected
        # the last step (fsync, unlink of the old files, checkpoint file) finishes in the worker
        deadline = time.monotonic() + 30
        while cleaner.in_progress and time.monotonic() < deadline:
            outs += cleaner.tick(logs, NOW)      # (the live appends may have made "t" dirty again)
            time.sleep(0.005)
        assert not cleaner.in_progress
        assert read_offset_checkpoint(tmp_path / CLEANER_OFFSET_CHECKPOINT) == {o.tp: o.end_offset for o in outs}
        for d in ("t-0", "u-0"):
            assert not [p for p in (tmp_path / d).iterdir() if p.suffix in (".deleted", ".swap", ".cleaned")]
        assert cleaner.tick(logs, NOW) == [] and not cleaner.in_progress      # nothing dirty left
    finally:
        cleaner.shutdown()


def test_shutdown_kills_a_running_cleaning_and_leaves_nothing(tmp_path):
    d = tmp_path / "t-0"
    log = open_log(d)
    append_random(log, 400, keys=50, per_batch=20)
    log.roll(NOW)
    cleaner = LogCleaner(threads=1)
    cleaner.tick({TP: log}, NOW)
    assert cleaner.in_progress == [TP] and log.cleaning is not None
    cleaner.shutdown()
    assert log.cleaning is None and not cleaner.in_progress
    assert not [p for p in d.iterdir() if p.suffix in (".cleaned", ".swap", ".deleted")]
    assert read_all(log)[0]


def test_truncation_while_the_worker_runs_discards_the_result(tmp_path):
    log = open_log(tmp_path / "t-0")
    append_random(log, 200, keys=10)
    log.roll(NOW)
    cleaner = LogCleaner(threads=1, backoff_ms=10**9)
    try:
        cleaner.tick({TP: log}, NOW)
        lease = log.cleaning
        assert lease is not None
        log.truncate_to(log.segments[2].base_offset + 1)
        outs = _tick_until_outcome(cleaner, {TP: log}, NOW)
        assert not outs[0].installed and outs[0].error.startswith("aborted")
        assert TP not in cleaner.uncleanable and log.cleaning is not lease   # (a new one may run)
    finally:
        cleaner.shutdown()
    assert log.cleaning is None and not list((tmp_path / "t-0").glob("*.cleaned"))


def test_orphaned_worker_stops_and_removes_its_files(tmp_path, monkeypatch):
    log = open_log(tmp_path / "t-0")
    append_random(log, 100, keys=10)
    log.roll(NOW)
    cleaner = LogCleaner()
    job = cleaner.start(cleaner.grab_filthiest({TP: log}, NOW), NOW)
    monkeypatch.setattr(compaction, "_parent_pid", -1)         # "the broker is gone"
    with pytest.raises(CleaningAbandoned):
        run_clean_task(job.task)
    assert not list((tmp_path / "t-0").glob("*.cleaned"))
