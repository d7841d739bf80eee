"""Helpers the raw-protocol broker tests share: produce one record batch, a broker serving its
``/metrics`` on an HTTP listener of its own, and a scrape of those metrics."""

from __future__ import annotations

import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from kcompat.protocol.messages.produce import ProduceRequest
from kcompat.testing import wire
from kcompat.testing.ports import free_ports
from tests.support.broker_process import BrokerProcess


def produce_batch(bootstrap: str, topic: str, partition: int, batch: bytes) -> int:
    """Produce (v9, acks=1) one record batch to ``topic``-``partition``; its base offset."""
    resp = wire.call(bootstrap, ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=partition, records=batch)])]), 9)
    r = resp.responses[0].partition_responses[0]
    assert r.error_code == 0
    return r.base_offset


def broker_with_metrics(data_dir: Path, overrides: dict[str, str] | None = None) -> BrokerProcess:
    """A broker (not started) with an HTTP listener; ``metrics_url`` is its ``/metrics``."""
    (http,) = free_ports(1)
    b = BrokerProcess(data_dir, {"http.listeners": f"HTTP://127.0.0.1:{http}", **(overrides or {})})
    b.metrics_url = f"http://127.0.0.1:{http}/metrics"
    return b


def scrape(b: BrokerProcess, prefix: str) -> dict[str, float]:
    """{sample name: value} of the samples without labels whose name starts with ``prefix``."""
    with urllib.request.urlopen(b.metrics_url, timeout=10) as r:
        text = r.read().decode()
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples
            if s.name.startswith(prefix) and not s.labels}
