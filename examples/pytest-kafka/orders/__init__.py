"""A tiny application: publishes orders as JSON keyed by customer and totals them per customer."""

from __future__ import annotations

import json


def encode(order: dict) -> tuple[bytes, bytes]:
    """(key, value) of an order record: the customer id, and the order as JSON."""
    return order["customer"].encode(), json.dumps(order, sort_keys=True).encode()


def totals(values: list[bytes]) -> dict[str, int]:
    """Sum of ``amount`` per customer over order records' values."""
    out: dict[str, int] = {}
    for value in values:
        order = json.loads(value)
        out[order["customer"]] = out.get(order["customer"], 0) + order["amount"]
    return out
