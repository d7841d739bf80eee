"""BeginQuorumEpoch (key 53): a new leader announces its epoch to the voters (KIP-595).

Served on the controller listener only; the Raft core answers (``kcompat.kraft.raft``).
"""

from __future__ import annotations

from kcompat.broker.handlers._quorum import to_quorum, top_level_error
from kcompat.protocol.messages.begin_quorum_epoch import BeginQuorumEpochResponse

API_KEY = 53
MIN_VERSION = 0
MAX_VERSION = 1

handle = to_quorum
error_response = top_level_error(BeginQuorumEpochResponse)
