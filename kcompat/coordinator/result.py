"""The result of one call of a coordinator (Kafka's ``CoordinatorResult``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, TypeVar

R = TypeVar("R")


@dataclass
class CoordinatorResult(Generic[R]):
    """Records to append to the coordinator's internal topic partition(s), in order, and the
    replies to send once they are committed: ``(reply_to, response)`` pairs, ``reply_to`` being
    whatever the caller passed in (the runtime passes the future of the request). The records
    describe changes the coordinator has applied already or will apply when they are replayed;
    either way no reply is sent before its records are committed (DESIGN.md section 6)."""

    records: list[R] = field(default_factory=list)
    replies: list[tuple[object, object]] = field(default_factory=list)
