"""Vote (key 52): a candidate (or KIP-996 pre-vote prospective) asks this voter for its vote (KIP-595).

Served on the controller listener only; the Raft core answers (``kcompat.kraft.raft``).
"""

from __future__ import annotations

from kcompat.broker.handlers._quorum import to_quorum, top_level_error
from kcompat.protocol.messages.vote import VoteResponse

API_KEY = 52
MIN_VERSION = 0
MAX_VERSION = 1

handle = to_quorum
error_response = top_level_error(VoteResponse)
