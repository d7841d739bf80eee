"""The console's JSON API (``GET /api/v1/...``), read from the node's own state when asked: the
metadata image (brokers, topics, partitions: the whole cluster as this node knows it), the local
replicas (offsets and sizes of the partitions this node has a replica of), the groups and
transactional ids this node coordinates, and the sampled history of :mod:`.history` (rates, lag
over time). Every answer is a JSON object; times are epoch milliseconds, sizes bytes, rates per
second. A handler that fails logs the error and answers 500 ``{"error": ...}``; an unknown topic or
group answers 404 ``{"error": ...}``, a malformed parameter 400.

- ``GET /api/v1`` -> ``{"endpoints": [path, ...]}``.
- ``GET /api/v1/cluster`` -> ``{"cluster_id", "node_id", "version", "now_ms", "controller_id",
  "this_node_is_controller", "metadata_offset", "quorum": {"leader_id", "epoch", "voters": [id],
  "high_watermark", "log_end_offset"}, "brokers": {"total", "online", "fenced"}, "topics",
  "partitions", "groups", "transactions", "health": {"status": "ok"|"warning"|"critical",
  "active_controller", "offline", "under_replicated", "under_min_isr", "fenced_brokers",
  "problems": [{"topic", "partition", "leader", "replicas", "isr", "offline", "under_replicated",
  "under_min_isr"}]}, "rates": {"bytes_in", "bytes_out", "messages_in", "produce_requests",
  "fetch_requests"}}`` - ``problems`` lists at most 100 partitions; ``status`` is critical with
  an offline or under-min-ISR partition or without an active controller, warning with an
  under-replicated partition or a fenced broker.
- ``GET /api/v1/brokers`` -> ``{"brokers": [{"id", "rack", "status": "online"|"fenced"|
  "shutting_down", "fenced", "in_controlled_shutdown", "epoch", "controller", "this_node",
  "endpoints": [{"listener", "host", "port"}], "leaders", "replicas", "log_dirs": [{"path",
  "size_bytes", "partitions", "disk_total_bytes", "disk_free_bytes"}] or null}]}`` - ``log_dirs``
  only for this node (the others' are not known here).
- ``GET /api/v1/topics`` -> ``{"topics": [{"name", "id", "internal", "partition_count",
  "replication_factor", "size_bytes", "local_partitions", "offline", "under_replicated",
  "under_min_isr", "rates": {...}}]}`` - ``size_bytes`` sums the local replicas (null without one).
- ``GET /api/v1/topics/{name}`` -> the same fields plus ``"min_insync_replicas"``, ``"configs"``
  (overrides) and ``"partitions": [{"partition", "leader", "leader_epoch", "replicas", "isr",
  "offline", "under_replicated", "under_min_isr", "local": {"role": "leader"|"follower",
  "log_start_offset", "log_end_offset", "high_watermark", "last_stable_offset", "size_bytes",
  "segments", "log_dir", "producers"} or null}]`` and ``"history"`` (its rates, as /rates).
- ``GET /api/v1/groups`` -> ``{"groups": [{"group_id", "protocol": "classic"|"consumer", "state",
  "members", "topics", "partitions", "lag", "lag_trend": [last samples' total lag]}]}`` - ``lag``
  is null when no partition's high watermark is known here.
- ``GET /api/v1/groups/{id}`` -> ``{"group_id", "protocol", "protocol_type", "state",
  "assignor", "generation", "coordinator_partition", "leader", "members": [{"member_id",
  "instance_id", "client_id", "client_host", "member_epoch", "assignment": {topic: [partition]}}],
  "lag", "offsets": [{"topic", "partition", "committed", "metadata", "commit_timestamp",
  "high_watermark", "last_stable_offset", "lag", "stable_lag", "lag_history": [...]}],
  "history": {"t": [...], "lag": [...]}}`` - ``generation`` is a KIP-848 group's group epoch.
- ``GET /api/v1/transactions`` -> ``{"transactions": [{"transactional_id", "state", "producer_id",
  "producer_epoch", "timeout_ms", "partitions": [{"topic", "partition"}], "txn_start_ms",
  "last_update_ms", "coordinator_partition"}], "states": {state: count}, "producers": [{"topic",
  "partition", "producer_id", "producer_epoch", "last_sequence", "last_timestamp",
  "coordinator_epoch", "current_txn_start_offset"}]}`` - producers of the partitions led here.
- ``GET /api/v1/rates[?topic=T][&window=S]`` -> ``{"interval_s", "window_s", "topic", "t": [...],
  "bytes_in": [...], "bytes_out": [...], "messages_in": [...], "produce_requests": [...],
  "fetch_requests": [...], "current": {...}}`` - per-second rates over each sampling interval.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from importlib import metadata as importlib_metadata
from typing import TYPE_CHECKING

from aiohttp import web

from kcompat.broker.http.history import RATE_NAMES, History
from kcompat.broker.http.lag import consumer_lag
from kcompat.group.consumer_protocol import EmbeddedProtocolError, parse_assignment
from kcompat.protocol.topic_names import INTERNAL_TOPICS

if TYPE_CHECKING:   # types only: built by kcompat.broker.broker
    from kcompat.broker.http.services import HttpServices

log = logging.getLogger("kcompat.http")

LAG_TREND_SAMPLES = 90   # 3 minutes at the default interval
MAX_PROBLEMS = 100       # partitions listed in /cluster's health.problems


class ApiError(Exception):
    """Answered as ``status`` ``{"error": message}``."""

    status = 400


class NotFound(ApiError):
    status = 404


def _version() -> str:
    try:
        return importlib_metadata.version("kcompat")
    except importlib_metadata.PackageNotFoundError:
        return "unknown"


# -- cluster and brokers -------------------------------------------------------------------------

def _controller_id(services: HttpServices) -> int | None:
    quorum = services.quorum
    if quorum is None:
        return None
    leader = quorum.raft.leader_and_epoch.leader_id
    return leader if leader is not None and leader >= 0 else None


class _MinIsr:
    """``min.insync.replicas`` of topics, for one answer: a topic's override, else the broker's
    value, worked out once (the full effective config of every topic would cost the event loop
    too much on a large cluster)."""

    def __init__(self, services: HttpServices) -> None:
        self.services = services
        self._default: int | None = None

    def __call__(self, topic: str) -> int:
        override = self.services.image.topic_configs(topic).get("min.insync.replicas")
        if override is not None:
            try:
                return int(override)
            except ValueError:
                pass
        if self._default is None:
            try:
                self._default = int(self.services.topic_values(topic)["min.insync.replicas"])
            except (AttributeError, KeyError, TypeError, ValueError):
                self._default = 1
        return self._default


def _partition_flags(pi, min_isr: int) -> dict:
    return {"offline": pi.leader < 0, "under_replicated": len(pi.isr) < len(pi.replicas),
            "under_min_isr": pi.leader >= 0 and len(pi.isr) < min_isr}


def _health(services: HttpServices) -> dict:
    offline = under = under_min = 0
    problems = []
    min_isr_of = _MinIsr(services)
    for name, t in sorted(list(services.image.topics.items())):
        min_isr = min_isr_of(name)
        for i, pi in sorted(t.partitions.items()):
            f = _partition_flags(pi, min_isr)
            offline += f["offline"]
            under += f["under_replicated"]
            under_min += f["under_min_isr"]
            if any(f.values()) and len(problems) < MAX_PROBLEMS:
                problems.append({"topic": name, "partition": i, "leader": pi.leader, "replicas": list(pi.replicas),
                                 "isr": list(pi.isr), **f})
    fenced = sum(1 for b in services.image.brokers.values() if b.fenced)
    controller = _controller_id(services) is not None
    status = "critical" if offline or under_min or not controller else "warning" if under or fenced else "ok"
    return {"status": status, "active_controller": controller, "offline": offline, "under_replicated": under,
            "under_min_isr": under_min, "fenced_brokers": fenced, "problems": problems}


def _groups_of(services: HttpServices) -> dict:
    groups = services.groups
    return dict(groups.coordinator.ctx.groups) if groups is not None else {}


def _txn_coordinator(services: HttpServices):
    txn = services.txn
    return txn.coordinator if txn is not None else None


def cluster(services: HttpServices, history: History) -> dict:
    image = services.image
    controller = _controller_id(services)
    quorum = services.quorum
    q = None
    if quorum is not None:
        raft = quorum.raft
        config = services.config
        voters = sorted(v.node_id for v in config.controller_quorum_voters) if config is not None else []
        q = {"leader_id": controller, "epoch": raft.leader_and_epoch.epoch, "voters": voters,
             "high_watermark": raft.high_watermark, "log_end_offset": raft.log_end_offset}
    brokers = list(image.brokers.values())
    txn = _txn_coordinator(services)
    return {
        "cluster_id": services.cluster_id, "node_id": services.node_id, "version": _version(),
        "now_ms": int(time.time() * 1000), "controller_id": controller,
        "this_node_is_controller": bool(services.controller_active()), "metadata_offset": image.offset, "quorum": q,
        "brokers": {"total": len(brokers), "online": sum(1 for b in brokers if not b.fenced),
                    "fenced": sum(1 for b in brokers if b.fenced)},
        "topics": len(image.topics), "partitions": sum(len(t.partitions) for t in image.topics.values()),
        "groups": len(_groups_of(services)),
        "transactions": len(txn.transactional_ids()) if txn is not None else 0,
        "health": _health(services), "rates": history.current_rates(),
    }


def _local_log_dirs(services: HttpServices) -> list[dict]:
    """This node's log dirs as the log manager describes them (the numbers DescribeLogDirs gives)."""
    lm = services.log_manager
    if lm is None:
        return []
    return [{"path": d.path, "size_bytes": sum(lg.size_in_bytes for lg in d.logs.values()), "partitions": len(d.logs),
             "disk_total_bytes": None if d.error else d.total_bytes,
             "disk_free_bytes": None if d.error else d.usable_bytes} for d in lm.describe_dirs()]


def brokers(services: HttpServices) -> dict:
    image = services.image
    controller = _controller_id(services)
    leaders: Counter = Counter()
    replicas: Counter = Counter()
    for t in list(image.topics.values()):
        for pi in t.partitions.values():
            leaders[pi.leader] += 1
            for r in pi.replicas:
                replicas[r] += 1
    out = []
    for b in sorted(image.brokers.values(), key=lambda b: b.broker_id):
        status = "fenced" if b.fenced else "shutting_down" if b.in_controlled_shutdown else "online"
        out.append({
            "id": b.broker_id, "rack": b.rack, "status": status, "fenced": b.fenced,
            "in_controlled_shutdown": b.in_controlled_shutdown, "epoch": b.epoch,
            "controller": b.broker_id == controller, "this_node": b.broker_id == services.node_id,
            "endpoints": [{"listener": e.name, "host": e.host, "port": e.port} for e in b.endpoints.values()],
            "leaders": leaders[b.broker_id], "replicas": replicas[b.broker_id],
            "log_dirs": _local_log_dirs(services) if b.broker_id == services.node_id else None,
        })
    return {"brokers": out}


# -- topics --------------------------------------------------------------------------------------

def _local(services: HttpServices, topic: str, partition: int) -> dict | None:
    rm = services.replica_manager
    p = rm.partitions.get((topic, partition)) if rm is not None else None
    if p is None:
        return None
    lm = services.log_manager
    d = lm.log_dir_of(topic, partition) if lm is not None else None
    leader = p.is_leader
    return {"role": "leader" if leader else "follower", "log_start_offset": p.log_start_offset,
            "log_end_offset": p.log_end_offset, "high_watermark": p.high_watermark,
            "last_stable_offset": p.last_stable_offset if leader else None,
            "size_bytes": p.log.size_in_bytes, "segments": len(p.log.segments),
            "log_dir": str(d) if d is not None else None, "producers": len(p.producer_state.producers)}


def _topic_summary(services: HttpServices, t, rates: dict, min_isr_of: _MinIsr) -> dict:
    min_isr = min_isr_of(t.name)
    rm = services.replica_manager
    local = [rm.partitions.get((t.name, i)) for i in t.partitions] if rm is not None else []
    local = [p for p in local if p is not None]
    flags = [_partition_flags(pi, min_isr) for pi in t.partitions.values()]
    return {
        "name": t.name, "id": str(t.topic_id), "internal": t.name in INTERNAL_TOPICS,
        "partition_count": len(t.partitions),
        "replication_factor": max((len(pi.replicas) for pi in t.partitions.values()), default=0),
        "size_bytes": sum(p.log.size_in_bytes for p in local) if local else None,
        "local_partitions": len(local),
        "offline": sum(f["offline"] for f in flags), "under_replicated": sum(f["under_replicated"] for f in flags),
        "under_min_isr": sum(f["under_min_isr"] for f in flags),
        "rates": rates.get(t.name) or dict.fromkeys(RATE_NAMES, 0.0),
    }


def topics(services: HttpServices, history: History) -> dict:
    rates = history.current_topic_rates()
    min_isr_of = _MinIsr(services)
    return {"topics": [_topic_summary(services, t, rates, min_isr_of)
                       for _, t in sorted(list(services.image.topics.items()))]}


def topic(services: HttpServices, history: History, name: str) -> dict:
    t = services.image.topics.get(name)
    if t is None:
        raise NotFound(f"no topic {name!r}")
    min_isr_of = _MinIsr(services)
    out = _topic_summary(services, t, history.current_topic_rates(), min_isr_of)
    min_isr = min_isr_of(name)
    out["min_insync_replicas"] = min_isr
    out["configs"] = services.image.topic_configs(name)
    out["partitions"] = [
        {"partition": i, "leader": pi.leader, "leader_epoch": pi.leader_epoch, "replicas": list(pi.replicas),
         "isr": list(pi.isr), **_partition_flags(pi, min_isr), "local": _local(services, name, i)}
        for i, pi in sorted(t.partitions.items())]
    out["history"] = history.rates(topic=name)
    return out


# -- groups --------------------------------------------------------------------------------------

def _group_state(g) -> str:
    return g.consumer.state.value if g.consumer is not None else g.state.value


def _member_count(g) -> int:
    return len(g.consumer.members) if g.consumer is not None else len(g.members)


def _sum_known(values) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def groups(services: HttpServices, history: History) -> dict:
    lags: dict[str, list] = {}
    for entry in consumer_lag(services):
        lags.setdefault(entry.group, []).append(entry)
    trend = history.lag_totals()
    out = []
    for gid, g in sorted(_groups_of(services).items()):
        entries = lags.get(gid, [])
        topics_ = {e.topic for e in entries} | set(g.subscribed_topics or ())
        if g.consumer is not None:
            for m in g.consumer.members.values():
                topics_.update(m.subscribed_topic_names)
        out.append({"group_id": gid, "protocol": g.type_name, "state": _group_state(g), "members": _member_count(g),
                    "topics": sorted(topics_), "partitions": len(entries),
                    "lag": _sum_known(e.lag for e in entries),
                    "lag_trend": trend["groups"].get(gid, [])[-LAG_TREND_SAMPLES:]})
    return {"groups": out}


def _classic_members(g) -> list[dict]:
    out = []
    for m in g.members.values():
        try:
            assigned = parse_assignment(m.assignment) if g.protocol_type == "consumer" else {}
        except EmbeddedProtocolError:
            assigned = {}
        out.append({"member_id": m.member_id, "instance_id": m.group_instance_id, "client_id": m.client_id,
                    "client_host": m.client_host, "member_epoch": None,
                    "assignment": {t: sorted(ps) for t, ps in sorted(assigned.items())}})
    return out


def _consumer_members(services: HttpServices, g) -> list[dict]:
    by_id = services.image.topics_by_id
    out = []
    for m in g.consumer.members.values():
        assignment: dict[str, list[int]] = {}
        for tid, parts in m.assigned.items():
            t = by_id.get(tid)
            assignment[t.name if t is not None else str(tid)] = sorted(parts)
        out.append({"member_id": m.member_id, "instance_id": m.instance_id, "client_id": m.client_id,
                    "client_host": m.client_host, "member_epoch": m.member_epoch,
                    "assignment": dict(sorted(assignment.items()))})
    return out


def group(services: HttpServices, history: History, group_id: str) -> dict:
    g = _groups_of(services).get(group_id)
    if g is None:
        raise NotFound(f"no group {group_id!r} on this node's coordinator")
    entries = consumer_lag(services, {group_id})
    h = history.lag(group_id)
    if g.consumer is not None:
        members = _consumer_members(services, g)
        assignors = {m.server_assignor for m in g.consumer.members.values() if m.server_assignor}
        cfg = getattr(services.groups.coordinator, "consumer_config", None)
        default = cfg.assignors[0] if cfg is not None and cfg.assignors else None
        assignor = ",".join(sorted(assignors)) if assignors else default
        generation, protocol_type, leader = g.consumer.group_epoch, "consumer", None
    else:
        members = _classic_members(g)
        assignor, generation, protocol_type, leader = g.protocol_name, g.generation_id, g.protocol_type, g.leader_id
    offsets = []
    for e in entries:
        om = g.offsets.get((e.topic, e.partition))
        offsets.append({"topic": e.topic, "partition": e.partition, "committed": e.committed,
                        "metadata": getattr(om, "metadata", None),
                        "commit_timestamp": getattr(om, "commit_timestamp", None), "high_watermark": e.high_watermark,
                        "last_stable_offset": e.last_stable_offset, "lag": e.lag, "stable_lag": e.stable_lag,
                        "lag_history": h["partitions"].get((e.topic, e.partition), [])})
    return {"group_id": group_id, "protocol": g.type_name, "protocol_type": protocol_type, "state": _group_state(g),
            "assignor": assignor, "generation": generation, "coordinator_partition": g.partition, "leader": leader,
            "members": members, "lag": _sum_known(e.lag for e in entries), "offsets": offsets,
            "history": {"t": h["t"], "lag": h["lag"]}}


# -- transactions and rates ------------------------------------------------------------------------

def transactions(services: HttpServices) -> dict:
    coordinator = _txn_coordinator(services)
    txns = []
    states: Counter = Counter()
    if coordinator is not None:
        for tid in coordinator.transactional_ids():
            m = coordinator.metadata(tid)
            if m is None:
                continue
            states[m.state.value] += 1
            txns.append({"transactional_id": tid, "state": m.state.value, "producer_id": m.producer_id,
                         "producer_epoch": m.producer_epoch, "timeout_ms": m.timeout_ms,
                         "partitions": [{"topic": tp[0], "partition": tp[1]} for tp in sorted(m.partitions)],
                         "txn_start_ms": m.txn_start_ms, "last_update_ms": m.last_update_ms,
                         "coordinator_partition": m.partition})
    producers = []
    rm = services.replica_manager
    for (t, i), p in sorted(list(rm.partitions.items()) if rm is not None else []):
        if not p.is_leader:
            continue
        for e in list(p.producer_state.producers.values()):
            producers.append({"topic": t, "partition": i, "producer_id": e.producer_id,
                              "producer_epoch": e.producer_epoch, "last_sequence": e.last_seq,
                              "last_timestamp": e.last_timestamp, "coordinator_epoch": e.coordinator_epoch,
                              "current_txn_start_offset": e.current_txn_first_offset})
    return {"transactions": txns, "states": dict(sorted(states.items())), "producers": producers}


def rates(services: HttpServices, history: History, topic_name: str | None, window_s: float | None) -> dict:
    if topic_name is not None and topic_name not in services.image.topics:
        raise NotFound(f"no topic {topic_name!r}")
    series = history.rates(topic=topic_name, window_s=window_s)
    if topic_name is None:
        current = history.current_rates()
    else:
        current = history.current_topic_rates().get(topic_name) or dict.fromkeys(RATE_NAMES, 0.0)
    return {"interval_s": history.interval_s, "window_s": history.window_s, "topic": topic_name, **series,
            "current": current}


# -- routes --------------------------------------------------------------------------------------

ENDPOINTS = ("/api/v1/cluster", "/api/v1/brokers", "/api/v1/topics", "/api/v1/topics/{name}", "/api/v1/groups",
             "/api/v1/groups/{id}", "/api/v1/transactions", "/api/v1/rates")


def _json(body: dict, status: int = 200) -> web.Response:
    return web.json_response(body, status=status, headers={"Cache-Control": "no-store"})


def guarded(build):
    """An aiohttp handler answering ``build(request)`` as JSON: 404 (400) for :class:`NotFound`
    (:class:`ApiError`), 500 (logged) for any other exception."""
    async def handler(request: web.Request) -> web.Response:
        try:
            return _json(build(request))
        except ApiError as e:
            return _json({"error": str(e)}, e.status)
        except Exception as e:
            log.exception("GET %s failed", request.path)
            return _json({"error": f"{type(e).__name__}: {e}", "path": request.path}, 500)
    return handler


def _window(request: web.Request) -> float | None:
    raw = request.query.get("window")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        raise ApiError(f"window={raw!r} is not a number of seconds") from None


def add_routes(app: web.Application, services: HttpServices, history: History) -> None:
    get = app.router.add_get
    get("/api/v1", guarded(lambda r: {"endpoints": list(ENDPOINTS)}))
    get("/api/v1/cluster", guarded(lambda r: cluster(services, history)))
    get("/api/v1/brokers", guarded(lambda r: brokers(services)))
    get("/api/v1/topics", guarded(lambda r: topics(services, history)))
    get("/api/v1/topics/{name}", guarded(lambda r: topic(services, history, r.match_info["name"])))
    get("/api/v1/groups", guarded(lambda r: groups(services, history)))
    get("/api/v1/groups/{id:.+}", guarded(lambda r: group(services, history, r.match_info["id"])))
    get("/api/v1/transactions", guarded(lambda r: transactions(services)))
    get("/api/v1/rates", guarded(lambda r: rates(services, history, r.query.get("topic"), _window(r))))
