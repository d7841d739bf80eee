"""Shared fixtures: a real kcompat broker process per test module or per test."""

from __future__ import annotations

import pytest

from tests.support.broker_process import BrokerProcess


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
