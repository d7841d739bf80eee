"""The console's short memory: one sample of the node's counters every ``interval_s`` (2 s) for the
last ``window_s`` (10 min), in memory only, taken by an asyncio task that runs while the HTTP
listener serves (started and stopped by the listener's application, :func:`kcompat.broker.http.console.routes`).

A sample holds, per topic, the produce/fetch counters of :mod:`kcompat.isr.broker_topic_stats`
(bytes in and out, records in, produce and fetch requests) and the lag of every committed offset
of the groups this node coordinates (:func:`kcompat.broker.http.lag.consumer_lag`). Rates are
the differences of consecutive samples per second; a counter that went down (a topic deleted and
created again) counts as 0 for that interval. Series come back column-wise (``t`` in epoch
milliseconds, one value per sample), which is what the console's charts draw."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from kcompat.broker.http.lag import consumer_lag

if TYPE_CHECKING:   # types only: built by kcompat.broker.broker
    from kcompat.broker.http.services import HttpServices

log = logging.getLogger("kcompat.http")

# counter names, in the order of each tuple in a sample (TopicCounters attributes)
COUNTERS = ("bytes_in", "bytes_out", "messages_in", "total_produce", "total_fetch")
# how each is named as a rate in the API (per second)
RATE_NAMES = ("bytes_in", "bytes_out", "messages_in", "produce_requests", "fetch_requests")
_ZERO = (0,) * len(COUNTERS)

Counts = tuple[int, ...]


@dataclass
class Sample:
    """The counters at one moment: ``t_ms`` wall clock (epoch ms), ``mono`` monotonic seconds."""

    t_ms: int
    mono: float
    topics: dict[str, Counts]
    totals: Counts
    lag: dict[str, dict[tuple[str, int], int | None]] = field(default_factory=dict)


def _rate(now: Counts, before: Counts, seconds: float) -> list[float]:
    if seconds <= 0:
        return [0.0] * len(now)
    return [max(0, a - b) / seconds for a, b in zip(now, before)]


class History:
    """A ring of :class:`Sample` of the node ``services`` reads (its ``replica_manager.stats`` and
    groups)."""

    def __init__(self, services: HttpServices, *, interval_s: float = 2.0, window_s: float = 600.0,
                 wall_ms: Callable[[], int] = lambda: int(time.time() * 1000),
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.services = services
        self.interval_s = interval_s
        self.window_s = window_s
        self.samples: deque[Sample] = deque(maxlen=int(window_s / interval_s) + 1)
        self._wall_ms = wall_ms
        self._monotonic = monotonic
        self._task: asyncio.Task | None = None
        self._last_error_logged = 0.0

    # -- sampling ------------------------------------------------------------------------------

    def sample(self) -> Sample:
        """Take one sample now and keep it."""
        rm = self.services.replica_manager
        topics: dict[str, Counts] = {}
        if rm is not None:
            for name, c in list(rm.stats.topics.items()):
                topics[name] = tuple(getattr(c, attr) for attr in COUNTERS)
        totals = tuple(sum(v[i] for v in topics.values()) for i in range(len(COUNTERS)))
        lag: dict[str, dict[tuple[str, int], int | None]] = {}
        for entry in consumer_lag(self.services):
            lag.setdefault(entry.group, {})[(entry.topic, entry.partition)] = entry.lag
        s = Sample(self._wall_ms(), self._monotonic(), topics, totals, lag)
        self.samples.append(s)
        return s

    async def _run(self) -> None:
        while True:
            try:
                self.sample()
            except Exception:   # a sample that fails is skipped, the task goes on
                now = self._monotonic()
                if now - self._last_error_logged > 60:
                    self._last_error_logged = now
                    log.exception("console history: sampling failed (logged at most once a minute)")
            await asyncio.sleep(self.interval_s)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="kcompat-http-history")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    # aiohttp application signals (on_startup / on_cleanup)
    async def on_startup(self, _app) -> None:
        self.start()

    async def on_cleanup(self, _app) -> None:
        await self.stop()

    # -- reading -------------------------------------------------------------------------------

    def _window(self, window_s: float | None) -> list[Sample]:
        samples = list(self.samples)
        if window_s is not None and samples:
            since = samples[-1].mono - window_s
            # one sample before the window too: the first rate in it needs its predecessor
            first = next((i for i, s in enumerate(samples) if s.mono >= since), len(samples))
            samples = samples[max(0, first - 1):]
        return samples

    def rates(self, topic: str | None = None, window_s: float | None = None) -> dict:
        """``{"t": [...], "bytes_in": [...], ...}``: per-second rates of all topics (or ``topic``)
        over the interval ending at each sample (the first sample has none and is left out)."""
        samples = self._window(window_s)
        out: dict[str, list] = {"t": []}
        for name in RATE_NAMES:
            out[name] = []
        for before, now in zip(samples, samples[1:]):
            if topic is None:
                a, b = now.totals, before.totals
            else:
                a, b = now.topics.get(topic, _ZERO), before.topics.get(topic, _ZERO)
            out["t"].append(now.t_ms)
            for name, value in zip(RATE_NAMES, _rate(a, b, now.mono - before.mono)):
                out[name].append(round(value, 3))
        return out

    def current_topic_rates(self) -> dict[str, dict[str, float]]:
        """Per topic, the rates over the last interval: ``{topic: {"bytes_in": ..., ...}}``."""
        if len(self.samples) < 2:
            return {}
        before, now = self.samples[-2], self.samples[-1]
        seconds = now.mono - before.mono
        return {name: dict(zip(RATE_NAMES, (round(v, 3) for v in _rate(c, before.topics.get(name, _ZERO), seconds))))
                for name, c in now.topics.items()}

    def current_rates(self) -> dict[str, float]:
        """The rates of all topics over the last interval (zeros before two samples)."""
        if len(self.samples) < 2:
            return dict.fromkeys(RATE_NAMES, 0.0)
        before, now = self.samples[-2], self.samples[-1]
        return dict(zip(RATE_NAMES, (round(v, 3) for v in _rate(now.totals, before.totals, now.mono - before.mono))))

    def lag(self, group: str, window_s: float | None = None) -> dict:
        """``{"t": [...], "lag": [...], "partitions": {(topic, partition): [...]}}`` of ``group``:
        its total lag (None where no partition's lag was known) and each partition's lag
        (None where it had no committed offset or no local replica then)."""
        samples = self._window(window_s)
        keys: dict[tuple[str, int], None] = {}
        for s in samples:
            keys.update(dict.fromkeys(s.lag.get(group, ())))
        t, total = [], []
        parts: dict[tuple[str, int], list] = {k: [] for k in sorted(keys)}
        for s in samples:
            g = s.lag.get(group, {})
            t.append(s.t_ms)
            known = [v for v in g.values() if v is not None]
            total.append(sum(known) if known else None)
            for k, series in parts.items():
                series.append(g.get(k))
        return {"t": t, "lag": total, "partitions": parts}

    def lag_totals(self, window_s: float | None = None) -> dict:
        """``{"t": [...], "groups": {group: [total lag or None, ...]}}`` for every group seen."""
        samples = self._window(window_s)
        names: dict[str, None] = {}
        for s in samples:
            names.update(dict.fromkeys(s.lag))
        out: dict[str, list] = {g: [] for g in names}
        for s in samples:
            for g, series in out.items():
                known = [v for v in s.lag.get(g, {}).values() if v is not None]
                series.append(sum(known) if known else None)
        return {"t": [s.t_ms for s in samples], "groups": out}
