"""``tools/fuzz_protocol.py --engine atheris``: libFuzzer's coverage-guided search over the same
targets (tools/fuzz_targets.py), with kcompat instrumented (``pip install atheris``).

An input is two bytes choosing the target (``index % number of targets``; the top bit asks for a
record batch's framing and CRC to be made valid, as the mutation engine's ``refit_batch`` does)
and the bytes to run. The seed corpus is every target's valid encodings; libFuzzer keeps inputs
that reach new code. Properties are checked as by the mutation engine (findings are recorded and
the search goes on); the report is printed after ``--inputs`` runs.
"""

from __future__ import annotations

import json
import struct
import sys
import tempfile
import time
from pathlib import Path


def fix_batch(b: bytes) -> bytes:
    """Magic 2, batchLength covering the input, a valid CRC32C: deterministic, for libFuzzer."""
    from kcompat.protocol import records as rb
    if len(b) < rb.HEADER_SIZE:
        return b
    out = bytearray(b)
    out[16] = rb.MAGIC
    struct.pack_into(">i", out, 8, len(out) - rb.LOG_OVERHEAD)
    struct.pack_into(">I", out, 17, rb.compute_crc(out, 0, len(out)))
    return bytes(out)


def run_atheris(args) -> int:
    import random
    import tracemalloc

    import atheris

    with atheris.instrument_imports(include=["kcompat"]):
        import kcompat.broker.connection  # noqa: F401 - instrumented before the targets use them
        import kcompat.isr.partition  # noqa: F401
        import kcompat.log  # noqa: F401
        from kcompat.protocol.messages import API_TABLE, api_classes
        for key in API_TABLE:
            api_classes(key)
        from tools import fuzz_targets
    from tools.fuzz_protocol import Fuzzer, report, select

    targets = select(fuzz_targets.all_targets(), args.targets)
    fuzzer = Fuzzer(targets, args.seed, args.out, memory=not args.no_memory)
    corpus = Path(tempfile.mkdtemp(prefix="kcompat-atheris-"))
    rng = random.Random(args.seed)
    for i, t in enumerate(targets):
        for j, s in enumerate(t.seeds(rng)):
            (corpus / f"{i}-{j}").write_bytes(struct.pack(">H", i) + s)
    print(f"atheris: {len(targets)} targets, {args.inputs} runs, seed corpus in {corpus}", flush=True)
    state = {"runs": 0, "t0": time.perf_counter()}

    def one_input(data: bytes) -> None:
        state["runs"] += 1
        if len(data) >= 2:
            (sel,) = struct.unpack_from(">H", data, 0)
            t = targets[(sel & 0x7FFF) % len(targets)]
            body = data[2:]
            if sel & 0x8000 and t.group in ("batch", "append", "follower"):
                body = fix_batch(body)
            fuzzer.one(t, body)
        if state["runs"] >= args.inputs:
            finish()

    def finish() -> None:
        if fuzzer.memory:
            tracemalloc.stop()
        fuzz_targets.close_all()
        summary = report(fuzzer, time.perf_counter() - state["t0"])
        print(json.dumps(summary, default=str), flush=True)
        sys.stdout.flush()
        import os
        os._exit(1 if fuzzer.findings else 0)

    if fuzzer.memory:
        tracemalloc.start()
    atheris.Setup([sys.argv[0], str(corpus), f"-seed={args.seed}", "-max_len=65536",
                   f"-runs={args.inputs + 10}", "-print_final_stats=1"], one_input)
    atheris.Fuzz()
    return 0
