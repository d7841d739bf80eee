"""Configuration of the Raft core, with Kafka's ``QuorumConfig`` names and defaults."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class RaftConfig:
    """Settings of one replica of the ``__cluster_metadata`` quorum.

    ``voters`` is ``controller.quorum.voters`` (ids only; addresses belong to the transport). A node
    whose ``node_id`` is not a voter is an observer (a broker replicating the metadata log).
    """

    node_id: int
    voters: frozenset[int]
    cluster_id: str
    # controller.quorum.election.timeout.ms: a voter without a leader waits a random time in
    # [timeout, 2 * timeout) before starting an election (KIP-595).
    election_timeout_ms: int = 1000
    # controller.quorum.fetch.timeout.ms: a follower that has not fetched successfully from its
    # leader for this long starts an election; the leader resigns after 1.5x of it without fetches
    # from a majority (check quorum, KAFKA-15489).
    fetch_timeout_ms: int = 2000
    # controller.quorum.election.backoff.max.ms: cap of the exponential backoff after a lost election.
    election_backoff_max_ms: int = 1000
    # controller.quorum.request.timeout.ms and controller.quorum.retry.backoff.ms.
    request_timeout_ms: int = 2000
    retry_backoff_ms: int = 20
    # KafkaRaftClient.MAX_FETCH_WAIT_MS: how long the leader parks a Fetch with no new data.
    fetch_max_wait_ms: int = 500
    # KafkaRaftClient.MAX_FETCH_SIZE_BYTES: Fetch max_bytes and FetchSnapshot max_bytes.
    fetch_max_bytes: int = 8 * 1024 * 1024
    fetch_snapshot_max_bytes: int = 8 * 1024 * 1024
    # KIP-996 pre-vote: a replica checks it could win before bumping the epoch.
    pre_vote: bool = True
    # Delete the log before a snapshot as soon as the application creates it (Kafka deletes
    # segments below the latest snapshot by metadata.log retention; the simulation uses this).
    delete_log_on_snapshot: bool = True
    topic_name: str = field(default="__cluster_metadata")

    def __post_init__(self) -> None:
        if self.election_timeout_ms <= 0 or self.fetch_timeout_ms <= 0:
            raise ValueError("election and fetch timeouts must be positive")
        if self.request_timeout_ms <= self.fetch_max_wait_ms:
            raise ValueError("request timeout must exceed the fetch max wait")
        object.__setattr__(self, "voters", frozenset(self.voters))

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voters

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1
