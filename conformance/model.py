"""Results and the exceptions scenarios use to fail.

A case (one scenario run through one client) ends as ``pass`` or ``fail`` — there is no "skip".
A failure has a ``kind`` that tells why:

- ``assertion``: the broker answered, but not as Kafka would (the reason says what differed);
- ``prerequisite``: something the scenario needs is missing — an API the broker does not
  advertise, a restart the suite cannot perform, a client that is not installed;
- ``error``: an exception in a client or the scenario (the reason carries it);
- ``timeout``: the case did not finish in time and was killed with everything it started.

``observed`` holds values that should be the same on any conforming broker; the report compares
them between the broker under test and the reference Kafka. ``details`` holds anything else worth
showing (timings, tool output, measured numbers).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

PASS = "pass"
FAIL = "fail"


class CaseFailure(Exception):
    """Raised by a scenario: the case fails with ``reason``."""

    kind = "assertion"

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Prerequisite(CaseFailure):
    """Raised when something the scenario needs is missing; reported as a failing prerequisite."""

    kind = "prerequisite"


@dataclass
class CaseResult:
    """The outcome of one case on one target."""

    case_id: str
    scenario: str
    client: str
    area: str
    status: str
    kind: str = "ok"
    reason: str = ""
    observed: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "CaseResult":
        return cls(**d)


def jsonable(value: Any) -> Any:
    """Turn tuples, sets, bytes and other values into something json.dumps accepts, stably."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((jsonable(v) for v in value), key=repr)
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)
