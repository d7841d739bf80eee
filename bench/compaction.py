"""Benchmark of the log cleaner: a compacted log holding 1,000,000 updates over 1,000 keys.

    python bench/compaction.py [--records 1000000] [--keys 1000] [--value-bytes 100]
                               [--batch 200] [--codec none|gzip|snappy|lz4|zstd]
                               [--segment-bytes 16777216] [--in-process] [--dir DIR]

Appends the updates as RecordBatch v2 batches (keys ``key-000000``.., 100-byte values, batches of
``--batch`` records, like a producer's), rolls the active segment (as ``segment.ms`` would), then
cleans it through ``LogCleaner.tick`` with a worker process (``--in-process``: in this process).
Prints records and bytes before/after, cleaning time and records/s, the time the calling thread
spent in ``tick`` (what the broker's event loop pays), and checks that a reader starting at the
log start sees every key's latest value. A second round adds 10% more updates and cleans again
(the incremental case: the clean section is ~1,000 records). Prints numbers; asserts nothing but
the data check.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from kcompat.log import Log, LogCleaner, LogConfig
from kcompat.protocol import compression
from kcompat.protocol.records import build_batch, iter_batches, iter_records

NOW = 1_700_000_000_000


def produce(log: Log, n: int, keys: int, value_bytes: int, batch: int, codec: int, rnd: random.Random,
            latest: dict, ts0: int) -> float:
    t0 = time.perf_counter()
    done = 0
    while done < n:
        k = min(batch, n - done)
        base = log.log_end_offset
        recs = []
        for i in range(k):
            key = b"key-%06d" % rnd.randrange(keys)
            value = (b"%012d" % (base + i)) + rnd.randbytes(value_bytes - 12)
            recs.append((ts0 + base + i, key, value, ()))
            latest[key] = value
        log.append(build_batch(recs, base_offset=base, codec=codec), last_offset=base + k - 1,
                   max_timestamp=ts0 + base + k - 1, offset_of_max_timestamp=base + k - 1, now_ms=ts0)
        done += k
    return time.perf_counter() - t0


def count(log: Log) -> tuple[int, int, dict]:
    """Records in the log and what a consumer reading from the start ends up with."""
    seen: dict = {}
    records = 0
    off = log.log_start_offset
    last = -1
    while off < log.log_end_offset:
        data = log.read(off, 8 << 20)
        if not data:
            break
        for pos, h in iter_batches(data):
            for r in iter_records(data[pos:pos + h.size]):
                if r.offset < off:
                    continue
                assert r.offset > last, "offsets must increase"
                last = r.offset
                records += 1
                seen[r.key] = r.value
            off = h.next_offset
    return records, log.size_in_bytes, seen


def clean(cleaner: LogCleaner, logs: dict, now: int, in_process: bool):
    t0 = time.perf_counter()
    if in_process:
        out = cleaner.clean_now(logs, now)
        return out, time.perf_counter() - t0, [], 0
    durations = []
    while True:
        s = time.perf_counter()
        outs = cleaner.tick(logs, now)
        durations.append(time.perf_counter() - s)
        if outs:
            wall = time.perf_counter() - t0
            while cleaner.in_progress:          # the worker's last step: fsync, unlink, checkpoint
                time.sleep(0.01)
                s = time.perf_counter()
                cleaner.tick(logs, now)
                durations.append(time.perf_counter() - s)
            return outs[0], wall, durations, len(durations)
        time.sleep(0.01)


def report(label: str, before, after, out, wall: float, ticks: list, n: int, latest: dict) -> None:
    """Print one round; ``ticks`` are the durations of the tick() calls."""
    rec_b, bytes_b, _ = before
    rec_a, bytes_a, seen = after
    st = out.stats
    ok = seen == latest
    print(f"{label}:")
    print(f"  records  {rec_b:>12,} -> {rec_a:>10,}")
    print(f"  bytes    {bytes_b:>12,} -> {bytes_a:>10,}")
    print(f"  cleaning {wall:8.2f} s wall ({rec_b / wall:,.0f} records/s); worker: offset map "
          f"{st.map_seconds:.2f} s ({st.map_records:,} records, {st.map_keys:,} keys), rewrite "
          f"{st.clean_seconds:.2f} s ({st.records_read:,} records, {st.batches_read:,} batches)")
    if ticks:
        rest = sorted(ticks[1:]) or [0.0]
        print(f"  calling thread: {n} tick() calls; the first {ticks[0] * 1000:.1f} ms (submits the "
              f"task{', starts the worker' if label.startswith('round 1') else ''}), the others "
              f"max {rest[-1] * 1000:.2f} ms (the install), median {rest[len(rest) // 2] * 1000:.3f} ms")
    print(f"  every key's latest value survived: {ok} ({len(seen):,} keys read, {len(latest):,} expected)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--batch", type=int, default=200)
    ap.add_argument("--codec", default="none", choices=sorted(compression.BY_NAME))
    ap.add_argument("--segment-bytes", type=int, default=16 << 20)
    ap.add_argument("--in-process", action="store_true", help="clean in this process, no worker")
    ap.add_argument("--dir", help="parent directory for the log (default: a temporary one)")
    args = ap.parse_args()

    root = Path(tempfile.mkdtemp(prefix="kcompat-compaction-", dir=args.dir))
    try:
        cfg = LogConfig(segment_bytes=args.segment_bytes, cleanup_policy="compact")
        log = Log.open(root / "t-0", cfg, clean_shutdown=True, now_ms=NOW)
        logs = {("t", 0): log}
        rnd = random.Random(42)
        latest: dict = {}
        codec = compression.BY_NAME[args.codec]
        t = produce(log, args.records, args.keys, args.value_bytes, args.batch, codec, rnd, latest, NOW)
        log.roll(NOW)
        print(f"appended {args.records:,} updates over {args.keys:,} keys ({args.value_bytes} B values, "
              f"batches of {args.batch}, codec {args.codec}) in {t:.1f} s: {len(log.segments) - 1} "
              f"inactive segment(s) of <= {args.segment_bytes:,} B")
        cleaner = LogCleaner(threads=1, backoff_ms=0)
        try:
            before = count(log)
            out, wall, tick_time, ticks = clean(cleaner, logs, NOW + 1000, args.in_process)
            assert out.installed, out.error
            after = count(log)
            report("round 1 (whole log dirty)", before, after, out, wall, tick_time, ticks, latest)

            extra = args.records // 10
            produce(log, extra, args.keys, args.value_bytes, args.batch, codec, rnd, latest, NOW + 2000)
            log.roll(NOW + 2000)
            before = count(log)
            out, wall, tick_time, ticks = clean(cleaner, logs, NOW + 3000, args.in_process)
            assert out.installed, out.error
            after = count(log)
            report(f"round 2 (+{extra:,} updates)", before, after, out, wall, tick_time, ticks, latest)
        finally:
            cleaner.shutdown()
            log.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
