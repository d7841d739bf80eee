"""Fixtures of the Spark tests: one kcompat broker and one local SparkSession for the whole session.

Starting Spark (a JVM, and Ivy resolving the Kafka connector from its cache) costs seconds, so every
test shares one SparkSession (``local[2]``) and one broker, with distinct topics, query names and
checkpoint directories.
"""

from __future__ import annotations

import pytest

from spark_it.session import build_session
from tests.support.broker_process import BrokerProcess


@pytest.fixture(scope="session")
def spark_broker(tmp_path_factory):
    """One broker for every Spark test; the log cleaner and retention check often, so that the
    compaction and retention tests do not wait long."""
    data = tmp_path_factory.mktemp("spark-broker") / "data"
    with BrokerProcess(data, {"log.cleaner.backoff.ms": "200", "log.retention.check.interval.ms": "500"}) as b:
        yield b


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession with the Kafka connector, shared by every Spark test."""
    session = build_session("kcompat-tests", "local[2]")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def bootstrap(spark_broker) -> str:
    """The shared broker's bootstrap address."""
    return spark_broker.bootstrap
