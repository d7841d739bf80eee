"""Scenarios of tests/broker/test_kafka_parity_reference.py: ``scenario(bootstrap)`` and
``check(ours, theirs)`` each, and :func:`until`, which their set-up steps share."""

from __future__ import annotations

import time

# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR: a coordinator that is
# being created or loaded; clients retry them
COORDINATOR_RETRIABLE = frozenset({14, 15, 16})


def until(call, what: str, ok=lambda answer: answer.error_code not in COORDINATOR_RETRIABLE,
          timeout_s: float = 60.0, interval_s: float = 0.1):
    """``call()``'s first answer that ``ok(answer)`` accepts (by default: an error code clients
    would not retry), asked every ``interval_s``; TimeoutError with ``what`` and the last answer
    after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        answer = call()
        if ok(answer):
            return answer
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: {answer}")
        time.sleep(interval_s)
