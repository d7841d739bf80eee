"""EndQuorumEpoch (key 54): a resigning leader asks the voters to elect a successor at once (KIP-595).

Served on the controller listener only; the Raft core answers (``kcompat.kraft.raft``).
"""

from __future__ import annotations

from kcompat.broker.handlers._quorum import to_quorum, top_level_error
from kcompat.protocol.messages.end_quorum_epoch import EndQuorumEpochResponse

API_KEY = 54
MIN_VERSION = 0
MAX_VERSION = 1

handle = to_quorum
error_response = top_level_error(EndQuorumEpochResponse)
