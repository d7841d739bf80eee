"""Shared fixtures: a real kcompat broker process per test module or per test."""

from __future__ import annotations

import pytest

from tests.support.broker_process import BrokerProcess


def pytest_collection_modifyitems(config, items):
    """pytest-xdist (``-n 2 --dist loadgroup``, pyproject.toml) keeps each test file on one worker,
    so module-scoped brokers start once, and every Spark test on one worker: they share one
    session-scoped SparkSession and broker, and two JVMs resolving the connector into one Ivy cache
    at once would race."""
    for item in items:
        path = item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group("spark" if path.startswith("tests/spark/") else path))


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """One broker for the whole test module (tests use distinct topic names)."""
    data = tmp_path_factory.mktemp("broker") / "data"
    with BrokerProcess(data) as b:
        yield b


@pytest.fixture
def fresh_broker(tmp_path):
    """A broker of its own, for tests that restart or kill it."""
    b = BrokerProcess(tmp_path / "data")
    b.start()
    yield b
    if b.proc is not None:
        try:
            b.stop()
        except Exception:
            b.kill9()
