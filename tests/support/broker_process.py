"""The broker process the tests start: :class:`kcompat.testing.process.BrokerProcess` (the same
class the pytest plugin and ``kcompat.testing.Broker`` use), run from the repository root."""

from __future__ import annotations

from pathlib import Path

from kcompat.testing.process import BrokerProcess as _BrokerProcess
from kcompat.testing.process import wait_for  # noqa: F401 - re-exported for the tests

ROOT = Path(__file__).resolve().parents[2]


class BrokerProcess(_BrokerProcess):
    """A broker subprocess whose working directory is the repository root."""

    def __init__(self, *args, cwd: Path | None = ROOT, **kwargs) -> None:
        super().__init__(*args, cwd=cwd, **kwargs)
