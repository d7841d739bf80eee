"""Broker and topic settings of the tiered-storage tests, and what they look at on disk."""

from __future__ import annotations

from pathlib import Path

# short intervals so that copying and local retention happen within a test
TIERED_BROKER = {
    "remote.log.storage.system.enable": "true",
    "remote.log.manager.task.interval.ms": "200",
    "remote.log.manager.task.retry.backoff.ms": "100",
    "remote.log.manager.task.retry.backoff.max.ms": "1000",
    "rlmm.config.remote.log.metadata.topic.num.partitions": "5",
    "log.retention.check.interval.ms": "200",
    "log.segment.delete.delay.ms": "0",
}

TIERED_TOPIC = {
    "remote.storage.enable": "true",
    "segment.bytes": str(1024 * 1024),
    "local.retention.bytes": str(2 * 1024 * 1024),
    "file.delete.delay.ms": "0",
}


def local_log_bytes(partition_dir: Path) -> int:
    """Bytes of the ``.log`` files of a partition directory."""
    return sum(f.stat().st_size for f in partition_dir.glob("*.log"))


def remote_objects(root: Path, suffix: str) -> list[Path]:
    """Objects with ``suffix`` the local filesystem backend holds under ``root``."""
    return [p for p in root.rglob(f"*.{suffix}") if p.is_file()] if root.exists() else []
