"""Fetch (key 1) on the controller listener: replication of ``__cluster_metadata-0`` between the
voters and to observer brokers (KIP-595), with diverging-epoch truncation and snapshot redirects.

Only the metadata partition is served here; client Fetches go to the broker listeners
(:mod:`kcompat.broker.handlers.fetch`).
"""

from __future__ import annotations

from kcompat.broker.handlers._quorum import to_quorum, top_level_error
from kcompat.protocol.messages.fetch import FetchResponse

API_KEY = 1
MIN_VERSION = 13   # topic ids (the metadata topic's fixed id), as Kafka's controllers
MAX_VERSION = 16

handle = to_quorum
error_response = top_level_error(FetchResponse)
