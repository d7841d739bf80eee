"""A cleaning advances as soon as its worker step finishes, not at the broker's next periodic
tick: the cleaner's ``on_step_done`` notice (from the worker pool's result thread) and the
broker's :class:`~kcompat.broker.cleaner_driver.CleanerDriver`, which hops to the event loop and
ticks the cleaner there. No test here measures time: the deadlines only bound a hung test."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kcompat.broker.cleaner_driver import CleanerDriver
from kcompat.log import CLEANER_OFFSET_CHECKPOINT, CleanOutcome, LogCleaner, read_offset_checkpoint
from tests.support.broker_process import BrokerProcess, wait_for

from .cleaner_helpers import NOW, TP, append_random, latest, open_log, read_all

HUNG_S = 60.0   # only bounds a hung test


def _dirty_log(path):
    log = open_log(path)
    expected = append_random(log, 120, keys=15)
    log.roll(NOW)
    return log, expected


def _no_leftovers(d) -> bool:
    return not [p for p in d.iterdir() if p.suffix in (".cleaned", ".swap", ".deleted")]


def test_each_worker_step_notifies_and_notices_alone_drive_the_install(tmp_path):
    log, expected = _dirty_log(tmp_path / "t-0")
    cleaner = LogCleaner(threads=1, backoff_ms=10**9)
    notices = threading.Semaphore(0)
    cleaner.on_step_done = notices.release
    try:
        assert cleaner.tick({TP: log}, NOW) == [] and cleaner.in_progress == [TP]
        outcomes, steps = [], 0
        while cleaner.in_progress:          # only a notice makes it look again
            assert notices.acquire(timeout=HUNG_S), "a worker step finished without a notice"
            steps += 1
            outcomes += cleaner.poll(NOW)
        assert steps == 3                   # clean, fsync after .swap, finish (fsync, unlink, checkpoint)
        assert [(o.tp, o.installed) for o in outcomes] == [(TP, True)]
        assert latest(log) == expected and log.cleaning is None
        assert read_offset_checkpoint(tmp_path / CLEANER_OFFSET_CHECKPOINT) == {TP: outcomes[0].end_offset}
        assert _no_leftovers(tmp_path / "t-0")
    finally:
        cleaner.shutdown()


def test_a_cleaning_bounded_by_the_offset_map_goes_on_without_waiting_for_the_backoff(tmp_path):
    """The offset map holds ~80 keys a pass, so the log takes several cleanings; once one has
    finished its last step the next starts at once (Kafka's cleaner thread picks the filthiest
    log again), not after ``log.cleaner.backoff.ms`` (here "never")."""
    log = open_log(tmp_path / "t-0")
    expected = append_random(log, 120, keys=200, per_batch=5)
    log.roll(NOW)
    cleaner = LogCleaner(threads=1, dedupe_buffer_size=8_000, io_buffer_load_factor=1.0, backoff_ms=10**9)
    notices = threading.Semaphore(0)
    cleaner.on_step_done = notices.release
    try:
        installed = cleaner.tick({TP: log}, NOW)
        assert cleaner.in_progress == [TP]
        while cleaner.in_progress:          # only notices make it tick again, never the clock
            assert notices.acquire(timeout=HUNG_S), "a worker step finished without a notice"
            installed += [o for o in cleaner.tick({TP: log}, NOW) if o.installed]
        ends = [o.end_offset for o in installed]
        assert len(ends) > 1 and ends == sorted(ends) and ends[-1] == log.segments[-1].base_offset
        assert latest(log) == expected and len(read_all(log)[0]) == len(expected)
    finally:
        cleaner.shutdown()


def test_driver_installs_a_cleaning_without_another_periodic_tick(tmp_path):
    log, expected = _dirty_log(tmp_path / "t-0")
    cleaner = LogCleaner(threads=1, backoff_ms=10**9)
    ticks = []
    real_tick = cleaner.tick

    def spy_tick(logs, now_ms, **kw):
        ticks.append((threading.get_ident(), kw))
        return real_tick(logs, now_ms, **kw)
    cleaner.tick = spy_tick
    stable, plo = (lambda tp: None), (lambda tp: None)

    async def main():
        driver = CleanerDriver(cleaner, {TP: log}, now_ms=lambda: NOW, stable_offset_of=stable,
                               producer_last_offsets_of=plo, interval_s=3600)
        driver.start()
        try:
            assert driver.tick(NOW) == [] and cleaner.in_progress == [TP]   # the one periodic tick
            deadline = time.monotonic() + HUNG_S
            while cleaner.in_progress and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert not cleaner.in_progress, "the cleaning was not advanced without periodic ticks"
        finally:
            driver.stop()
        assert cleaner.on_step_done is None
    try:
        asyncio.run(main())
        assert latest(log) == expected and log.cleaning is None
        assert TP in read_offset_checkpoint(tmp_path / CLEANER_OFFSET_CHECKPOINT)
        assert _no_leftovers(tmp_path / "t-0")
        assert len(ticks) == 4              # the periodic one, then one per finished worker step
        assert {t for t, _ in ticks} == {threading.get_ident()}       # all on the loop's thread
        assert all(kw == {"stable_offset_of": stable, "producer_last_offsets_of": plo} for _, kw in ticks)
    finally:
        cleaner.shutdown()


def test_driver_looks_for_cleanable_logs_on_its_own(tmp_path):
    """No one else ticks the cleaner: the driver's own task finds the dirty log and cleans it
    (the broker's other periodic work, which may fail or wait, never stands in its way)."""
    log, expected = _dirty_log(tmp_path / "t-0")
    cleaner = LogCleaner(threads=1, backoff_ms=10**9)

    async def main():
        driver = CleanerDriver(cleaner, {TP: log}, now_ms=lambda: NOW, stable_offset_of=lambda tp: None,
                               producer_last_offsets_of=lambda tp: None, interval_s=0.05)
        driver.start()
        try:
            deadline = time.monotonic() + HUNG_S
            while latest(log) != expected and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
        finally:
            driver.stop()
    try:
        asyncio.run(main())
        assert latest(log) == expected
    finally:
        cleaner.shutdown()


def test_a_wall_clock_stepped_back_does_not_stop_cleaning(tmp_path):
    """The backoff between checks runs on a monotonic clock: a first check that found nothing,
    then the wall clock (``now_ms``, record time) stepped back an hour, must not keep the cleaner
    from looking again once ``log.cleaner.backoff.ms`` has passed."""
    log = open_log(tmp_path / "t-0")
    mono = [1_000]
    cleaner = LogCleaner(threads=1, backoff_ms=50, monotonic_ms=lambda: mono[0])
    try:
        assert cleaner.tick({TP: log}, NOW) == [] and not cleaner.in_progress    # nothing yet
        expected = append_random(log, 60, keys=15)
        log.roll(NOW)
        mono[0] += 49
        assert cleaner.tick({TP: log}, NOW - 3_600_000) == [] and not cleaner.in_progress   # backoff
        mono[0] += 1
        cleaner.tick({TP: log}, NOW - 3_600_000)
        assert cleaner.in_progress == [TP]
        deadline = time.monotonic() + HUNG_S
        while cleaner.in_progress and time.monotonic() < deadline:
            cleaner.poll(NOW - 3_600_000)
            time.sleep(0.01)
        assert latest(log) == expected
    finally:
        cleaner.shutdown()


class _FakeCleaner:
    def __init__(self, results) -> None:
        self.on_step_done = None
        self.results = list(results)
        self.calls: list[tuple[int, int]] = []

    def tick(self, logs, now_ms, **kw):
        self.calls.append((threading.get_ident(), now_ms))
        r = self.results.pop(0)
        if isinstance(r, Exception):
            raise r
        return r


def test_driver_hops_to_the_loop_survives_errors_and_stops(caplog):
    failed = CleanOutcome(("t", 3), False, 0, None, "boom")
    fake = _FakeCleaner([RuntimeError("tick failed"), [failed], []])
    driver = CleanerDriver(fake, {}, now_ms=lambda: 42, stable_offset_of=lambda tp: None,
                           producer_last_offsets_of=lambda tp: None, interval_s=3600)

    async def main():
        driver.start()
        assert fake.on_step_done == driver._step_done
        for n in (1, 2):                    # notices from a worker-pool-like thread
            th = threading.Thread(target=fake.on_step_done)
            th.start()
            th.join()
            deadline = time.monotonic() + HUNG_S
            while len(fake.calls) < n and time.monotonic() < deadline:
                await asyncio.sleep(0.005)
        assert fake.calls == [(threading.get_ident(), 42)] * 2
        driver.stop()
        assert fake.on_step_done is None
        await asyncio.sleep(0)
    with caplog.at_level(logging.WARNING, logger="kcompat.broker"):
        asyncio.run(main())
    assert "advancing the log cleaner failed" in caplog.text
    assert "cleaning t-3 failed: boom" in caplog.text
    driver._step_done()                     # a late notice into the closed loop: ignored
    assert len(fake.calls) == 2


def test_broker_cleans_promptly_and_stops_cleanly(tmp_path):
    """A real broker: a compacted topic of many small segments is cleaned to one record per key
    (the cleaner checkpoint moves past it) and the broker stops without error."""
    topic = f"prompt-{uuid.uuid4().hex[:8]}"
    keys, n = 20, 2000
    with BrokerProcess(tmp_path / "data", overrides={"log.cleaner.backoff.ms": "100"}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1, config={
            "cleanup.policy": "compact", "internal.segment.bytes": "16384",
            "min.cleanable.dirty.ratio": "0.01"})])[topic].result(15)
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
        expected = {}
        for i in range(n):
            key, value = b"k%02d" % (i % keys), b"%06d" % i + b"v" * 50
            expected[key] = value
            p.produce(topic, key=key, value=value)
            if i % 50 == 49:
                assert p.flush(10) == 0
        assert p.flush(10) == 0

        ckpt = tmp_path / "data" / CLEANER_OFFSET_CHECKPOINT
        def cleaned_to():
            offset = read_offset_checkpoint(ckpt).get((topic, 0), 0) if ckpt.exists() else 0
            return offset if offset > n // 2 else None
        cleaned = wait_for(cleaned_to, timeout=HUNG_S, interval=0.1, what="the cleaner checkpoint")
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "prompt-reader", "enable.auto.commit": False})
        c.assign([TopicPartition(topic, 0, 0)])
        got, count, last = {}, 0, -1
        deadline = time.time() + HUNG_S
        while last < n - 1 and time.time() < deadline:
            for m in c.consume(num_messages=1000, timeout=0.5):
                assert m.error() is None, m.error()
                got[m.key()], count, last = m.value(), count + 1, m.offset()
        c.close()
        assert got == expected
        assert count <= keys + n - cleaned, (count, cleaned)   # the cleaned range: one record per key
        assert "cleaned up to offset" in b.log_text()
        del admin
        assert b.stop() == 0
    text = b.log_text()
    assert "Traceback" not in text and "exception calling callback" not in text
    assert "failed" not in "\n".join(line for line in text.splitlines() if "clean" in line)
