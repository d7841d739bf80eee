"""The log cleaner under racing writes: many compacted logs appended to, rolled and truncated while
the cleaner (real worker processes, driven by the broker's :class:`CleanerDriver` on an event loop)
cleans them. When the writes stop, every log must get cleaned up to its active segment within a
bound — a lost wake-up, a leaked cleaning lease or a dirty ratio computed from a stale segment
list leaves some log dirty forever — and each must read back as the latest value per key.

Truncations model a follower's (KIP-101): only above the log's high watermark, which the cleaner
never passes (``stable_offset_of``). The schedule is seeded; the deadline only bounds a hung test.
"""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from kcompat.broker.cleaner_driver import CleanerDriver
from kcompat.log import LogCleaner

from .cleaner_helpers import NOW, append_records, compact_config, latest, open_log

HUNG_S = 90.0
LOGS = 24
KEYS = 40


class Model:
    """What each log must read back as: every appended record, by offset, and the log's HW."""

    def __init__(self, logs) -> None:
        self.logs = logs
        self.history = {tp: {} for tp in logs}       # tp -> {offset: (key, value)}
        self.hw = {tp: 0 for tp in logs}

    def append(self, rnd: random.Random, tp) -> None:
        log = self.logs[tp]
        recs = [(b"k%02d" % rnd.randrange(KEYS), ...) for _ in range(rnd.randint(1, 6))]
        base, _last = append_records(log, recs, now_ms=NOW)
        for i, (key, _v) in enumerate(recs):
            self.history[tp][base + i] = key

    def truncate(self, rnd: random.Random, tp) -> None:
        log = self.logs[tp]
        if log.log_end_offset <= self.hw[tp]:
            return
        log.truncate_to(rnd.randrange(self.hw[tp], log.log_end_offset), now_ms=NOW)
        leo = log.log_end_offset
        self.history[tp] = {o: k for o, k in self.history[tp].items() if o < leo}

    def expected(self, tp) -> dict:
        out = {}
        for offset in sorted(self.history[tp]):
            key = self.history[tp][offset]
            out[key] = offset
        return out


@pytest.mark.parametrize("seed", [int(s) for s in __import__("os").environ.get("STRESS_SEEDS", "1,2").split(",")])
def test_every_log_gets_cleaned_after_racing_appends_rolls_and_truncations(tmp_path, seed):
    rnd = random.Random(seed)
    config = compact_config(segment_bytes=3000)
    logs = {(f"t{i}", 0): open_log(tmp_path / f"t{i}-0", config) for i in range(LOGS)}
    model = Model(logs)
    cleaner = LogCleaner(threads=2, backoff_ms=100, dedupe_buffer_size=64_000)

    async def main():
        driver = CleanerDriver(cleaner, logs, now_ms=lambda: NOW, stable_offset_of=lambda tp: model.hw[tp],
                               producer_last_offsets_of=lambda tp: None, interval_s=0.05)
        driver.start()
        try:
            for step in range(4000):
                tp = rnd.choice(list(logs))
                r = rnd.random()
                if r < 0.80:
                    model.append(rnd, tp)
                elif r < 0.88:
                    model.hw[tp] = logs[tp].log_end_offset      # the followers caught up
                elif r < 0.93:
                    logs[tp].roll(NOW)
                else:
                    model.truncate(rnd, tp)
                if step % 7 == 0:
                    await asyncio.sleep(0)                      # let the cleaner's ticks in
            for tp, log in logs.items():                        # writes stop: all committed, rolled
                model.hw[tp] = log.log_end_offset
                log.roll(NOW)
            deadline = time.monotonic() + HUNG_S
            while time.monotonic() < deadline and not all_cleaned():
                await asyncio.sleep(0.05)
        finally:
            driver.stop()

    def all_cleaned() -> bool:
        return not cleaner.in_progress and all(
            cleaner.checkpoint_of(tp, tmp_path) == log.segments[-1].base_offset for tp, log in logs.items())

    try:
        asyncio.run(main())
        assert not cleaner.uncleanable, cleaner.uncleanable
        dirty = {f"{tp[0]}": (cleaner.checkpoint_of(tp, tmp_path), log.segments[-1].base_offset)
                 for tp, log in logs.items() if cleaner.checkpoint_of(tp, tmp_path) != log.segments[-1].base_offset}
        assert not dirty, f"logs never cleaned up to their active segment (checkpoint, active base): {dirty}"
        for tp, log in logs.items():
            assert log.cleaning is None
            got = {key: offset for key, (offset, _value) in latest(log).items()}
            assert got == model.expected(tp), tp
    finally:
        cleaner.shutdown()
        for log in logs.values():
            log.close()
