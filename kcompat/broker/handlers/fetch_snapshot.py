"""FetchSnapshot (key 59): a follower too far behind fetches the leader's latest metadata snapshot (KIP-630).

Served on the controller listener only; the Raft core answers (``kcompat.kraft.raft``).
"""

from __future__ import annotations

from kcompat.broker.handlers._quorum import to_quorum, top_level_error
from kcompat.protocol.messages.fetch_snapshot import FetchSnapshotResponse

API_KEY = 59
MIN_VERSION = 0
MAX_VERSION = 1

handle = to_quorum
error_response = top_level_error(FetchSnapshotResponse)
