"""What the HTTP listener's routes read of their node (:mod:`.metrics`, :mod:`.console` and
:mod:`.api`, the REST Proxy, the Schema Registry), instead of the broker itself, as the API
handlers get :class:`~kcompat.broker.api_services.ApiServices`.

The broker builds one :class:`HttpServices` when it starts its HTTP listener
(:meth:`kcompat.broker.broker.Broker.start`), once every part it names exists.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:   # types only: the objects are built by kcompat.broker.broker
    from kcompat.broker.group_runtime import GroupRuntime
    from kcompat.broker.quorum import QuorumRuntime
    from kcompat.broker.remote_log import RemoteLogManager
    from kcompat.broker.request_stats import RequestStats
    from kcompat.broker.txn_runtime import TxnRuntime
    from kcompat.config.broker import BrokerConfig
    from kcompat.isr.fetch_session import FetchSessions
    from kcompat.isr.replica_manager import ReplicaManager
    from kcompat.kraft.controller import NewTopic, TopicResult
    from kcompat.kraft.image import MetadataImage
    from kcompat.log import LogManager


@dataclass(frozen=True, eq=False, slots=True)
class HttpServices:
    """The node's state and operations the HTTP routes use.

    - ``node_id``, ``cluster_id``: this node's ``node.id`` and its cluster's id;
    - ``config``: the :class:`~kcompat.config.broker.BrokerConfig` (static and dynamic configs);
    - ``image``: the :class:`~kcompat.kraft.image.MetadataImage`, updated in place by metadata
      replay (so always current);
    - ``controller_active()``: True while this node is the active controller;
    - ``quorum``: the metadata Raft quorum (its leader, epoch, high watermark);
    - ``replica_manager``, ``log_manager``: the partitions hosted here and their logs (sizes,
      offsets, producer state, per-topic byte and request counters);
    - ``groups``, ``txn``: the group and transaction coordinator runtimes (groups, committed
      offsets, transactional ids);
    - ``remote_log``: the tiered storage manager (KIP-405), None without
      ``remote.log.storage.system.enable``;
    - ``fetch_sessions``: the incremental fetch session cache (KIP-227), None in stand-ins;
    - ``request_stats``: the per-API request metrics (:mod:`kcompat.broker.request_stats`);
    - ``connection_count()``: the client connections open now;
    - ``topic_values(topic)``: the effective typed config values of a topic;
    - ``leader_of(topic, partition)``: its leader's node id (-1: none; None: no such partition);
    - ``live_broker_ids()``: the registered, unfenced brokers;
    - ``create_topics(topics)``: creates topics through the active controller
      (:meth:`kcompat.broker.controller_service.ControllerService.create_topics`);
    - ``auto_create_topics(names)``: creates topics with the broker defaults
      (``auto.create.topics.enable``), returning once this node's image has them;
    - ``wait_for_topics(names, timeout_s)``: until this node's image has those topics (or
      ``timeout_s`` seconds passed).

    The routes read ``quorum``, ``replica_manager``, ``log_manager``, ``groups``, ``txn`` and
    ``image`` as absent when None (a stand-in in tests); the broker gives them all.
    """

    node_id: int
    cluster_id: str
    config: BrokerConfig
    image: MetadataImage | None
    controller_active: Callable[[], bool]
    quorum: QuorumRuntime | None
    replica_manager: ReplicaManager | None
    log_manager: LogManager | None
    groups: GroupRuntime | None
    txn: TxnRuntime | None
    remote_log: RemoteLogManager | None
    request_stats: RequestStats
    connection_count: Callable[[], int]
    topic_values: Callable[[str], dict]
    leader_of: Callable[[str, int], int | None]
    live_broker_ids: Callable[[], list[int]]
    create_topics: Callable[[list[NewTopic]], Awaitable[list[TopicResult]]]
    auto_create_topics: Callable[[list[str]], Awaitable[list[TopicResult]]]
    wait_for_topics: Callable[[list[str], float], Awaitable[None]]
    fetch_sessions: FetchSessions | None = None
