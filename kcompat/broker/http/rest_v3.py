"""Confluent REST Proxy API v3 on the HTTP listener: the cluster, its topics, partitions and
replicas, consumer lag, and producing records (:mod:`.rest_v3_produce`). Paths, JSON shapes, status
and error codes follow Confluent's API reference ("Kafka REST Proxy API v3": Cluster, Topic,
Partition, Replica, Consumer Group and Records (v3); ``api/v3/openapi.yaml`` of confluentinc/kafka-rest).

Endpoints (all ``application/json``; ``cluster_id`` must be this cluster's, else 404 with
``error_code`` 404 "Cluster <id> cannot be found."):

- ``GET /v3/clusters`` -> KafkaClusterList; ``GET /v3/clusters/{cluster_id}`` -> KafkaCluster;
- ``GET .../topics`` -> KafkaTopicList (internal topics included, ``is_internal`` true);
  ``GET .../topics/{topic_name}`` -> KafkaTopic (``replication_factor``: replicas of partition 0);
- ``GET .../topics/{topic_name}/partitions`` -> KafkaPartitionList, ``.../partitions/{partition_id}``
  -> KafkaPartition (``leader`` links the leader's replica; absent while there is none);
  ``.../partitions/{partition_id}/replicas`` -> KafkaReplicaList and ``.../replicas/{broker_id}`` ->
  KafkaReplica (``is_leader``, ``is_in_sync``: the ISR), all from this node's metadata image;
- ``POST .../topics/{topic_name}/records`` -> ProduceResponse(s), see :mod:`.rest_v3_produce`;
- ``GET .../consumer-groups/{consumer_group_id}/lag-summary`` -> KafkaConsumerGroupLagSummary
  (``max_lag`` and the partition and consumer that have it, ``total_lag``),
  ``.../lags`` -> KafkaConsumerLagList, ``.../lags/{topic_name}/partitions/{partition_id}`` ->
  KafkaConsumerLag: per partition with a committed offset, ``current_offset`` (committed),
  ``log_end_offset`` (the last stable offset, as the REST Proxy lists offsets read_committed)
  and ``lag`` (never negative), with the member that owns the partition (``consumer_id``,
  ``instance_id``, ``client_id``; empty when none does).

Errors: 404 40401 "Topic not found." and 40402 "Partition not found." (the REST Proxy's v2 codes,
used here for every topic-scoped path; Confluent's v3 answers an unknown topic on GET with the
Admin client's UnknownTopicOrPartitionException, 40403), 404 (error_code 404) for an unknown
group or one without committed offsets ("Consumer group offsets could not be found."), JSON 404
"HTTP 404 Not Found" / 405 for paths and methods the proxy does not serve.

Lag: for a group this node coordinates, committed offsets come from the coordinator's state
(:func:`kcompat.broker.http.lag.consumer_lag`, with the owning members from the group's
assignment); for a group another node coordinates they are asked for with OffsetFetch, so every
node answers for every group (the owning member is then not known: empty ``consumer_id``).
Log end offsets come from the partition's leader replica when it is on this node, else from
ListOffsets to the leader.
"""

from __future__ import annotations

from urllib.parse import quote
from typing import TYPE_CHECKING

from aiohttp import web

from kcompat.broker.http.kafka_client import LATEST, READ_COMMITTED, ClusterClient, shared_client
from kcompat.broker.http.lag import consumer_lag
from kcompat.broker.http.rest_common import (
    V3_CONTENT_TYPE, add_fallback, add_route, json_response, not_found, partition_not_found, rest_handler, topic_not_found,
)
from kcompat.broker.http.rest_v3_produce import RestProducer, add_routes as add_produce_routes
from kcompat.protocol.topic_names import INTERNAL_TOPICS
from kcompat.group.consumer_protocol import parse_assignment

if TYPE_CHECKING:   # types only: built by kcompat.broker.broker
    from kcompat.broker.http.services import HttpServices

CLUSTERS = "/v3/clusters"


def _collection(kind: str, self_url: str, data: list) -> dict:
    return {"kind": kind, "metadata": {"self": self_url, "next": None}, "data": data}


def _resource(kind: str, self_url: str, crn: str) -> dict:
    return {"kind": kind, "metadata": {"self": self_url, "resource_name": crn}}


class V3:
    """The v3 resources of one broker: ``url(request)`` is where this listener's ``/v3`` is, as
    the client reached it (the ``self`` and ``related`` links)."""

    def __init__(self, services: HttpServices, client: ClusterClient) -> None:
        self.services = services
        self.client = client

    @staticmethod
    def url(request: web.Request) -> str:
        """``http://host:port/v3`` as the client addressed this listener."""
        return f"{request.url.origin()}/v3"

    def check_cluster(self, request: web.Request) -> str:
        """The request's ``cluster_id``; 404 (error_code 404) unless it is this cluster's."""
        cluster_id = request.match_info["cluster_id"]
        if cluster_id != self.services.cluster_id:
            raise not_found(f"Cluster {cluster_id} cannot be found.")
        return cluster_id

    def topic(self, name: str):
        """The topic's image; 404 40401 if there is none."""
        t = self.services.image.topics.get(name)
        if t is None:
            raise topic_not_found()
        return t

    @staticmethod
    def partition(t, partition_id: str):
        """The partition ``partition_id`` (a path segment) of topic image ``t``; 404 40402."""
        try:
            p = t.partitions.get(int(partition_id))
        except ValueError:
            p = None
        if p is None:
            raise partition_not_found()
        return p

    # -- resources ---------------------------------------------------------------------------------

    def cluster_data(self, base: str) -> dict:
        """ClusterData: ``cluster_id`` and the links to its resources (``controller``: the active controller)."""
        c = self.services.cluster_id
        url = f"{base}/clusters/{c}"
        out = _resource("KafkaCluster", url, f"crn:///kafka={c}")
        out["cluster_id"] = c
        controller = self._controller_id()
        if controller is not None:
            out["controller"] = {"related": f"{url}/brokers/{controller}"}
        for name, path in (("acls", "acls"), ("brokers", "brokers"), ("broker_configs", "broker-configs"),
                           ("consumer_groups", "consumer-groups"), ("topics", "topics"),
                           ("partition_reassignments", "topics/-/partitions/-/reassignment")):
            out[name] = {"related": f"{url}/{path}"}
        return out

    def _controller_id(self) -> int | None:
        quorum = self.services.quorum
        if quorum is None:
            return None
        leader = quorum.raft.leader_and_epoch.leader_id
        return leader if leader is not None and leader >= 0 else None

    def topic_data(self, base: str, t) -> dict:
        """TopicData of topic image ``t``."""
        c = self.services.cluster_id
        url = f"{base}/clusters/{c}/topics/{t.name}"
        out = _resource("KafkaTopic", url, f"crn:///kafka={c}/topic={t.name}")
        first = t.partitions.get(0) or next(iter(t.partitions.values()), None)
        out.update(cluster_id=c, topic_name=t.name, is_internal=t.name in INTERNAL_TOPICS,
                   replication_factor=len(first.replicas) if first is not None else 0,
                   partitions_count=len(t.partitions), partitions={"related": f"{url}/partitions"},
                   configs={"related": f"{url}/configs"},
                   partition_reassignments={"related": f"{url}/partitions/-/reassignment"})
        return out

    def partition_data(self, base: str, topic: str, p) -> dict:
        """PartitionData of partition image ``p``."""
        c = self.services.cluster_id
        url = f"{base}/clusters/{c}/topics/{topic}/partitions/{p.partition_id}"
        out = _resource("KafkaPartition", url, f"crn:///kafka={c}/topic={topic}/partition={p.partition_id}")
        out.update(cluster_id=c, topic_name=topic, partition_id=p.partition_id)
        if p.leader is not None and p.leader >= 0:
            out["leader"] = {"related": f"{url}/replicas/{p.leader}"}
        out["replicas"] = {"related": f"{url}/replicas"}
        out["reassignment"] = {"related": f"{url}/reassignment"}
        return out

    def replica_data(self, base: str, topic: str, p, broker_id: int) -> dict:
        """ReplicaData of ``broker_id``'s replica of partition image ``p`` (leader? in the ISR?)."""
        c = self.services.cluster_id
        url = f"{base}/clusters/{c}/topics/{topic}/partitions/{p.partition_id}/replicas/{broker_id}"
        out = _resource("KafkaReplica", url,
                        f"crn:///kafka={c}/topic={topic}/partition={p.partition_id}/replica={broker_id}")
        out.update(cluster_id=c, topic_name=topic, partition_id=p.partition_id, broker_id=broker_id,
                   is_leader=p.leader == broker_id, is_in_sync=broker_id in p.isr,
                   broker={"related": f"{base}/clusters/{c}/brokers/{broker_id}"})
        return out

    # -- consumer lag --------------------------------------------------------------------------------

    def _owners(self, group: str) -> dict[tuple[str, int], tuple[str, str | None, str]]:
        """(topic, partition) -> (member id, instance id, client id) of the member that owns it,
        for a group coordinated here."""
        groups = self.services.groups
        g = groups.coordinator.ctx.groups.get(group) if groups is not None else None
        out: dict[tuple[str, int], tuple[str, str | None, str]] = {}
        if g is None:
            return out
        if g.consumer is not None:
            by_id = self.services.image.topics_by_id
            for m in g.consumer.members.values():
                for tid, ps in m.assigned.items():
                    t = by_id.get(tid)
                    for p in ps if t is not None else ():
                        out[(t.name, p)] = (m.member_id, m.instance_id, m.client_id)
        elif g.protocol_type == "consumer":
            for m in g.members.values():
                try:
                    assigned = parse_assignment(m.assignment) if m.assignment else {}
                except Exception:   # a client's own encoding we cannot read: no owner shown
                    continue
                for t, ps in assigned.items():
                    for p in ps:
                        out[(t, p)] = (m.member_id, m.group_instance_id, m.client_id)
        return out

    async def lags(self, group: str) -> list[dict]:
        """Rows ``{topic, partition, current, end, owner}`` of ``group``, sorted; 404 if it has no
        committed offsets."""
        services = self.services
        groups = services.groups
        coordinator = groups.coordinator_node(group) if groups is not None else None
        if coordinator is None:
            raise not_found(f"Consumer Group {group} could not be found.")
        ends: dict[tuple[str, int], int] = {}
        owners: dict = {}
        if coordinator == services.node_id:
            entries = consumer_lag(services, {group})
            if not entries and group not in groups.coordinator.ctx.groups:
                raise not_found(f"Consumer Group {group} could not be found.")
            committed = {(e.topic, e.partition): e.committed for e in entries}
            ends = {(e.topic, e.partition): e.last_stable_offset for e in entries
                    if e.leader and e.last_stable_offset is not None}
            owners = self._owners(group)
        else:
            committed = {tp: off for tp, (off, _meta) in (await self.client.offset_fetch(group, None)).items()}
        if not committed:
            raise not_found("Consumer group offsets could not be found.")
        missing = {tp: LATEST for tp in committed if tp not in ends and self.client.leader(*tp) is not None}
        if missing:
            ends.update(await self.client.list_offsets(missing, READ_COMMITTED))
        rows = []
        for tp in sorted(committed):
            if tp in ends:
                rows.append({"topic": tp[0], "partition": tp[1], "current": committed[tp], "end": ends[tp],
                             "owner": owners.get(tp, ("", None, ""))})
        return rows

    def lag_data(self, base: str, group: str, row: dict) -> dict:
        """ConsumerLagData of one row of :meth:`lags` (offsets in records)."""
        c = self.services.cluster_id
        t, p = row["topic"], row["partition"]
        url = f"{base}/clusters/{c}/consumer-groups/{quote(group, safe='')}/lags/{t}/partitions/{p}"
        out = _resource("KafkaConsumerLag", url, f"crn:///kafka={c}/consumer-group={group}/lag={t}/partition={p}")
        consumer_id, instance_id, client_id = row["owner"]
        out.update(cluster_id=c, consumer_group_id=group, topic_name=t, partition_id=p,
                   consumer_id=consumer_id, instance_id=instance_id, client_id=client_id,
                   current_offset=row["current"], log_end_offset=row["end"],
                   lag=max(0, row["end"] - row["current"]))
        return out

    def lag_summary(self, base: str, group: str, rows: list[dict]) -> dict:
        """ConsumerGroupLagSummaryData of :meth:`lags` rows: the first partition with the largest
        lag, and the sum of the lags (records)."""
        c = self.services.cluster_id
        url = f"{base}/clusters/{c}/consumer-groups/{quote(group, safe='')}"
        out = _resource("KafkaConsumerGroupLagSummary", f"{url}/lag-summary",
                        f"crn:///kafka={c}/consumer-groups={group}/lag-summary")
        out.update(cluster_id=c, consumer_group_id=group)
        max_lag, total, top = -1, 0, None
        for row in rows:
            lag = max(0, row["end"] - row["current"])
            total += lag
            if lag > max_lag:
                max_lag, top = lag, row
        consumer_id, instance_id, client_id = top["owner"] if top else ("", None, "")
        out.update(max_lag_consumer_id=consumer_id, max_lag_instance_id=instance_id, max_lag_client_id=client_id,
                   max_lag_topic_name=top["topic"] if top else "",
                   max_lag_partition_id=top["partition"] if top else -1,
                   max_lag=max(max_lag, 0), total_lag=total,
                   max_lag_consumer={"related": f"{url}/consumers/{consumer_id}"},
                   max_lag_partition={"related": f"{base}/clusters/{c}/topics/{top['topic'] if top else ''}"
                                                 f"/partitions/{top['partition'] if top else -1}"})
        return out


def routes(app: web.Application, services: HttpServices) -> None:
    """Register the v3 routes (and the produce route) on ``app``."""
    v3 = V3(services, shared_client(app, services))
    producer = RestProducer(services, v3.client)
    handler = rest_handler(V3_CONTENT_TYPE)
    base = V3.url
    cluster = f"{CLUSTERS}/{{cluster_id}}"
    topic = f"{cluster}/topics/{{topic_name}}"
    partition = f"{topic}/partitions/{{partition_id}}"
    group = f"{cluster}/consumer-groups/{{consumer_group_id}}"

    @handler
    async def list_clusters(request):
        return json_response(_collection("KafkaClusterList", f"{base(request)}/clusters",
                                         [v3.cluster_data(base(request))]))

    @handler
    async def get_cluster(request):
        v3.check_cluster(request)
        return json_response(v3.cluster_data(base(request)))

    @handler
    async def list_topics(request):
        c = v3.check_cluster(request)
        image = services.image
        return json_response(_collection("KafkaTopicList", f"{base(request)}/clusters/{c}/topics",
                                         [v3.topic_data(base(request), image.topics[n]) for n in sorted(image.topics)]))

    @handler
    async def get_topic(request):
        v3.check_cluster(request)
        return json_response(v3.topic_data(base(request), v3.topic(request.match_info["topic_name"])))

    @handler
    async def list_partitions(request):
        c = v3.check_cluster(request)
        t = v3.topic(request.match_info["topic_name"])
        return json_response(_collection(
            "KafkaPartitionList", f"{base(request)}/clusters/{c}/topics/{t.name}/partitions",
            [v3.partition_data(base(request), t.name, t.partitions[p]) for p in sorted(t.partitions)]))

    @handler
    async def get_partition(request):
        v3.check_cluster(request)
        t = v3.topic(request.match_info["topic_name"])
        return json_response(v3.partition_data(base(request), t.name, v3.partition(t, request.match_info["partition_id"])))

    @handler
    async def list_replicas(request):
        c = v3.check_cluster(request)
        t = v3.topic(request.match_info["topic_name"])
        p = v3.partition(t, request.match_info["partition_id"])
        return json_response(_collection(
            "KafkaReplicaList", f"{base(request)}/clusters/{c}/topics/{t.name}/partitions/{p.partition_id}/replicas",
            [v3.replica_data(base(request), t.name, p, b) for b in p.replicas]))

    @handler
    async def get_replica(request):
        v3.check_cluster(request)
        t = v3.topic(request.match_info["topic_name"])
        p = v3.partition(t, request.match_info["partition_id"])
        try:
            broker_id = int(request.match_info["broker_id"])
        except ValueError:
            broker_id = None
        if broker_id not in p.replicas:
            raise not_found(f"Replica {request.match_info['broker_id']} cannot be found.")
        return json_response(v3.replica_data(base(request), t.name, p, broker_id))

    @handler
    async def lag_summary(request):
        v3.check_cluster(request)
        g = request.match_info["consumer_group_id"]
        return json_response(v3.lag_summary(base(request), g, await v3.lags(g)))

    @handler
    async def list_lags(request):
        c = v3.check_cluster(request)
        g = request.match_info["consumer_group_id"]
        rows = await v3.lags(g)
        return json_response(_collection("KafkaConsumerLagList",
                                         f"{base(request)}/clusters/{c}/consumer-groups/{quote(g, safe='')}/lags",
                                         [v3.lag_data(base(request), g, r) for r in rows]))

    @handler
    async def get_lag(request):
        v3.check_cluster(request)
        g = request.match_info["consumer_group_id"]
        t, p = request.match_info["topic_name"], request.match_info["partition_id"]
        for row in await v3.lags(g):
            if row["topic"] == t and str(row["partition"]) == p:
                return json_response(v3.lag_data(base(request), g, row))
        raise not_found()

    def get(path: str, fn) -> None:
        add_route(app, "GET", path, fn)
    get(CLUSTERS, list_clusters)
    get(cluster, get_cluster)
    get(f"{cluster}/topics", list_topics)
    get(topic, get_topic)
    get(f"{topic}/partitions", list_partitions)
    get(partition, get_partition)
    get(f"{partition}/replicas", list_replicas)
    get(f"{partition}/replicas/{{broker_id}}", get_replica)
    get(f"{group}/lag-summary", lag_summary)
    get(f"{group}/lags", list_lags)
    get(f"{group}/lags/{{topic_name}}/partitions/{{partition_id}}", get_lag)
    add_produce_routes(app, services, producer, v3.check_cluster)
    add_fallback(app, "/v3/", V3_CONTENT_TYPE)
