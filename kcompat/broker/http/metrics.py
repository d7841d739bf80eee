"""``GET /metrics``: the node's metrics in the Prometheus text format (prometheus-client), named as
the Prometheus JMX exporter's standard Kafka rules name Kafka's JMX metrics (``lowercaseOutputName``,
``kafka.<domain><type=T, name=N, k=v><>Count`` -> ``kafka_<domain>_<t>_<n>_total{k="v"}``, ``Value``
-> a gauge, ``...PerSec`` without the suffix), so that existing dashboards and alerts work.

Counters come from numbers the request path keeps as plain integers (:mod:`kcompat.isr.broker_topic_stats`,
:mod:`kcompat.broker.request_stats`); everything else is read from the broker's state when scraped,
so a scrape costs the hot path nothing. Families:

- ``kafka_server_brokertopicmetrics_{bytesin,bytesout,messagesin,bytesrejected,totalproducerequests,
  failedproducerequests,totalfetchrequests,failedfetchrequests}_total`` per ``topic`` and without a
  label for all topics (BrokerTopicMetrics);
- ``kafka_network_requestmetrics_requests_total{request,version}``, ``..._errors_total{request,error}``,
  ``..._{totaltimems,requestqueuetimems,localtimems,remotetimems,responsesendtimems}`` histograms per
  ``request``, ``..._requestbytes_total``/``..._responsebytes_total`` (RequestMetrics);
- ``kafka_server_replicamanager_{partitioncount,leadercount,underreplicatedpartitions,
  underminisrpartitioncount,atminisrpartitioncount,offlinereplicacount}`` and
  ``..._{isrshrinks,isrexpands}_total`` (ReplicaManager);
- ``kafka_log_log_{size,numlogsegments,logstartoffset,logendoffset}{topic,partition}`` (Log; ``size``
  is the local part of a tiered partition);
- tiered storage (KIP-405): ``kafka_server_brokertopicmetrics_remotelogsizebytes{topic}`` (bytes of
  the remote segments of the partitions this broker leads) and
  ``kafka_log_log_locallogstartoffset{topic,partition}``;
- ``kafka_controller_kafkacontroller_{activecontrollercount,offlinepartitionscount,globaltopiccount,
  globalpartitioncount,fencedbrokercount,activebrokercount}``, ``kafka_server_raft_metrics_{current_leader,
  current_epoch,high_watermark,log_end_offset}``, ``kafka_server_broker_metadata_metrics_last_applied_record_offset``;
- ``kafka_server_group_coordinator_metrics_group_count{protocol}`` (classic, consumer, share, streams)
  and the groups of each protocol by state, ``..._{classic,consumer,share,streams}_group_count{state}``
  (GroupCoordinatorMetrics), ``kafka_server_transaction_coordinator_metrics_transaction_count{state}``;
- ``kafka_server_fetchsessioncache_{numincrementalfetchsessions,numincrementalfetchpartitionscached}``
  and ``kafka_server_fetchsessioncache_incrementalfetchsessionevictions_total`` (FetchSessionCache, KIP-227);
- ``kafka_server_socket_server_metrics_{connection_count,connection_creation_total,connection_close_total}``;
- consumer lag as kafka_exporter names it: ``kafka_consumergroup_lag{consumergroup,topic,partition}``,
  ``kafka_consumergroup_lag_stable``, ``kafka_consumergroup_current_offset``, ``kafka_consumergroup_lag_sum{consumergroup,topic}``,
  and ``kafka_topic_partition_current_offset``/``kafka_topic_partition_oldest_offset{topic,partition}``.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.samples import Sample

from kcompat.broker.http.lag import consumer_lag
from kcompat.broker.request_stats import BUCKETS_MS, TIMES
from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages import API_NAMES

if TYPE_CHECKING:   # types only: built by kcompat.broker.broker
    from kcompat.broker.http.services import HttpServices

log = logging.getLogger("kcompat.http")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# GroupCoordinatorMetrics' group types (the protocol tag of group-count; KIP-848, KIP-932, KIP-1071)
GROUP_PROTOCOLS = ("classic", "consumer", "share", "streams")

_TOPIC_COUNTERS = (("bytesin", "bytes_in", "Bytes of records appended by produce requests"),
                   ("bytesout", "bytes_out", "Bytes of records returned to consumers"),
                   ("messagesin", "messages_in", "Records appended by produce requests"),
                   ("bytesrejected", "bytes_rejected", "Bytes of produce requests that failed"),
                   ("totalproducerequests", "total_produce", "Produce requests, per topic and partition"),
                   ("failedproducerequests", "failed_produce", "Failed produce requests"),
                   ("totalfetchrequests", "total_fetch", "Consumer fetches, per topic and partition"),
                   ("failedfetchrequests", "failed_fetch", "Failed consumer fetches"))
_TIME_NAMES = {"total": "totaltimems", "request_queue": "requestqueuetimems", "local": "localtimems",
               "remote": "remotetimems", "response_send": "responsesendtimems"}


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class BrokerCollector:
    """A prometheus-client collector reading the node (``services``) at scrape time."""

    def __init__(self, services: HttpServices) -> None:
        self.services = services

    def collect(self):
        yield from self._topic_metrics()
        yield from self._request_metrics()
        yield from self._replica_metrics()
        yield from self._fetch_session_metrics()
        yield from self._controller_metrics()
        yield from self._coordinator_metrics()
        yield from self._lag_metrics()

    # -- BrokerTopicMetrics --------------------------------------------------------------------

    def _topic_metrics(self):
        rm = self.services.replica_manager
        topics = dict(rm.stats.topics) if rm is not None else {}
        for suffix, attr, doc in _TOPIC_COUNTERS:
            f = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{suffix}", doc, labels=["topic"])
            total = 0
            for topic in sorted(topics):
                value = getattr(topics[topic], attr)
                total += value
                f.add_metric([topic], value)
            f.samples.append(Sample(f"kafka_server_brokertopicmetrics_{suffix}_total", {}, total, None, None))
            yield f

    # -- RequestMetrics and the socket server ---------------------------------------------------

    def _request_metrics(self):
        stats = self.services.request_stats
        requests = CounterMetricFamily("kafka_network_requestmetrics_requests", "Requests by API and version",
                                       labels=["request", "version"])
        errors = CounterMetricFamily("kafka_network_requestmetrics_errors", "Error codes in responses",
                                     labels=["request", "error"])
        req_bytes = CounterMetricFamily("kafka_network_requestmetrics_requestbytes", "Request bytes",
                                        labels=["request"])
        resp_bytes = CounterMetricFamily("kafka_network_requestmetrics_responsebytes", "Response bytes",
                                         labels=["request"])
        times = {t: HistogramMetricFamily(f"kafka_network_requestmetrics_{_TIME_NAMES[t]}",
                                          f"{_TIME_NAMES[t]} (milliseconds)", labels=["request"]) for t in TIMES}
        for api_key, s in sorted(stats.apis.items()):
            name = API_NAMES.get(api_key, str(api_key))
            for version, n in sorted(s.requests.items()):
                requests.add_metric([name, str(version)], n)
            for code, n in sorted(s.errors.items()):
                errors.add_metric([name, _error_name(code)], n)
            req_bytes.add_metric([name], s.request_bytes)
            resp_bytes.add_metric([name], s.response_bytes)
            for t in TIMES:
                h = s.times[t]
                cumulative, buckets = 0, []
                for bound, count in zip(BUCKETS_MS, h.counts):
                    cumulative += count
                    buckets.append((str(bound), cumulative))
                buckets.append(("+Inf", h.count))
                times[t].add_metric([name], buckets, h.sum)
        yield from (requests, errors, req_bytes, resp_bytes, *times.values())
        yield GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count", "Open client connections",
                                value=self.services.connection_count())
        yield CounterMetricFamily("kafka_server_socket_server_metrics_connection_creation",
                                  "Connections accepted", value=stats.connections_created)
        yield CounterMetricFamily("kafka_server_socket_server_metrics_connection_close", "Connections closed",
                                  value=stats.connections_closed)
        yield CounterMetricFamily("kcompat_zero_copy_responses", "Fetch responses written with sendfile",
                                  value=stats.zero_copy_responses)
        yield CounterMetricFamily("kcompat_zero_copy_bytes", "Record bytes sent from segment files with sendfile",
                                  value=stats.zero_copy_bytes)

    # -- ReplicaManager and Log ---------------------------------------------------------------

    def _fetch_session_metrics(self):
        """Kafka's ``kafka.server:type=FetchSessionCache`` gauges and eviction meter."""
        sessions = self.services.fetch_sessions
        if sessions is None:
            return
        prefix = "kafka_server_fetchsessioncache_"
        yield GaugeMetricFamily(prefix + "numincrementalfetchsessions", "Incremental fetch sessions cached",
                                value=sessions.sessions())
        yield GaugeMetricFamily(prefix + "numincrementalfetchpartitionscached",
                                "Partitions in the cached incremental fetch sessions", value=sessions.partitions())
        yield CounterMetricFamily(prefix + "incrementalfetchsessionevictions",
                                  "Incremental fetch sessions evicted to make room", value=sessions.evictions())

    def _replica_metrics(self):
        rm = self.services.replica_manager
        partitions = list(rm.partitions.values()) if rm is not None else []
        leaders = [p for p in partitions if p.is_leader]
        under = under_min = at_min = 0
        for p in leaders:
            isr = len(p.isr)
            if isr < len(p.replicas):
                under += 1
            if isr < p.min_insync_replicas:
                under_min += 1
            elif isr == p.min_insync_replicas:
                at_min += 1
        prefix = "kafka_server_replicamanager_"
        yield GaugeMetricFamily(prefix + "partitioncount", "Partitions with a replica here", value=len(partitions))
        yield GaugeMetricFamily(prefix + "leadercount", "Partitions led here", value=len(leaders))
        yield GaugeMetricFamily(prefix + "underreplicatedpartitions", "Led partitions whose ISR lacks replicas",
                                value=under)
        yield GaugeMetricFamily(prefix + "underminisrpartitioncount", "Led partitions below min.insync.replicas",
                                value=under_min)
        yield GaugeMetricFamily(prefix + "atminisrpartitioncount", "Led partitions at min.insync.replicas",
                                value=at_min)
        yield GaugeMetricFamily(prefix + "offlinereplicacount", "Replicas in failed log dirs", value=0)
        if rm is not None:
            yield CounterMetricFamily(prefix + "isrshrinks", "ISR shrinks of led partitions", value=rm.stats.isr_shrinks)
            yield CounterMetricFamily(prefix + "isrexpands", "ISR expansions of led partitions",
                                      value=rm.stats.isr_expands)
        fams = {name: GaugeMetricFamily(f"kafka_log_log_{name}", doc, labels=["topic", "partition"])
                for name, doc in (("size", "Bytes of the partition's log"), ("numlogsegments", "Segments"),
                                  ("logstartoffset", "Log start offset"), ("logendoffset", "Log end offset"))}
        topic_offsets = {name: GaugeMetricFamily(f"kafka_topic_partition_{name}", doc, labels=["topic", "partition"])
                         for name, doc in (("current_offset", "High watermark of the partition"),
                                           ("oldest_offset", "Log start offset of the partition"))}
        for p in sorted(partitions, key=lambda p: (p.topic, p.partition_id)):
            labels = [p.topic, str(p.partition_id)]
            lg = p.log
            fams["size"].add_metric(labels, lg.size_in_bytes)
            fams["numlogsegments"].add_metric(labels, len(lg.segments))
            fams["logstartoffset"].add_metric(labels, p.log_start_offset)
            fams["logendoffset"].add_metric(labels, p.log_end_offset)
            if p.is_leader:
                topic_offsets["current_offset"].add_metric(labels, p.high_watermark)
                topic_offsets["oldest_offset"].add_metric(labels, p.log_start_offset)
        yield from fams.values()
        yield from topic_offsets.values()
        yield from self._tiered_metrics(partitions)

    def _tiered_metrics(self, partitions):
        remote = self.services.remote_log
        if remote is None:
            return
        sizes = GaugeMetricFamily("kafka_server_brokertopicmetrics_remotelogsizebytes",
                                  "Bytes of remote segments (tiered storage) of led partitions", labels=["topic"])
        local_start = GaugeMetricFamily("kafka_log_log_locallogstartoffset", "First offset on local disk",
                                        labels=["topic", "partition"])
        per_topic: Counter = Counter()
        for p in partitions:
            if p.log.config.remote_storage_enable:
                local_start.add_metric([p.topic, str(p.partition_id)], p.log.local_log_start_offset)
                if p.is_leader:
                    per_topic[p.topic] += remote.remote_size_in_bytes(p)
        for topic, size in sorted(per_topic.items()):
            sizes.add_metric([topic], size)
        yield sizes
        yield local_start

    # -- controller, Raft, metadata ------------------------------------------------------------

    def _controller_metrics(self):
        b = self.services
        image = b.image
        if image is None:
            return
        offline = sum(1 for t in image.topics.values() for pi in t.partitions.values() if pi.leader < 0)
        brokers = list(image.brokers.values())
        c = "kafka_controller_kafkacontroller_"
        yield GaugeMetricFamily(c + "activecontrollercount", "1 on the active controller",
                                value=1 if b.controller_active() else 0)
        yield GaugeMetricFamily(c + "offlinepartitionscount", "Partitions without a leader", value=offline)
        yield GaugeMetricFamily(c + "globaltopiccount", "Topics", value=len(image.topics))
        yield GaugeMetricFamily(c + "globalpartitioncount", "Partitions",
                                value=sum(len(t.partitions) for t in image.topics.values()))
        yield GaugeMetricFamily(c + "fencedbrokercount", "Fenced brokers", value=sum(1 for x in brokers if x.fenced))
        yield GaugeMetricFamily(c + "activebrokercount", "Unfenced brokers",
                                value=sum(1 for x in brokers if not x.fenced))
        quorum = b.quorum
        if quorum is not None:
            raft = quorum.raft
            r = "kafka_server_raft_metrics_"
            leader = raft.leader_and_epoch
            yield GaugeMetricFamily(r + "current_leader", "Leader of the metadata quorum (-1: none)",
                                    value=leader.leader_id if leader.leader_id is not None else -1)
            yield GaugeMetricFamily(r + "current_epoch", "Epoch of the metadata quorum", value=leader.epoch)
            hw = raft.high_watermark
            yield GaugeMetricFamily(r + "high_watermark", "Metadata log high watermark",
                                    value=hw if hw is not None else -1)
            yield GaugeMetricFamily(r + "log_end_offset", "Metadata log end offset", value=raft.log_end_offset)
        yield GaugeMetricFamily("kafka_server_broker_metadata_metrics_last_applied_record_offset",
                                "Offset of the last metadata record applied", value=image.offset)

    # -- coordinators ----------------------------------------------------------------------------

    def _coordinator_metrics(self):
        groups = self.services.groups
        if groups is not None:
            by_protocol: Counter[str] = Counter()
            by_state: dict[str, Counter[str]] = {p: Counter() for p in GROUP_PROTOCOLS}
            for group in list(groups.coordinator.ctx.groups.values()):
                protocol = group.type_name
                by_protocol[protocol] += 1
                typed = group.consumer or group.share or group.streams
                by_state[protocol][str(group.state) if typed is None else typed.state.value] += 1
            g = "kafka_server_group_coordinator_metrics_"
            f = GaugeMetricFamily(g + "group_count", "Groups by protocol", labels=["protocol"])
            for protocol in GROUP_PROTOCOLS:
                f.add_metric([protocol], by_protocol.get(protocol, 0))
            yield f
            rebalances = groups.coordinator.ctx.rebalances
            yield CounterMetricFamily(g + "classic_group_completed_rebalance_count",
                                      "Completed classic group rebalances", value=rebalances["classic"])
            yield CounterMetricFamily(g + "consumer_group_rebalance_count",
                                      "Consumer group epoch bumps (KIP-848 rebalances)", value=rebalances["consumer"])
            for protocol in GROUP_PROTOCOLS:
                f = GaugeMetricFamily(f"{g}{protocol}_group_count", f"{protocol.capitalize()} groups by state",
                                      labels=["state"])
                for state, n in sorted(by_state[protocol].items()):
                    f.add_metric([state], n)
                yield f
        txn = self.services.txn
        if txn is not None:
            coordinator = txn.coordinator
            states: Counter[str] = Counter(m.state.name for m in (coordinator.metadata(t)
                                                                   for t in coordinator.transactional_ids())
                                           if m is not None)
            f = GaugeMetricFamily("kafka_server_transaction_coordinator_metrics_transaction_count",
                                  "Transactional ids by state", labels=["state"])
            for state, n in sorted(states.items()):
                f.add_metric([state], n)
            yield f

    # -- consumer lag ----------------------------------------------------------------------------

    def _lag_metrics(self):
        labels = ["consumergroup", "topic", "partition"]
        lag = GaugeMetricFamily("kafka_consumergroup_lag", "High watermark - committed offset", labels=labels)
        stable = GaugeMetricFamily("kafka_consumergroup_lag_stable", "Last stable offset - committed offset",
                                   labels=labels)
        current = GaugeMetricFamily("kafka_consumergroup_current_offset", "Committed offset", labels=labels)
        lag_sum = GaugeMetricFamily("kafka_consumergroup_lag_sum", "Lag of a group on a topic",
                                    labels=["consumergroup", "topic"])
        sums: Counter[tuple[str, str]] = Counter()
        for entry in consumer_lag(self.services):
            lbl = [entry.group, entry.topic, str(entry.partition)]
            current.add_metric(lbl, entry.committed)
            if entry.lag is not None:
                lag.add_metric(lbl, entry.lag)
                sums[(entry.group, entry.topic)] += entry.lag
            if entry.stable_lag is not None:
                stable.add_metric(lbl, entry.stable_lag)
        for (group, topic), n in sorted(sums.items()):
            lag_sum.add_metric([group, topic], n)
        yield from (lag, stable, current, lag_sum)


def render(services: HttpServices) -> bytes:
    """The Prometheus text exposition of the metrics of the node ``services`` reads."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(services))
    return generate_latest(registry)


def routes(app: web.Application, services: HttpServices) -> None:
    async def metrics(_request: web.Request) -> web.Response:
        try:
            body = render(services)
        except Exception:
            log.exception("GET /metrics failed")
            raise web.HTTPInternalServerError(text="metrics could not be collected; see the broker log")
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})
    app.router.add_get("/metrics", metrics)
