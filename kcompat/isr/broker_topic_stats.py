"""Counters of the produce and fetch path and of ISR changes, kept as plain integers so that the
hot path pays a dict update (Kafka's BrokerTopicStats and ReplicaManager meters; exported by
:mod:`kcompat.broker.http.metrics` as the Prometheus JMX exporter names them)."""

from __future__ import annotations

from collections import defaultdict


class TopicCounters:
    """One topic's counters (Kafka's BrokerTopicMetrics): bytes (``bytes_in``, ``bytes_out``),
    records (``messages_in``) and requests (total and failed, produce and fetch)."""

    __slots__ = ("bytes_in", "bytes_out", "messages_in", "total_produce", "failed_produce", "total_fetch",
                 "failed_fetch", "bytes_rejected")

    def __init__(self) -> None:
        self.bytes_in = self.bytes_out = self.messages_in = 0
        self.total_produce = self.failed_produce = self.total_fetch = self.failed_fetch = 0
        self.bytes_rejected = 0


class BrokerTopicStats:
    """Per-topic counters and the broker's ISR shrink/expand counts."""

    def __init__(self) -> None:
        self.topics: defaultdict[str, TopicCounters] = defaultdict(TopicCounters)
        self.isr_shrinks = 0
        self.isr_expands = 0

    def produced(self, topic: str, nbytes: int, records: int) -> None:
        """A produce request's batch for ``topic`` appended: ``nbytes`` of ``records`` records."""
        c = self.topics[topic]
        c.total_produce += 1
        c.bytes_in += nbytes
        c.messages_in += records

    def produce_failed(self, topic: str, nbytes: int = 0) -> None:
        c = self.topics[topic]
        c.total_produce += 1
        c.failed_produce += 1
        c.bytes_rejected += nbytes

    def fetched(self, topic: str, nbytes: int, failed: bool = False) -> None:
        """A consumer fetch of one partition of ``topic`` returned ``nbytes`` of records."""
        c = self.topics[topic]
        c.total_fetch += 1
        c.bytes_out += nbytes
        if failed:
            c.failed_fetch += 1

    def isr_changed(self, before: frozenset[int], after: frozenset[int]) -> None:
        """A committed ISR change of a partition this broker leads (IsrShrinksPerSec,
        IsrExpandsPerSec). Kafka counts only the changes the leader proposes; kcompat also counts
        those the controller makes (a follower fenced or shut down), which an operator watching
        the metric expects to see."""
        if len(after) < len(before):
            self.isr_shrinks += 1
        elif len(after) > len(before):
            self.isr_expands += 1

    def forget(self, topic: str) -> None:
        """A deleted topic's counters go (Kafka removes its metrics)."""
        self.topics.pop(topic, None)
