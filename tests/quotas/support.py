"""Helpers of the quota tests: set a client quota on the wire, run a confluent-kafka client flat
out in a thread while collecting the throttle times its statistics report."""

from __future__ import annotations

import json
import threading
import time

import confluent_kafka as ck

from kcompat.protocol.messages.alter_client_quotas import AlterClientQuotasRequest as AQ
from kcompat.testing import wire

MB = 1024 * 1024
VALUE = b"q" * 65000   # one record per 64 KB batch: few client calls per MB, however loaded the machine


def set_quota(bootstrap: str, entity: list[tuple[str, str | None]], **values: float) -> None:
    """AlterClientQuotas for one entity, e.g. ``[("client-id", "app")], producer_byte_rate=MB``."""
    req = AQ(entries=[AQ.EntryData(entity=[AQ.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                                   ops=[AQ.OpData(key=k, value=v, remove=False) for k, v in values.items()])])
    (entry,) = wire.call(bootstrap, req, 1).entries
    assert entry.error_code == 0, entry.error_message


class Throttles:
    """librdkafka ``stats_cb``: the per-broker ``throttle`` window statistics (ms) it reports."""

    def __init__(self) -> None:
        self.max_ms = 0
        self.avgs: list[int] = []

    def __call__(self, js: str) -> None:
        for b in json.loads(js)["brokers"].values():
            if b["nodeid"] >= 0 and b["throttle"]["cnt"]:
                self.max_ms = max(self.max_ms, b["throttle"]["max"])
                self.avgs.append(b["throttle"]["avg"])


class FlatOutProducer(threading.Thread):
    """Produces :data:`VALUE` records to ``topic`` as fast as the client lets it (or at
    ``rate`` bytes/s) until :meth:`stop`; counts what was acknowledged."""

    def __init__(self, bootstrap: str, topic: str, client_id: str, rate: float | None = None,
                 request_bytes: int = 65536) -> None:
        super().__init__(daemon=True)
        self.throttles = Throttles()
        self.topic = topic
        self.rate = rate
        self.acked = 0
        self.errors: list = []
        self._halt = threading.Event()
        # requests of one batch of ``request_bytes``: the quota is enforced a request at a time
        self.producer = ck.Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
                                     "batch.size": request_bytes, "queue.buffering.max.kbytes": 4096,
                                     "statistics.interval.ms": 500, "stats_cb": self.throttles})

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.acked += 1
        else:
            self.errors.append(err)

    def run(self) -> None:
        p = self.producer
        start = time.monotonic()
        sent = 0
        while not self._halt.is_set():
            if self.rate is not None and sent * len(VALUE) > self.rate * (time.monotonic() - start):
                p.poll(0.002)
                continue
            try:
                p.produce(self.topic, VALUE, on_delivery=self._delivered)
                sent += 1
            except BufferError:
                p.poll(0.005)
            p.poll(0)
        p.flush(60)

    def stop(self) -> None:
        self._halt.set()
        self.join(90)
