"""A generator of JSON page-view events, written to a Kafka topic with confluent-kafka.

Each event is ``{"user": "u17", "page": "/pricing", "ts": "2024-05-01T12:00:03.250Z"}``, keyed by
user. Events are deterministic for a given seed, so a test can compute the expected aggregates.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from datetime import datetime, timezone

PAGES = ("/", "/pricing", "/docs", "/blog", "/signup", "/login")


@dataclass(frozen=True)
class PageView:
    """One page view: who, which page, and when (event time, epoch milliseconds)."""

    user: str
    page: str
    ts_ms: int

    def to_json(self) -> bytes:
        """The event as the JSON the pipeline parses (``ts`` as an ISO-8601 UTC string)."""
        ts = datetime.fromtimestamp(self.ts_ms / 1000, tz=timezone.utc)
        return json.dumps({"user": self.user, "page": self.page,
                           "ts": ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"}
                          ).encode()


def page_views(n: int, start_ms: int, step_ms: int = 100, *, users: int = 50, seed: int = 0) -> list[PageView]:
    """``n`` page views with event times ``start_ms, start_ms + step_ms, ...``."""
    rnd = random.Random(seed)
    return [PageView(f"u{rnd.randrange(users)}", rnd.choice(PAGES), start_ms + i * step_ms) for i in range(n)]


def produce(bootstrap: str, topic: str, events, *, config: dict | None = None) -> int:
    """Write ``events`` to ``topic`` (key = user, value = JSON, record timestamp = event time).

    Returns the number of records acknowledged; raises if any delivery failed. Because the record
    timestamps are the event times, events older than the topic's ``retention.ms`` (7 days by
    default) are deleted by retention right away, as in Kafka: give such topics ``retention.ms=-1``.
    """
    from confluent_kafka import Producer

    errors: list = []

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(err)

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True,
                         **(config or {})})
    count = 0
    for ev in events:
        while True:
            try:
                producer.produce(topic, key=ev.user.encode(), value=ev.to_json(), timestamp=ev.ts_ms,
                                 on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.1)
        count += 1
        producer.poll(0)
    remaining = producer.flush(60)
    if errors or remaining:
        raise RuntimeError(f"{len(errors)} delivery errors ({errors[:3]}), {remaining} not delivered")
    return count


def live_page_views(rate: float, seconds: float, *, users: int = 50, seed: int = 0):
    """Yield page views stamped with the wall clock, about ``rate`` per second for ``seconds``."""
    rnd = random.Random(seed)
    start = time.time()
    sent = 0
    while (elapsed := time.time() - start) < seconds:
        due = int(elapsed * rate) + 1
        while sent < due:
            yield PageView(f"u{rnd.randrange(users)}", rnd.choice(PAGES), int(time.time() * 1000))
            sent += 1
        time.sleep(min(0.05, max(0.0, sent / rate - (time.time() - start))))
