"""The table of broker configs kcompat knows: Kafka 4.3's names, types, defaults, validators and
dynamic update modes (kafka.apache.org/43/documentation "3.1 Broker Configs"; Kafka sources
``KafkaConfig``, ``ServerLogConfigs``, ``ReplicationConfigs``, ``KRaftConfigs``, ``QuorumConfig``,
``SocketServerConfigs``, ``GroupCoordinatorConfig``, ``TransactionLogConfigs``, ``CleanerConfig``,
``DynamicBrokerConfig``, ``GroupCoordinatorConfig``, ``ShareGroupConfig``), checked side by side
with a Kafka 4.3.1 broker's DescribeConfigs (tests/config/test_config_tables_reference.py).

The message timestamp bounds are Kafka 4.x's (KIP-937): ``log.message.timestamp.after.max.ms``
defaults to one hour. The keys Kafka 4.0 removed are :data:`REMOVED_KEYS`.
kcompat departs from Kafka's defaults only where a zero-config local broker needs it (see
``KCOMPAT_DEFAULTS``). ``implemented=True`` marks configs kcompat acts on; every other key is
accepted so a Kafka ``server.properties`` loads, and is named in a start-up warning when set.

Dynamic update modes follow ``DynamicBrokerConfig.dynamicConfigUpdateModes``: the listener and
SSL/SASL configs are per-broker; log defaults (the *first* synonym of each topic config, e.g.
``log.retention.ms`` but not ``log.retention.hours``), cleaner, thread-pool and connection-quota
configs are cluster-wide; everything else is read-only.

The less common keys (security, metrics, quotas, tiered storage) live in
:mod:`kcompat.config.compat_defs`.
"""

from __future__ import annotations

import re

from .compat_defs import COMPAT_CONFIGS
from .endpoints import parse_bootstrap_servers, parse_listeners, parse_protocol_map, parse_voters
from .errors import ConfigError, invalid_value
from .group_defs import GROUP_COORDINATOR_CONFIGS
from .keydef import (BOOLEAN, CLASS, CW, DOUBLE, INT, LIST, LONG, PB, RO, SHORT, STRING, ConfigKey,
                     define as d)
from .types import LONG_MAX, Custom, ValidList, ValidString, at_least, between, one_of_or_range

INT_MAX = 2**31 - 1
DOUBLE_MAX = 1.7976931348623157e308

# kcompat's zero-config defaults, where they differ from Kafka 4.3 (Kafka's in the comment).
KCOMPAT_DEFAULTS = {
    "listeners": "PLAINTEXT://127.0.0.1:9092",            # Kafka: PLAINTEXT://:9092
    "log.dir": "kcompat-data",                             # Kafka: /tmp/kafka-logs (log.dirs null)
    "node.id": 1,                                          # Kafka: -1 (required in KRaft)
    "broker.id": 1,                                        # Kafka: -1; kcompat: same as node.id
    "process.roles": "broker,controller",                  # Kafka: "" (ZooKeeper mode)
    "controller.quorum.voters": "1@127.0.0.1:9093",        # Kafka: ""; computed, see BrokerConfig
    # Kafka's built-in default is 3000, but its shipped config/kraft/server.properties sets 0 "for
    # the benefit of development": a zero-config kcompat follows the shipped file.
    "group.initial.rebalance.delay.ms": 0,
}

_listeners = Custom(lambda n, v: parse_listeners(n, v), "")
_adv_listeners = Custom(lambda n, v: parse_listeners(n, v, require_distinct_ports=False), "")
_proto_map = Custom(lambda n, v: parse_protocol_map(n, v), "")
_voters = Custom(lambda n, v: parse_voters(n, v), "")
_bootstrap = Custom(lambda n, v: parse_bootstrap_servers(n, v), "")
_compression = ValidString(["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"])
_gzip_level = one_of_or_range([-1], between(1, 9))
_lz4_level = between(1, 17)
_zstd_level = between(-131072, 22)
_protocols = ValidString(["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"])


def _check_no_empty_items(name: str, value: list) -> None:
    """``ConfigDef.ValidList.anyNonDuplicateValues``: no empty item (duplicates are dropped)."""
    if any(not item for item in value):
        raise ConfigError(name, f"Configuration '{name}' values must not be empty.")


_no_empty_items = Custom(_check_no_empty_items, "")


_HTTP_LISTENER = re.compile(r"^HTTP://(\[[^\]]*\]|[^:/]*):(\d{1,5})$", re.IGNORECASE)


def _check_http_listeners(name: str, value: str) -> None:
    """``HTTP://host:port`` entries, comma-separated (empty: no HTTP listener)."""
    items = value.split(",") if isinstance(value, str) else value
    for item in (v.strip() for v in items):
        if item and (not _HTTP_LISTENER.match(item) or int(_HTTP_LISTENER.match(item).group(2)) > 65535):
            raise invalid_value(name, value, f"{item!r} is not HTTP://host:port")


def _check_replica_selector(name: str, value: str) -> None:
    """Kafka instantiates the class at start-up and fails on one it cannot load; kcompat has
    Kafka's one implementation."""
    if value.strip() != "org.apache.kafka.common.replica.RackAwareReplicaSelector":
        raise invalid_value(name, value, f"Class {value} cannot be found (kcompat implements "
                                         f"org.apache.kafka.common.replica.RackAwareReplicaSelector)")


_replica_selector = Custom(_check_replica_selector, "[org.apache.kafka.common.replica.RackAwareReplicaSelector]")

_CORE: list[ConfigKey] = [
    # ---------------------------------------------------------------- KRaft / server basics
    d("process.roles", LIST, KCOMPAT_DEFAULTS["process.roles"], ValidList(["broker", "controller"]), RO, True,
      "Roles of this process: broker, controller, or broker,controller (combined). kcompat runs KRaft only."),
    d("node.id", INT, KCOMPAT_DEFAULTS["node.id"], None, RO, True,
      "Node id for the roles this process plays (KRaft). broker.id is a synonym."),
    d("broker.id", INT, KCOMPAT_DEFAULTS["broker.id"], None, RO, True,
      "Broker id; synonym of node.id (if both are set they must be equal)."),
    d("controller.quorum.voters", LIST, KCOMPAT_DEFAULTS["controller.quorum.voters"], _voters, RO, True,
      "Static controller quorum as {id}@{host}:{port},... (KIP-595). kcompat default: this node alone "
      "({node.id}@<controller listener or 127.0.0.1:9093>) unless controller.quorum.bootstrap.servers is set."),
    d("controller.quorum.bootstrap.servers", LIST, "", _bootstrap, RO, True,
      "Controller endpoints {host}:{port},... to discover a dynamic quorum (KIP-853)."),
    d("controller.listener.names", STRING, None, None, RO, True,
      "Comma-separated names of the listeners used by the controller; the broker uses the first."),
    d("metadata.log.dir", STRING, None, None, RO, True,
      "Directory of the __cluster_metadata log; default: the first directory of log.dirs."),
    d("initial.broker.registration.timeout.ms", INT, 60000, None, RO, True,
      "Time (ms) to wait for the initial broker registration before failing."),
    d("broker.heartbeat.interval.ms", INT, 2000, None, RO, True,
      "Time (ms) between broker heartbeats to the controller (KRaft)."),
    d("broker.session.timeout.ms", INT, 9000, None, RO, True,
      "Lease (ms) a broker keeps without heartbeating before the controller fences it (KRaft)."),
    d("metadata.log.segment.bytes", INT, 1073741824, at_least(8 * 1024 * 1024), RO, True,
      "Maximum size (bytes) of a metadata log segment; at least 8 MiB (MetadataLogConfig, Kafka 4.x)."),
    d("internal.metadata.log.segment.bytes", INT, None, None, RO, True,
      "The maximum size of a single metadata log file, instead of metadata.log.segment.bytes; for "
      "testing only (MetadataLogConfig.INTERNAL_METADATA_LOG_SEGMENT_BYTES_CONFIG).", internal=True),
    d("metadata.log.segment.ms", LONG, 604800000, None, RO, True,
      "Maximum time (ms) before a new metadata log segment is rolled."),
    d("metadata.max.retention.bytes", LONG, 104857600, None, RO, True,
      "Maximum total size (bytes) of metadata log and snapshots before old snapshots are deleted."),
    d("metadata.max.retention.ms", LONG, 604800000, None, RO, True,
      "Retention (ms) of metadata log segments and snapshots."),
    d("metadata.max.idle.interval.ms", INT, 500, at_least(0), RO, False,
      "How often (ms) the active controller appends a no-op record to the metadata log; 0 disables."),
    d("metadata.log.max.record.bytes.between.snapshots", LONG, 20971520, at_least(1), RO, True,
      "Bytes of new metadata records after which a new snapshot is generated."),
    d("metadata.log.max.snapshot.interval.ms", LONG, 3600000, at_least(0), RO, True,
      "Maximum time (ms) between snapshots when there are committed records; 0 disables."),
    d("controller.quorum.election.timeout.ms", INT, 1000, None, RO, True,
      "Maximum time (ms) without a fetch from the leader before a new election starts."),
    d("controller.quorum.fetch.timeout.ms", INT, 2000, None, RO, True,
      "Maximum time (ms) without a successful fetch before a voter becomes a candidate."),
    d("controller.quorum.election.backoff.max.ms", INT, 1000, None, RO, True,
      "Maximum backoff (ms) before starting a new election (exponential backoff)."),
    d("controller.quorum.append.linger.ms", INT, 25, None, RO, True,
      "Time (ms) the leader waits for writes to accumulate before flushing to disk."),
    d("controller.quorum.request.timeout.ms", INT, 2000, None, RO, True,
      "Maximum time (ms) to wait for a quorum request response."),
    d("controller.quorum.retry.backoff.ms", INT, 20, None, RO, True,
      "Time (ms) to wait before retrying a failed quorum request."),
    # ---------------------------------------------------------------- sockets and listeners
    d("listeners", STRING, KCOMPAT_DEFAULTS["listeners"], _listeners, PB, True,
      "Comma-separated NAME://host:port URIs to listen on; empty host = all interfaces, port 0 = any."),
    d("advertised.listeners", STRING, None, _adv_listeners, RO, True,   # dynamic in 3.9, not in 4.3
      "Addresses advertised to clients and other brokers; defaults to listeners; 0.0.0.0 not allowed."),
    d("listener.security.protocol.map", STRING, "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
      _proto_map, PB, True,
      "Map of listener name to security protocol, NAME:PROTOCOL,... Controller listeners default to PLAINTEXT."),
    d("inter.broker.listener.name", STRING, None, None, RO, True,
      "Listener used between brokers; default: the listener named after security.inter.broker.protocol."),
    d("security.inter.broker.protocol", STRING, "PLAINTEXT", _protocols, RO, False,
      "Security protocol between brokers; only one of this and inter.broker.listener.name may be set."),
    d("socket.send.buffer.bytes", INT, 102400, None, RO, False, "SO_SNDBUF of server sockets (bytes); -1 = OS default."),
    d("socket.receive.buffer.bytes", INT, 102400, None, RO, False, "SO_RCVBUF of server sockets (bytes); -1 = OS default."),
    d("socket.request.max.bytes", INT, 104857600, at_least(1), RO, True, "Maximum size (bytes) of a request."),
    d("socket.listen.backlog.size", INT, 50, at_least(1), RO, True, "Maximum pending connections on a listening socket."),
    d("socket.connection.setup.timeout.ms", LONG, 10000, None, RO, False,
      "Time (ms) the broker's own clients wait for a socket connection."),
    d("socket.connection.setup.timeout.max.ms", LONG, 30000, None, RO, False,
      "Maximum (ms) of the exponential connection setup timeout of the broker's own clients."),
    d("max.connections.per.ip", INT, INT_MAX, at_least(0), CW, True, "Maximum connections from one IP address."),
    d("max.connections.per.ip.overrides", STRING, "", None, CW, True, "Per-IP or host overrides, e.g. host:100,127.0.0.1:200."),
    d("max.connections", INT, INT_MAX, at_least(0), CW, True, "Maximum connections to the broker at any time."),
    d("max.connection.creation.rate", INT, INT_MAX, at_least(0), CW, False, "Maximum new connections per second."),
    d("connections.max.idle.ms", LONG, 600000, None, RO, True, "Idle connections are closed after this time (ms)."),
    d("connection.failed.authentication.delay.ms", INT, 100, at_least(0), RO, True,
      "Delay (ms) of connection close after a failed authentication."),
    d("queued.max.requests", INT, 500, at_least(1), RO, True, "Queued requests allowed before blocking the network threads."),
    d("queued.max.request.bytes", LONG, -1, None, RO, True, "Queued bytes allowed before no more requests are read; -1 = no limit."),
    d("num.network.threads", INT, 3, at_least(1), CW, False, "Threads receiving requests and sending responses."),
    d("num.io.threads", INT, 8, at_least(1), CW, False, "Threads processing requests (including disk I/O)."),
    d("background.threads", INT, 10, at_least(1), CW, False, "Threads for background tasks."),
    d("request.timeout.ms", INT, 30000, None, RO, False, "Maximum time (ms) the broker's own clients wait for a response."),
    # ---------------------------------------------------------------- logs
    d("log.dirs", STRING, None, None, RO, True, "Comma-separated data directories; if unset, log.dir is used."),
    d("log.dir", STRING, KCOMPAT_DEFAULTS["log.dir"], None, RO, True,
      "Data directory when log.dirs is unset (kcompat default: kcompat-data, relative to the working directory)."),
    d("cordoned.log.dirs", LIST, "", _no_empty_items, PB, True,
      "Log dirs (entries of log.dirs or log.dir, or * for all) that get no new partition replicas (KIP-1066)."),
    d("num.partitions", INT, 1, at_least(1), RO, True, "Default number of partitions of a new topic."),
    d("auto.create.topics.enable", BOOLEAN, True, None, RO, True, "Create topics on first Metadata/Produce request."),
    d("delete.topic.enable", BOOLEAN, True, None, RO, True, "Allow DeleteTopics; false makes deletion a no-op."),
    d("log.segment.bytes", INT, 1073741824, at_least(1024 * 1024), CW, True,
      "Maximum size (bytes) of a log segment file; at least 1 MiB since Kafka 4.1."),
    d("log.roll.ms", LONG, None, None, CW, True, "Maximum age (ms) of the active segment before it is rolled; if unset, log.roll.hours."),
    d("log.roll.hours", INT, 168, at_least(1), RO, True, "Maximum age (hours) of the active segment; secondary to log.roll.ms."),
    d("log.roll.jitter.ms", LONG, None, None, CW, True, "Maximum random jitter (ms) subtracted from the roll time; if unset, log.roll.jitter.hours."),
    d("log.roll.jitter.hours", INT, 0, at_least(0), RO, True, "Maximum roll jitter (hours); secondary to log.roll.jitter.ms."),
    d("log.retention.ms", LONG, None, None, CW, True,
      "Time (ms) a log segment is kept; if unset, log.retention.minutes; -1 = no time limit."),
    d("log.retention.minutes", INT, None, None, RO, True, "Retention (minutes); secondary to log.retention.ms; if unset, log.retention.hours."),
    d("log.retention.hours", INT, 168, None, RO, True, "Retention (hours); tertiary to log.retention.ms."),
    d("log.retention.bytes", LONG, -1, None, CW, True, "Maximum size (bytes) of a partition log before old segments are deleted; -1 = no limit."),
    d("log.retention.check.interval.ms", LONG, 300000, at_least(1), RO, True, "How often (ms) logs are checked for retention."),
    d("log.cleanup.policy", LIST, "delete", ValidList(["compact", "delete"]), CW, True,
      "Default cleanup policy of segments beyond the retention window: delete, compact or both."),
    d("log.index.size.max.bytes", INT, 10485760, at_least(4), CW, True, "Maximum size (bytes) of an offset index file."),
    d("log.index.interval.bytes", INT, 4096, at_least(0), CW, True, "Bytes of log between two offset index entries."),
    d("log.flush.interval.messages", LONG, LONG_MAX, at_least(1), CW, True, "Messages accumulated on a partition before an fsync."),
    d("log.flush.interval.ms", LONG, None, None, CW, True,
      "Maximum time (ms) a message stays unflushed; if unset, log.flush.scheduler.interval.ms."),
    d("log.flush.scheduler.interval.ms", LONG, LONG_MAX, None, RO, True, "How often (ms) the flusher checks whether a log needs flushing."),
    d("log.flush.offset.checkpoint.interval.ms", INT, 60000, at_least(0), RO, True, "How often (ms) the recovery point is checkpointed."),
    d("log.flush.start.offset.checkpoint.interval.ms", INT, 60000, at_least(0), RO, True, "How often (ms) log start offsets are checkpointed."),
    d("log.segment.delete.delay.ms", LONG, 60000, at_least(0), CW, True, "Delay (ms) before a deleted segment's files are removed."),
    d("log.preallocate", BOOLEAN, False, None, CW, False, "Preallocate segment files at creation."),
    d("log.message.timestamp.type", STRING, "CreateTime", ValidString(["CreateTime", "LogAppendTime"]), CW, True,
      "Whether record timestamps are the producer's CreateTime or the broker's LogAppendTime."),
    d("log.message.timestamp.before.max.ms", LONG, LONG_MAX, at_least(0), CW, True,
      "How far (ms) a CreateTime timestamp may be before the broker's time (KIP-937)."),
    d("log.message.timestamp.after.max.ms", LONG, 3_600_000, at_least(0), CW, True,
      "How far (ms) a CreateTime timestamp may be after the broker's time (KIP-937; 1 hour since Kafka 4.0)."),
    d("log.dir.failure.timeout.ms", LONG, 30000, at_least(1), RO, False,
      "Time (ms) after which a broker that cannot report a failed log dir shuts down."),
    d("log.initial.task.delay.ms", LONG, 30000, at_least(0), RO, False, "Initial delay (ms) of log manager tasks (testing).", internal=True),
    d("num.recovery.threads.per.data.dir", INT, 2, at_least(1), CW, False, "Threads per data directory for recovery at start-up."),
    d("min.insync.replicas", INT, 1, at_least(1), CW, True,
      "With acks=all, the minimum in-sync replicas that must have a write (else NOT_ENOUGH_REPLICAS)."),
    d("message.max.bytes", INT, 1048588, at_least(0), CW, True, "Largest record batch size (bytes) the broker accepts."),
    d("compression.type", STRING, "producer", _compression, CW, True,
      "Final compression of topic data: uncompressed, zstd, lz4, snappy, gzip, or producer (keep)."),
    d("compression.gzip.level", INT, -1, _gzip_level, CW, True, "gzip level when compression.type=gzip (KIP-390)."),
    d("compression.lz4.level", INT, 9, _lz4_level, CW, True, "lz4 level when compression.type=lz4 (KIP-390)."),
    d("compression.zstd.level", INT, 3, _zstd_level, CW, True, "zstd level when compression.type=zstd (KIP-390)."),
    d("create.topic.policy.class.name", CLASS, None, None, RO, False, "CreateTopicPolicy implementation."),
    d("alter.config.policy.class.name", CLASS, None, None, RO, False, "AlterConfigPolicy implementation."),
    # ---------------------------------------------------------------- log cleaner (CleanerConfig)
    d("log.cleaner.enable", BOOLEAN, True, None, RO, True, "Run the log cleaner (needed for compacted topics)."),
    d("log.cleaner.threads", INT, 1, at_least(0), CW, False, "Background threads for log compaction."),
    d("log.cleaner.io.max.bytes.per.second", DOUBLE, DOUBLE_MAX, None, CW, False, "Cleaner read+write I/O limit (bytes/s)."),
    d("log.cleaner.dedupe.buffer.size", LONG, 134217728, None, CW, False, "Memory (bytes) for deduplication across cleaner threads."),
    d("log.cleaner.io.buffer.size", INT, 524288, at_least(0), CW, False, "Memory (bytes) for cleaner I/O buffers."),
    d("log.cleaner.io.buffer.load.factor", DOUBLE, 0.9, None, CW, False, "Load factor of the cleaner dedupe buffer."),
    d("log.cleaner.backoff.ms", LONG, 15000, at_least(0), CW, True, "Sleep (ms) when there is no log to clean."),
    d("log.cleaner.min.cleanable.ratio", DOUBLE, 0.5, between(0, 1), CW, True, "Minimum dirty/total ratio for a log to be cleaned."),
    d("log.cleaner.delete.retention.ms", LONG, 86400000, at_least(0), CW, True, "Time (ms) tombstones are kept on compacted topics."),
    d("log.cleaner.min.compaction.lag.ms", LONG, 0, at_least(0), CW, True, "Minimum age (ms) of a record before it can be compacted."),
    d("log.cleaner.max.compaction.lag.ms", LONG, LONG_MAX, at_least(1), CW, True, "Maximum time (ms) a record stays ineligible for compaction."),
    # ---------------------------------------------------------------- replication
    d("default.replication.factor", INT, 1, None, RO, True, "Default replication factor of automatically created topics."),
    d("replica.lag.time.max.ms", LONG, 30000, None, RO, True, "A follower not caught up for this long (ms) leaves the ISR."),
    d("replica.socket.timeout.ms", INT, 30000, None, RO, False, "Socket timeout (ms) of follower fetch requests."),
    d("replica.socket.receive.buffer.bytes", INT, 65536, None, RO, False, "Socket receive buffer (bytes) of followers."),
    d("replica.fetch.max.bytes", INT, 1048576, at_least(0), RO, True, "Bytes per partition a follower fetches."),
    d("replica.fetch.wait.max.ms", INT, 500, None, RO, True, "Maximum wait (ms) of a follower fetch; must be < replica.lag.time.max.ms."),
    d("replica.fetch.backoff.ms", INT, 1000, at_least(0), RO, True, "Sleep (ms) after a follower fetch error."),
    d("replica.fetch.min.bytes", INT, 1, None, RO, True, "Minimum bytes a follower fetch waits for."),
    d("replica.fetch.response.max.bytes", INT, 10485760, at_least(0), RO, True, "Maximum bytes of a whole follower fetch response."),
    d("num.replica.fetchers", INT, 1, None, CW, False, "Fetcher threads per source broker."),
    d("replica.high.watermark.checkpoint.interval.ms", LONG, 5000, None, RO, True, "How often (ms) high watermarks are checkpointed."),
    d("fetch.purgatory.purge.interval.requests", INT, 1000, None, RO, False, "Purge interval (requests) of the fetch purgatory."),
    d("producer.purgatory.purge.interval.requests", INT, 1000, None, RO, False, "Purge interval (requests) of the produce purgatory."),
    d("delete.records.purgatory.purge.interval.requests", INT, 1, None, RO, False, "Purge interval (requests) of the delete-records purgatory."),
    d("auto.leader.rebalance.enable", BOOLEAN, True, None, RO, True, "Move leadership back to preferred replicas periodically."),
    d("leader.imbalance.check.interval.seconds", LONG, 300, at_least(1), RO, True, "How often (s) leader balance is checked."),
    d("unclean.leader.election.enable", BOOLEAN, False, None, CW, True, "Allow out-of-sync replicas to become leader (data loss)."),
    d("broker.rack", STRING, None, None, RO, True,
      "Rack of the broker: rack-aware replica placement and fetch from the closest replica (KIP-36, KIP-392)."),
    # kcompat's own: the HTTP listener (metrics, console, REST proxy); off unless set, except in
    # the zero-config node and the container image (HTTP://127.0.0.1:8090, HTTP://0.0.0.0:8090)
    d("http.listeners", LIST, "", Custom(_check_http_listeners, "HTTP://host:port,..."), RO, True,
      "HTTP listeners of the node (kcompat): /metrics, the console at /, the REST proxy at /v3."),
    d("consumer.instance.timeout.ms", INT, 300000, at_least(1), RO, True,
      "Idle time (ms) after which a REST proxy consumer instance (/consumers, on http.listeners) is closed "
      "and leaves its group (kcompat; Confluent REST Proxy's setting of that name)."),
    d("replica.selector.class", STRING, None, _replica_selector, RO, True,
      "ReplicaSelector for fetch from the closest replica (KIP-392): null (leader only) or "
      "org.apache.kafka.common.replica.RackAwareReplicaSelector."),
    d("controller.socket.timeout.ms", INT, 30000, None, RO, False, "Socket timeout (ms) of controller-to-broker channels."),
    d("controlled.shutdown.enable", BOOLEAN, True, None, RO, True, "Move leadership away before shutting down."),
    d("max.incremental.fetch.session.cache.slots", INT, 1000, at_least(0), RO, True, "Maximum incremental fetch sessions kept (KIP-227)."),
    d("fetch.max.bytes", INT, 57671680, at_least(1024), RO, True, "Maximum bytes returned by one fetch request."),
    d("max.request.partition.size.limit", INT, 2000, at_least(1), RO, False, "Maximum partitions in one request (KIP-1005)."),
    # ---------------------------------------------------------------- group coordinator and offsets
    d("group.min.session.timeout.ms", INT, 6000, None, RO, True, "Minimum session timeout (ms) of classic group members."),
    d("group.max.session.timeout.ms", INT, 1800000, None, RO, True, "Maximum session timeout (ms) of classic group members."),
    d("group.initial.rebalance.delay.ms", INT, KCOMPAT_DEFAULTS["group.initial.rebalance.delay.ms"], None, RO, True, "Wait (ms) for more members before the first rebalance of a new group."),
    d("group.max.size", INT, INT_MAX, at_least(1), RO, True, "Maximum members of one consumer group."),
    # KIP-848 consumer groups (GroupCoordinatorConfig, Kafka 4 defaults)
    d("group.coordinator.rebalance.protocols", LIST, "classic,consumer,streams",
      ValidList(["consumer", "classic", "share", "streams"]),
      RO, True, "Enabled rebalance protocols (KIP-848 consumer and KIP-1071 streams beside the classic one)."),
    d("group.consumer.session.timeout.ms", INT, 45000, at_least(1), RO, True, "Session timeout (ms) of consumer-protocol members."),
    d("group.consumer.min.session.timeout.ms", INT, 45000, at_least(1), RO, True, "Lower bound of group.consumer.session.timeout.ms."),
    d("group.consumer.max.session.timeout.ms", INT, 60000, at_least(1), RO, True, "Upper bound of group.consumer.session.timeout.ms."),
    d("group.consumer.heartbeat.interval.ms", INT, 5000, at_least(1), RO, True, "Heartbeat interval (ms) the coordinator gives consumer-protocol members."),
    d("group.consumer.min.heartbeat.interval.ms", INT, 5000, at_least(1), RO, True, "Lower bound of group.consumer.heartbeat.interval.ms."),
    d("group.consumer.max.heartbeat.interval.ms", INT, 15000, at_least(1), RO, True, "Upper bound of group.consumer.heartbeat.interval.ms."),
    d("group.consumer.max.size", INT, INT_MAX, at_least(1), RO, True, "Maximum members of one consumer-protocol group."),
    d("group.consumer.migration.policy", STRING, "bidirectional",
      ValidString(["disabled", "downgrade", "upgrade", "bidirectional"], case_insensitive=True), RO, True,
      "Online migration between the classic and consumer protocols: disabled, upgrade, downgrade, bidirectional."),
    d("group.consumer.assignors", LIST, "uniform,range", ValidList(["uniform", "range", "org.apache.kafka.coordinator.group.assignor.UniformAssignor", "org.apache.kafka.coordinator.group.assignor.RangeAssignor"]), RO, True, "Server-side assignors of consumer-protocol groups; the first is the default."),
    # group.consumer.assignment.interval.*, group.share.* (KIP-932) and group.streams.* (KIP-1071):
    # kcompat.config.group_defs
    d("offset.metadata.max.bytes", INT, 4096, None, RO, True, "Maximum size (bytes) of offset commit metadata."),
    d("offsets.load.buffer.size", INT, 5242880, at_least(1), RO, False, "Read batch size (bytes) when loading offsets."),
    d("offsets.topic.replication.factor", SHORT, 3, at_least(1), RO, True, "Replication factor of __consumer_offsets."),
    d("offsets.topic.num.partitions", INT, 50, at_least(1), RO, True, "Partitions of __consumer_offsets (do not change after deployment)."),
    d("offsets.topic.segment.bytes", INT, 104857600, at_least(1), RO, True, "Segment size (bytes) of __consumer_offsets."),
    d("offsets.topic.compression.codec", INT, 0, None, RO, False, "Compression codec id for __consumer_offsets."),
    d("offsets.retention.minutes", INT, 10080, at_least(1), RO, True, "Committed offsets of empty groups expire after this (minutes)."),
    d("offsets.retention.check.interval.ms", LONG, 600000, at_least(1), RO, True, "How often (ms) stale offsets are checked."),
    d("offsets.commit.timeout.ms", INT, 5000, at_least(1), RO, True, "Offset commit waits this long (ms) for replication."),
    # ---------------------------------------------------------------- transactions and producer ids
    d("transactional.id.expiration.ms", INT, 604800000, at_least(1), RO, True, "Idle transactional ids expire after this (ms)."),
    d("transaction.max.timeout.ms", INT, 900000, at_least(1), RO, True, "Maximum transaction timeout (ms) a producer may request."),
    d("transaction.state.log.min.isr", INT, 2, at_least(1), RO, True, "min.insync.replicas of __transaction_state."),
    d("transaction.state.log.load.buffer.size", INT, 5242880, at_least(1), RO, False, "Read batch size (bytes) loading transactions."),
    d("transaction.state.log.replication.factor", SHORT, 3, at_least(1), RO, True, "Replication factor of __transaction_state."),
    d("transaction.state.log.num.partitions", INT, 50, at_least(1), RO, True, "Partitions of __transaction_state."),
    d("transaction.state.log.segment.bytes", INT, 104857600, at_least(1), RO, True, "Segment size (bytes) of __transaction_state."),
    d("transaction.abort.timed.out.transaction.cleanup.interval.ms", INT, 10000, at_least(1), RO, True, "How often (ms) timed-out transactions are aborted."),
    d("transaction.remove.expired.transaction.cleanup.interval.ms", INT, 3600000, at_least(1), RO, True, "How often (ms) expired transactional ids are removed."),
    d("transaction.partition.verification.enable", BOOLEAN, True, None, CW, False, "Verify partitions are in a transaction before appending (KIP-890)."),
    d("producer.id.expiration.ms", INT, 86400000, at_least(1), CW, True, "Idle producer id state expires after this (ms) (KIP-854)."),
    d("producer.id.expiration.check.interval.ms", INT, 600000, at_least(1), RO, True,
      "How often (ms) expired producer ids are removed.", internal=True),
    # ---------------------------------------------------------------- share coordinator (KIP-932, Kafka 4.3's
    # ShareCoordinatorConfig). Kafka creates __share_group_state with cleanup.policy=delete,
    # compression.type=producer and the segment size below, and no min.insync.replicas override: the
    # min.isr key is defined (and validated) but, as in Kafka, not applied to the topic.
    d("share.coordinator.state.topic.replication.factor", SHORT, 3, at_least(1), RO, True, "Replication factor of __share_group_state."),
    d("share.coordinator.state.topic.min.isr", SHORT, 2, at_least(1), RO, False, "Overridden min.insync.replicas for __share_group_state (not applied, as in Kafka)."),
    d("share.coordinator.state.topic.num.partitions", INT, 50, at_least(1), RO, True, "Partitions of __share_group_state (do not change after deployment)."),
    d("share.coordinator.state.topic.segment.bytes", INT, 104857600, at_least(1), RO, True, "Segment size (bytes) of __share_group_state."),
    d("share.coordinator.threads", INT, 1, at_least(1), RO, False, "Threads of the share coordinator."),
    d("share.coordinator.snapshot.update.records.per.snapshot", INT, 500, between(0, 500), RO, True,
      "Update records the share coordinator writes between two snapshot records of a share partition."),
    d("share.coordinator.write.timeout.ms", INT, 5000, at_least(1), RO, True,
      "How long (ms) the share coordinator waits for every replica of __share_group_state to receive a write."),
    d("share.coordinator.load.buffer.size", INT, 5242880, at_least(1), RO, False, "Read batch size (bytes) when loading share state."),
    d("share.coordinator.state.topic.compression.codec", INT, 0, None, RO, False, "Compression codec id for __share_group_state."),
    d("share.coordinator.append.linger.ms", INT, -1, at_least(-1), RO, False,
      "How long (ms) the share coordinator lets writes accumulate before flushing them (-1: adaptive)."),
    d("share.coordinator.cached.buffer.max.bytes", INT, 1048588, at_least(524288), CW, False,
      "Largest write buffer the share coordinator keeps for reuse."),
    d("share.coordinator.state.topic.prune.interval.ms", INT, 300000, at_least(1), RO, True,
      "How often (ms) redundant records of __share_group_state are deleted.", internal=True),
    d("share.coordinator.cold.partition.snapshot.interval.ms", INT, 300000, at_least(1), RO, True,
      "How often (ms) share partitions not written to are snapshotted again (so pruning can advance).",
      internal=True),
]

BROKER_CONFIGS: dict[str, ConfigKey] = {}
for _key in _CORE + GROUP_COORDINATOR_CONFIGS + COMPAT_CONFIGS:
    if _key.name in BROKER_CONFIGS:  # pragma: no cover - table sanity
        raise RuntimeError(f"duplicate config definition {_key.name}")
    BROKER_CONFIGS[_key.name] = _key

# Dynamic configs that must be set per broker (DynamicBrokerConfig.PerBrokerConfigs).
PER_BROKER_CONFIGS = frozenset(k for k, v in BROKER_CONFIGS.items() if v.update_mode.value == "per-broker")
# Every dynamically updatable broker config (DynamicBrokerConfig.AllDynamicConfigs).
DYNAMIC_CONFIGS = frozenset(k for k, v in BROKER_CONFIGS.items() if v.update_mode.value != "read-only")
# SSL configs that may be updated dynamically only with a listener prefix (DynamicSecurityConfigs).
LISTENER_ONLY_DYNAMIC_CONFIGS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates",
})
# Configs Kafka 4.3 defines as LIST that kcompat parses as one string (the listener and log
# directory parsers split them): DescribeConfigs reports Kafka's type; the value text is the same.
DESCRIBED_AS_LIST = frozenset({"listeners", "advertised.listeners", "controller.listener.names",
                               "early.start.listeners", "log.dir", "log.dirs"})
# Synonym groups of broker configs, highest priority first (DynamicBrokerConfig.brokerConfigSynonyms).
BROKER_SYNONYM_GROUPS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)
# Prefixes of keys Kafka passes through to plugins; accepted with no effect.
ACCEPTED_PREFIXES = ("listener.name.", "config.providers.", "rsm.config.", "rlmm.config.")
# Kafka 3.9 broker configs that Kafka 4.0 removed (ZooKeeper mode, the message format and
# inter-broker protocol versions, password encoding for ZooKeeper-stored configs, KIP-937's
# timestamp difference, KIP-830's JMX switch, the early-access ELR switch, ...): a 3.9
# server.properties (or dynamic config) setting one still loads, with no effect, and
# DescribeConfigs shows it as Kafka 4.3 does any key it does not know (type UNKNOWN, sensitive,
# listed only when set). kcompat refuses keys it knows nothing about at all (a typo should fail).
REMOVED_KEYS = frozenset({
    "log.message.timestamp.difference.max.ms",                           # KIP-937 / KAFKA-17997
    "log.message.format.version", "log.message.downconversion.enable",  # KIP-724
    "inter.broker.protocol.version", "control.plane.listener.name",
    "broker.id.generation.enable", "reserved.broker.max.id",
    "controlled.shutdown.max.retries", "controlled.shutdown.retry.backoff.ms",
    "leader.imbalance.per.broker.percentage", "offsets.commit.required.acks",
    "auto.include.jmx.reporter",                                         # KIP-830
    "delegation.token.master.key", "eligible.leader.replicas.enable",
    "password.encoder.secret", "password.encoder.old.secret", "password.encoder.keyfactory.algorithm",
    "password.encoder.cipher.algorithm", "password.encoder.key.length", "password.encoder.iterations",
    "zookeeper.connect", "zookeeper.session.timeout.ms", "zookeeper.connection.timeout.ms",
    "zookeeper.set.acl", "zookeeper.max.in.flight.requests", "zookeeper.metadata.migration.enable",
    "zookeeper.clientCnxnSocket", "zookeeper.ssl.client.enable", "zookeeper.ssl.keystore.location",
    "zookeeper.ssl.keystore.password", "zookeeper.ssl.keystore.type", "zookeeper.ssl.truststore.location",
    "zookeeper.ssl.truststore.password", "zookeeper.ssl.truststore.type", "zookeeper.ssl.protocol",
    "zookeeper.ssl.enabled.protocols", "zookeeper.ssl.cipher.suites",
    "zookeeper.ssl.endpoint.identification.algorithm", "zookeeper.ssl.crl.enable", "zookeeper.ssl.ocsp.enable",
})


def broker_config_synonyms(name: str) -> list[str]:
    """``DynamicBrokerConfig.brokerConfigSynonyms(name, matchListenerOverride = true)``."""
    for group in BROKER_SYNONYM_GROUPS:
        if name in group:
            if name == "log.flush.scheduler.interval.ms":
                return [name]
            return list(group)
    if name.startswith("listener.name."):
        rest = name[len("listener.name."):]
        if "." in rest:
            base = rest.split(".", 1)[1]
            for mech in ("sasl.jaas.config", "sasl.login.callback.handler.class", "sasl.login.class",
                         "sasl.server.callback.handler.class", "connections.max.reauth.ms"):
                if base.endswith(mech):
                    return [name, mech]
            return [name, base]
    return [name]


def config_key(name: str) -> ConfigKey | None:
    """The definition of a broker config, or ``None`` if kcompat does not know it."""
    return BROKER_CONFIGS.get(name)


def is_accepted_key(name: str) -> bool:
    """Known config, a pass-through prefix Kafka accepts (``listener.name.<l>.<config>``...), or a
    config Kafka 4.0 removed (:data:`REMOVED_KEYS`)."""
    return name in BROKER_CONFIGS or name.startswith(ACCEPTED_PREFIXES) or name in REMOVED_KEYS


def _check_tables() -> None:  # pragma: no cover - import-time sanity
    for k in DYNAMIC_CONFIGS:
        assert BROKER_CONFIGS[k].update_mode is not RO


_check_tables()
