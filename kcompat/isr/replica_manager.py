"""The partitions this broker hosts, kept in step with the metadata image.

Kafka's ``ReplicaManager`` applied to a metadata delta (``applyDelta``): partitions assigned to
this broker get a log (created or loaded) and a :class:`Partition`; removed topics lose theirs;
topic config changes reach the log and the append policy. Each hosted partition is made leader
or follower as the image says (:meth:`ReplicaManager.apply_partition_state`); followers are handed
to the replica fetcher through ``follower_listener``. High watermarks are checkpointed in
``replication-offset-checkpoint`` (``replica.high.watermark.checkpoint.interval.ms`` and at
shutdown) and a partition starts from its checkpointed HW.

The produce and fetch paths are here, as in Kafka: :meth:`ReplicaManager.append_records`
(:mod:`kcompat.isr.append_records`, with DelayedProduce) and :meth:`ReplicaManager.fetch_messages`
(:mod:`kcompat.isr.fetch_messages`, with DelayedFetch). What they need of the cluster metadata
is two callables, ``leader_of`` and ``topic_exists``.
"""

from __future__ import annotations

import logging
from typing import Awaitable, Callable

from kcompat.isr import append_records as _append
from kcompat.isr import fetch_messages as _fetch
from kcompat.isr.append_records import ProducePartitionResult
from kcompat.isr.broker_topic_stats import BrokerTopicStats
from kcompat.isr.fetch_messages import FetchParams, FetchPartitionRequest, FetchPartitionResult
from kcompat.isr.partition import AppendPolicy, Partition
from kcompat.isr.replica_log_dirs import ReplicaLogDirs
from kcompat.log import LogConfig

log = logging.getLogger("kcompat.isr")


class ReplicaManager:
    """``(topic, partition) -> Partition`` for partitions whose replicas include ``node_id``.

    ``log_manager`` is a :class:`kcompat.log.LogManager`; ``log_config_for(topic)`` and
    ``policy_for(topic)`` give the effective LogConfig and AppendPolicy of a topic; ``now_ms()``
    is the clock; ``leader_of(topic, partition)`` the leader in the metadata image (None: no such
    partition, -1: no leader) and ``topic_exists(name)`` whether the image has the topic.
    """

    def __init__(self, log_manager, node_id: int, *, log_config_for: Callable[[str], LogConfig],
                 policy_for: Callable[[str], AppendPolicy], now_ms: Callable[[], int],
                 leader_of: Callable[[str, int], int | None] = lambda topic, partition: None,
                 topic_exists: Callable[[str], bool] = lambda name: False) -> None:
        self.log_manager = log_manager
        self.node_id = node_id
        self.now_ms = now_ms
        self.leader_of = leader_of
        self.topic_exists = topic_exists
        # set at shutdown: waiting fetches answer at once
        self.shutting_down = False
        # wake-ups of the waiting fetches (DelayedFetch), called at shutdown and on metadata changes
        self.fetch_waiters: set[Callable[[], None]] = set()
        self._log_config_for = log_config_for
        self._policy_for = policy_for
        self._now_ms = now_ms
        self.partitions: dict[tuple[str, int], Partition] = {}
        # KIP-890 verification of transactional produce, given to every partition (None: off)
        self.txn_verifier = None
        # ...and the transaction coordinator when it is on another broker (handle_produce_append)
        self.remote_txn_verification: _append.RemoteTxnVerification | None = None
        # the transaction coordinator adding partitions for Produce v12+ (KIP-890 part 2), None: off
        self.txn_partition_adder: _append.TxnPartitionAdder | None = None
        # (partition, leader id or -1, leader epoch) -> None: start/stop fetching (-1 or us: stop)
        self.follower_listener: Callable[[Partition, int, int], None] | None = None
        # (partition, PendingIsrChange) -> None: send AlterPartition to the controller
        self.isr_change_listener = None
        # produce/fetch byte and request counters, ISR shrinks and expands (BrokerTopicMetrics)
        self.stats = BrokerTopicStats()
        # reads below the local log start offset of tiered partitions (KIP-405), None: not tiered
        self.remote_reader: _fetch.RemoteReads | None = None
        # moves between log dirs (AlterReplicaLogDirs) and failed log dirs
        self.log_dirs = ReplicaLogDirs(self)
        # leader-side replication throttle (a kcompat.broker.quota.replication.ReplicationQuota), None: off
        self.leader_quota = None

    def get(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    # -- produce and fetch -----------------------------------------------------------------------

    def append_records(self, entries: list[tuple[str, int, object]], *, acks: int, timeout_ms: int,
                       transactional_id: str | None, verified: dict[tuple[str, int], int] | None = None
                       ) -> list[ProducePartitionResult] | Awaitable[list[ProducePartitionResult]]:
        """Append one batch per ``(topic, partition, records)``, as Kafka's
        ``ReplicaManager.appendRecords``: see :func:`kcompat.isr.append_records.append_records`."""
        return _append.append_records(self, entries, acks=acks, timeout_ms=timeout_ms,
                                      transactional_id=transactional_id, now_ms=self._now_ms(), verified=verified)

    def handle_produce_append(self, entries: list[tuple[str, int, object]], *, acks: int, timeout_ms: int,
                              transactional_id: str | None, add_partitions: bool = False
                              ) -> list[ProducePartitionResult] | Awaitable[list[ProducePartitionResult]]:
        """A Produce request's appends, as Kafka's ``ReplicaManager.handleProduceAppend``: verified
        with a remote transaction coordinator first where KIP-890 asks it (or, ``add_partitions``,
        for Produce v12+, added to the transaction by the coordinator), then
        :meth:`append_records`; see :func:`kcompat.isr.append_records.handle_produce_append`."""
        return _append.handle_produce_append(self, entries, acks=acks, timeout_ms=timeout_ms,
                                             transactional_id=transactional_id, add_partitions=add_partitions)

    def fetch_messages(self, params: FetchParams, requests: list[FetchPartitionRequest]
                       ) -> list[FetchPartitionResult] | Awaitable[list[FetchPartitionResult]]:
        """Read the partitions of a fetch, waiting for data as asked, as Kafka's
        ``ReplicaManager.fetchMessages``: see :func:`kcompat.isr.fetch_messages.fetch_messages`."""
        return _fetch.fetch_messages(self, params, requests)

    def wake_delayed_fetches(self) -> None:
        """Make every waiting fetch re-check now (shutdown, metadata changes)."""
        for wake in list(self.fetch_waiters):
            wake()

    def ensure_partition(self, topic: str, partition: int, topic_id, leader_epoch: int) -> Partition:
        """Host ``topic``-``partition``: load its log if present, else create it."""
        p = self.partitions.get((topic, partition))
        if p is not None:
            p.leader_epoch = leader_epoch
            return p
        config = self._log_config_for(topic)
        lg = self.log_manager.get(topic, partition)
        if lg is None:
            lg = self.log_manager.create(topic, partition, config, topic_id, self._now_ms())
        else:
            lg.update_config(config)
        hw = self.log_manager.high_watermarks.get((topic, partition))
        p = Partition(topic, partition, topic_id, lg, leader_epoch=leader_epoch, policy=self._policy_for(topic),
                      local_id=self.node_id, high_watermark=hw)
        p.stats = self.stats
        p.txn_verifier = self.txn_verifier
        p.isr_change_listener = self.isr_change_listener
        p.storage_failure_listener = self.log_dirs.on_storage_failure
        self.partitions[(topic, partition)] = p
        self.log_dirs.on_hosted(p)
        return p

    def apply_partition_state(self, p: Partition, *, leader: int, leader_epoch: int, partition_epoch: int,
                              replicas, isr, now_ms: int, min_insync_replicas: int, replica_lag_time_max_ms: int,
                              is_eligible=None) -> None:
        """Make ``p`` leader or follower as the metadata says (Kafka ``ReplicaManager.applyDelta``
        -> ``makeLeader`` / ``makeFollower``), and start or stop its fetcher. A partition whose log
        dir failed keeps no role until the broker restarts (Kafka's offline partitions)."""
        if p.offline:
            return
        if leader == self.node_id:
            if p.make_leader(leader_epoch=leader_epoch, partition_epoch=partition_epoch, replicas=replicas, isr=isr,
                             now_ms=now_ms, min_insync_replicas=min_insync_replicas,
                             replica_lag_time_max_ms=replica_lag_time_max_ms, is_eligible=is_eligible):
                log.info("%s: leader at epoch %d from offset %d, ISR %s", p, leader_epoch,
                         p.log.log_end_offset, sorted(isr))
            if self.follower_listener is not None:
                self.follower_listener(p, -1, leader_epoch)
        else:
            changed = p.make_follower(leader_id=leader, leader_epoch=leader_epoch, replicas=replicas)
            if changed:
                log.info("%s: follower of %s at leader epoch %d", p, leader if leader >= 0 else "no leader",
                         leader_epoch)
            if self.follower_listener is not None and (changed or leader < 0):
                self.follower_listener(p, leader, leader_epoch)

    def maybe_shrink_isr(self, now_ms: int) -> int:
        """Propose ISR shrinks of every partition led here (``replica.lag.time.max.ms`` / 2
        period, as Kafka's isr-expiration task). Returns how many were proposed. A partition whose
        HW was held only by a follower outside the ISR that has since stopped counting as caught up
        (``replica.lag.time.max.ms`` passed without a fetch: its broker stopped replicating it, e.g.
        after a log dir failure) gets its HW advanced here, since no fetch or append may come."""
        proposed = 0
        for p in list(self.partitions.values()):
            if p.replica_state is None or p.offline:
                continue
            if p.maybe_shrink_isr(now_ms):
                proposed += 1
            elif p.replica_state.maybe_increment_high_watermark(now_ms):
                p._on_high_watermark_advanced()
        return proposed

    def checkpoint_high_watermarks(self) -> None:
        """Write every hosted partition's HW to ``replication-offset-checkpoint``."""
        try:
            self.log_manager.write_high_watermarks({key: p.high_watermark for key, p in self.partitions.items()})
        except OSError:
            pass   # logged once by the log manager; the previous file stays and the next interval retries

    def remove_topic(self, topic: str) -> int:
        """Stop hosting every partition of ``topic`` and delete their logs; returns how many."""
        keys = [k for k in self.partitions if k[0] == topic]
        for key in keys:
            self.remove_partition(*key)
        return len(keys)

    def remove_partition(self, topic: str, partition: int) -> bool:
        """Stop hosting ``topic``-``partition`` and delete its log (Kafka ``ReplicaManager.
        stopPartitions`` with delete): the topic was deleted or a reassignment removed this
        broker from the replicas. Its fetcher stops, waiting acks=all produces fail with
        NOT_LEADER_OR_FOLLOWER, waiting fetches wake and find it gone. False if not hosted."""
        p = self.partitions.pop((topic, partition), None)
        if p is None:
            return False
        if self.follower_listener is not None:
            self.follower_listener(p, -1, -1)
        p.make_follower(leader_id=-1, leader_epoch=p.leader_epoch, replicas=p.replicas)
        p._wake()
        self.log_dirs.cancel(topic, partition)   # a move to another log dir (AlterReplicaLogDirs) stops
        if not p.offline:
            self.log_manager.delete(topic, partition)
        return True

    def update_topic_config(self, topic: str) -> None:
        """Re-read the effective config of ``topic`` into its logs and append policy."""
        config = self._log_config_for(topic)
        policy = self._policy_for(topic)
        for (t, _), p in self.partitions.items():
            if t == topic:
                p.log.update_config(config)
                p.policy = policy

    def topic_partitions(self, topic: str) -> list[Partition]:
        return [p for (t, _), p in sorted(self.partitions.items()) if t == topic]

    def log_consumer_bytes(self) -> None:
        """One log line: bytes of records served to consumers per partition since start-up, as
        leader and as follower (``consumer bytes served (leader/follower): t-0=10/0 ...``)."""
        served = [f"{p.topic}-{p.partition_id}={p.consumer_bytes_as_leader}/{p.consumer_bytes_as_follower}"
                  for p in self.partitions.values() if p.consumer_bytes_as_leader or p.consumer_bytes_as_follower]
        if served:
            log.info("consumer bytes served (leader/follower): %s", " ".join(sorted(served)))

    def shutdown(self) -> None:
        """Write producer-state snapshots at the LEO of every partition and the HW checkpoint
        (clean shutdown)."""
        self.checkpoint_high_watermarks()
        self.log_consumer_bytes()
        failed: list[str] = []
        error = None
        for p in self.partitions.values():
            if p.offline:
                continue
            try:
                p.write_snapshot()
            except OSError as e:   # disk full: the next start rebuilds producer state from the log
                failed.append(f"{p.topic}-{p.partition_id}")
                error = e
        if failed:
            log.warning("could not write the producer snapshot of %d partition(s) (%s%s): %s", len(failed),
                        ", ".join(failed[:5]), ", ..." if len(failed) > 5 else "", error)
