"""Tiered storage broker configs (KIP-405; Kafka ``RemoteLogManagerConfig``): names, types,
defaults and update modes of Kafka 4.3 (whose thread-pool defaults changed in 4.0).

``implemented=True`` marks the ones :mod:`kcompat.broker.remote_log` acts on. The remote log
metadata manager's own settings are read, as in Kafka, with the ``rlmm.config.`` prefix
(``rlmm.config.remote.log.metadata.topic.num.partitions`` ...: :data:`RLMM_DEFAULTS`), and the
storage backend's with the ``rsm.config.`` prefix (:mod:`kcompat.tiered.backends`).
"""

from __future__ import annotations

from .keydef import BOOLEAN, CW, DOUBLE, INT, LONG, RO, STRING, ConfigKey
from .keydef import define as _define
from .types import LONG_MAX, at_least, between

_DOC = "Tiered storage setting (KIP-405)."
#: prefixes of the backend's (``rsm.config.``) and metadata manager's (``rlmm.config.``) settings
TIERED_PREFIXES = ("rsm.config.", "rlmm.config.")
_IGNORED = "Tiered storage setting (KIP-405; accepted, not acted on by kcompat)."

# (name, type, default, validator, mode, implemented)
_SPECS = [
    ("remote.log.storage.system.enable", BOOLEAN, False, None, RO, True),
    ("remote.log.storage.manager.class.name", STRING, None, None, RO, True),
    ("remote.log.storage.manager.class.path", STRING, None, None, RO, False),
    ("remote.log.storage.manager.impl.prefix", STRING, "rsm.config.", None, RO, True),
    ("remote.log.metadata.manager.class.name", STRING,
     "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager", None, RO, False),
    ("remote.log.metadata.manager.class.path", STRING, None, None, RO, False),
    ("remote.log.metadata.manager.impl.prefix", STRING, "rlmm.config.", None, RO, True),
    ("remote.log.metadata.manager.listener.name", STRING, None, None, RO, False),
    ("remote.log.index.file.cache.total.size.bytes", LONG, 1073741824, at_least(1), CW, False),
    ("remote.log.manager.thread.pool.size", INT, 2, at_least(1), RO, False),
    ("remote.log.manager.copier.thread.pool.size", INT, 10, at_least(1), CW, False),
    ("remote.log.manager.expiration.thread.pool.size", INT, 10, at_least(1), CW, False),
    ("remote.log.manager.follower.thread.pool.size", INT, 2, at_least(1), CW, False),
    ("remote.log.manager.task.interval.ms", LONG, 30000, at_least(1), RO, True),
    ("remote.log.reader.threads", INT, 10, at_least(1), CW, False),
    ("remote.log.reader.max.pending.tasks", INT, 100, at_least(1), RO, False),
    ("remote.log.manager.copy.max.bytes.per.second", LONG, LONG_MAX, at_least(1), CW, False),
    ("remote.log.manager.copy.quota.window.num", INT, 11, at_least(1), RO, False),
    ("remote.log.manager.copy.quota.window.size.seconds", INT, 1, at_least(1), RO, False),
    ("remote.log.manager.fetch.max.bytes.per.second", LONG, LONG_MAX, at_least(1), CW, False),
    ("remote.log.manager.fetch.quota.window.num", INT, 11, at_least(1), RO, False),
    ("remote.log.manager.fetch.quota.window.size.seconds", INT, 1, at_least(1), RO, False),
    ("remote.log.metadata.custom.metadata.max.bytes", INT, 128, at_least(0), RO, False),
    ("remote.fetch.max.wait.ms", INT, 500, at_least(1), RO, True),
    ("follower.fetch.last.tiered.offset.enable", BOOLEAN, False, None, CW, False),   # KIP-1023
    ("remote.list.offsets.request.timeout.ms", LONG, 30000, at_least(1), CW, True),   # read per ListOffsets
]

REMOTE_LOG_CONFIGS: list[ConfigKey] = [
    _define("log.local.retention.ms", LONG, -2, at_least(-2), CW, True,
            "Local retention (ms) of tiered topics; -2 = log.retention.ms."),
    _define("log.local.retention.bytes", LONG, -2, at_least(-2), CW, True,
            "Local retention (bytes) of tiered topics; -2 = log.retention.bytes."),
    *(_define(n, t, dflt, v, m, impl, _DOC if impl else _IGNORED) for (n, t, dflt, v, m, impl) in _SPECS),
    # Kafka 3.9's retry backoff of the copy and expiration tasks, which kcompat still acts on; Kafka
    # 4.0 removed the keys, so they are described only when set
    *(_define(n, t, dflt, v, RO, True, "Retry backoff of the tiered storage copy and expiration tasks (KIP-405).",
              internal=True)
      for (n, t, dflt, v) in (("remote.log.manager.task.retry.backoff.ms", LONG, 500, at_least(1)),
                              ("remote.log.manager.task.retry.backoff.max.ms", LONG, 30000, at_least(1)),
                              ("remote.log.manager.task.retry.jitter", DOUBLE, 0.2, between(0.0, 0.5)))),
]

#: ``TopicBasedRemoteLogMetadataManagerConfig`` settings (read with the ``rlmm.config.`` prefix)
#: and their defaults: the metadata topic's partitions, replication factor and retention, and
#: how long (ms) a writer waits for its record to be consumed / the topic to be ready.
RLMM_DEFAULTS = {
    "remote.log.metadata.topic.num.partitions": 50,
    "remote.log.metadata.topic.replication.factor": 3,
    "remote.log.metadata.topic.retention.ms": -1,
    "remote.log.metadata.consume.wait.ms": 120000,
    "remote.log.metadata.initialization.retry.max.timeout.ms": 120000,
    "remote.log.metadata.initialization.retry.interval.ms": 100,
}
