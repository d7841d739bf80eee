"""What the API handlers are given: the typed collaborators of Kafka's ``KafkaApis`` and
``ControllerApis`` (their constructor arguments), instead of the whole broker.

A handler reaches only these, as ``ctx.services`` (:class:`kcompat.broker.context.RequestContext`):
the metadata image and a :class:`MetadataCache` over it, the broker config, the clock, the
authorizer and the client quotas; the controller side (forwarding, the KRaft controller and
cluster control, the quorum); and the broker side (the ReplicaManager, the coordinators, share
groups, tiered storage). Lifecycles, listeners, fetchers, the cleaner and the loops stay the
broker's own.

The broker builds one :class:`ApiServices` before its first listener opens (the controller
listener, :meth:`kcompat.broker.broker.Broker.start`) and fills in the broker side with
:meth:`ApiServices.attach_broker_side` before its broker listeners serve; the broker-side fields
are None on a controller-only node, whose listeners serve only controller APIs
(:mod:`kcompat.broker.apis`). Tests can build one from the parts a handler uses, without a broker.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:   # types only: the objects are built by kcompat.broker.broker
    from kcompat.broker.controller_service import ControllerService
    from kcompat.broker.group_runtime import GroupRuntime
    from kcompat.broker.quorum import QuorumRuntime
    from kcompat.broker.quota.client_quota import QuotaManagers
    from kcompat.broker.remote_log import RemoteLogManager
    from kcompat.broker.share.service import ShareService
    from kcompat.broker.share_state_runtime import ShareStateRuntime
    from kcompat.broker.txn_runtime import TxnRuntime
    from kcompat.config.broker import BrokerConfig
    from kcompat.config.describe import ConfigEntry
    from kcompat.isr.fetch_session import FetchSessions
    from kcompat.isr.replica_manager import ReplicaManager
    from kcompat.kraft.cluster_control import ClusterControl
    from kcompat.kraft.controller import Controller, TopicResult
    from kcompat.kraft.image import MetadataImage
    from kcompat.log import LogManager
    from kcompat.security.authorizer import StandardAuthorizer
    from kcompat.txn.producer_id_manager import ProducerIdManager


class MetadataCache:
    """Brokers and leaders as this node's metadata image has them (Kafka's ``KRaftMetadataCache``).

    ``image`` is the broker's :class:`kcompat.kraft.image.MetadataImage`, which metadata replay
    updates in place, so answers are always current.
    """

    __slots__ = ("image",)

    def __init__(self, image: MetadataImage) -> None:
        self.image = image

    def leader_of(self, topic: str, partition: int) -> int | None:
        """The partition's leader id: None if the image has no such partition, -1 if it has no leader."""
        t = self.image.topics.get(topic)
        if t is None or partition not in t.partitions:
            return None
        return t.partitions[partition].leader

    def live_broker_endpoints(self, listener_name: str) -> list[tuple[int, str, int, str | None]]:
        """(id, host, port, rack) on ``listener_name`` of every unfenced broker, by id, as Metadata
        shows them (Kafka's ``KRaftMetadataCache.getAliveBrokerNodes``)."""
        out = []
        for b in sorted(self.image.brokers.values(), key=lambda b: b.broker_id):
            ep = b.endpoints.get(listener_name)
            if ep is not None and not b.fenced:
                out.append((b.broker_id, ep.host, ep.port, b.rack))
        return out

    def endpoint_of(self, node_id: int, listener_name: str) -> tuple[str, int] | None:
        """(host, port) of unfenced broker ``node_id`` on ``listener_name``; None if unknown."""
        for node, host, port, _rack in self.live_broker_endpoints(listener_name):
            if node == node_id:
                return host, port
        return None


@dataclass(eq=False, slots=True)
class ApiServices:
    """The handlers' dependencies (see the module docstring).

    Controller side, set at construction:
    ``node_id``, ``cluster_id``; ``config`` (static and dynamic broker configs); ``image`` and
    ``metadata_cache``; ``now_ms`` (wall clock, ms); ``authorizer`` (None without
    ``authorizer.class.name``); ``quotas`` (client quotas, KIP-13/124/599); ``describe_topic_configs``
    (a topic's overrides over the broker defaults, DescribeConfigs entries); ``controller_service``
    (handle locally on the active controller or forward to it); ``controller`` and
    ``cluster_control`` (the KRaft controller's state machines, used on the active controller
    only); ``quorum`` (the metadata Raft quorum); ``is_shutting_down``.

    Broker side, None until :meth:`attach_broker_side` (and on a controller-only node):
    ``replica_manager``, ``log_manager``, ``remote_log`` (None without tiered storage),
    ``groups`` / ``txn`` / ``share_state`` (the group, transaction and share coordinators),
    ``share`` (ShareFetch and ShareAcknowledge), ``fetch_sessions`` (the incremental fetch
    session cache, KIP-227), ``producer_id_manager``, and ``auto_create_topics`` (create topics
    with the defaults through the controller, awaiting this node's image).
    """

    node_id: int
    cluster_id: str
    config: BrokerConfig
    image: MetadataImage
    metadata_cache: MetadataCache
    now_ms: Callable[[], int]
    authorizer: StandardAuthorizer | None
    quotas: QuotaManagers
    describe_topic_configs: Callable[..., list[ConfigEntry]]
    controller_service: ControllerService
    controller: Controller
    cluster_control: ClusterControl
    quorum: QuorumRuntime
    is_shutting_down: Callable[[], bool]
    replica_manager: ReplicaManager | None = None
    log_manager: LogManager | None = None
    remote_log: RemoteLogManager | None = None
    groups: GroupRuntime | None = None
    txn: TxnRuntime | None = None
    share_state: ShareStateRuntime | None = None
    share: ShareService | None = None
    fetch_sessions: FetchSessions | None = None
    producer_id_manager: ProducerIdManager | None = None
    auto_create_topics: Callable[[list[str]], Awaitable[list[TopicResult]]] | None = None

    def attach_broker_side(self, *, replica_manager: ReplicaManager, log_manager: LogManager,
                           remote_log: RemoteLogManager | None, groups: GroupRuntime, txn: TxnRuntime,
                           share_state: ShareStateRuntime, share: ShareService, fetch_sessions: FetchSessions,
                           producer_id_manager: ProducerIdManager,
                           auto_create_topics: Callable[[list[str]], Awaitable[list[TopicResult]]]) -> None:
        """Add the broker role's collaborators once they exist (before the broker listeners serve)."""
        self.replica_manager = replica_manager
        self.log_manager = log_manager
        self.remote_log = remote_log
        self.groups = groups
        self.txn = txn
        self.share_state = share_state
        self.share = share
        self.fetch_sessions = fetch_sessions
        self.producer_id_manager = producer_id_manager
        self.auto_create_topics = auto_create_topics
