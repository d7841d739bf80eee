"""kcompat's segment log: Kafka's on-disk layout (``<dir>/<topic>-<partition>/<offset>.log``,
``.index``, ``.timeindex``, ``.snapshot``, checkpoints) with plain file I/O.

Imports from kcompat only ``kcompat.protocol.records`` / ``kcompat.protocol.compression``; no
asyncio, no sockets, no threads (the log cleaner's work runs in worker processes).
"""

from kcompat.log.checkpoint import (
    read_meta_properties, read_offset_checkpoint, read_partition_metadata, topic_id_from_str,
    topic_id_to_str, write_meta_properties, write_offset_checkpoint, write_partition_metadata,
)
from kcompat.log.cleaner import CLEANER_OFFSET_CHECKPOINT, CleanOutcome, LogCleaner, LogToClean
from kcompat.log.compaction import CleanResult, CleanStats, CleanTask, run_clean_task
from kcompat.log.config import KAFKA_NAMES, LogConfig
from kcompat.log.errors import (
    CheckpointError, CorruptLogError, LogClosedError, LogDirError, LogError, LogStorageError,
    OffsetOutOfRangeError,
)
from kcompat.log.file_records import FileRecords
from kcompat.log.index import OffsetIndex, TimeIndex
from kcompat.log.leader_epoch import (
    LEADER_EPOCH_CHECKPOINT, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, EpochEntry, LeaderEpochFileCache,
)
from kcompat.log.log import Log
from kcompat.log.log_flush import FlushPlan
from kcompat.log.manager import LogManager, parse_topic_partition, remove_tree
from kcompat.log.segment import LogSegment

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT", "CleanOutcome", "CleanResult", "CleanStats", "CleanTask",
    "LogCleaner", "LogToClean", "run_clean_task",
    "EpochEntry", "LEADER_EPOCH_CHECKPOINT", "LeaderEpochFileCache", "UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET",
    "CheckpointError", "CorruptLogError", "FileRecords", "FlushPlan", "KAFKA_NAMES", "Log", "LogClosedError", "LogConfig",
    "LogDirError", "LogError", "LogManager", "LogStorageError", "LogSegment", "OffsetIndex", "OffsetOutOfRangeError",
    "TimeIndex", "parse_topic_partition", "remove_tree", "read_meta_properties", "read_offset_checkpoint",
    "read_partition_metadata", "topic_id_from_str", "topic_id_to_str", "write_meta_properties",
    "write_offset_checkpoint", "write_partition_metadata",
]
