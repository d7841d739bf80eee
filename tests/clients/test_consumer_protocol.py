"""Kafka 4's consumer group protocol (KIP-848, ``group.protocol=consumer``) with unmodified clients
against a kcompat process: Kafka 4.3.1's Java consumer (VerifiableConsumer, its JSON events say
what each member was assigned, revoked and read), librdkafka through confluent-kafka, and Kafka
4.3.1's ``kafka-consumer-groups.sh --describe`` for a consumer group and a classic group."""

from __future__ import annotations

import time
import uuid

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from conformance import maven
from conformance.clients.java import JavaTools, _apply_event, json_events
from conformance.clients.members import Member
from kcompat.testing import Broker
from kcompat.testing.process import wait_for

GROUP_CONFIGS = {"group.consumer.session.timeout.ms": "6000", "group.consumer.min.session.timeout.ms": "6000",
                 "group.consumer.heartbeat.interval.ms": "500", "group.consumer.min.heartbeat.interval.ms": "500",
                 "group.initial.rebalance.delay.ms": "0"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with Broker(GROUP_CONFIGS) as b:
        yield b


@pytest.fixture(scope="module")
def tools(tmp_path_factory):
    return JavaTools(str(maven.resolve_kafka("4.3.1")), tmp_path_factory.mktemp("java"))


class Java4Member(Member):
    """Kafka 4.3.1's VerifiableConsumer with ``--group-protocol CONSUMER`` (committing after each
    batch, as the tool does)."""

    def __init__(self, tools: JavaTools, bootstrap: str, topic: str, group: str, name: str) -> None:
        super().__init__()
        self.topic = topic
        args = ["--bootstrap-server", bootstrap, "--topic", topic, "--group-id", group, "--group-protocol",
                "CONSUMER", "--reset-policy", "earliest", "--verbose"]
        self._proc = tools.background("org.apache.kafka.tools.VerifiableConsumer", args, on_line=self._line,
                                      name=name)

    def _line(self, line: str) -> None:
        for e in json_events([line]):
            _apply_event(e, member=self, topic_default=self.topic)

    def stop(self, leave: bool = True) -> None:
        self._proc.stop(grace=20)

    def crash(self) -> None:
        self._proc.proc.kill()
        self._proc.stop()


def produce(bootstrap: str, topic: str, values: range) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in values:
        p.produce(topic, b"%d" % i, partition=i % 6)
    assert p.flush(30) == 0


def create(bootstrap: str, topic: str, partitions: int = 6) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result arrives
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)


def owners(members: list[Member]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for i, m in enumerate(members):
        for _, p in m.current():
            out.setdefault(p, []).append(i)
    return out


def settled(members: list[Member], partitions: int = 6) -> bool:
    """Every partition owned by exactly one member, and the members' shares differ by at most 1."""
    o = owners(members)
    counts = [len(m.current()) for m in members]
    return sorted(o) == list(range(partitions)) and all(len(v) == 1 for v in o.values()) and \
        max(counts) - min(counts) <= 1


@pytest.mark.timeout(1200)  # the first run on a machine resolves Kafka 4.3.1's jars from Maven Central
def test_java_4_consumers_share_move_and_rebalance_incrementally(broker, tools):
    bootstrap = broker.bootstrap_servers
    topic, group = f"kip848-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    create(bootstrap, topic)
    produce(bootstrap, topic, range(600))
    members = [Java4Member(tools, bootstrap, topic, group, f"m{i}") for i in range(3)]
    try:
        wait_for(lambda: settled(members) and sum(len(m.consumed()) for m in members) >= 600, 60,
                 what="three members sharing the six partitions and reading all 600 records")
        read = [(r.partition, r.offset) for m in members for r in m.consumed()]
        assert sorted(read) == sorted(set(read)) and len(read) == 600          # each record exactly once
        assert all(len(m.current()) == 2 for m in members)

        # a fourth member joins: it gets partitions, the others give up only those it takes
        before = [(set(m.current()), len(m.event_log())) for m in members]
        members.append(Java4Member(tools, bootstrap, topic, group, "m3"))
        wait_for(lambda: settled(members) and members[3].current(), 30, what="the fourth member's partitions")
        for m, (had, seen) in zip(members[:3], before):
            revoked = {tp for kind, parts in m.event_log()[seen:] if kind == "revoked" for tp in parts}
            assert revoked <= set(members[3].current()), (revoked, members[3].current())
            assert had - revoked <= set(m.current())                       # what stays is never revoked

        # kill -9 of one member: its partitions move within the session timeout (6 s)
        victim = members.pop(0)
        lost = set(victim.current())
        killed_at = time.monotonic()
        victim.crash()
        wait_for(lambda: settled(members) and lost <= {tp for m in members for tp in m.current()}, 30,
                 what="the killed member's partitions on the others")
        assert time.monotonic() - killed_at < 6 + 10
        produce(bootstrap, topic, range(600, 1200))
        wait_for(lambda: {int(r.value) for m in members + [victim] for r in m.consumed()} >= set(range(1200)), 60,
                 what="every record read after the kill")
    finally:
        for m in members:
            m.stop()


def test_librdkafka_consumer_protocol_and_a_regex_subscription_that_finds_a_new_topic(broker):
    bootstrap = broker.bootstrap_servers
    prefix = f"rx{uuid.uuid4().hex[:6]}"
    create(bootstrap, f"{prefix}-a")
    produce(bootstrap, f"{prefix}-a", range(60))
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{prefix}", "group.protocol": "consumer",
                     "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 1000})
    c.subscribe([f"^{prefix}-.*"])
    got: list[tuple[str, int]] = []
    try:
        deadline = time.monotonic() + 60
        while len(got) < 60 and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append((m.topic(), int(m.value())))
        assert sorted(v for _, v in got) == list(range(60))
        create(bootstrap, f"{prefix}-b", 2)                 # created after the subscription
        p = ck.Producer({"bootstrap.servers": bootstrap})
        for i in range(20):
            p.produce(f"{prefix}-b", b"%d" % (1000 + i))
        assert p.flush(30) == 0
        while len(got) < 80 and time.monotonic() < deadline + 30:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append((m.topic(), int(m.value())))
        assert sorted(v for t, v in got if t == f"{prefix}-b") == list(range(1000, 1020))
        assert {p.topic for p in c.assignment()} == {f"{prefix}-a", f"{prefix}-b"}
    finally:
        c.close()


@pytest.mark.timeout(1200)
def test_kafka_consumer_groups_describes_both_kinds_of_group(broker, tools):
    bootstrap = broker.bootstrap_servers
    topic = f"desc-{uuid.uuid4().hex[:6]}"
    create(bootstrap, topic)
    produce(bootstrap, topic, range(60))
    consumers = {}
    try:
        for protocol in ("consumer", "classic"):
            c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"{protocol}-{topic}",
                             "group.protocol": protocol, "auto.offset.reset": "earliest"})
            c.subscribe([topic])
            n = 0
            deadline = time.monotonic() + 30
            while n < 60 and time.monotonic() < deadline:
                m = c.poll(0.2)
                n += m is not None and m.error() is None
            c.commit(asynchronous=False)
            consumers[protocol] = c
        for protocol, c in consumers.items():
            c.poll(0.5)
            res = tools.run("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
                            ["--bootstrap-server", bootstrap, "--describe", "--group", f"{protocol}-{topic}"],
                            timeout=60)
            rows = [line.split() for line in res.stdout.splitlines() if topic in line]
            assert len(rows) == 6, res.stdout
            assert all(r[3] == r[4] for r in rows) and sum(int(r[3]) for r in rows) == 60   # no lag
            state = tools.run("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
                              ["--bootstrap-server", bootstrap, "--describe", "--group", f"{protocol}-{topic}",
                               "--state"], timeout=60)
            assert "Stable" in state.stdout and ("UNIFORM" in state.stdout.upper()) == (protocol == "consumer"), \
                state.stdout
    finally:
        for c in consumers.values():
            c.close()


def java_member(tools, bootstrap: str, topic: str, group: str, name: str, protocol: str) -> Member:
    if protocol == "CONSUMER":
        return Java4Member(tools, bootstrap, topic, group, name)
    m = Java4Member.__new__(Java4Member)
    Member.__init__(m)
    m.topic = topic
    m._proc = tools.background("org.apache.kafka.tools.VerifiableConsumer", [
        "--bootstrap-server", bootstrap, "--topic", topic, "--group-id", group, "--group-protocol", "CLASSIC",
        "--assignment-strategy", "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
        "--session-timeout", "10000", "--reset-policy", "earliest", "--verbose"], on_line=m._line, name=name)
    return m


@pytest.mark.timeout(1200)
def test_rolling_upgrade_to_the_consumer_protocol_and_back_keeps_consuming(broker, tools):
    """KIP-848's online migration with Java 4.3.1 consumers restarted one at a time: classic ->
    mixed -> consumer protocol -> mixed -> classic. Every record is read and the group's committed
    offsets end at the log end."""
    bootstrap = broker.bootstrap_servers
    topic, group = f"migrate-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    create(bootstrap, topic)
    members = [java_member(tools, bootstrap, topic, group, f"a{i}", "CLASSIC") for i in range(2)]
    everyone = list(members)
    produced = 0
    try:
        for step, (index, protocol) in enumerate([(None, None), (0, "CONSUMER"), (1, "CONSUMER"),
                                                  (0, "CLASSIC"), (1, "CLASSIC")]):
            if index is not None:
                members[index].stop()
                members[index] = java_member(tools, bootstrap, topic, group, f"s{step}", protocol)
                everyone.append(members[index])
            wait_for(lambda: settled(members), 60, what=f"step {step}: both members sharing the partitions")
            produce(bootstrap, topic, range(produced, produced + 300))
            produced += 300
            wait_for(lambda: {int(r.value) for m in everyone for r in m.consumed()} >= set(range(produced)), 60,
                     what=f"step {step}: every record read")
        res = tools.run("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
                        ["--bootstrap-server", bootstrap, "--describe", "--group", group], timeout=60)
        rows = [line.split() for line in res.stdout.splitlines() if topic in line]
        assert len(rows) == 6 and sum(int(r[3]) for r in rows) == produced, res.stdout
        log = broker.log_text()
        assert f"group {group}: the classic group (generation" in log           # upgraded with members
        assert f"group {group}: the last consumer-protocol member left" in log  # and downgraded
    finally:
        for m in members:
            m.stop()
