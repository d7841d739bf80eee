"""Shared fixtures: a real kcompat broker process per test module or per test."""

from __future__ import annotations

import os
import sys
import tempfile

import pytest
from hypothesis import HealthCheck, settings

from tests.support.broker_process import BrokerProcess

# Hypothesis's per-example deadline (200 ms) and its too-slow health check are timing assertions:
# on a loaded machine an example that takes 0.1 ms can take a second. Speed lives in bench/.
settings.register_profile("kcompat", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("kcompat")

SPARK = "tests/spark/"

# Where the environment forbids bytecode files (PYTHONDONTWRITEBYTECODE, as on this project's CI
# machines), every broker process a test starts compiles kcompat's modules again: about 0.3 s of
# CPU per start (bench/README.md, fixture_start), over thousands of starts. The suite keeps the
# bytecode in a cache outside the checkout instead (Python's own PYTHONPYCACHEPREFIX; stale
# entries are detected by source mtime and size, writes are atomic renames).
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
    os.environ.setdefault("PYTHONPYCACHEPREFIX", os.path.join(tempfile.gettempdir(), "kcompat-pycache"))
    sys.pycache_prefix = os.environ["PYTHONPYCACHEPREFIX"]
    sys.dont_write_bytecode = False

pytest_plugins = ["pytester"]   # tests/testing runs the kcompat pytest plugin in inner pytest sessions


def pytest_collection_modifyitems(config, items):
    """The Spark tests first: they are the longest unit of work (about 3 minutes), so a worker
    starts them at once rather than leaving the other idle at the end (tests/support/xdist_scopes.py)."""
    items.sort(key=lambda item: not item.nodeid.startswith(SPARK))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Units of work for the xdist workers: a test file each, the Spark tests together."""
    from tests.support.xdist_scopes import FileScopeScheduling
    return FileScopeScheduling(config, log)


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
