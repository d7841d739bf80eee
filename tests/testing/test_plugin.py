"""The kcompat pytest plugin (kcompat/testing/plugin.py), run as users run it: inner pytest sessions
(pytester, each in a subprocess) whose tests use the fixtures with real Kafka clients.

Inner tests pass values to the outer test through files in the pytester directory (``record``),
since each inner session is a separate process.
"""

from __future__ import annotations

import json
import os
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

RECORD = '''
import json, os, pathlib

def record(name, value):
    """Append ``value`` to <rootdir>/<name>.jsonl (read back by the outer test)."""
    with open(pathlib.Path(os.environ["KCOMPAT_TEST_OUT"]) / f"{name}.jsonl", "a") as f:
        f.write(json.dumps(value) + "\\n")
'''


@pytest.fixture
def inner(pytester, monkeypatch):
    """pytester with a ``record`` helper module for inner tests and the output dir in the env.

    The inner sessions import this checkout's kcompat (its root first on PYTHONPATH): the
    installed distribution supplies the ``pytest11`` entry point, but an editable install may
    point at another checkout, or at none left on this machine."""
    monkeypatch.setenv("KCOMPAT_TEST_OUT", str(pytester.path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    pytester.makepyfile(recorder=RECORD)
    pytester.syspathinsert()
    return pytester


def recorded(pytester, name: str) -> list:
    path = pytester.path / f"{name}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def run(pytester, *args: str):
    """An inner session in a subprocess: the plugin as an installed entry point loads it."""
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "0", *args, timeout=240)


def test_the_plugin_is_registered_through_the_pytest11_entry_point(inner):
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["pytest11"]
    assert declared == {"kcompat": "kcompat.testing.plugin"}
    installed = {e.name: e.value for e in entry_points(group="pytest11")}
    assert installed.get("kcompat") == "kcompat.testing.plugin"
    # an inner session with no conftest.py and no -p has the fixtures and the options
    result = run(inner, "--help")
    result.stdout.fnmatch_lines(["*--kcompat-config=KEY=VALUE*", "*--kcompat-reset*", "*kcompat_scope*"])
    result = run(inner, "--fixtures")
    for name in ("kafka_broker", "kafka_cluster", "kafka_topic", "kafka_topic_factory"):
        result.stdout.fnmatch_lines([f"{name}*kcompat/testing/plugin.py*"])


def test_kafka_broker_is_shared_and_kafka_topic_is_fresh_per_test(inner):
    inner.makepyfile(test_inner='''
        import confluent_kafka, kafka
        from kcompat.testing import admin
        from recorder import record

        def test_confluent(kafka_broker, kafka_topic):
            record("seen", [kafka_broker.bootstrap_servers, kafka_topic])
            assert admin.list_topics(kafka_broker.bootstrap_servers) == [kafka_topic]
            p = confluent_kafka.Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
            acks = []
            p.produce(kafka_topic, b"v1", key=b"k1", on_delivery=lambda e, m: acks.append((e, m.offset())))
            assert p.flush(30) == 0 and acks == [(None, 0)]

        def test_kafka_python(kafka_broker, kafka_topic):
            record("seen", [kafka_broker.bootstrap_servers, kafka_topic])
            assert admin.list_topics(kafka_broker.bootstrap_servers) == [kafka_topic]   # the last one is gone
            producer = kafka.KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers)
            producer.send(kafka_topic, b"v2").get(30)
            producer.close()
            consumer = kafka.KafkaConsumer(kafka_topic, bootstrap_servers=kafka_broker.bootstrap_servers,
                                           auto_offset_reset="earliest", consumer_timeout_ms=10000)
            m = next(consumer)        # the record, without waiting out consumer_timeout_ms after it
            assert (m.value, m.offset, consumer.highwater(kafka.TopicPartition(kafka_topic, 0))) == (b"v2", 0, 1)
            consumer.close()
    ''')
    result = run(inner)
    result.assert_outcomes(passed=2)
    (b1, t1), (b2, t2) = recorded(inner, "seen")
    assert b1 == b2                      # one broker for the session
    assert t1 != t2 and t1.startswith("test_confluent-") and t2.startswith("test_kafka_python-")


def test_kafka_topic_marker_shapes_the_topic_and_factory_makes_several(inner):
    inner.makepyfile(test_inner='''
        import pytest
        from confluent_kafka.admin import AdminClient, ConfigResource
        from recorder import record

        @pytest.mark.kafka_topic(partitions=3, config={"cleanup.policy": "compact", "retention.ms": 123456})
        def test_shape(kafka_broker, kafka_topic):
            admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap_servers})
            meta = admin.list_topics(kafka_topic, timeout=30)
            assert len(meta.topics[kafka_topic].partitions) == 3
            res = ConfigResource(ConfigResource.Type.TOPIC, kafka_topic)
            configs = admin.describe_configs([res])[res].result(30)
            assert configs["cleanup.policy"].value == "compact"
            assert configs["retention.ms"].value == "123456"

        def test_factory(kafka_broker, kafka_topic_factory):
            a = kafka_topic_factory(partitions=2)
            b = kafka_topic_factory(name="chosen-name")
            record("made", [a, b])
            assert sorted(kafka_broker.list_topics()) == sorted([a, b])

        def test_after(kafka_broker):
            assert kafka_broker.list_topics() == []    # the factory's topics were deleted
    ''')
    run(inner).assert_outcomes(passed=3)
    assert recorded(inner, "made")[0][1] == "chosen-name"


def test_reset_deletes_topics_and_groups_between_tests(inner):
    inner.makepyfile(test_inner='''
        import kafka
        from kcompat.testing import admin

        def test_leave_state(kafka_broker):
            bs = kafka_broker.bootstrap_servers
            producer = kafka.KafkaProducer(bootstrap_servers=bs)
            producer.send("auto-created", b"x").get(30)     # auto-created topic
            producer.close()
            consumer = kafka.KafkaConsumer("auto-created", bootstrap_servers=bs, group_id="g1",
                                           auto_offset_reset="earliest", consumer_timeout_ms=10000)
            m = next(consumer)        # the record, without waiting out consumer_timeout_ms after it
            assert (m.value, m.offset, consumer.highwater(kafka.TopicPartition("auto-created", 0))) == (b"x", 0, 1)
            consumer.commit()
            consumer.close()
            assert admin.list_groups(bs) == ["g1"] and kafka_broker.list_topics() == ["auto-created"]

        def test_clean(kafka_broker):
            assert kafka_broker.list_topics() == []
            assert admin.list_groups(kafka_broker.bootstrap_servers) == []
    ''')
    run(inner).assert_outcomes(passed=1, failed=1)        # without the option state leaks
    run(inner, "--kcompat-reset").assert_outcomes(passed=2)
    # a broker per test: it is reset before it is torn down, never fetched again after
    run(inner, "--kcompat-reset", "--kcompat-scope=function").assert_outcomes(passed=2)
    inner.makeini("[pytest]\nkcompat_reset = true\n")
    run(inner).assert_outcomes(passed=2)


def test_a_test_that_pauses_or_kills_the_shared_broker_leaves_it_running_for_the_next(inner):
    inner.makepyfile(test_inner='''
        import kafka
        from recorder import record

        def send(broker):
            producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
            producer.send("faults", b"x").get(30)
            producer.close()

        def test_pause(kafka_broker):
            send(kafka_broker)
            kafka_broker.pause()

        def test_kill(kafka_broker):
            send(kafka_broker)                      # resumed after the last test
            record("bs", kafka_broker.bootstrap_servers)
            kafka_broker.kill()

        def test_after(kafka_broker):
            record("bs", kafka_broker.bootstrap_servers)
            send(kafka_broker)                      # started again over its data
            consumer = kafka.KafkaConsumer("faults", bootstrap_servers=kafka_broker.bootstrap_servers,
                                           auto_offset_reset="earliest", consumer_timeout_ms=10000)
            got = [next(consumer) for _ in range(3)]   # without waiting out consumer_timeout_ms after them
            assert [(m.value, m.offset) for m in got] == [(b"x", 0), (b"x", 1), (b"x", 2)]
            assert consumer.highwater(kafka.TopicPartition("faults", 0)) == 3
            consumer.close()
    ''')
    run(inner).assert_outcomes(passed=3)
    first, second = recorded(inner, "bs")
    assert first == second                  # the same broker, on the same address


def test_scope_and_config_options(inner):
    inner.makepyfile(test_inner='''
        import kafka
        from recorder import record

        def test_one(kafka_broker):
            record("bs", kafka_broker.bootstrap_servers)
            producer = kafka.KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers)
            producer.send("auto", b"x").get(30)
            record("partitions", len(producer.partitions_for("auto")))
            producer.close()

        def test_two(kafka_broker):
            record("bs", kafka_broker.bootstrap_servers)
    ''')
    inner.makeini("[pytest]\nkcompat_config =\n    num.partitions=4\n    log.segment.bytes=1048576\n")
    run(inner, "--kcompat-scope=function", "--kcompat-config", "num.partitions=5").assert_outcomes(passed=2)
    first, second = recorded(inner, "bs")
    assert first != second                                   # a broker per test
    assert recorded(inner, "partitions") == [5]              # the command line wins over the ini file


def test_a_bad_broker_property_fails_the_fixture_with_the_brokers_message(inner):
    inner.makepyfile(test_inner='''
        def test_one(kafka_broker):
            pass
    ''')
    result = run(inner, "--kcompat-config", "num.partitions=many")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*num.partitions*"])


def test_in_process_broker_runs_on_a_thread_of_the_test_process(inner):
    inner.makepyfile(test_inner='''
        import threading
        import confluent_kafka

        def test_one(kafka_broker):
            assert "kcompat-broker" in [t.name for t in threading.enumerate()]
            p = confluent_kafka.Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
            acks = []
            p.produce("inproc", b"v", on_delivery=lambda e, m: acks.append(e))
            assert p.flush(30) == 0 and acks == [None]
    ''')
    run(inner, "--kcompat-in-process").assert_outcomes(passed=1)


def test_each_xdist_worker_gets_its_own_broker(inner):
    inner.makepyfile(test_inner='''
        import os
        import pytest
        import kafka
        from recorder import record

        @pytest.mark.parametrize("i", range(6))
        def test_produce(kafka_broker, kafka_topic, i):
            record("seen", [os.environ["PYTEST_XDIST_WORKER"], kafka_broker.bootstrap_servers])
            producer = kafka.KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers)
            producer.send(kafka_topic, b"x").get(30)
            producer.close()
    ''')
    result = inner.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "--dist", "load", timeout=240)
    result.assert_outcomes(passed=6)
    by_worker: dict[str, set] = {}
    for worker, bootstrap in recorded(inner, "seen"):
        by_worker.setdefault(worker, set()).add(bootstrap)
    assert len(by_worker) == 2, by_worker
    assert all(len(b) == 1 for b in by_worker.values()), by_worker          # one broker per worker
    assert len(set.union(*by_worker.values())) == 2, by_worker              # no two share one


def test_asyncio_tests_with_aiokafka(inner):
    inner.makepyfile(test_inner='''
        import pytest
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

        @pytest.mark.asyncio
        async def test_round_trip(kafka_broker, kafka_topic):
            producer = AIOKafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers)
            await producer.start()
            try:
                sent = await producer.send_and_wait(kafka_topic, b"hello", key=b"k")
            finally:
                await producer.stop()
            consumer = AIOKafkaConsumer(kafka_topic, bootstrap_servers=kafka_broker.bootstrap_servers,
                                        auto_offset_reset="earliest")
            await consumer.start()
            try:
                msg = await consumer.getone()
            finally:
                await consumer.stop()
            assert (msg.key, msg.value, msg.offset) == (b"k", b"hello", sent.offset)
    ''')
    run(inner, "-p", "asyncio").assert_outcomes(passed=1)


def test_kafka_cluster_survives_a_leader_kill_and_is_healed_for_the_next_test(inner):
    inner.makepyfile(test_inner='''
        import confluent_kafka
        import pytest
        from recorder import record

        @pytest.mark.kafka_topic(partitions=1)
        def test_kill_leader(kafka_cluster, kafka_topic):
            conf = {"bootstrap.servers": kafka_cluster.bootstrap_servers, "acks": "all",
                    "enable.idempotence": True}
            p = confluent_kafka.Producer(conf)
            acked = []

            def produce(n, start):
                for i in range(start, start + n):
                    p.produce(kafka_topic, b"%d" % i,
                              on_delivery=lambda e, m: acked.append(int(m.value())) if e is None else None)
                assert p.flush(60) == 0

            produce(50, 0)
            leader = kafka_cluster.leader_of(kafka_topic, 0)
            record("killed", leader)
            kafka_cluster.kill(leader)
            produce(50, 50)
            assert kafka_cluster.leader_of(kafka_topic, 0) not in (-1, leader)
            c = confluent_kafka.Consumer({"bootstrap.servers": kafka_cluster.bootstrap_servers,
                                          "group.id": "check", "auto.offset.reset": "earliest"})
            c.subscribe([kafka_topic])
            got = []
            while len(got) < 100:
                m = c.poll(30)
                assert m is not None, got
                assert m.error() is None, m.error()
                got.append(int(m.value()))
            c.close()
            assert got == sorted(acked) == list(range(100))

        def test_healed(kafka_cluster):
            record("live", [n.proc is not None for n in kafka_cluster.nodes])
            assert kafka_cluster.broker_ids(1) == [1, 2, 3]
    ''')
    run(inner).assert_outcomes(passed=2)
    assert recorded(inner, "live") == [[True, True, True]]


def test_kafka_cluster_restart_pause_and_reset_between_tests(inner):
    inner.makepyfile(test_inner='''
        import confluent_kafka
        from kcompat.testing import admin
        from recorder import record

        def produce(cluster, value):
            p = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
            p.produce("made-by-the-test", value)
            assert p.flush(60) == 0

        def test_faults(kafka_cluster):
            kafka_cluster.create_topic("made-by-the-test")          # no fixture deletes it
            produce(kafka_cluster, b"a")
            c = confluent_kafka.Consumer({"bootstrap.servers": kafka_cluster.bootstrap_servers,
                                          "group.id": "left-behind", "auto.offset.reset": "earliest",
                                          "enable.auto.commit": False})
            c.subscribe(["made-by-the-test"])
            m = c.poll(30)
            assert m is not None and m.error() is None, m
            c.commit(m, asynchronous=False)
            c.close()
            leader = kafka_cluster.leader_of("made-by-the-test")
            pid = kafka_cluster.node(leader).proc.pid
            kafka_cluster.restart(leader)          # a running node: SIGTERM, then started again
            assert kafka_cluster.node(leader).proc.pid != pid
            assert "shutdown complete" in kafka_cluster.node(leader).log_text()
            produce(kafka_cluster, b"b")
            other = next(n for n in (1, 2, 3) if n != kafka_cluster.leader_of("made-by-the-test"))
            kafka_cluster.pause(other)             # left paused for the fixture to resume
            record("paused", other)

        def test_next(kafka_cluster):
            record("live", [n.proc is not None for n in kafka_cluster.nodes])
            for node in (1, 2, 3):
                assert kafka_cluster.broker_ids(node) == [1, 2, 3]
            assert kafka_cluster.list_topics() == []                       # reset
            assert admin.list_groups(kafka_cluster.bootstrap_servers) == []
    ''')
    run(inner, "--kcompat-reset").assert_outcomes(passed=2)
    assert len(recorded(inner, "paused")) == 1
    assert recorded(inner, "live") == [[True, True, True]]


def test_the_readme_example_runs_as_written(inner):
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Kafka in your own tests (pytest plugin)", 1)[1]
    example = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert "def test_with_aiokafka" in example
    inner.makepyfile(test_greetings=example)
    run(inner, "-o", "asyncio_mode=auto").assert_outcomes(passed=3)
