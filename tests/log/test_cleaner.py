"""The log cleaner: what survives compaction, when a log is cleaned, and how the result is
installed (Kafka ``LogCleanerTest`` / ``LogCleanerManagerTest`` behaviour)."""

from __future__ import annotations

import os
import shutil

import pytest

from kcompat.log import (
    CLEANER_OFFSET_CHECKPOINT, LogCleaner, LogConfig, read_offset_checkpoint, run_clean_task,
)
from kcompat.log.checkpoint import write_offset_checkpoint
from kcompat.protocol import compression
from kcompat.protocol.records import (
    ATTR_DELETE_HORIZON, CONTROL_COMMIT, build_batch, build_control_batch, iter_batches,
    iter_records,
)

from .cleaner_helpers import (
    NOW, TP, append_random, append_records, check_kafka_python, clean, compact_config, latest,
    open_log, read_all, segment_bytes, value_of,
)


# -- what survives -----------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", sorted(compression.NAMES))
def test_latest_value_per_key_survives_across_segments(tmp_path, codec):
    log = open_log(tmp_path / "t-0")
    expected = append_random(log, 150, codecs=(codec,))
    original = {r.offset: r for r in read_all(log)[0]}
    log.roll(NOW)
    assert len(log.segments) > 5
    out = clean(log)
    assert out.end_offset == log.segments[-1].base_offset
    records, hdrs = read_all(log)
    assert latest(log) == expected
    assert len(records) == len(expected)                  # only the latest per key is left
    for r in records:                                     # offset, timestamp, key, value, headers kept
        assert r == original[r.offset]
    assert all(h.compression == codec for h in hdrs if h.records_count)
    assert check_kafka_python(log) == len(records)
    assert log.size_in_bytes == sum(s.size for s in log.segments)


def test_mixed_codecs_and_headers(tmp_path):
    log = open_log(tmp_path / "t-0")
    expected = append_random(log, 200, keys=50, codecs=tuple(compression.NAMES), seed=7)
    log.roll(NOW)
    clean(log)
    assert latest(log) == expected
    check_kafka_python(log)


def test_clean_section_records_superseded_by_dirty_records_are_dropped(tmp_path):
    log = open_log(tmp_path / "t-0")
    expected = append_random(log, 60, keys=10)
    log.roll(NOW)
    clean(log)
    assert len(read_all(log)[0]) == 10
    cleaner = LogCleaner()
    cleaner.clean_now({TP: log}, NOW)          # nothing dirty: not eligible
    expected = append_random(log, 60, keys=10, seed=2, expected=expected)
    log.roll(NOW)
    clean(log)
    records = read_all(log)[0]
    assert len(records) == 10 and latest(log) == expected


def test_offsets_are_never_rewritten(tmp_path):
    log = open_log(tmp_path / "t-0")
    for i in range(40):
        append_records(log, [(b"a", ...), (b"b", ...), (b"k%d" % i, ...)])
    log.roll(NOW)
    leo = log.log_end_offset
    clean(log)
    records = read_all(log)[0]
    assert [r.offset for r in records] == [3 * i + 2 for i in range(39)] + [117, 118, 119]
    assert log.log_end_offset == leo
    # reading at an offset that fell into a gap returns the next batch that survived
    data = log.read(1, 1 << 20)
    first = next(iter(iter_records(data[:next(iter_batches(data))[1].size])))
    assert first.offset == 2


def test_keyless_records_are_kept(tmp_path):
    log = open_log(tmp_path / "t-0")
    append_records(log, [(b"a", ...), (None, b"no-key-1"), (b"a", ...)])
    append_records(log, [(b"a", ...), (None, b"no-key-2")])
    append_records(log, [(b"z", ...)])
    log.roll(NOW)
    clean(log)
    values = [(r.key, r.value) for r in read_all(log)[0]]
    assert values == [(None, b"no-key-1"), (b"a", value_of(3)), (None, b"no-key-2"),
                      (b"z", value_of(5))]


def test_transactional_and_control_batches_are_kept_whole(tmp_path):
    log = open_log(tmp_path / "t-0")
    append_records(log, [(b"a", ...), (b"b", ...)])
    append_records(log, [(b"a", ...)], producer_id=7, producer_epoch=0, base_sequence=0,
                   transactional=True)
    base = log.log_end_offset
    marker = build_control_batch(CONTROL_COMMIT, 7, 0, 3, NOW, base_offset=base)
    log.append(marker, last_offset=base, max_timestamp=NOW, offset_of_max_timestamp=base, now_ms=NOW)
    append_records(log, [(b"a", ...), (b"b", ...)])
    log.roll(NOW)
    clean(log)
    records, hdrs = read_all(log)
    # the transactional "a" is neither compacted away nor used to compact older records
    assert [(r.offset, r.key) for r in records] == [(2, b"a"), (3, b"\x00\x00\x00\x01"),
                                                  (4, b"a"), (5, b"b")]
    assert [h.is_control for h in hdrs] == [False, True, False]


# -- tombstones (KIP-534) --------------------------------------------------------------------------

def test_tombstones_survive_until_delete_retention_then_vanish(tmp_path):
    log = open_log(tmp_path / "t-0", compact_config(delete_retention_ms=10_000))
    append_records(log, [(b"gone", ...), (b"kept", ...)])
    append_records(log, [(b"gone", None)])
    append_records(log, [(b"other", ...)])
    log.roll(NOW)
    t0 = NOW + 5_000
    clean(log, t0)
    records, hdrs = read_all(log)
    tomb = [r for r in records if r.key == b"gone"]
    assert len(tomb) == 1 and tomb[0].value is None and tomb[0].offset == 2
    assert tomb[0].timestamp == NOW + 2                      # its own timestamp survives
    tomb_batch = next(h for h in hdrs if h.base_offset == 2)
    assert tomb_batch.attributes & ATTR_DELETE_HORIZON
    assert tomb_batch.base_timestamp == t0 + 10_000          # horizon = now + delete.retention.ms
    check_kafka_python(log)

    # a later pass before the horizon keeps it (and keeps the first horizon)
    append_records(log, [(b"other", ...)])
    log.roll(NOW)
    clean(log, t0 + 9_999)
    assert (2, None) == latest(log)[b"gone"]
    assert next(h for h in read_all(log)[1] if h.base_offset == 2).base_timestamp == t0 + 10_000

    # once the horizon has passed, the next cleaning removes it
    append_records(log, [(b"other", ...)])
    log.roll(NOW)
    out = clean(log, t0 + 10_000)
    assert out.stats.tombstones_removed == 1
    assert b"gone" not in latest(log)
    assert set(latest(log)) == {b"kept", b"other"}


def test_tombstone_superseded_by_a_new_value_goes_at_once(tmp_path):
    log = open_log(tmp_path / "t-0")
    append_records(log, [(b"k", ...), (b"k", None), (b"k", b"back")])
    append_records(log, [(b"x", ...)])
    log.roll(NOW)
    clean(log)
    assert latest(log)[b"k"] == (2, b"back")
    assert [r.key for r in read_all(log)[0]] == [b"k", b"x"]


# -- when a log is cleaned ---------------------------------------------------------------------------

def test_min_cleanable_dirty_ratio_gates_cleaning(tmp_path):
    log = open_log(tmp_path / "t-0", compact_config(min_cleanable_dirty_ratio=0.5, segment_bytes=10**6))
    cleaner = LogCleaner()
    logs = {TP: log}
    append_random(log, 100, keys=10)
    assert cleaner.grab_filthiest(logs, NOW) is None          # all in the active segment
    log.roll(NOW)
    ltc = cleaner.grab_filthiest(logs, NOW)
    assert ltc is not None and ltc.cleanable_ratio == 1.0
    clean(log, cleaner=cleaner)
    clean_size = log.size_in_bytes
    # a little dirty data: ratio below 0.5
    append_records(log, [(b"k001", ...)])
    log.roll(NOW)
    ltc = cleaner.log_to_clean(TP, log, NOW)
    assert 0 < ltc.cleanable_ratio < 0.5
    assert ltc.cleanable_ratio == pytest.approx(ltc.cleanable_bytes / (clean_size + ltc.cleanable_bytes))
    assert cleaner.grab_filthiest(logs, NOW) is None
    assert cleaner.tick(logs, NOW) == []
    # enough dirty data: cleaned
    append_random(log, 20, keys=10, seed=3)
    log.roll(NOW)
    assert cleaner.log_to_clean(TP, log, NOW).cleanable_ratio > 0.5
    assert clean(log, cleaner=cleaner).installed
    cleaner.shutdown()


def test_min_compaction_lag_keeps_recent_segments_dirty(tmp_path):
    lag = 60_000
    log = open_log(tmp_path / "t-0", compact_config(min_compaction_lag_ms=lag, segment_bytes=2000))
    now = NOW + 1_000_000
    for i in range(60):                          # old updates
        append_records(log, [(b"a", ...), (b"b", ...)], ts=NOW)
    old_end = log.log_end_offset
    log.roll(NOW)
    for i in range(60):                          # recent updates (within the lag)
        append_records(log, [(b"a", ...), (b"b", ...)], ts=now - 1000)
    log.roll(now)
    cleaner = LogCleaner()
    ltc = cleaner.log_to_clean(TP, log, now)
    assert ltc.upper == old_end                  # the first recent segment is uncleanable
    out = clean(log, now, cleaner=cleaner)
    assert out.end_offset == old_end
    offsets = [r.offset for r in read_all(log)[0]]
    assert offsets[:2] == [old_end - 2, old_end - 1]               # old part compacted
    assert offsets[2:] == list(range(old_end, log.log_end_offset))  # recent part untouched
    # later the lag has passed: the rest is cleaned
    clean(log, now + lag + 1, cleaner=cleaner)
    assert [r.offset for r in read_all(log)[0]] == [log.log_end_offset - 2, log.log_end_offset - 1]


def test_max_compaction_lag_forces_cleaning_below_the_ratio(tmp_path):
    cfg = compact_config(min_cleanable_dirty_ratio=1.0, max_compaction_lag_ms=100_000)
    log = open_log(tmp_path / "t-0", cfg)
    append_random(log, 40, keys=5)
    log.roll(NOW)
    cleaner = LogCleaner()
    assert cleaner.grab_filthiest({TP: log}, NOW + 1000) is None     # ratio 1.0 is never exceeded
    ltc = cleaner.grab_filthiest({TP: log}, NOW + 200_000)
    assert ltc is not None and ltc.need_compaction_now
    clean(log, NOW + 200_000, cleaner=cleaner)
    assert len(read_all(log)[0]) == 5


def test_max_compaction_lag_rolls_the_active_segment(tmp_path):
    cfg = compact_config(max_compaction_lag_ms=5_000, segment_bytes=10**6)
    assert cfg.max_segment_ms == 5_000
    assert LogConfig(max_compaction_lag_ms=5_000).max_segment_ms == LogConfig().segment_ms
    log = open_log(tmp_path / "t-0", cfg)
    append_records(log, [(b"a", ...)], ts=NOW)
    append_records(log, [(b"a", ...)], ts=NOW + 5_001)
    assert len(log.segments) == 2


def test_segment_ms_roll_makes_data_cleanable(tmp_path):
    log = open_log(tmp_path / "t-0", compact_config(segment_ms=1000, segment_bytes=10**6))
    for _ in range(10):
        append_records(log, [(b"a", ...)], ts=NOW)
    cleaner = LogCleaner()
    assert cleaner.grab_filthiest({TP: log}, NOW) is None
    append_records(log, [(b"a", ...)], ts=NOW + 2000)          # rolls by segment.ms
    clean(log, NOW + 2000, cleaner=cleaner)
    assert [r.offset for r in read_all(log)[0]] == [9, 10]


def test_active_segment_is_never_touched(tmp_path):
    log = open_log(tmp_path / "t-0")
    append_random(log, 60, keys=5)
    active_base = log.active_segment.base_offset
    append_random(log, 3, keys=5, seed=9)                       # duplicates in the active one
    assert log.active_segment.base_offset == active_base
    before = log.active_segment.read(0, log.active_segment.size)
    cleaner = LogCleaner()
    out = clean(log, cleaner=cleaner)
    assert out.end_offset == active_base
    assert log.active_segment.base_offset == active_base
    assert log.active_segment.read(0, log.active_segment.size) == before
    assert all(s.base_offset < active_base for s in log.segments[:-1])
    # a log with only an active segment is never cleaned
    only = open_log(tmp_path / "t-1", compact_config(segment_bytes=10**6))
    append_random(only, 20, keys=3)
    assert len(only.segments) == 1
    assert cleaner.grab_filthiest({("t", 1): only}, NOW) is None


def test_stable_offset_bounds_cleaning(tmp_path):
    log = open_log(tmp_path / "t-0")
    append_random(log, 100, keys=5)
    log.roll(NOW)
    bases = [s.base_offset for s in log.segments]
    cleaner = LogCleaner()
    ltc = cleaner.log_to_clean(TP, log, NOW, stable_offset=bases[3] + 1)
    assert ltc.upper == bases[3]


# -- producers -------------------------------------------------------------------------------------

def test_producer_id_epoch_and_sequence_survive(tmp_path):
    log = open_log(tmp_path / "t-0")
    seq = {1: 0, 2: 0}
    batches = {}
    for i in range(30):
        pid = 1 if i % 3 else 2
        base, last = append_records(log, [(b"k", ...), (b"k", ...)], producer_id=pid,
                                    producer_epoch=5, base_sequence=seq[pid])
        batches[pid] = (base, last, seq[pid])
        seq[pid] += 2
    append_records(log, [(b"k", ...)])                           # supersedes every "k" above
    log.roll(NOW)
    clean(log)
    hdrs = {h.base_offset: h for h in read_all(log)[1]}
    for pid, (base, last, s) in batches.items():
        h = hdrs[base]                                           # the producer's last batch stays
        assert (h.producer_id, h.producer_epoch, h.base_sequence) == (pid, 5, s)
        assert h.last_offset == last and h.records_count == 0    # ... as an empty header
        assert h.max_timestamp == h.base_timestamp == NOW + last
    assert sorted(h.producer_id for h in hdrs.values()) == [-1, 1, 2]
    check_kafka_python(log)


def test_producer_state_given_by_the_broker_decides(tmp_path):
    log = open_log(tmp_path / "t-0")
    b1 = append_records(log, [(b"k", ...)], producer_id=1, producer_epoch=0, base_sequence=0)
    b2 = append_records(log, [(b"k", ...)], producer_id=1, producer_epoch=0, base_sequence=1)
    append_records(log, [(b"k", ...)], producer_id=2, producer_epoch=0, base_sequence=0)
    append_records(log, [(b"k", ...)])
    log.roll(NOW)
    # producer 1 is active with its last batch at b1 (as if b2 were not its); producer 2 expired
    clean(log, producer_last_offsets={1: b1[1]})
    hdrs = read_all(log)[1]
    assert [(h.base_offset, h.producer_id, h.records_count) for h in hdrs] == [(b1[0], 1, 0), (3, -1, 1)]
    assert b2[0] not in [h.base_offset for h in hdrs]


def test_last_batch_of_the_cleaned_range_is_kept_even_if_empty(tmp_path):
    """Kafka keeps the batch ending at the first uncleanable offset (as an empty header if it
    lost every record), so the offset it ends at stays known."""
    log = open_log(tmp_path / "t-0")
    append_records(log, [(b"a", ...)])
    append_records(log, [(b"b", None)])          # a tombstone ends the cleanable range
    log.roll(NOW)
    append_records(log, [(b"z", ...)])
    clean(log, NOW)                              # sets the tombstone's delete horizon
    (tmp_path / CLEANER_OFFSET_CHECKPOINT).unlink()
    out = clean(log, NOW + 1000, cleaner=LogCleaner())      # horizon passed: tombstone removed
    assert out.stats.tombstones_removed == 1 and out.stats.empty_batches == 1
    hdrs = read_all(log)[1]
    assert [(h.base_offset, h.last_offset, h.records_count) for h in hdrs] == [(0, 0, 1), (1, 1, 0), (2, 2, 1)]


# -- the checkpoint --------------------------------------------------------------------------------

def test_cleaner_checkpoint_persists_the_cleaned_offset(tmp_path):
    d = tmp_path / "t-0"
    log = open_log(d)
    append_random(log, 60, keys=5)
    log.roll(NOW)
    out = clean(log)
    path = tmp_path / CLEANER_OFFSET_CHECKPOINT
    assert read_offset_checkpoint(path) == {TP: out.end_offset}
    assert path.read_text().splitlines()[:2] == ["0", "1"]
    # a new cleaner (after a restart) starts where the last one stopped
    fresh = LogCleaner()
    assert fresh.log_to_clean(TP, log, NOW).first_dirty == out.end_offset
    assert fresh.grab_filthiest({TP: log}, NOW) is None


def test_invalid_checkpoint_resets_to_log_start(tmp_path):
    log = open_log(tmp_path / "t-0")
    append_random(log, 30, keys=5)
    log.roll(NOW)
    write_offset_checkpoint(tmp_path / CLEANER_OFFSET_CHECKPOINT, {TP: 10**9, ("gone", 0): 5})
    cleaner = LogCleaner()
    assert cleaner.log_to_clean(TP, log, NOW).first_dirty == 0
    clean(log, cleaner=cleaner)
    assert read_offset_checkpoint(tmp_path / CLEANER_OFFSET_CHECKPOINT) == {TP: log.segments[-1].base_offset}


def test_truncation_lowers_the_checkpoint(tmp_path):
    log = open_log(tmp_path / "t-0")
    append_random(log, 60, keys=5)
    log.roll(NOW)
    cleaner = LogCleaner()
    out = clean(log, cleaner=cleaner)
    append_random(log, 5, keys=5, seed=4)
    log.truncate_to(out.end_offset - 3)
    assert out.end_offset > log.log_end_offset
    assert cleaner.log_to_clean(TP, log, NOW).first_dirty == log.active_segment.base_offset


# -- retention and truncation while cleaning -------------------------------------------------------

def test_compact_delete_also_applies_retention(tmp_path):
    cfg = compact_config(cleanup_policy="compact,delete", retention_ms=100_000)
    log = open_log(tmp_path / "t-0", cfg)
    for i in range(30):
        append_records(log, [(b"old%d" % i, ...)], ts=NOW)
    for i in range(30):
        append_records(log, [(b"new%d" % (i % 3), ...)], ts=NOW + 500_000)
    log.roll(NOW + 500_000)
    out = clean(log, NOW + 500_000)
    keys = {r.key for r in read_all(log)[0]}
    assert keys == {b"new0", b"new1", b"new2"}                 # old segments expired by retention.ms
    assert log.log_start_offset > 0 and out.installed


def test_retention_waits_while_a_log_is_being_cleaned(tmp_path):
    log = open_log(tmp_path / "t-0")
    expected = append_random(log, 80, keys=5)
    log.roll(NOW)
    cleaner = LogCleaner()
    job = cleaner.start(cleaner.grab_filthiest({TP: log}, NOW), NOW)
    result = run_clean_task(job.task)
    n = len(log.segments)
    cut = log.segments[2].base_offset
    assert log.delete_records_before(cut) == cut                # log start moves at once ...
    assert len(log.segments) == n                               # ... segments stay for now
    assert log.apply_retention(NOW + 10**12) == 0
    assert log.replace_segments(job.lease, result.groups, now_ms=NOW)
    log.end_cleaning(job.lease)                                 # ... and go after the install
    assert log.segments[0].base_offset <= cut                  # no segment wholly below it is left
    assert all(s.base_offset > cut for s in log.segments[1:])
    assert log.log_start_offset == cut
    assert all(expected[k] == v for k, v in latest(log).items())


def test_truncation_below_the_cleaned_range_discards_the_result(tmp_path):
    d = tmp_path / "t-0"
    log = open_log(d)
    append_random(log, 80, keys=5)
    log.roll(NOW)
    cleaner = LogCleaner()
    job = cleaner.start(cleaner.grab_filthiest({TP: log}, NOW), NOW)
    result = run_clean_task(job.task)
    assert list(d.glob("*.cleaned"))
    cut = log.segments[1].base_offset + 2
    log.truncate_to(cut)
    assert job.lease.aborted
    assert not log.replace_segments(job.lease, result.groups, now_ms=NOW)
    log.end_cleaning(job.lease)
    assert not list(d.glob("*.cleaned")) and not list(d.glob("*.swap"))
    assert log.log_end_offset <= cut
    assert read_all(log)[0][-1].offset == log.log_end_offset - 1


def test_truncation_after_the_swap_rename_removes_the_swap_files(tmp_path):
    d = tmp_path / "t-0"
    log = open_log(d)
    append_random(log, 80, keys=5)
    log.roll(NOW)
    cleaner = LogCleaner()
    job = cleaner.start(cleaner.grab_filthiest({TP: log}, NOW), NOW)
    result = run_clean_task(job.task)
    assert log.begin_swap(job.lease, result.groups)
    assert list(d.glob("*.swap"))
    log.truncate_to(log.segments[1].base_offset + 1)
    assert not list(d.glob("*.swap"))                           # a crash now must not apply them
    assert log.complete_swap(job.lease, result.groups, now_ms=NOW) is None


def test_truncation_above_the_cleaned_range_does_not_abort(tmp_path):
    log = open_log(tmp_path / "t-0")
    expected = append_random(log, 80, keys=5)
    log.roll(NOW)
    append_records(log, [(b"tail", ...), (b"tail", ...)])
    cleaner = LogCleaner()
    job = cleaner.start(cleaner.grab_filthiest({TP: log}, NOW), NOW)
    result = run_clean_task(job.task)
    log.truncate_to(log.log_end_offset - 1)
    assert not job.lease.aborted
    assert log.replace_segments(job.lease, result.groups, now_ms=NOW)
    log.end_cleaning(job.lease)
    got = latest(log)
    assert {k: got[k] for k in expected} == expected


# -- install ---------------------------------------------------------------------------------------

def test_reads_interleaved_with_the_install_see_old_or_new_segments(tmp_path):
    """A consumer fetching small chunks, with the install's two halves happening between two of
    its fetches at various points of its progress: offsets keep increasing and it ends with every
    key's latest value (Kafka consumers see the same across a segment swap)."""
    pristine = tmp_path / "pristine" / "t-0"
    log = open_log(pristine, compact_config(segment_bytes=1500))
    expected = append_random(log, 150, keys=8)
    log.roll(NOW)
    total = log.log_end_offset
    log.close()
    for stop_after in (0, 1, 3, 10, 40):
        d = tmp_path / f"copy{stop_after}" / "t-0"
        shutil.copytree(pristine, d)
        log = open_log(d, compact_config(segment_bytes=1500))
        cleaner = LogCleaner()
        job = cleaner.start(cleaner.grab_filthiest({TP: log}, NOW), NOW)
        result = run_clean_task(job.task)
        assert len(result.groups) > 1
        seen, off, fetches, last, installed = {}, 0, 0, -1, False
        while off < total:
            if fetches == stop_after:
                assert log.begin_swap(job.lease, result.groups)
                between = log.read(off, 300)            # the old segments are still served
                assert between and next(iter_batches(between))[1].last_offset >= off
                assert log.complete_swap(job.lease, result.groups, now_ms=NOW) is not None
                log.end_cleaning(job.lease)
                installed = True
            data = log.read(off, 300)
            fetches += 1
            for pos, h in iter_batches(data):
                for r in iter_records(data[pos:pos + h.size]):
                    if r.offset >= off:
                        assert r.offset > last
                        last = r.offset
                        seen[r.key] = (r.offset, r.value)
                off = h.next_offset
        assert installed and seen == expected
        log.close()


def test_indexes_of_cleaned_segments_are_valid(tmp_path):
    d = tmp_path / "t-0"
    log = open_log(d, compact_config(index_interval_bytes=50, segment_bytes=3000))
    append_random(log, 200, keys=40, per_batch=2)
    log.roll(NOW)
    clean(log)
    records = read_all(log)[0]
    for r in records:                                          # every offset found via the index
        data = log.read(r.offset, 1)
        assert any(x.offset == r.offset for x in iter_records(data))
    for seg in log.segments[:-1]:                              # same as a rebuild from the .log
        idx = (d / f"{seg.base_offset:020d}.index").read_bytes()
        tidx = (d / f"{seg.base_offset:020d}.timeindex").read_bytes()
        seg.rebuild(truncate=False)
        assert (d / f"{seg.base_offset:020d}.index").read_bytes() == idx
        assert (d / f"{seg.base_offset:020d}.timeindex").read_bytes() == tidx
    log.close()
    reopened = open_log(d, clean=False)
    assert [(r.offset, r.value) for r in read_all(reopened)[0]] == [(r.offset, r.value) for r in records]
    assert reopened.offset_for_timestamp(NOW) == (records[0].offset, records[0].timestamp)


def test_cleaned_segment_keeps_the_old_mtime(tmp_path):
    d = tmp_path / "t-0"
    log = open_log(d)
    append_random(log, 30, keys=3)
    log.roll(NOW)
    old = d / f"{log.segments[0].base_offset:020d}.log"
    os.utime(old, ns=(10**18, 10**18))
    last_old = log.segments[-2]
    os.utime(d / f"{last_old.base_offset:020d}.log", ns=(2 * 10**18, 2 * 10**18))
    clean(log)
    assert os.stat(d / f"{log.segments[-2].base_offset:020d}.log").st_mtime_ns == 2 * 10**18


def test_idempotent_recleaning_changes_nothing(tmp_path):
    log = open_log(tmp_path / "t-0", compact_config(delete_retention_ms=10**9))
    append_random(log, 120, keys=20, tombstone_rate=0.1, codecs=(0, 1, 3))
    log.roll(NOW)
    clean(log)
    before, before_recs = segment_bytes(log), read_all(log)[0]
    for _ in range(2):
        # forget the checkpoint: everything is dirty again, nothing is left to remove
        (tmp_path / CLEANER_OFFSET_CHECKPOINT).unlink()
        clean(log, NOW + 1, cleaner=LogCleaner())
        assert segment_bytes(log) == before
        assert read_all(log)[0] == before_recs


def test_map_budget_cleans_in_several_passes(tmp_path):
    log = open_log(tmp_path / "t-0")
    expected = append_random(log, 120, keys=200, per_batch=5)
    log.roll(NOW)
    cleaner = LogCleaner(dedupe_buffer_size=8_000, io_buffer_load_factor=1.0)   # ~80 keys a pass
    ends = []
    while (out := cleaner.clean_now({TP: log}, NOW)) is not None:
        assert out.installed
        ends.append(out.end_offset)
    assert len(ends) > 1 and ends == sorted(ends) and ends[-1] == log.segments[-1].base_offset
    assert latest(log) == expected
    assert len(read_all(log)[0]) == len(expected)


def test_corrupt_batch_marks_the_partition_uncleanable(tmp_path):
    d = tmp_path / "t-0"
    log = open_log(d)
    append_random(log, 40, keys=3)
    log.roll(NOW)
    seg = log.segments[0]
    with open(seg.log_path, "r+b") as f:                         # flip a byte inside a record
        f.seek(80)
        b = f.read(1)
        f.seek(80)
        f.write(bytes([b[0] ^ 0xFF]))
    cleaner = LogCleaner()
    out = cleaner.clean_now({TP: log}, NOW)
    assert out is not None and not out.installed and "CorruptRecordError" in out.error
    assert TP in cleaner.uncleanable
    assert log.cleaning is None and not list(d.glob("*.cleaned"))
    assert cleaner.grab_filthiest({TP: log}, NOW) is None


def test_config_names():
    cfg = LogConfig.from_properties({"cleanup.policy": "compact,delete", "delete.retention.ms": "5",
                                     "min.compaction.lag.ms": 6, "max.compaction.lag.ms": "7",
                                     "min.cleanable.dirty.ratio": "0.25"})
    assert (cfg.delete_retention_ms, cfg.min_compaction_lag_ms, cfg.max_compaction_lag_ms,
            cfg.min_cleanable_dirty_ratio) == (5, 6, 7, 0.25)
    assert cfg.compact_enabled and cfg.delete_enabled
    assert LogConfig.from_properties({"cleanup.policy": ["compact"]}).cleanup_policy == "compact"
    with pytest.raises(ValueError):
        LogConfig(min_cleanable_dirty_ratio=1.5)
    with pytest.raises(ValueError):
        LogConfig(max_compaction_lag_ms=0)


def test_non_compacted_logs_are_ignored(tmp_path):
    log = open_log(tmp_path / "t-0", compact_config(cleanup_policy="delete"))
    append_random(log, 60, keys=3)
    log.roll(NOW)
    assert LogCleaner().grab_filthiest({TP: log}, NOW) is None


def test_build_batch_round_trip_of_rebuilt_batches(tmp_path):
    """Rebuilt batches keep base offset, last offset delta, leader epoch, timestamp type."""
    log = open_log(tmp_path / "t-0")
    recs = [(NOW + i, b"k%d" % (i % 2), b"v%d" % i, ()) for i in range(4)]
    batch = bytearray(build_batch(recs, base_offset=0, partition_leader_epoch=9,
                                  timestamp_type=1, codec=compression.ZSTD))
    log.append(bytes(batch), last_offset=3, max_timestamp=NOW + 3, offset_of_max_timestamp=3, now_ms=NOW)
    append_records(log, [(b"z", ...)])
    log.roll(NOW)
    clean(log)
    records, hdrs = read_all(log)
    h = hdrs[0]
    assert (h.base_offset, h.last_offset_delta, h.partition_leader_epoch, h.timestamp_type,
            h.compression, h.records_count) == (0, 3, 9, 1, compression.ZSTD, 2)
    assert [(r.offset, r.value, r.timestamp) for r in records[:2]] == [(2, b"v2", NOW + 3), (3, b"v3", NOW + 3)]
