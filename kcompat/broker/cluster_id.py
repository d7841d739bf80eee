"""Cluster ids (a module of its own so that tools can make one without importing the broker)."""

from __future__ import annotations

import base64
import uuid


def new_cluster_id() -> str:
    """A cluster id as ``kafka-storage random-uuid`` prints it (url-safe base64, no padding); like
    Kafka's ``Uuid.randomUuid`` never starting with "-", which a command line would take for an
    option."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid
