"""Micro-benchmark of kcompat.log: append and read throughput on this machine.

    python bench/log_micro.py [--dir DIR] [--total-mib 1024]

Appends pre-built RecordBatch v2 bytes (only baseOffset is rewritten per append, as the broker
does), then reads the log back sequentially (1 MiB fetches, like a consumer) and at random
offsets. Data goes through the page cache (Kafka's default: no fsync per append); the final
fsync is timed separately. Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from kcompat.log import Log, LogConfig
from kcompat.protocol.records import build_batch, iter_batches, set_base_offset

NOW = 1_700_000_000_000
MIB = 1 << 20


def make(batch_bytes: int, record_bytes: int = 1024) -> tuple[bytearray, int]:
    n = max(1, round(batch_bytes / (record_bytes + 10)))   # ~10 bytes of record framing
    value = os.urandom(record_bytes)
    b = build_batch([(NOW, None, value, ())] * n)
    return bytearray(b), n


def bench_append(root: Path, batch_bytes: int, total: int) -> Log:
    batch, n = make(batch_bytes)
    log = Log.open(root / f"append{batch_bytes}-0", LogConfig(), clean_shutdown=True, now_ms=NOW)
    count = max(1, total // len(batch))
    t0 = time.perf_counter()
    for _ in range(count):
        base = log.log_end_offset
        set_base_offset(batch, 0, base)
        log.append(batch, last_offset=base + n - 1, max_timestamp=NOW,
                   offset_of_max_timestamp=base, now_ms=NOW)
    t1 = time.perf_counter()
    log.flush()
    t2 = time.perf_counter()
    mb = count * len(batch) / MIB
    print(f"append {len(batch) / 1024:7.1f} KiB batches: {count:>6} appends, {mb:8.1f} MiB, "
          f"{mb / (t1 - t0):8.1f} MiB/s, {count / (t1 - t0):9.0f} appends/s "
          f"(+ final fsync {t2 - t1:.2f} s -> {mb / (t2 - t0):.1f} MiB/s durable)")
    return log


def bench_read(log: Log, max_bytes: int) -> None:
    t0 = time.perf_counter()
    offset, total, reads = 0, 0, 0
    while offset < log.log_end_offset:
        data = log.read(offset, max_bytes)
        reads += 1
        total += len(data)
        last = None
        for _pos, h in iter_batches(data):   # the consumer learns the next offset from these
            last = h
        offset = last.next_offset
    t1 = time.perf_counter()
    print(f"sequential read ({max_bytes // 1024} KiB fetches): {total / MIB:8.1f} MiB, "
          f"{total / MIB / (t1 - t0):8.1f} MiB/s, {reads / (t1 - t0):8.0f} reads/s")
    rnd = random.Random(1)
    k = 2000
    offsets = [rnd.randrange(log.log_end_offset) for _ in range(k)]
    t0 = time.perf_counter()
    got = 0
    for o in offsets:
        got += len(log.read(o, max_bytes))
    t1 = time.perf_counter()
    print(f"random-offset reads ({max_bytes // 1024} KiB): {k / (t1 - t0):8.0f} reads/s, "
          f"{got / MIB / (t1 - t0):8.1f} MiB/s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=None, help="where to write (default: a temp dir)")
    ap.add_argument("--total-mib", type=int, default=1024, help="MiB appended per batch size")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="kcompat-bench-", dir=args.dir))
    try:
        total = args.total_mib * MIB
        big = bench_append(root, MIB, total)
        small = bench_append(root, 16 * 1024, total)
        print(f"segments: {len(big.segments)} (1 MiB batches), {len(small.segments)} (16 KiB)")
        bench_read(big, MIB)
        bench_read(small, MIB)
        bench_read(small, 64 * 1024)
        for log in (big, small):
            log.close()
        t0 = time.perf_counter()
        reopened = Log.open(root / f"append{16 * 1024}-0", LogConfig(), clean_shutdown=False,
                            recovery_point=0, now_ms=NOW)
        t1 = time.perf_counter()
        print(f"unclean open, recovery of {reopened.size_in_bytes / MIB:.0f} MiB from offset 0 "
              f"(CRC of every batch): {t1 - t0:.2f} s "
              f"({reopened.size_in_bytes / MIB / (t1 - t0):.0f} MiB/s)")
        reopened.close()
        t0 = time.perf_counter()
        Log.open(root / f"append{16 * 1024}-0", LogConfig(), clean_shutdown=True,
                 now_ms=NOW).close()
        print(f"clean open: {(time.perf_counter() - t0) * 1000:.1f} ms")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
