#!/usr/bin/env python3
"""Fuzz every decoder kcompat runs on bytes from outside (issue 25, "Fuzzing and bad input").

Usage::

    nice -n 10 python3 tools/fuzz_protocol.py [--inputs 1000000] [--seed 1] [--targets GLOB,...]
        [--engine mutate|atheris] [--out DIR] [--no-memory] [--no-linear] [--list]

Targets (tools/fuzz_targets.py): ``request:<api key>:<version>`` for every API key and version
of the protocol, ``header:1``/``header:2``, ``frame:plaintext``/``frame:controller`` (the
connection code with stub handlers), ``batch``, ``compression:<codec>``, ``append:<policy>``
(``Partition.append`` on a real log) and ``follower``; ``--targets 'request:0:*,batch'`` picks
some (fnmatch patterns). ``--inputs`` is the total, shared out by group weight (requests half).

Properties checked on every input:

1. it raises nothing but the target's own error type (DecodeError, CorruptRecordError,
   CompressionError, KafkaError with a Kafka error code);
2. it allocates at most ``MEM_PER_BYTE`` times its size plus ``MEM_BASE`` (tracemalloc peak);
3. afterwards, for each target's slowest inputs (time per byte, a span repeated 1, 2, 4, 8 times)
   and its ``scaled(k)`` valid input at 1x..8x the size, work grows at most linearly: function
   calls (deterministic) by their increments per byte added (``growth_of_increments``, at most
   ``MAX_CALLS_EXPONENT``), CPU time by log(t8/t2)/log(n8/n2) (at most ``MAX_EXPONENT``); a
   quadratic decoder shows 2.

``--engine mutate`` (default) mutates valid encodings (seeded, deterministic: same seed, same
inputs): bit flips, interesting integers (counts, lengths, varints), truncation, duplicated and
deleted spans, splices, record batches re-framed with a valid CRC so mutations reach the records.
Inputs that end in a new outcome (error message) join the target's corpus. ``--engine atheris``
runs libFuzzer's coverage-guided search (``pip install atheris``) over the same targets and
seeds, ``--inputs`` runs in all; it stops at the first finding and writes ``crash-*`` files.

Findings (input in hex, traceback) go to ``--out`` (default /tmp/kcompat-fuzz); the last line
printed is a JSON summary. Exit status 1 if anything was found.
"""

from __future__ import annotations

import argparse
import fnmatch
import gc
import json
import math
import os
import random
import struct
import sys
import time
import traceback
import tracemalloc
from collections import defaultdict
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MEM_PER_BYTE = 200          # Python objects per decoded byte: ~56 B per struct, ~56 B per empty list
MEM_BASE = 4 << 20          # bytes: a decompression piece, the minimum decompressed_limit, buffers
MAX_EXPONENT = 1.6          # CPU time growth allowed (1 = linear); calls: MAX_CALLS_EXPONENT
MAX_CALLS_EXPONENT = 1.2
GROUP_WEIGHTS = {"request": 0.5, "header": 0.02, "frame": 0.13, "batch": 0.1, "compression": 0.09,
                 "append": 0.12, "follower": 0.04}
CORPUS_MAX = 64

INTERESTING_16 = [0, 1, -1, 0x7FFF, -0x8000, 0xFF]
INTERESTING_32 = [0, 1, -1, 2, 0x7FFFFFFF, -0x80000000, 0x10000000, 0xFFFF, 61, 100000]
VARINTS = [b"\x00", b"\x01", b"\x7f", b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\x07", b"\x80\x80\x80\x80\x80",
           b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", b"\xfe\xff\xff\xff\x0f"]


# ------------------------------------------------------------------------------------------------
# mutations
# ------------------------------------------------------------------------------------------------

def mutate(rng: random.Random, data: bytes, corpus: list[bytes], group: str) -> bytes:
    b = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3))):
        op = rng.randrange(12)
        n = len(b)
        if op == 0 and n:
            for _ in range(rng.randint(1, 4)):
                b[rng.randrange(n)] ^= 1 << rng.randrange(8)
        elif op == 1 and n:
            b[rng.randrange(n)] = rng.choice((0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)))
        elif op == 2 and n >= 2:
            p = rng.randrange(n - 1)
            b[p:p + 2] = struct.pack(">h", rng.choice(INTERESTING_16) if rng.random() < 0.8 else rng.randrange(-99, 999))
        elif op == 3 and n >= 4:
            p = rng.randrange(n - 3)
            v = rng.choice(INTERESTING_32) if rng.random() < 0.8 else n - p + rng.randint(-8, 8)
            b[p:p + 4] = struct.pack(">i", max(-0x80000000, min(0x7FFFFFFF, v)))
        elif op == 4:
            p = rng.randint(0, n)
            v = rng.choice(VARINTS)
            b[p:p + (len(v) if rng.random() < 0.5 else 0)] = v
        elif op == 5 and n:
            del b[rng.randrange(n):]
        elif op == 6 and n:
            p = rng.randrange(n)
            del b[p:p + rng.randint(1, 16)]
        elif op == 7 and n:
            p = rng.randrange(n)
            span = b[p:p + rng.randint(1, 64)]
            q = rng.randint(0, n)
            b[q:q] = span * rng.choice((1, 1, 2, 8))
        elif op == 8:
            p = rng.randint(0, n)
            b[p:p] = rng.randbytes(rng.randint(1, 32))
        elif op == 9 and corpus:
            other = rng.choice(corpus)
            b = b[:rng.randint(0, n)] + other[rng.randint(0, len(other)):]
        elif op == 10:
            b = bytearray(rng.randbytes(rng.choice((0, 1, 4, 8, 17, 61, 200, 1000))))
        elif op == 11:
            b += rng.randbytes(rng.randint(1, 8))
    if group in ("batch", "append", "follower") and rng.random() < 0.75:
        b = refit_batch(rng, b)
    elif group == "frame" and len(b) >= 4 and rng.random() < 0.5:
        struct.pack_into(">i", b, 0, len(b) - 4)
    return bytes(b)


def refit_batch(rng: random.Random, b: bytearray) -> bytearray:
    """Make the first batch's framing consistent again (batchLength, magic, sometimes records
    count) and its CRC valid, so a mutation reaches the checks behind them; sometimes mutate the
    records of a compressed batch and compress them again."""
    from kcompat.protocol import compression
    from kcompat.protocol import records as rb
    if len(b) < rb.HEADER_SIZE:
        return b
    attrs = struct.unpack_from(">h", b, 21)[0]
    codec = attrs & 7
    if codec and 0 < codec <= 4 and rng.random() < 0.4:
        try:
            size = max(rb.HEADER_SIZE, min(len(b), struct.unpack_from(">i", b, 8)[0] + rb.LOG_OVERHEAD))
            body = bytearray(compression.decompress(codec, bytes(b[rb.HEADER_SIZE:size]), 1 << 20))
            if body:
                p = rng.randrange(len(body))
                body[p:p + rng.randint(1, 3)] = rng.choice(VARINTS) if rng.random() < 0.5 else rng.randbytes(2)
            b = b[:rb.HEADER_SIZE] + bytearray(compression.compress(codec, bytes(body))) + b[size:]
        except compression.CompressionError:
            pass
    b[16] = rb.MAGIC
    if rng.random() < 0.2:
        count = rng.choice((0, 1, 2, 1000, 0x7FFFFFFF, rng.randint(1, 10)))
        struct.pack_into(">i", b, 57, count)
        struct.pack_into(">i", b, 23, count - 1)
    end = len(b)
    if rng.random() < 0.8:
        struct.pack_into(">i", b, 8, len(b) - rb.LOG_OVERHEAD)
    else:
        end = min(len(b), max(rb.HEADER_SIZE, struct.unpack_from(">i", b, 8)[0] + rb.LOG_OVERHEAD))
    struct.pack_into(">I", b, 17, rb.compute_crc(b, 0, end))
    return b


# ------------------------------------------------------------------------------------------------
# the run
# ------------------------------------------------------------------------------------------------

class Stats:
    def __init__(self) -> None:
        self.inputs = 0
        self.seconds = 0.0
        self.outcomes: dict[str, int] = defaultdict(int)
        self.max_mem_ratio = 0.0      # peak / size, inputs of at least 1 KiB
        self.max_peak = 0             # bytes
        self.slowest: list[tuple[float, bytes]] = []  # (seconds per byte, input)
        self.exponent = None          # linear-time check result


def signal_of(outcome) -> str:
    """What an input ended in, digits masked: new ones join the corpus."""
    if outcome is None or not isinstance(outcome, (str, BaseException)):
        return "ok"
    text = outcome if isinstance(outcome, str) else f"{type(outcome).__name__}:{outcome}"
    return "".join("#" if c.isdigit() else c for c in text)[:80]


class Fuzzer:
    def __init__(self, targets, seed: int, out: Path, memory: bool = True) -> None:
        self.targets = targets
        self.seed = seed
        self.out = out
        self.memory = memory
        self.stats = {t.name: Stats() for t in targets}
        self.findings: dict[tuple, dict] = {}

    def one(self, target, data: bytes):
        """Run one input under the properties; returns what it ended in: the allowed error, what
        ``run`` returned, or None."""
        st = self.stats[target.name]
        if self.memory:
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
        t0 = time.perf_counter()
        outcome = None
        try:
            outcome = target.run(data)
        except target.allowed as e:
            outcome = e
            if not target.accept(e):
                self.finding(target, data, "error", e)
        except Exception as e:  # noqa: BLE001 - the finding
            outcome = e
            self.finding(target, data, "exception", e)
        dt = time.perf_counter() - t0
        st.inputs += 1
        st.seconds += dt
        if self.memory:
            peak = tracemalloc.get_traced_memory()[1] - base
            st.max_peak = max(st.max_peak, peak)
            if len(data) >= 1024:
                st.max_mem_ratio = max(st.max_mem_ratio, peak / len(data))
            if peak > MEM_PER_BYTE * len(data) + MEM_BASE:
                self.finding(target, data, "memory", MemoryError(f"peak {peak} bytes for a {len(data)}-byte input"))
        per_byte = dt / max(len(data), 64)
        if len(st.slowest) < 5 or per_byte > st.slowest[-1][0]:
            st.slowest.append((per_byte, data))
            st.slowest.sort(key=lambda x: -x[0])
            del st.slowest[5:]
        return outcome

    def finding(self, target, data: bytes, kind: str, exc: BaseException) -> None:
        tb = traceback.extract_tb(exc.__traceback__)
        where = f"{tb[-1].filename}:{tb[-1].lineno}" if tb else "?"
        key = (target.name.split(":")[0] if kind == "exception" else target.name, kind, type(exc).__name__, where)
        if key in self.findings:
            self.findings[key]["count"] += 1
            return
        self.findings[key] = {"target": target.name, "kind": kind, "exception": f"{type(exc).__name__}: {exc}"[:300],
                              "where": where, "count": 1, "input": data.hex() if len(data) <= 100000 else None,
                              "traceback": "".join(traceback.format_exception(exc))[-4000:]}
        print(f"FINDING {kind} in {target.name}: {type(exc).__name__}: {str(exc)[:200]} at {where}", flush=True)
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / f"finding-{len(self.findings)}.json").write_text(json.dumps(self.findings[key], indent=1))

    def run_target(self, target, n: int) -> None:
        rng = random.Random(f"{self.seed}:{target.name}")
        corpus = target.seeds(rng)
        seen = set()
        for s in corpus:
            seen.add(signal_of(self.one(target, s)))
        ran = len(corpus)
        corpus = [s for s in corpus if s] or [b""]
        for _ in range(max(0, n - ran)):
            data = mutate(rng, rng.choice(corpus), corpus, target.group)
            sig = signal_of(self.one(target, data))
            self.stats[target.name].outcomes[sig.split(":")[0]] += 1
            if sig not in seen and len(data) <= 200000:
                seen.add(sig)
                if len(corpus) < CORPUS_MAX:
                    corpus.append(data)
                else:
                    corpus[rng.randrange(CORPUS_MAX)] = data

    # -- linear time --------------------------------------------------------------------------------

    def linear_check(self, target) -> tuple[float, float]:
        """Largest growth exponents ``(calls, cpu time)`` over the slowest inputs with a span
        repeated 1, 2, 4, 8 times and the target's scaled valid input at 1x..8x (see
        :func:`growth_of_increments` and :func:`growth`), 1 for linear work. Calls (Python and C
        function calls, deterministic) catch
        loops that do not advance through the input; CPU time (thread time, GC off, best of 5,
        confirmed twice) also catches copying that grows with the input, with a wider margin
        because a shared machine's caches make time per byte drift with size."""
        rng = random.Random(f"{self.seed}:linear:{target.name}")
        families = []
        for _, x in self.stats[target.name].slowest[:2]:
            n = len(x)
            spans = [(0, n), (n // 2, n), sorted((rng.randint(0, n), rng.randint(0, n)))]
            families += [[x[:a] + x[a:b] * k + x[b:] for k in (1, 2, 4, 8)] for a, b in spans if b > a]
        if target.scaled is not None:
            families.append([target.scaled(k) for k in target.scale])
        worst_calls = worst_time = 0.0
        for fam in families:
            sizes = [len(d) for d in fam]
            if sizes[3] <= sizes[1]:
                continue
            calls = [cost_calls(target, d) for d in fam]
            e_calls = growth_of_increments(calls, sizes)
            if calls[3] <= 1000:
                continue  # a few dozen calls: where an invalid input fails, not how work grows
            if e_calls > MAX_CALLS_EXPONENT:
                self.finding(target, fam[3], "calls", TimeoutError(
                    f"function calls grow with exponent {e_calls:.2f}: sizes {sizes}, calls {calls}"))
            worst_calls = max(worst_calls, e_calls)
            secs = [cost_cpu(target, d) for d in fam]
            e_time = growth(secs, sizes)
            if e_time > MAX_EXPONENT and secs[3] > 0.005:
                secs = [cost_cpu(target, d, repeat=7) for d in fam]
                e_time = min(e_time, growth(secs, sizes))
                if e_time > MAX_EXPONENT:
                    self.finding(target, fam[3], "time", TimeoutError(
                        f"CPU time grows with exponent {e_time:.2f}: sizes {sizes}, "
                        f"seconds {[round(c, 5) for c in secs]}"))
            worst_time = max(worst_time, e_time if secs[3] > 0.005 else 0.0)  # below: timer noise
        self.stats[target.name].exponent = (worst_calls, worst_time)
        return worst_calls, worst_time


def growth(costs, sizes) -> float:
    """Exponent of the cost between the 2nd and the 4th size (1 = linear)."""
    return math.log(max(costs[3], 1e-9) / max(costs[1], 1e-9)) / math.log(sizes[3] / sizes[1])


def growth_of_increments(costs, sizes) -> float:
    """1 + log2 of how much faster the cost grows from one size to the next than the size does,
    the smaller of the two steps 1x-2x-4x and 2x-4x-8x: 1 when the cost is linear in the size,
    whatever its constant part (a repeated span next to an unrepeated rest), 2 when it is
    quadratic. 0 when the cost does not grow at every step (a repeated span that only moves where
    an invalid input fails)."""
    dc = [costs[i + 1] - costs[i] for i in range(3)]
    ds = [sizes[i + 1] - sizes[i] for i in range(3)]
    if min(dc) <= 0 or min(ds) <= 0:
        return 0.0
    steps = [(dc[i + 1] / dc[i]) / (ds[i + 1] / ds[i]) for i in range(2)]
    return 1 + math.log2(min(steps))


def cost_cpu(target, data: bytes, repeat: int = 3) -> float:
    """Best CPU seconds of this thread over ``repeat`` runs, garbage collection off."""
    best = float("inf")
    gc.disable()
    try:
        for _ in range(repeat):
            target.reset()
            t0 = time.thread_time()
            target.check(data)
            best = min(best, time.thread_time() - t0)
    finally:
        gc.enable()
    return best


def cost_calls(target, data: bytes) -> int:
    """Python and C function calls made running one input: a deterministic measure of work (the
    test suite's linear-time check; tests never time)."""
    calls = 0

    def prof(frame, event, arg):
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1
    target.reset()
    sys.setprofile(prof)
    try:
        target.check(data)
    finally:
        sys.setprofile(None)
    return calls


def select(targets, patterns: str | None):
    if not patterns:
        return targets
    pats = [p.strip() for p in patterns.split(",") if p.strip()]
    return [t for t in targets if any(fnmatch.fnmatchcase(t.name, p) or t.group == p for p in pats)]


def shares(targets, total: int) -> dict[str, int]:
    groups = defaultdict(list)
    for t in targets:
        groups[t.group].append(t)
    weight = sum(GROUP_WEIGHTS.get(g, 0.05) for g in groups)
    out = {}
    for g, ts in groups.items():
        n = total * GROUP_WEIGHTS.get(g, 0.05) / weight
        for t in ts:
            out[t.name] = max(20, round(n / len(ts)))
    return out


def report(fuzzer: Fuzzer, seconds: float) -> dict:
    by_group = defaultdict(lambda: {"targets": 0, "inputs": 0, "seconds": 0.0, "max_mem_ratio": 0.0,
                                    "max_peak_bytes": 0, "calls_exponent": 0.0, "time_exponent": 0.0})
    for t in fuzzer.targets:
        st = fuzzer.stats[t.name]
        g = by_group[t.group]
        g["targets"] += 1
        g["inputs"] += st.inputs
        g["seconds"] += st.seconds
        g["max_mem_ratio"] = max(g["max_mem_ratio"], st.max_mem_ratio)
        g["max_peak_bytes"] = max(g["max_peak_bytes"], st.max_peak)
        calls_e, time_e = st.exponent or (0.0, 0.0)
        g["calls_exponent"] = max(g["calls_exponent"], calls_e)
        g["time_exponent"] = max(g["time_exponent"], time_e)
    print(f"{'group':12} {'targets':>7} {'inputs':>9} {'cpu s':>7} {'mem/byte':>8} {'peak KiB':>9} "
          f"{'calls exp':>9} {'time exp':>8}")
    for name, g in by_group.items():
        print(f"{name:12} {g['targets']:7d} {g['inputs']:9d} {g['seconds']:7.1f} {g['max_mem_ratio']:8.1f} "
              f"{g['max_peak_bytes'] // 1024:9d} {g['calls_exponent']:9.2f} {g['time_exponent']:8.2f}")
    print("mem/byte: the largest tracemalloc peak per input byte over inputs of 1 KiB or more (batch, "
          "compression, append, follower: mostly the 256 KiB decompression piece); peak: the largest peak; "
          "calls/time exp: the largest growth exponent of function calls / CPU time at 2x..8x sizes "
          "(1 = linear; families of over 1000 calls / 5 ms)")
    for t in fuzzer.targets:
        if t.group in ("batch", "compression", "append", "follower", "frame", "header"):
            st = fuzzer.stats[t.name]
            print(f"  {t.name:24} {st.inputs:8d} inputs, outcomes {dict(sorted(st.outcomes.items()))}")
    total = sum(g["inputs"] for g in by_group.values())
    print(f"{total} inputs over {len(fuzzer.targets)} targets in {seconds:.0f} s; {len(fuzzer.findings)} findings")
    for f in fuzzer.findings.values():
        print(f"  {f['kind']:9} {f['target']:22} x{f['count']:<5} {f['exception'][:120]}  ({f['where']})")
    return {"inputs": total, "targets": len(fuzzer.targets), "seconds": round(seconds, 1),
            "findings": len(fuzzer.findings), "groups": by_group}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--inputs", type=int, default=1_000_000, help="total inputs (atheris: runs)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--targets", help="comma-separated fnmatch patterns or group names (default: all)")
    ap.add_argument("--engine", choices=("mutate", "atheris"), default="mutate")
    ap.add_argument("--out", type=Path, default=Path("/tmp/kcompat-fuzz"))
    ap.add_argument("--no-memory", action="store_true", help="skip the tracemalloc check (about 2x faster)")
    ap.add_argument("--no-linear", action="store_true", help="skip the linear-time check")
    ap.add_argument("--list", action="store_true", help="list the targets and exit")
    args = ap.parse_args(argv)
    if args.engine == "atheris":
        from tools.fuzz_atheris import run_atheris
        return run_atheris(args)
    from tools import fuzz_targets
    targets = select(fuzz_targets.all_targets(), args.targets)
    if args.list:
        for t in targets:
            print(t.name)
        return 0
    fuzzer = Fuzzer(targets, args.seed, args.out, memory=not args.no_memory)
    counts = shares(targets, args.inputs)
    print(f"fuzzing {len(targets)} targets, {sum(counts.values())} inputs, seed {args.seed}", flush=True)
    if fuzzer.memory:
        tracemalloc.start()
    t0 = time.perf_counter()
    last = t0
    try:
        for i, t in enumerate(targets):
            fuzzer.run_target(t, counts[t.name])
            if time.perf_counter() - last > 30:
                last = time.perf_counter()
                done = sum(s.inputs for s in fuzzer.stats.values())
                print(f"  {i + 1}/{len(targets)} targets, {done} inputs, {last - t0:.0f} s, "
                      f"{len(fuzzer.findings)} findings", flush=True)
        if fuzzer.memory:
            tracemalloc.stop()
        if not args.no_linear:
            print(f"linear-time check of {len(targets)} targets", flush=True)
            for i, t in enumerate(targets):
                fuzzer.linear_check(t)
                if time.perf_counter() - last > 30:
                    last = time.perf_counter()
                    print(f"  {i + 1}/{len(targets)} targets checked, {last - t0:.0f} s", flush=True)
    finally:
        fuzz_targets.close_all()
    summary = report(fuzzer, time.perf_counter() - t0)
    print(json.dumps(summary, default=str))
    return 1 if fuzzer.findings else 0


if __name__ == "__main__":
    sys.exit(main())
