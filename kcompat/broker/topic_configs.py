"""A topic's effective configuration on this broker, and the views of it the log layer takes.

A topic's values are its overrides (ConfigRecords, in the metadata image) over the broker's
topic-level defaults (``log.retention.ms`` for ``retention.ms`` and so on: Kafka's
``LogConfig.fromProps`` over ``KafkaConfig.extractLogConfigMap``), typed by
:func:`kcompat.config.log_config_for`. The log layer takes two views of them: a
:class:`kcompat.log.LogConfig` (segments, retention, cleaning, tiering: Kafka's ``LogConfig``)
and an :class:`kcompat.isr.partition.AppendPolicy` (what a produced batch is checked against:
``max.message.bytes``, timestamps, compacted-topic keys). Both are read when asked, so a topic
config change applies to the next segment roll, retention pass or append.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kcompat.config import describe_topic, log_config_for
from kcompat.config.topic import INTERNAL_SEGMENT_BYTES, segment_size
from kcompat.isr.partition import AppendPolicy
from kcompat.log import LogConfig

if TYPE_CHECKING:   # types only
    from kcompat.config import BrokerConfig
    from kcompat.kraft.image import MetadataImage


class TopicConfigs:
    """Topic configuration views over ``image`` (the broker's metadata image, updated in place)
    and ``config`` (the broker's configuration, with its dynamic defaults)."""

    def __init__(self, image: MetadataImage, config: BrokerConfig) -> None:
        self.image = image
        self.config = config

    def topic_values(self, topic: str) -> dict:
        """``{name: typed value}`` of every topic config of ``topic`` (overrides over the
        broker's defaults); a topic the image does not know has the defaults."""
        return log_config_for(self.image.topic_configs(topic), self.config)

    def log_config_for(self, topic: str) -> LogConfig:
        """The topic's :class:`LogConfig` (sizes in bytes, times in ms); ``internal.segment.bytes``,
        when set, is the segment size instead of ``segment.bytes`` (Kafka's ``LogConfig.segmentSize``)."""
        v = self.topic_values(topic)
        return LogConfig(
            segment_bytes=segment_size(v["segment.bytes"], v[INTERNAL_SEGMENT_BYTES]),
            segment_ms=v["segment.ms"], segment_jitter_ms=v["segment.jitter.ms"],
            segment_index_bytes=v["segment.index.bytes"], index_interval_bytes=v["index.interval.bytes"],
            retention_ms=v["retention.ms"], retention_bytes=v["retention.bytes"],
            flush_messages=v["flush.messages"], flush_ms=v["flush.ms"],
            file_delete_delay_ms=v["file.delete.delay.ms"],
            cleanup_policy=",".join(v["cleanup.policy"]),
            delete_retention_ms=v["delete.retention.ms"], min_compaction_lag_ms=v["min.compaction.lag.ms"],
            max_compaction_lag_ms=v["max.compaction.lag.ms"],
            min_cleanable_dirty_ratio=v["min.cleanable.dirty.ratio"],
            remote_storage_enable=bool(v["remote.storage.enable"]) and self.config.get("remote.log.storage.system.enable"),
            local_retention_ms=v["local.retention.ms"], local_retention_bytes=v["local.retention.bytes"])

    def policy_for(self, topic: str) -> AppendPolicy:
        """What a batch produced to ``topic`` is checked against (Kafka's ``LogValidator`` inputs)."""
        v = self.topic_values(topic)
        return AppendPolicy(
            max_message_bytes=v["max.message.bytes"],
            log_append_time=v["message.timestamp.type"] == "LogAppendTime",
            timestamp_before_max_ms=v["message.timestamp.before.max.ms"],
            timestamp_after_max_ms=v["message.timestamp.after.max.ms"],
            compact="compact" in v["cleanup.policy"])

    def describe(self, overrides: dict, keys=None, include_synonyms=False, include_documentation=False):
        """DescribeConfigs entries of a topic with ``overrides`` (:func:`kcompat.config.describe_topic`)."""
        return describe_topic(overrides, self.config, include_synonyms=include_synonyms, keys=keys,
                              include_documentation=include_documentation)
