"""The ``perf`` group: Kafka's performance tools against the broker (and the reference Kafka, in the same run).

- ``ProducerPerformance``: ``--num-records`` (1,000,000 by default; ``--perf-records``) of 100 bytes and
  of 1 KiB, ``acks=1`` and ``acks=all``, unthrottled, Kafka 3.9's producer defaults otherwise;
- ``ConsumerPerformance``: fills a topic with ProducerPerformance (acks=1) first, then reads every record
  back in a consumer group (so it needs the group APIs);
- ``EndToEndLatency``: 10,000 round trips of 100-byte records (acks=1), producer to consumer.

Each produce measurement (and each consume fill) follows an unreported 100,000-record warm-up run with
the same settings, so neither broker is measured cold.

Each case stores ``details["metrics"]``: records/s, MB/s (the tools' MB = 2^20 bytes), average,
p50, p99 and max latency in ms where the tool reports them. The report puts the two brokers side by
side with the ratio broker/Kafka. A case passes when the tool completes; speed is reported, not judged.
"""

from __future__ import annotations

import os
import re

from conformance.model import CaseFailure
from conformance.registry import JAVA, scenario
from conformance.scenarios.groups import GROUP_APIS

_PRODUCER = re.compile(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
                       r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th")
_E2E_AVG = re.compile(r"Avg latency: ([\d.]+) ms")
_E2E_PCT = re.compile(r"Percentiles: 50th = (\d+), 99th = (\d+), 99.9th = (\d+)")


def producer_perf(ctx, topic: str, records: int, size: int, acks: str) -> dict:
    props = ["bootstrap.servers=" + ctx.bootstrap, f"acks={acks}"]
    res = ctx.client.tools.run("org.apache.kafka.tools.ProducerPerformance",
                               ["--topic", topic, "--num-records", records, "--record-size", size, "--throughput", -1,
                                "--producer-props", *props],
                               timeout=ctx.timeout(1100), check=False, heap="1g", quick=False)
    m = None
    for line in res.stdout.splitlines():
        m = _PRODUCER.search(line) or m
    if not res.ok or m is None:
        raise CaseFailure(f"ProducerPerformance: {res.summary()}")
    sent, rps, mbps, avg, mx, p50, p95, p99, p999 = m.groups()
    return {"records": int(sent), "records_per_s": float(rps), "mb_per_s": float(mbps), "avg_ms": float(avg),
            "max_ms": float(mx), "p50_ms": float(p50), "p95_ms": float(p95), "p99_ms": float(p99),
            "p999_ms": float(p999)}


WARMUP_RECORDS = 100_000


def warm_up(ctx, size: int, acks: str) -> None:
    """An unreported ProducerPerformance run with the same settings, so that neither broker is measured
    cold (the JVM of a freshly started Kafka compiles its hot paths during the first seconds)."""
    n = min(WARMUP_RECORDS, ctx.target.perf_records)
    ctx.detail(warm_up=producer_perf(ctx, ctx.topic(), n, size, acks))


def _produce_case(size: int, acks: str):
    def run(ctx):
        topic = ctx.topic()
        warm_up(ctx, size, acks)
        metrics = producer_perf(ctx, topic, ctx.target.perf_records, size, acks)
        ctx.detail(metrics=metrics, tool="ProducerPerformance", record_size=size, acks=acks,
                   load_avg_1m=round(os.getloadavg()[0], 2))
        ctx.check(metrics["records"] == ctx.target.perf_records,
                  f"{metrics['records']} of {ctx.target.perf_records} records sent")

    run.__doc__ = f"ProducerPerformance: records of {size} bytes, acks={acks}, unthrottled."
    return run


for _size, _label in ((100, "100b"), (1024, "1kib")):
    for _acks in ("1", "all"):
        scenario(f"perf.produce-{_label}-acks-{_acks}", area="perf",
                 title=f"ProducerPerformance: {_label} records, acks={_acks}", clients=[JAVA], group="perf",
                 timeout=1200)(_produce_case(_size, _acks))


def _consume_case(size: int):
    def run(ctx):
        topic = ctx.topic()
        n = ctx.target.perf_records
        warm_up(ctx, size, "1")
        fill = producer_perf(ctx, topic, n, size, "1")
        ctx.detail(fill=fill)
        res = ctx.client.tools.run("org.apache.kafka.tools.ConsumerPerformance",
                                   ["--bootstrap-server", ctx.bootstrap, "--topic", topic, "--messages", n,
                                    "--group", ctx.group(), "--timeout", 60000],
                                   timeout=ctx.timeout(900), check=False, heap="1g", quick=False)
        lines = [line for line in res.stdout.splitlines() if line.strip()]
        header = next((i for i, line in enumerate(lines) if line.startswith("start.time")), None)
        if not res.ok or header is None or header + 1 >= len(lines):
            raise CaseFailure(f"ConsumerPerformance: {res.summary()}")
        names = [c.strip() for c in lines[header].split(",")]
        values = dict(zip(names, [c.strip() for c in lines[header + 1].split(",")]))
        metrics = {"records": int(float(values["data.consumed.in.nMsg"])),
                   "records_per_s": float(values["nMsg.sec"]), "mb_per_s": float(values["MB.sec"]),
                   "fetch_records_per_s": float(values.get("fetch.nMsg.sec", "nan")),
                   "rebalance_ms": float(values.get("rebalance.time.ms", "nan"))}
        ctx.detail(metrics=metrics, tool="ConsumerPerformance", record_size=size,
                   load_avg_1m=round(os.getloadavg()[0], 2))
        ctx.check(metrics["records"] >= n, f"consumed {metrics['records']} of {n} records")

    run.__doc__ = f"ConsumerPerformance over {size}-byte records (filled with ProducerPerformance, acks=1)."
    return run


for _size, _label in ((100, "100b"), (1024, "1kib")):
    scenario(f"perf.consume-{_label}", area="perf", title=f"ConsumerPerformance: {_label} records",
             clients=[JAVA], group="perf", requires=GROUP_APIS, timeout=1800)(_consume_case(_size))


@scenario("perf.end-to-end-latency", area="perf", title="EndToEndLatency: 10,000 round trips of 100 bytes, acks=1",
          clients=[JAVA], group="perf", timeout=600)
def end_to_end(ctx):
    topic = ctx.topic()
    res = ctx.client.tools.run("org.apache.kafka.tools.EndToEndLatency",
                               [ctx.bootstrap, topic, 10000, "1", 100], timeout=ctx.timeout(540), check=False,
                               quick=False)
    avg = _E2E_AVG.search(res.stdout)
    pct = _E2E_PCT.search(res.stdout)
    if not res.ok or not avg or not pct:
        raise CaseFailure(f"EndToEndLatency: {res.summary()}")
    ctx.detail(metrics={"avg_ms": float(avg.group(1)), "p50_ms": float(pct.group(1)), "p99_ms": float(pct.group(2)),
                        "p999_ms": float(pct.group(3)), "records": 10000}, tool="EndToEndLatency",
               load_avg_1m=round(os.getloadavg()[0], 2))
