"""Consumer-group load and checks for fault tests and the nemesis soak (bench/nemesis.py).

- :class:`OffsetMonitor`: polls a group's committed offsets (OffsetFetch through ``committed()`` of a
  non-member confluent-kafka consumer; ``isolation.level=read_committed``, so KIP-447
  ``require_stable``: offsets of an open transaction are answered UNSTABLE_OFFSET_COMMIT and retried,
  never as the old value) and records every answer with the time the fetch was sent.
- :class:`GroupReader`: ``members`` confluent-kafka consumers of one group (subscribe, manual
  synchronous commit after each batch), each in its own thread, plus an :class:`OffsetMonitor`.
- :func:`committed_offset_violations`: committed offsets never go backwards.
"""

from __future__ import annotations

import threading
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition

MEMBER_CONF = {"enable.auto.commit": False, "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
               "heartbeat.interval.ms": 500, "max.poll.interval.ms": 120000, "log_level": 3}


class OffsetMonitor:
    """Polls ``group``'s committed offsets of ``partitions`` of ``topic`` every ``interval`` seconds
    until :meth:`stop`. ``observed``: [(monotonic time the fetch was sent, partition, offset)]
    (offset -1001 = none committed); ``commits``: [(monotonic time acknowledged, partition, offset)]
    filled by whoever commits (:meth:`acknowledged`)."""

    def __init__(self, bootstrap: str, group: str, topic: str, partitions: list[int], interval: float = 0.1) -> None:
        self.bootstrap, self.group, self.topic, self.partitions = bootstrap, group, topic, list(partitions)
        self.interval = interval
        self.observed: list[tuple[float, int, int]] = []
        self.commits: list[tuple[float, int, int]] = []
        self.fetch_errors = 0
        self.last_fetch_error = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"offsets-{group}", daemon=True)

    def start(self) -> "OffsetMonitor":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)

    def acknowledged(self, when: float, offsets: dict[int, int]) -> None:
        """Record a commit of ``offsets`` {partition: offset} acknowledged at monotonic ``when``."""
        for p, o in offsets.items():
            self.commits.append((when, p, o))

    def committed_now(self) -> dict[int, int]:
        """The latest observed committed offset per partition."""
        latest: dict[int, int] = {}
        for _t, p, o in list(self.observed):
            latest[p] = o
        return latest

    def _run(self) -> None:
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group, "enable.auto.commit": False,
                      "log_level": 3})
        tps = [TopicPartition(self.topic, p) for p in self.partitions]
        try:
            while not self._stop.is_set():
                sent = time.monotonic()
                try:
                    res = c.committed(tps, timeout=5)
                except KafkaException as e:
                    self.fetch_errors += 1
                    self.last_fetch_error = e
                    res = []
                for tp in res:
                    if tp.error is None:
                        self.observed.append((sent, tp.partition, tp.offset))
                    else:
                        self.fetch_errors += 1
                        self.last_fetch_error = tp.error
                time.sleep(self.interval)
        finally:
            c.close()


class GroupReader:
    """``members`` group members (subscribe, synchronous commit after each batch) and an
    :class:`OffsetMonitor` of the group (``monitor``; acknowledged commits go to ``monitor.commits``).
    ``consumed``: [(partition, offset, value)] of every member."""

    def __init__(self, bootstrap: str, topic: str, group: str, partitions: list[int], members: int = 1) -> None:
        self.bootstrap, self.topic, self.group = bootstrap, topic, group
        self.consumed: list[tuple[int, int, bytes]] = []
        self.monitor = OffsetMonitor(bootstrap, group, topic, partitions)
        self.commit_errors = 0
        self.last_commit_error = None
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._consume, name=f"{group}-member{i}", daemon=True)
                         for i in range(members)]

    @property
    def commits(self) -> list[tuple[float, int, int]]:
        return self.monitor.commits

    def start(self) -> "GroupReader":
        self.monitor.start()
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(60)
        self.monitor.stop()

    def committed_now(self) -> dict[int, int]:
        return self.monitor.committed_now()

    def status(self) -> str:
        now, m = time.monotonic(), self.monitor
        last_commit = f"{now - m.commits[-1][0]:.1f}s ago" if m.commits else "never"
        last_seen = f"{now - m.observed[-1][0]:.1f}s ago" if m.observed else "never"
        return (f"consumed {len(self.consumed)}, {len(m.commits)} commits acknowledged (last {last_commit}), "
                f"{self.commit_errors} failed, offset fetches: last {last_seen}, {m.fetch_errors} failed "
                f"(last error {m.last_fetch_error}); "
                f"consumer errors {self.errors[-3:]}, last commit error {self.last_commit_error}")

    def _consume(self) -> None:
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group, **MEMBER_CONF})
        try:
            c.subscribe([self.topic])
            while not self._stop.is_set():
                msgs = c.consume(500, 0.2)
                got = False
                for m in msgs:
                    if m.error() is not None:
                        self.errors.append(str(m.error()))
                        continue
                    self.consumed.append((m.partition(), m.offset(), m.value()))
                    got = True
                if not got:
                    continue
                try:
                    result = c.commit(asynchronous=False)
                except KafkaException as e:
                    self.commit_errors += 1
                    self.last_commit_error = e
                    continue
                now = time.monotonic()
                for tp in result or []:
                    if tp.error is None and tp.offset >= 0:
                        self.monitor.commits.append((now, tp.partition, tp.offset))
                    elif tp.error is not None:
                        self.commit_errors += 1
                        self.last_commit_error = tp.error
        finally:
            c.close()


def committed_offset_violations(monitor: OffsetMonitor) -> list[str]:
    """Per partition: OffsetFetch answers never decrease (once an offset is committed, "none" is
    backwards too), and none is below a commit that was acknowledged before the fetch was sent.
    Returns one line per partition that went backwards (empty: none did)."""
    problems = []
    for p in monitor.partitions:
        seen = [(t, o) for t, pp, o in list(monitor.observed) if pp == p]
        high, high_t = None, None
        for t, o in seen:
            if high is not None and o < high:
                problems.append(f"partition {p}: committed offset went from {high} back to {o} "
                                f"({t - high_t:.2f}s later)")
                break
            if o >= 0 and (high is None or o > high):
                high, high_t = o, t
        commits = sorted((t, o) for t, pp, o in list(monitor.commits) if pp == p)
        i, acked_high = 0, None
        for t, o in seen:
            while i < len(commits) and commits[i][0] < t:
                acked_high = commits[i][1] if acked_high is None else max(acked_high, commits[i][1])
                i += 1
            if acked_high is not None and o < acked_high:
                problems.append(f"partition {p}: OffsetFetch answered {o} after commit of {acked_high} was "
                                "acknowledged")
                break
    return problems


def summary(monitor: OffsetMonitor) -> str:
    return (f"{len(monitor.observed)} committed-offset observations, {len(monitor.commits)} acknowledged commits, "
            f"{monitor.fetch_errors} failed offset fetches")
