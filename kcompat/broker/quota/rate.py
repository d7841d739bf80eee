"""Sampled rates and token buckets, as Kafka's metrics ``Rate`` / ``SampledStat`` and
``TokenBucket`` (clients/common/metrics/stats), which its quota managers enforce.

:class:`Rate` keeps ``samples + 1`` samples of ``window_ms`` each: a sample starts at the first
record after the previous one is complete, samples without events for ``samples * window_ms`` are
reset. The rate is the sum of all samples divided by the time since the oldest sample started,
counted as at least ``samples - 1`` full windows (so a fresh client is measured over the whole
window, not over its first milliseconds), in units per second.

:class:`TokenBucket` (KIP-599) holds up to ``samples * window_s * quota`` tokens, refilled at
``quota`` per second; recording takes tokens and may leave the bucket negative.

Pure: the caller passes the time (``now_ms``).
"""

from __future__ import annotations


class _Sample:
    __slots__ = ("value", "events", "start_ms", "last_ms")

    def __init__(self, now_ms: int) -> None:
        self.reset(now_ms)

    def reset(self, now_ms: int) -> None:
        self.value = 0.0
        self.events = 0
        self.start_ms = now_ms
        self.last_ms = now_ms


class Rate:
    """A rate in units per second over ``samples`` windows of ``window_ms`` (Kafka's ``Rate``)."""

    __slots__ = ("samples", "window_ms", "_samples", "_current")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = max(1, samples)
        self.window_ms = max(1, window_ms)
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        """Add ``value`` at ``now_ms`` (a negative value takes back one recorded before)."""
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            self._current = (self._current + 1) % (self.samples + 1)
            if self._current >= len(self._samples):
                sample = _Sample(now_ms)
                self._samples.append(sample)
            else:
                sample = self._samples[self._current]
                sample.reset(now_ms)
        sample.value += value
        sample.events += 1
        sample.last_ms = now_ms

    def measure(self, now_ms: int) -> float:
        """The rate at ``now_ms``, units per second."""
        return self._sum(now_ms) * 1000.0 / self.window_size_ms(now_ms)

    def window_size_ms(self, now_ms: int) -> int:
        """The time the rate is measured over (Kafka's ``Rate.windowSize``), ms, at least 1."""
        self._purge(now_ms)
        oldest = min(self._samples, key=lambda s: s.start_ms).start_ms if self._samples else now_ms
        elapsed = now_ms - oldest
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def idle_since(self, now_ms: int) -> bool:
        """Nothing recorded for all ``samples`` windows: the rate is 0, as a new one's."""
        return all(now_ms - s.last_ms >= self.samples * self.window_ms for s in self._samples)

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return self._samples[self._current]

    def _purge(self, now_ms: int) -> None:
        expire = self.samples * self.window_ms
        for s in self._samples:
            if now_ms - s.last_ms >= expire:
                s.reset(now_ms)

    def _sum(self, now_ms: int) -> float:
        self._purge(now_ms)
        return sum(s.value for s in self._samples)


class TokenBucket:
    """Kafka's ``TokenBucket`` for ``quota`` units per second (KIP-599): burst
    ``samples * window_ms / 1000 * quota``; starts empty, as Kafka's."""

    __slots__ = ("samples", "window_ms", "tokens", "_last_ms")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = max(1, samples)
        self.window_ms = max(1, window_ms)
        self.tokens = 0.0
        self._last_ms = 0

    def measure(self, quota: float, now_ms: int) -> float:
        """Tokens left at ``now_ms`` (negative: over the quota)."""
        self._refill(quota, now_ms)
        return self.tokens

    def record(self, quota: float, value: float, now_ms: int) -> None:
        """Take ``value`` tokens."""
        self._refill(quota, now_ms)
        self.tokens = min(self._burst(quota), self.tokens - value)

    def idle_since(self, quota: float, now_ms: int) -> bool:
        """Refilled to the burst: the same as a new bucket."""
        return self.measure(quota, now_ms) >= self._burst(quota)

    def _burst(self, quota: float) -> float:
        return self.samples * self.window_ms / 1000.0 * quota

    def _refill(self, quota: float, now_ms: int) -> None:
        self.tokens = min(self._burst(quota), self.tokens + quota * (now_ms - self._last_ms) / 1000.0)
        self._last_ms = now_ms
