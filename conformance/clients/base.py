"""The client-driver interface shared by every client.

A driver turns suite-level operations (create a topic, produce these records with this codec and
acks level, fetch from an offset, look up an offset, consume in a group, ...) into calls of one
client implementation. Operations a client cannot express raise :class:`Unsupported`; scenarios only
register cases for clients that have the capability they need, so that never happens at run time
for a registered case.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class Unsupported(Exception):
    """The client has no way to perform this operation."""


@dataclass
class Rec:
    """A record to produce."""

    value: bytes | None
    key: bytes | None = None
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    timestamp_ms: int | None = None
    partition: int | None = None


@dataclass
class Consumed:
    """A record as a client returned it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    timestamp_ms: int | None = None
    timestamp_type: str | None = None  # "create", "log_append" or None if the client does not say

    def brief(self) -> tuple:
        return (self.partition, self.offset, self.key, self.value)


@dataclass
class GroupRun:
    """What a group consumer did: records consumed, assignments seen, offsets committed."""

    records: list[Consumed] = field(default_factory=list)
    assignments: list[list[tuple[str, int]]] = field(default_factory=list)  # each assignment seen, in order
    revocations: list[list[tuple[str, int]]] = field(default_factory=list)
    committed: dict[tuple[str, int], int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
ACKS = ("0", "1", "all")


class Driver:
    """Base class; see the module docstring. ``caps`` lists what the client can do."""

    name = "client"
    caps: frozenset[str] = frozenset()

    def __init__(self, ctx) -> None:
        self.ctx = ctx
        self.bootstrap = ctx.bootstrap

    def version(self) -> str:
        return "?"

    def close(self) -> None:
        pass

    # data plane ---------------------------------------------------------------------------------------
    def produce(self, topic: str, records: list[Rec], *, acks: str = "all", codec: str = "none",
                idempotent: bool = False, bootstrap: str | None = None, linger_ms: int = 5) -> list[int | None]:
        """Produce ``records`` in order; returns the offset of each (None where acks=0 gives none)."""
        raise Unsupported("produce")

    def fetch(self, topic: str, partition: int, offset: int | str, count: int, *, timeout_s: float = 20.0,
              isolation: str = "read_uncommitted") -> list[Consumed]:
        """Read ``count`` records from ``partition`` starting at ``offset`` (or "earliest")."""
        raise Unsupported("fetch")

    def fetch_from_timestamp(self, topic: str, partition: int, timestamp_ms: int, count: int, *,
                             timeout_s: float = 20.0) -> list[Consumed]:
        """Consume from the first record whose timestamp is >= ``timestamp_ms`` (ListOffsets, then fetch)."""
        offset = self.list_offset(topic, partition, timestamp_ms)
        if offset is None:
            return []
        return self.fetch(topic, partition, offset, count, timeout_s=timeout_s)

    def list_offset(self, topic: str, partition: int, spec: str | int) -> int | None:
        """``spec``: "earliest", "latest", "max" (max timestamp) or a timestamp in ms. None = no offset."""
        raise Unsupported("list_offset")

    # admin ---------------------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int, configs: dict[str, str] | None = None) -> None:
        raise Unsupported("create_topic")

    def delete_topic(self, name: str) -> None:
        raise Unsupported("delete_topic")

    def list_topics(self) -> set[str]:
        raise Unsupported("list_topics")

    def describe_topic(self, name: str) -> dict[int, dict]:
        """{partition: {"leader": id, "replicas": [...], "isr": [...]}}"""
        raise Unsupported("describe_topic")

    def create_partitions(self, name: str, total: int) -> None:
        raise Unsupported("create_partitions")

    def describe_configs(self, name: str) -> dict[str, dict]:
        """{config name: {"value": str | None, "source": str}} with every config of the topic."""
        raise Unsupported("describe_configs")

    def alter_configs(self, name: str, set_: dict[str, str], delete: list[str] = ()) -> None:
        raise Unsupported("alter_configs")

    def delete_records(self, name: str, partition: int, before: int) -> int:
        """Delete records below ``before``; returns the new low watermark."""
        raise Unsupported("delete_records")

    # groups ----------------------------------------------------------------------------------------------
    def group_consume(self, topic: str, group: str, count: int, *, timeout_s: float = 30.0,
                      commit: bool = True, **options) -> GroupRun:
        """Subscribe in ``group``, consume ``count`` records, commit their offsets, leave."""
        raise Unsupported("group_consume")

    def committed(self, group: str, topic: str, partitions: list[int]) -> dict[int, int | None]:
        raise Unsupported("committed")
