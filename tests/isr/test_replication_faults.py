"""Issue 6 fault tests: a 3-broker cluster of real processes, a topic with replication factor 3 and
``min.insync.replicas=2``, idempotent acks=all producers writing sequential values while the test
kill -9s a partition leader (and restarts it), SIGSTOPs a broker past ``replica.lag.time.max.ms``
(and resumes it) and cuts a broker off from the others with TCP proxies on every node-to-node link
(and heals it). Afterwards every acknowledged record is in the log at its acknowledged offset, no
value appears twice, offsets increase and each partition holds its values in produce order.

The cluster is :class:`tests.support.cluster.ProxiedCluster` (the test suite's short quorum and
session timeouts, ``replica.lag.time.max.ms=3000``). No test asserts on timing; failover times are
printed (``-s``) and measured properly by ``bench/replication.py``.

Victims are chosen so the hard cases always happen: (a) kill -9 the leader of partition 0,
(b) SIGSTOP the active controller (also a partition leader: controller failover, leader
failover and ISR shrink at once), (c) cut off a partition leader that is not the active
controller (a leader that cannot reach the controller to shrink its ISR): with its connections
reset (CUT) in the first test, silently stalled (BLACKHOLE: a network that drops packets) in the
consumer-group test. For debugging, the
environment variable ``KCOMPAT_FAULT_STEPS`` (e.g. ``cut`` or ``kill,pause``) runs some of them.
"""

from __future__ import annotations

import os
import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support import group_load
from tests.support.cluster import ProxiedCluster, wait_until
from tests.support.group_load import GroupReader, committed_offset_violations
from tests.support.link_proxy import BLACKHOLE, CUT
from tests.support.replication_load import (
    SequentialProducer, check_log, decode, in_sync, kill_leader_and_time_failover, partition_states, read_partitions,
)

LAG_MS = 3000
OVERRIDES = {"replica.lag.time.max.ms": str(LAG_MS), "default.replication.factor": "3",
             "min.insync.replicas": "2", "group.initial.rebalance.delay.ms": "0"}
PARTITIONS = [0, 1, 2]
ALL = [1, 2, 3]
RECOVERY_S = 90  # liveness bound for each wait below; never a performance assertion
STEPS = [s for s in os.environ.get("KCOMPAT_FAULT_STEPS", "kill,pause,cut").split(",") if s]


@pytest.fixture
def cluster(tmp_path):
    c = ProxiedCluster(tmp_path, overrides=OVERRIDES)
    try:
        c.start()
        yield c
    finally:
        c.close()


# -- helpers -------------------------------------------------------------------------------------------


def addr(cluster, node: int) -> str:
    return f"127.0.0.1:{cluster.client_ports[node - 1]}"


def states(cluster, topic: str, via: list[int]):
    """Partition states from the first node of ``via`` that answers with every partition."""
    for node in via:
        s = partition_states(addr(cluster, node), topic)
        if len(s) == len(PARTITIONS) and all(st.error_code == 0 or st.leader < 0 for st in s.values()):
            return s
    return {}


def create_topic(cluster, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, len(PARTITIONS), 3, config={"min.insync.replicas": "2"})],
                        operation_timeout=20, request_timeout=20)[topic].result(30)
    wait_full_isr(cluster, topic, "the new topic fully replicated")


def wait_full_isr(cluster, topic: str, what: str, timeout: float = RECOVERY_S) -> None:
    """Every running node shows every partition with a leader and all three replicas in sync."""
    wait_until(lambda: in_sync(cluster, topic, PARTITIONS), timeout,
               f"{what}: ISR {ALL} everywhere (last seen {states(cluster, topic, ALL)})", interval=0.1)


def leader_of(cluster, topic: str, partition: int) -> int:
    return wait_until(lambda: (lambda s: s[partition].leader if s and s[partition].leader > 0 else None)(
        states(cluster, topic, [n for n in ALL if cluster.node(n).proc is not None])), 20,
        f"a leader for {topic}-{partition}")


def wait_out_of_isr(cluster, topic: str, victim: int, what: str) -> float:
    """Until the other nodes show ``victim`` in no ISR of ``topic``; returns seconds waited."""
    others = [n for n in ALL if n != victim]
    t0 = time.monotonic()
    wait_until(lambda: (lambda s: bool(s) and all(victim not in st.isr for st in s.values()))(
        states(cluster, topic, others)), RECOVERY_S,
        f"node {victim} out of the ISR ({what}); last seen {states(cluster, topic, others)}", interval=0.1)
    return time.monotonic() - t0


def controller_id(cluster) -> int:
    return wait_until(cluster.leader_id, 20, "an active controller")


def run_faults(cluster, topic: str, writer: SequentialProducer, report, cut_mode: str = CUT) -> None:
    """(a) kill -9 + restart, (b) SIGSTOP + SIGCONT, (c) cut off + heal (see the module docstring
    for the victims), with acks=all progress on every partition checked during and after each."""
    writer.wait_progress(RECOVERY_S, "before any fault", records=20)
    if "kill" in STEPS:
        kill_and_restart(cluster, topic, writer, report)
    if "pause" in STEPS:
        pause_and_resume(cluster, topic, writer, report)
    if "cut" in STEPS:
        cut_off_and_heal(cluster, topic, writer, report, cut_mode)
    # the proxies really carried the traffic the faults cut
    assert cluster.mesh.requests(kinds=["replication"], api_key=1) > 0
    assert cluster.mesh.requests(kinds=["controller"]) > 0


def kill_and_restart(cluster, topic: str, writer: SequentialProducer, report) -> None:
    """(a) kill -9 of the leader of partition 0, then restart it over its data."""
    victim = leader_of(cluster, topic, 0)
    t0 = time.monotonic()
    cluster.kill9(victim)
    took = writer.wait_progress(RECOVERY_S, f"every partition after kill -9 of node {victim}")
    report(f"(a) kill -9 node {victim}: acks=all on every partition again after {took:.2f}s")
    cluster.restart(victim)
    wait_full_isr(cluster, topic, f"node {victim} back in sync after its restart")
    writer.wait_progress(RECOVERY_S, f"after node {victim} restarted")
    report(f"(a) node {victim} restarted and back in every ISR {time.monotonic() - t0:.1f}s after the kill")


def pause_and_resume(cluster, topic: str, writer: SequentialProducer, report) -> None:
    """(b) SIGSTOP the active controller (a partition leader too) for longer than
    replica.lag.time.max.ms, then SIGCONT."""
    victim = controller_id(cluster)
    led = [p for p, st in states(cluster, topic, ALL).items() if st.leader == victim]
    t0 = time.monotonic()
    cluster.pause(victim)
    try:
        out = wait_out_of_isr(cluster, topic, victim, "SIGSTOPped")
        writer.wait_progress(RECOVERY_S, f"every partition while node {victim} is stopped")
        time.sleep(max(0.0, t0 + LAG_MS / 1000 + 1.0 - time.monotonic()))  # surely past the lag time
        report(f"(b) SIGSTOP node {victim} (active controller, leader of {led}): out of every ISR after "
               f"{out:.2f}s, resumed after {time.monotonic() - t0:.1f}s")
    finally:
        cluster.resume(victim)
    wait_full_isr(cluster, topic, f"node {victim} back in sync after SIGCONT")
    writer.wait_progress(RECOVERY_S, f"after node {victim} resumed")


def cut_off_and_heal(cluster, topic: str, writer: SequentialProducer, report, mode: str) -> None:
    """(c) cut a partition leader that is not the active controller off from the other nodes (all
    its node-to-node links, both ways, in proxy ``mode``), then heal."""
    ctrl = controller_id(cluster)
    current = states(cluster, topic, ALL)
    victim = next((st.leader for p, st in sorted(current.items()) if st.leader not in (ctrl, -1)), None)
    if victim is None:  # the controller leads everything: any other node (then a follower only)
        victim = next(n for n in ALL if n != ctrl)
    led = [p for p, st in current.items() if st.leader == victim]
    t0 = time.monotonic()
    cluster.mesh.isolate(victim, mode)
    try:
        out = wait_out_of_isr(cluster, topic, victim, f"cut off ({mode})")
        writer.wait_progress(RECOVERY_S, f"every partition while node {victim} is cut off")
        time.sleep(max(0.0, t0 + LAG_MS / 1000 + 1.0 - time.monotonic()))
        report(f"(c) cut off node {victim} ({mode}; leader of {led}; controller {ctrl}): out of every ISR after "
               f"{out:.2f}s, healed after {time.monotonic() - t0:.1f}s")
    finally:
        cluster.mesh.heal(victim)
    wait_full_isr(cluster, topic, f"node {victim} back in sync after the heal")
    writer.wait_progress(RECOVERY_S, f"after node {victim} rejoined")


def stop_and_verify(cluster, topic: str, writer: SequentialProducer, report) -> dict:
    writer.stop()
    report(f"producer: {writer.summary()}")
    assert writer.fatal is None, f"idempotent producer failed fatally: {writer.fatal}"
    assert writer.unflushed == 0, f"{writer.unflushed} records without a delivery report"
    wait_full_isr(cluster, topic, "before reading back")
    log = read_partitions(cluster.bootstrap, topic, PARTITIONS)
    report("read back: " + check_log(log, writer.acked))
    return log


# -- the tests -----------------------------------------------------------------------------------------


def test_acks_all_records_survive_kill_pause_and_partition(cluster):
    topic = "faults"
    create_topic(cluster, topic)
    writer = SequentialProducer(cluster.bootstrap, topic, PARTITIONS).start()
    try:
        run_faults(cluster, topic, writer, print)
    except BaseException:
        writer.stop(flush_timeout=5)
        print(f"producer: {writer.summary()}")
        raise
    log = stop_and_verify(cluster, topic, writer, print)
    assert all(len(log[p]) > 0 for p in PARTITIONS)


def test_group_committed_offsets_never_go_backwards_through_faults(cluster):
    topic = "faults-group"
    create_topic(cluster, topic)
    writer = SequentialProducer(cluster.bootstrap, topic, PARTITIONS).start()
    reader = GroupReader(cluster.bootstrap, topic, "faults-readers", PARTITIONS).start()
    try:
        wait_until(lambda: len(reader.commits) >= 3, RECOVERY_S, "the group member consuming and committing")
        run_faults(cluster, topic, writer, lambda line: print(line, "| group:", reader.status()), BLACKHOLE)
    except BaseException:
        writer.stop(flush_timeout=5)
        reader.stop()
        print(f"producer: {writer.summary()}")
        raise
    try:
        log = stop_and_verify(cluster, topic, writer, print)
        end = {p: (log[p][-1][0] + 1 if log[p] else 0) for p in PARTITIONS}
        deadline = time.monotonic() + RECOVERY_S
        while not all(reader.committed_now().get(p, -1) >= end[p] for p in PARTITIONS):
            assert time.monotonic() < deadline, (
                f"the group did not commit up to the end of the log {end} within {RECOVERY_S}s: committed "
                f"{reader.committed_now()}; {reader.status()}")
            time.sleep(0.1)
    finally:
        reader.stop()
    backwards = committed_offset_violations(reader.monitor)
    assert not backwards, "; ".join(backwards)
    print(f"group: {group_load.summary(reader.monitor)}, {reader.commit_errors} failed commits")
    # every record the member saw is in the final log at that offset (no read above the high
    # watermark of a record that was truncated later), and it saw every acknowledged record
    at = {p: dict(log[p]) for p in PARTITIONS}
    phantom = [(p, o, v) for p, o, v in reader.consumed if at[p].get(o) != v]
    assert not phantom, f"{len(phantom)} consumed records not in the final log, e.g. {phantom[:5]}"
    seen = {(p, decode(v)[1]) for p, _o, v in reader.consumed}
    missed = [(p, s) for p in PARTITIONS for s, _o in writer.acked[p] if (p, s) not in seen]
    assert not missed, f"{len(missed)} acknowledged records never consumed by the group, e.g. {missed[:5]}"


def test_leader_failover_time_after_kill9(cluster):
    """Time from kill -9 of a partition leader to the first successful acks=all produce of a new
    record on each partition it led (printed; bench/replication.py measures it over 20 trials)."""
    topic = "failover"
    create_topic(cluster, topic)
    writer = SequentialProducer(cluster.bootstrap, topic, PARTITIONS).start()
    try:
        writer.wait_progress(RECOVERY_S, "before the kill", records=20)
        victim = leader_of(cluster, topic, 0)
        times = kill_leader_and_time_failover(cluster, writer, topic, victim, timeout=RECOVERY_S)
        print(f"failover after kill -9 of node {victim}: " +
              ", ".join(f"partition {p} {t * 1000:.0f} ms" for p, t in sorted(times.items())) +
              f"; max {max(times.values()) * 1000:.0f} ms")
        writer.wait_progress(RECOVERY_S, "every partition after the failover")
        cluster.restart(victim)
        wait_full_isr(cluster, topic, f"node {victim} back in sync")
    except BaseException:
        writer.stop(flush_timeout=5)
        print(f"producer: {writer.summary()}")
        raise
    stop_and_verify(cluster, topic, writer, print)
