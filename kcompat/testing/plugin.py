"""pytest plugin: real Kafka-compatible brokers as fixtures (registered as ``kcompat`` through the
``pytest11`` entry point, so installing kcompat is all a test suite needs).

Fixtures
- ``kafka_broker``: a :class:`kcompat.testing.Broker` (single node), started once per session by
  default (``kcompat_scope``), ``bootstrap_servers`` for clients; brought back after a test that
  paused or killed it.
- ``kafka_cluster``: a :class:`kcompat.testing.Cluster` of 3 nodes (RF 3, ``min.insync.replicas``
  2, fast failure detection) with ``kill``/``restart``/``pause``/``resume`` by node id; shared like
  ``kafka_broker``, and healed after every test that used it (paused nodes resumed, killed ones
  restarted), so one test's faults never reach the next.
- ``kafka_topic``: the name of a fresh topic for this test on ``kafka_cluster`` if the test uses
  it, else on ``kafka_broker``; created before the test (every broker knows its leaders) and
  deleted after. ``@pytest.mark.kafka_topic(partitions=3, config={"cleanup.policy": "compact"})``
  chooses its shape.
- ``kafka_topic_factory``: ``make(partitions=1, config=None, name=None) -> name`` for tests that
  need several topics (all deleted after the test).

Options (command line or ini file)
- ``--kcompat-config KEY=VALUE`` (repeatable) / ``kcompat_config`` (one per line): broker properties
  with Kafka's names for every broker and cluster node the fixtures start.
- ``--kcompat-scope`` / ``kcompat_scope``: ``session`` (default), ``package``, ``module``, ``class``
  or ``function``: how long a broker or cluster lives.
- ``--kcompat-reset`` / ``kcompat_reset = true``: after each test that used ``kafka_broker`` or
  ``kafka_cluster``, delete every topic and group, so tests sharing one broker start from an empty
  one (a few requests, against seconds for a new broker).
- ``--kcompat-in-process`` / ``kcompat_in_process = true``: run ``kafka_broker`` on an event loop
  thread of the pytest process instead of a child process (no interpreter start).

Under pytest-xdist every worker starts its own brokers, on ports of its own.
"""

from __future__ import annotations

import re
import uuid

import pytest

SCOPES = ("session", "package", "module", "class", "function")
_TOPIC_CHARS = re.compile(r"[^a-zA-Z0-9._-]+")


def pytest_addoption(parser) -> None:
    """The ``--kcompat-...`` command-line options and their ini-file names."""
    group = parser.getgroup("kcompat", "kcompat Kafka fixtures")
    group.addoption("--kcompat-config", action="append", default=[], metavar="KEY=VALUE",
                    help="broker property for the kcompat fixtures' brokers (repeatable)")
    group.addoption("--kcompat-scope", choices=SCOPES, default=None,
                    help="lifetime of kafka_broker and kafka_cluster (default: session)")
    group.addoption("--kcompat-reset", action="store_true", default=None,
                    help="delete all topics and groups after each test that used kafka_broker or "
                         "kafka_cluster")
    group.addoption("--kcompat-in-process", action="store_true", default=None,
                    help="run kafka_broker in the pytest process (an event loop thread)")
    parser.addini("kcompat_config", type="linelist", default=[],
                  help="broker properties (KEY=VALUE, one per line) for the kcompat fixtures")
    parser.addini("kcompat_scope", default="session", help="lifetime of kafka_broker and kafka_cluster")
    parser.addini("kcompat_reset", type="bool", default=False,
                  help="delete all topics and groups after each test that used kafka_broker or kafka_cluster")
    parser.addini("kcompat_in_process", type="bool", default=False,
                  help="run kafka_broker in the pytest process (an event loop thread)")


def pytest_configure(config) -> None:
    """Declare the ``kafka_topic`` marker."""
    config.addinivalue_line(
        "markers", "kafka_topic(partitions=1, config=None, replication_factor=-1): shape of the "
                   "kafka_topic fixture's topic")


def _option(config, name: str):
    value = config.getoption(f"kcompat_{name}")
    return config.getini(f"kcompat_{name}") if value is None else value


def _scope(fixture_name: str, config) -> str:
    scope = _option(config, "scope")
    if scope not in SCOPES:
        raise pytest.UsageError(f"kcompat_scope must be one of {', '.join(SCOPES)}, not {scope!r}")
    return scope


def broker_config(config) -> dict[str, str]:
    """The ``KEY=VALUE`` properties of the ini file, then of the command line (which win)."""
    props: dict[str, str] = {}
    for item in [*config.getini("kcompat_config"), *config.getoption("kcompat_config")]:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise pytest.UsageError(f"kcompat config {item!r} is not KEY=VALUE")
        props[key.strip()] = value.strip()
    return props


@pytest.fixture(scope=_scope)
def kafka_broker(pytestconfig):
    """A running single-node kcompat broker (:class:`kcompat.testing.Broker`); clients connect to
    ``kafka_broker.bootstrap_servers``."""
    from kcompat.testing.embedded import Broker

    with Broker(broker_config(pytestconfig), in_process=bool(_option(pytestconfig, "in_process"))) as broker:
        yield broker


def _uses_broker(request) -> bool:
    """Whether the test uses ``kafka_broker``, directly or through a topic fixture (whose topics
    are on ``kafka_cluster`` when the test uses that)."""
    names = request.fixturenames
    return "kafka_broker" in names or ("kafka_cluster" not in names and
                                       ("kafka_topic" in names or "kafka_topic_factory" in names))


def _reset(target) -> None:
    left = target.reset()
    if left:
        raise AssertionError(f"kcompat_reset could not delete groups still in use: {left}")


@pytest.fixture(autouse=True)
def _kcompat_broker_after_test(request):
    """After each test that used ``kafka_broker``: resume or restart it if the test paused or
    killed it, and with ``kcompat_reset`` delete its topics and groups. The broker is requested
    before the test, so that whatever its scope it is torn down after this."""
    if not _uses_broker(request):
        yield
        return
    broker = request.getfixturevalue("kafka_broker")
    yield
    broker.heal()
    if _option(request.config, "reset"):
        _reset(broker)


@pytest.fixture(scope=_scope)
def _kcompat_cluster(pytestconfig):
    from kcompat.testing.embedded import Cluster

    with Cluster(3, broker_config(pytestconfig)) as cluster:
        yield cluster


@pytest.fixture
def kafka_cluster(_kcompat_cluster, pytestconfig):
    """A running 3-node kcompat cluster (:class:`kcompat.testing.Cluster`), whole at the start of
    every test: nodes a previous test killed or paused are back (and with ``kcompat_reset`` its
    topics and groups are gone)."""
    _kcompat_cluster.heal()
    yield _kcompat_cluster
    _kcompat_cluster.heal()
    if _option(pytestconfig, "reset"):
        _reset(_kcompat_cluster)


def _target(request):
    name = "kafka_cluster" if "kafka_cluster" in request.fixturenames else "kafka_broker"
    return request.getfixturevalue(name)


def _topic_name(request) -> str:
    base = _TOPIC_CHARS.sub("-", request.node.name)[:200].strip("-.") or "topic"
    return f"{base}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def kafka_topic_factory(request):
    """``make(partitions=1, config=None, name=None, replication_factor=-1) -> name``: create a
    fresh topic (on ``kafka_cluster`` if the test uses it, else ``kafka_broker``), deleted after
    the test."""
    target = _target(request)
    made: list[str] = []

    def make(partitions: int = 1, config=None, name: str | None = None, replication_factor: int = -1) -> str:
        topic = name or _topic_name(request)
        target.create_topic(topic, partitions, replication_factor, config)
        made.append(topic)
        return topic

    yield make
    if made:
        target.heal()     # a node the test paused or killed could not take part in the deletion
        target.delete_topics(*made)


@pytest.fixture
def kafka_topic(request, kafka_topic_factory) -> str:
    """The name of a fresh topic for this test; shape it with
    ``@pytest.mark.kafka_topic(partitions=..., config={...}, replication_factor=...)``."""
    marker = request.node.get_closest_marker("kafka_topic")
    kwargs = dict(marker.kwargs) if marker is not None else {}
    if marker is not None and marker.args:
        kwargs.setdefault("partitions", marker.args[0])
    return kafka_topic_factory(**kwargs)
