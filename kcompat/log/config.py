"""Per-topic log configuration (Kafka's ``LogConfig``, topic-level names in ``KAFKA_NAMES``)."""

from __future__ import annotations

import random
from dataclasses import dataclass, fields, replace
from typing import Mapping

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


@dataclass(frozen=True)
class LogConfig:
    """Log settings with Kafka's topic-config semantics and defaults.

    Sizes are bytes, times milliseconds. ``-1`` for ``retention_ms`` / ``retention_bytes`` means
    unlimited. ``cleanup_policy`` is Kafka's ``cleanup.policy`` (``"delete"``, ``"compact"`` or
    ``"compact,delete"``): time/size retention applies only when it contains ``delete``.
    Raises ValueError for values Kafka's ``LogConfig`` validator would reject.
    """

    segment_bytes: int = 1073741824          # segment.bytes
    segment_ms: int = 604800000              # segment.ms
    segment_jitter_ms: int = 0               # segment.jitter.ms
    segment_index_bytes: int = 10485760      # segment.index.bytes (max size of each index file)
    index_interval_bytes: int = 4096         # index.interval.bytes
    retention_ms: int = 604800000            # retention.ms
    retention_bytes: int = -1                # retention.bytes
    flush_messages: int = LONG_MAX           # flush.messages
    flush_ms: int = LONG_MAX                 # flush.ms
    file_delete_delay_ms: int = 60000        # file.delete.delay.ms
    cleanup_policy: str = "delete"           # cleanup.policy
    delete_retention_ms: int = 86400000      # delete.retention.ms (tombstones on compacted topics)
    min_compaction_lag_ms: int = 0           # min.compaction.lag.ms (KIP-58)
    max_compaction_lag_ms: int = LONG_MAX    # max.compaction.lag.ms (KIP-354)
    min_cleanable_dirty_ratio: float = 0.5   # min.cleanable.dirty.ratio
    remote_storage_enable: bool = False      # remote.storage.enable (KIP-405 tiered storage)
    local_retention_ms: int = -2             # local.retention.ms (-2: retention.ms)
    local_retention_bytes: int = -2          # local.retention.bytes (-2: retention.bytes)

    def __post_init__(self) -> None:
        # Kafka's LogConfig validators: segment.bytes >= 14, segment.ms >= 1,
        # segment.index.bytes >= 4, positions in the index are int32.
        if not 14 <= self.segment_bytes <= INT_MAX:
            raise ValueError(f"segment.bytes must be in [14, {INT_MAX}], got {self.segment_bytes}")
        if self.segment_ms < 1:
            raise ValueError(f"segment.ms must be >= 1, got {self.segment_ms}")
        if self.segment_jitter_ms < 0:
            raise ValueError("segment.jitter.ms must be >= 0")
        if not 4 <= self.segment_index_bytes <= INT_MAX:
            raise ValueError(f"segment.index.bytes must be in [4, {INT_MAX}]")
        if self.index_interval_bytes < 0:
            raise ValueError("index.interval.bytes must be >= 0")
        if self.retention_ms < -1:
            raise ValueError("retention.ms must be >= -1")
        if self.flush_messages < 1 or self.flush_ms < 0:
            raise ValueError("flush.messages must be >= 1 and flush.ms >= 0")
        if self.file_delete_delay_ms < 0:
            raise ValueError("file.delete.delay.ms must be >= 0")
        policies = {p.strip() for p in self.cleanup_policy.split(",") if p.strip()}
        if not policies or not policies <= {"delete", "compact"}:
            raise ValueError(f"invalid cleanup.policy {self.cleanup_policy!r}")
        if self.delete_retention_ms < 0:
            raise ValueError("delete.retention.ms must be >= 0")
        if self.min_compaction_lag_ms < 0:
            raise ValueError("min.compaction.lag.ms must be >= 0")
        if self.max_compaction_lag_ms < 1:
            raise ValueError("max.compaction.lag.ms must be >= 1")
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            raise ValueError("min.cleanable.dirty.ratio must be in [0, 1]")
        if self.local_retention_ms < -2 or self.local_retention_bytes < -2:
            raise ValueError("local.retention.ms and local.retention.bytes must be >= -2")

    @property
    def effective_local_retention_ms(self) -> int:
        """``local.retention.ms``, or ``retention.ms`` when it is -2 (Kafka
        ``LogConfig.localRetentionMs``); -1 = no limit."""
        return self.retention_ms if self.local_retention_ms == -2 else self.local_retention_ms

    @property
    def effective_local_retention_bytes(self) -> int:
        """``local.retention.bytes``, or ``retention.bytes`` when it is -2 (Kafka
        ``LogConfig.localRetentionBytes``); -1 = no limit."""
        return self.retention_bytes if self.local_retention_bytes == -2 else self.local_retention_bytes

    @property
    def delete_enabled(self) -> bool:
        """True when ``cleanup.policy`` contains ``delete`` (time/size retention applies)."""
        return "delete" in {p.strip() for p in self.cleanup_policy.split(",")}

    @property
    def compact_enabled(self) -> bool:
        """True when ``cleanup.policy`` contains ``compact`` (the log cleaner applies)."""
        return "compact" in {p.strip() for p in self.cleanup_policy.split(",")}

    @property
    def max_segment_ms(self) -> int:
        """Age after which the active segment rolls: ``segment.ms``, or ``max.compaction.lag.ms``
        if smaller on a compacted log (KIP-354; Kafka ``LogConfig.maxSegmentMs``)."""
        if self.compact_enabled and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    def random_segment_jitter(self) -> int:
        """Per-segment roll jitter in ms, as Kafka's ``LogConfig.randomSegmentJitter``."""
        if self.segment_jitter_ms == 0:
            return 0
        return random.randrange(min(self.segment_jitter_ms, self.segment_ms))

    @classmethod
    def from_properties(cls, props: Mapping[str, object], base: "LogConfig | None" = None) -> "LogConfig":
        """Build a config from Kafka topic-config names (``{"segment.bytes": "1024"}``), starting
        from ``base`` (default: Kafka's defaults). Unknown names are ignored (they belong to other
        layers, e.g. ``max.message.bytes``). Raises ValueError on a non-numeric value."""
        known = {f.name for f in fields(cls)}
        changes: dict[str, object] = {}
        for name, value in props.items():
            attr = KAFKA_NAMES.get(name)
            if attr is None or attr not in known:
                continue
            if attr == "cleanup_policy":
                changes[attr] = ",".join(value) if isinstance(value, (list, tuple)) else str(value)
            elif attr == "min_cleanable_dirty_ratio":
                changes[attr] = float(str(value))
            elif attr == "remote_storage_enable":
                changes[attr] = value if isinstance(value, bool) else str(value).strip().lower() == "true"
            else:
                changes[attr] = int(str(value))
        return replace(base or cls(), **changes)  # type: ignore[arg-type]


#: Kafka topic-config name -> LogConfig attribute.
KAFKA_NAMES: dict[str, str] = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "segment.jitter.ms": "segment_jitter_ms",
    "segment.index.bytes": "segment_index_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
    "file.delete.delay.ms": "file_delete_delay_ms",
    "cleanup.policy": "cleanup_policy",
    "delete.retention.ms": "delete_retention_ms",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "remote.storage.enable": "remote_storage_enable",
    "local.retention.ms": "local_retention_ms",
    "local.retention.bytes": "local_retention_bytes",
}
