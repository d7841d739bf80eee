"""Kafka's own loss-and-duplicate check with the Java VerifiableProducer and VerifiableConsumer.

The rule is Kafka's ``validate_delivery`` (kafkatest.utils.util): every value the producer saw
acknowledged must be consumed, and with idempotence enabled no value may be consumed twice.

The producer (idempotent, acks=all, a fixed rate) runs first — in the restart variants the suite
restarts the broker (SIGTERM, or SIGKILL) once a third of the records are acknowledged — then a
VerifiableConsumer in a fresh group reads the topic from the beginning. Consuming after the
restart keeps consumer-side redelivery out of the duplicate count, so duplicates can only come from
the producer path.

Restarts are only possible when the suite started the broker (``--broker-cmd`` or the reference
Kafka). Against an external ``--bootstrap`` the restart variants fail with the prerequisite named
("restart not possible"); the variant without a restart still runs.
"""

from __future__ import annotations

import time
from collections import Counter

from conformance.clients.java import json_events
from conformance.model import CaseFailure
from conformance.registry import JAVA, scenario
from conformance.scenarios.groups import GROUP_APIS

N = 15000
RATE = 3000


def validate_delivery(acked: list[str], consumed: list[str], idempotence: bool = True) -> tuple[bool, str, dict]:
    """Kafka's rule; returns (success, message, numbers)."""
    missing = set(acked) - set(consumed)
    counts = Counter(consumed)
    duplicates = sum(c - 1 for c in counts.values() if c > 1)
    ok = not missing and not (idempotence and duplicates)
    msg = []
    if missing:
        sample = sorted(missing, key=int)[:10]
        msg.append(f"{len(missing)} acknowledged values were not consumed (e.g. {sample})")
    if duplicates:
        dup_sample = sorted((v for v, c in counts.items() if c > 1), key=int)[:10]
        msg.append(f"{duplicates} duplicates even though idempotence was enabled (e.g. {dup_sample})")
    return ok, "; ".join(msg), {"acked": len(acked), "consumed": len(consumed), "unique_consumed": len(counts),
                                "missing": len(missing), "duplicates": duplicates}


def run_delivery(ctx, restart_mode: str | None) -> None:
    tools = ctx.client.tools
    topic = ctx.topic(partitions=3)
    cfg = tools.properties("verifiable-producer", {
        "enable.idempotence": "true", "retries": "2147483647", "linger.ms": "5", "delivery.timeout.ms": "120000",
        "request.timeout.ms": "15000", "retry.backoff.ms": "200", "reconnect.backoff.max.ms": "1000"})
    acked: list[str] = []
    failed: list[dict] = []

    def on_line(line: str) -> None:
        for e in json_events([line]):
            if e.get("name") == "producer_send_success":
                acked.append(str(e["value"]))
            elif e.get("name") == "producer_send_error":
                failed.append(e)

    producer = tools.background("org.apache.kafka.tools.VerifiableProducer",
                                ["--bootstrap-server", ctx.bootstrap, "--topic", topic, "--max-messages", N,
                                 "--throughput", RATE, "--acks", "-1", "--producer.config", cfg],
                                on_line=on_line, name="verifiable-producer")
    ctx.on_cleanup(producer.stop)
    if restart_mode:
        deadline = time.monotonic() + ctx.timeout(60)
        while len(acked) < N // 3:
            if time.monotonic() > deadline or not producer.running():
                raise CaseFailure(f"the producer acknowledged only {len(acked)} records before the restart point")
            time.sleep(0.1)
        ctx.detail(acked_before_restart=len(acked))
        ctx.restart_broker(restart_mode)
    rc = producer.wait(ctx.timeout(180))
    if rc is None:
        producer.stop()
        raise CaseFailure(f"VerifiableProducer did not finish within {ctx.timeout(180):.0f}s "
                          f"({len(acked)} acknowledged, {len(failed)} failed)")
    ctx.detail(producer_acked=len(acked), producer_failed=len(failed),
               first_send_errors=[f"{e.get('exception')}: {e.get('message')}" for e in failed[:3]])

    consumed: list[str] = []
    group = ctx.group()

    def on_consumer_line(line: str) -> None:
        for e in json_events([line]):
            if e.get("name") == "record_data":
                consumed.append(str(e["value"]))

    args = ctx.client.verifiable_consumer_args(topic, group)
    consumer = tools.background("org.apache.kafka.tools.VerifiableConsumer", args, on_line=on_consumer_line,
                                name="verifiable-consumer")
    ctx.on_cleanup(consumer.stop)
    wanted = set(acked)
    deadline = time.monotonic() + ctx.timeout(120)
    last_len, stable_since = -1, time.monotonic()
    while time.monotonic() < deadline and consumer.running():
        if wanted <= set(consumed) and len(consumed) == last_len and time.monotonic() - stable_since > 3:
            break
        if len(consumed) != last_len:
            last_len, stable_since = len(consumed), time.monotonic()
        time.sleep(0.5)
    consumer.stop()
    ok, msg, numbers = validate_delivery(acked, consumed, idempotence=True)
    ctx.detail(**numbers)
    ctx.observe(missing=numbers["missing"], duplicates=numbers["duplicates"])
    ctx.check(numbers["acked"] > 0, "the producer had no record acknowledged")
    ctx.check(ok, f"validate_delivery failed: {msg}")


@scenario("verifiable.delivery", area="verifiable",
          title="VerifiableProducer (idempotent, acks=all) then VerifiableConsumer: no loss, no duplicates",
          clients=[JAVA], requires=(22, *GROUP_APIS), timeout=360)
def delivery(ctx):
    run_delivery(ctx, None)


@scenario("verifiable.delivery-clean-restart", area="verifiable",
          title="The same check while the broker is restarted cleanly (SIGTERM) mid-production",
          clients=[JAVA], requires=(22, *GROUP_APIS), needs=("restart",), timeout=420)
def delivery_clean_restart(ctx):
    run_delivery(ctx, "clean")


@scenario("verifiable.delivery-kill9-restart", area="verifiable",
          title="The same check while the broker is killed (SIGKILL) and restarted mid-production",
          clients=[JAVA], requires=(22, *GROUP_APIS), needs=("restart",), timeout=420)
def delivery_kill_restart(ctx):
    run_delivery(ctx, "kill")
