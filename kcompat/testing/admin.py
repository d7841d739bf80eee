"""The few admin calls test fixtures need, over the Kafka protocol with kcompat's own codecs.

Blocking, one connection per call (:mod:`kcompat.testing.wire`), so fixtures work the same whatever
Kafka client a user's tests use — or none. Each function takes ``bootstrap``, a ``host:port[,...]``
list as clients take it, and works against kcompat or any Kafka broker. Errors come back as
:class:`AdminError` with Kafka's error code and name.
"""

from __future__ import annotations

import time

from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.create_topics import CreateTopicsRequest
from kcompat.protocol.messages.delete_groups import DeleteGroupsRequest
from kcompat.protocol.messages.delete_topics import DeleteTopicsRequest
from kcompat.protocol.messages.find_coordinator import FindCoordinatorRequest
from kcompat.protocol.messages.list_groups import ListGroupsRequest
from kcompat.protocol.messages.metadata import MetadataRequest
from kcompat.testing import wire

# request versions: all of them served by Kafka 2.4 and later as well as kcompat
CREATE_TOPICS_V, DELETE_TOPICS_V, METADATA_V = 5, 4, 9
LIST_GROUPS_V, FIND_COORDINATOR_V, DELETE_GROUPS_V = 3, 4, 2
# errors after which a call is tried again until its deadline (the cluster is still settling)
RETRIABLE = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
             ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_CONTROLLER, ErrorCode.REQUEST_TIMED_OUT,
             ErrorCode.LEADER_NOT_AVAILABLE}


class AdminError(Exception):
    """A Kafka error code from an admin call: ``code`` (int), ``name`` (Kafka's error name)."""

    def __init__(self, code: int, what: str, message: str | None = None) -> None:
        self.code = code
        try:
            self.name = ErrorCode(code).name
        except ValueError:
            self.name = f"UNKNOWN_ERROR_CODE_{code}"
        super().__init__(f"{what}: {self.name} ({code})" + (f": {message}" if message else ""))


def addresses(bootstrap: str) -> list[str]:
    """``host:port`` strings of a bootstrap list."""
    return [a.strip() for a in bootstrap.split(",") if a.strip()]


def _call_any(bootstrap: str, request, version: int):
    """The response of the first address of ``bootstrap`` that answers; OSError if none does."""
    last: OSError | None = None
    for address in addresses(bootstrap):
        try:
            return wire.call(address, request, version)
        except OSError as e:
            last = e
    raise last or OSError("empty bootstrap list")


def metadata(bootstrap: str, topics: list[str] | None = None):
    """A MetadataResponse (v9) for ``topics`` (None: all topics), without creating any."""
    req = MetadataRequest(topics=None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t)
                                                                for t in topics],
                          allow_auto_topic_creation=False)
    return _call_any(bootstrap, req, METADATA_V)


def broker_addresses(bootstrap: str) -> dict[int, str]:
    """Node id -> ``host:port`` of every broker the cluster lists."""
    return {b.node_id: f"{b.host}:{b.port}" for b in metadata(bootstrap, []).brokers}


def list_topics(bootstrap: str, internal: bool = False) -> list[str]:
    """Names of the cluster's topics, without the internal ones (``__consumer_offsets``...) unless
    ``internal``."""
    return sorted(t.name for t in metadata(bootstrap).topics if internal or not t.is_internal)


def create_topic(bootstrap: str, name: str, partitions: int = 1, replication_factor: int = -1,
                 config: dict[str, str] | None = None, timeout_s: float = 30.0) -> None:
    """CreateTopics (v5) for one topic (``replication_factor`` -1: the broker's
    ``default.replication.factor``), then wait until every broker's Metadata shows a leader for
    each partition, so that clients can use it at once. Raises AdminError (TOPIC_ALREADY_EXISTS,
    INVALID_CONFIG, INVALID_REPLICATION_FACTOR...) or TimeoutError."""
    configs = [CreateTopicsRequest.CreatableTopicConfig(name=k, value=str(v))
               for k, v in (config or {}).items()]
    req = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=replication_factor, assignments=[],
        configs=configs)], timeout_ms=int(timeout_s * 1000))
    deadline = time.monotonic() + timeout_s
    while True:
        result = _call_any(bootstrap, req, CREATE_TOPICS_V).topics[0]
        if result.error_code == 0:
            break
        if result.error_code not in RETRIABLE or time.monotonic() > deadline:
            raise AdminError(result.error_code, f"creating topic {name!r}", result.error_message)
        time.sleep(0.05)
    wait_for_leaders(bootstrap, [name], deadline - time.monotonic())


def wait_for_leaders(bootstrap: str, topics: list[str], timeout_s: float = 30.0) -> None:
    """Until every broker of the cluster lists each of ``topics`` with a leader for every
    partition. Raises TimeoutError."""
    deadline = time.monotonic() + max(timeout_s, 0.0)
    while True:
        try:
            brokers = list(broker_addresses(bootstrap).values())
            if brokers and all(_has_leaders(address, topics) for address in brokers):
                return
        except OSError:
            pass    # a broker that is restarting
        if time.monotonic() > deadline:
            raise TimeoutError(f"topics {topics} have no leader on every broker after {timeout_s:.0f} s")
        time.sleep(0.02)


def _has_leaders(address: str, topics: list[str]) -> bool:
    resp = metadata(address, topics)
    return all(t.error_code == 0 and t.partitions and all(p.leader_id >= 0 for p in t.partitions)
               for t in resp.topics)


def delete_topics(bootstrap: str, names: list[str], timeout_s: float = 30.0) -> None:
    """DeleteTopics (v4); a topic that is already gone is not an error, a retriable error (a
    controller moving after a restart) is tried again until ``timeout_s``. Raises AdminError."""
    deadline = time.monotonic() + timeout_s
    pending = list(names)
    while pending:
        req = DeleteTopicsRequest(topic_names=pending, timeout_ms=int(timeout_s * 1000))
        retry = []
        for result in _call_any(bootstrap, req, DELETE_TOPICS_V).responses:
            if result.error_code in (0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                continue
            if result.error_code not in RETRIABLE or time.monotonic() > deadline:
                raise AdminError(result.error_code, f"deleting topic {result.name!r}", result.error_message)
            retry.append(result.name)
        pending = retry
        if pending:
            time.sleep(0.05)


def list_groups(bootstrap: str, timeout_s: float = 30.0) -> list[str]:
    """Ids of every group on every broker (ListGroups v3 to each: a broker lists the groups it
    coordinates). A broker still loading its ``__consumer_offsets`` partitions (just restarted) is
    asked again until ``timeout_s``; other errors raise AdminError."""
    deadline = time.monotonic() + timeout_s
    groups: set[str] = set()
    for address in broker_addresses(bootstrap).values():
        while True:
            resp = wire.call(address, ListGroupsRequest(), LIST_GROUPS_V)
            if resp.error_code == 0:
                break
            if resp.error_code not in RETRIABLE or time.monotonic() > deadline:
                raise AdminError(resp.error_code, f"listing groups on {address}")
            time.sleep(0.05)
        groups.update(g.group_id for g in resp.groups)
    return sorted(groups)


def wait_for_coordinator(bootstrap: str, key_type: int = 0, timeout_s: float = 30.0) -> int:
    """FindCoordinator (v4) until it names a coordinator; returns its node id. The first call
    creates the coordinator's internal topic (``__consumer_offsets`` for key type 0 = group,
    ``__transaction_state`` for 1 = transaction), as Kafka does. Raises AdminError at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = _call_any(bootstrap, FindCoordinatorRequest(key_type=key_type, coordinator_keys=["kcompat-testing"]),
                          FIND_COORDINATOR_V).coordinators[0]
        if found.error_code == 0:
            return found.node_id
        if time.monotonic() > deadline:
            raise AdminError(found.error_code, "finding a coordinator", found.error_message)
        time.sleep(0.02)


def delete_groups(bootstrap: str, group_ids: list[str], timeout_s: float = 30.0) -> dict[str, int]:
    """DeleteGroups (v2) to each group's coordinator (found with FindCoordinator v4); returns each
    group's error code (0, GROUP_ID_NOT_FOUND 69, NON_EMPTY_GROUP 68 for a group with members...)."""
    results: dict[str, int] = {}
    deadline = time.monotonic() + timeout_s
    pending = list(group_ids)
    while pending:
        brokers = broker_addresses(bootstrap)
        found = _call_any(bootstrap, FindCoordinatorRequest(key_type=0, coordinator_keys=pending),
                          FIND_COORDINATOR_V)
        by_coordinator: dict[str, list[str]] = {}
        retry = []
        for c in found.coordinators:
            if c.error_code == 0:
                by_coordinator.setdefault(brokers.get(c.node_id, f"{c.host}:{c.port}"), []).append(c.key)
            else:
                retry.append(c.key)
        for address, ids in by_coordinator.items():
            for r in wire.call(address, DeleteGroupsRequest(groups_names=ids), DELETE_GROUPS_V).results:
                if r.error_code in RETRIABLE:
                    retry.append(r.group_id)
                else:
                    results[r.group_id] = r.error_code
        pending = retry
        if pending and time.monotonic() > deadline:
            results.update({g: ErrorCode.COORDINATOR_NOT_AVAILABLE for g in pending})
            break
        if pending:
            time.sleep(0.05)
    return results


def reset(bootstrap: str, timeout_s: float = 30.0) -> dict[str, int]:
    """Delete every group and every non-internal topic, so that the next test starts on an empty
    broker. Returns the error code of each group that could not be deleted (a group whose consumers
    are still running answers NON_EMPTY_GROUP)."""
    groups = delete_groups(bootstrap, list_groups(bootstrap), timeout_s)
    delete_topics(bootstrap, list_topics(bootstrap), timeout_s)
    return {g: code for g, code in groups.items() if code not in (0, ErrorCode.GROUP_ID_NOT_FOUND)}
