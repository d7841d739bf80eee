"""Run one scenario against Apache Kafka 4.3.1 and then against kcompat, for tests that compare
the two brokers' answers (``tests/**/test_*_reference.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, TypeVar

from conformance import maven
from conformance.reference import ReferenceKafka
from tests.support.broker_process import BrokerProcess

T = TypeVar("T")


def against_both(tmp_path: Path, scenario: Callable[[str], T]) -> tuple[T, T]:
    """``(kcompat's result, Kafka 4.3.1's result)`` of ``scenario(bootstrap)``, run first against a
    single-node Kafka 4.3.1 (jars from Maven Central, cached) and then against a zero-config
    kcompat process, one broker up at a time, each on its own data under ``tmp_path``."""
    kafka = ReferenceKafka(maven.resolve_kafka("4.3.1"), "4.3.1", Path(tmp_path / "kafka"))
    kafka.start()
    try:
        theirs = scenario(kafka.bootstrap)
    finally:
        kafka.stop()
    with BrokerProcess(tmp_path / "data") as b:
        ours = scenario(b.bootstrap)
    return ours, theirs
