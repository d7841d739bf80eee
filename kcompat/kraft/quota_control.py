"""Client quotas in the metadata log: AlterClientQuotas and DescribeClientQuotas (KIP-546).

As Kafka's ``ClientQuotaControlManager`` (controller) and ``ClientQuotasImage.describe`` (brokers).
An entity is a set of (entity type, name) pairs: ``user``, ``client-id`` (alone or together) or
``ip``; a null name is the type's default (``<default>`` in ``kafka-configs.sh``). Each changed
key becomes a ``ClientQuotaRecord`` (``remove`` true to delete it); the image keeps
:data:`EntityKey` -> {key: value}.

Keys (Kafka's ``QuotaConfig``): ``producer_byte_rate`` and ``consumer_byte_rate`` (bytes/s,
integral), ``request_percentage`` (percent of one request handler thread, KIP-124),
``controller_mutation_rate`` (partitions/s, KIP-599) for users and client ids;
``connection_creation_rate`` (connections/s, integral) for ips (KIP-612; stored, not enforced).

Errors are Kafka's, per entity: INVALID_REQUEST for an empty entity, an unknown entity type or
key, a duplicate entity type, an empty name, ip combined with user or client-id, a value <= 0 or a
fractional value of an integral key, a key twice or an entity twice in one request.
"""

from __future__ import annotations

import ipaddress
import socket

from kcompat.protocol.errors import ErrorCode
from kcompat.protocol.messages.alter_client_quotas import AlterClientQuotasResponse as AR
from kcompat.protocol.messages.describe_client_quotas import DescribeClientQuotasResponse as DR
from kcompat.protocol.metadata_records import ClientQuotaRecord

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

# key -> (integral?, upper limit of an integral value): Kafka's QuotaConfig config types
_LONG_MAX = 2**63 - 1
USER_CLIENT_KEYS = {PRODUCER_BYTE_RATE: (True, _LONG_MAX), CONSUMER_BYTE_RATE: (True, _LONG_MAX),
                    REQUEST_PERCENTAGE: (False, None), CONTROLLER_MUTATION_RATE: (False, None)}
IP_KEYS = {CONNECTION_CREATION_RATE: (True, 2**31 - 1)}
_TYPE_NAMES = {2**31 - 1: "an INT", _LONG_MAX: "a LONG"}

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

# (entity type, name or None), sorted by type: (("client-id", "app"), ("user", "alice"))
EntityKey = tuple[tuple[str, "str | None"], ...]


class QuotaRequestError(Exception):
    """A DescribeClientQuotas filter Kafka refuses: ``code`` (INVALID_REQUEST or
    UNSUPPORTED_VERSION for an unknown entity type) and Kafka's message."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def entity_key(pairs) -> EntityKey:
    """The image key of an entity given as (type, name) pairs."""
    return tuple(sorted(pairs))


def describe_entity(key: EntityKey) -> str:
    """Java's ``ClientQuotaEntity.toString`` of the entity (used in Kafka's messages)."""
    return "ClientQuotaEntity(entries={" + ", ".join(f"{t}={n}" for t, n in key) + "})"


def apply_record(quotas: dict, record) -> None:
    """Replay one ClientQuotaRecord into ``quotas`` (EntityKey -> {key: value}), as Kafka's
    ``ClientQuotaControlManager.replay``: an entity left without keys disappears."""
    key = entity_key((e.entity_type, e.entity_name) for e in record.entity)
    values = quotas.get(key)
    if record.remove:
        if values is not None:
            values.pop(record.key, None)
            if not values:
                del quotas[key]
    else:
        quotas.setdefault(key, {})[record.key] = float(record.value)


def quota_records(quotas: dict) -> list:
    """ClientQuotaRecords rebuilding ``quotas`` (for a metadata snapshot)."""
    return [ClientQuotaRecord(entity=[ClientQuotaRecord.EntityData(entity_type=t, entity_name=n) for t, n in key],
                              key=k, value=v, remove=False)
            for key in sorted(quotas, key=_sort_key) for k, v in sorted(quotas[key].items())]


def _sort_key(key: EntityKey):
    return tuple((t, n is not None, n or "") for t, n in key)


# -- AlterClientQuotas (controller) ----------------------------------------------------------------

def alter_client_quotas(quotas: dict, req) -> tuple[list, AR]:
    """``(records, response)`` for an AlterClientQuotas request against ``quotas`` (the image's
    EntityKey -> {key: value}); the records of every entity without error, applied atomically by
    the caller (unless ``validate_only``). One response entry per distinct entity."""
    records: list = []
    results: dict[EntityKey, tuple[ErrorCode, str | None, list]] = {}
    for entry in req.entries:
        # an entity type named twice: the last name counts (Kafka reads the entity into a map,
        # AlterClientQuotasRequest.entries)
        pairs = list({e.entity_type: e.entity_name for e in entry.entity}.items())
        key = entity_key(pairs)
        alterations: dict[str, float | None] = {}
        error = None
        for op in entry.ops:
            if op.key in alterations:
                error = (ErrorCode.INVALID_REQUEST,
                         f"Duplicate quota key {op.key} not updating quota for this entity {describe_entity(key)}")
            else:
                alterations[op.key] = None if op.remove else float(op.value)
        if key in results or error is not None:
            results[key] = (ErrorCode.INVALID_REQUEST, f"Ignoring duplicate entity {describe_entity(key)}", pairs)
            continue
        code, message = _alter_entity(quotas, pairs, key, alterations, records)
        results[key] = (code, message, pairs)
    entries = [AR.EntryData(error_code=code, error_message=message,
                            entity=[AR.EntityData(entity_type=t, entity_name=n) for t, n in pairs])
               for code, message, pairs in results.values()]
    return ([] if req.validate_only else records), AR(throttle_time_ms=0, entries=entries)


def _alter_entity(quotas: dict, pairs, key: EntityKey, alterations: dict, records: list):
    error = _validate_entity(pairs)
    if error is not None:
        return error
    types = {t for t, _n in pairs}
    if IP in types:
        if USER in types or CLIENT_ID in types:
            return (ErrorCode.INVALID_REQUEST,
                    "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId")
        ip = dict(pairs)[IP]
        if not _valid_ip_entity(ip):
            return ErrorCode.INVALID_REQUEST, f"{ip} is not a valid IP or resolvable host."
        valid_keys = IP_KEYS
    else:
        valid_keys = USER_CLIENT_KEYS
    current = quotas.get(key, {})
    new: list = []
    for name, value in alterations.items():
        if value is None:
            if name in current:
                new.append(_record(key, name, 0.0, remove=True))
            continue
        error = _validate_value(valid_keys, name, value)
        if error is not None:
            return error
        if current.get(name) != value:
            new.append(_record(key, name, value, remove=False))
    records.extend(new)
    return ErrorCode.NONE, None


def _record(key: EntityKey, name: str, value: float, *, remove: bool):
    return ClientQuotaRecord(entity=[ClientQuotaRecord.EntityData(entity_type=t, entity_name=n) for t, n in key],
                             key=name, value=value, remove=remove)


def _validate_entity(pairs):
    if not pairs:
        return ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity"
    for etype, name in pairs:
        if etype not in (USER, CLIENT_ID, IP):
            return ErrorCode.INVALID_REQUEST, f"Unhandled client quota entity type: {etype}"
        if name is not None and name == "":
            return ErrorCode.INVALID_REQUEST, f"Empty {etype} not supported"
    return None


def _valid_ip_entity(ip: str | None) -> bool:
    if ip is None:
        return True
    try:
        ipaddress.ip_address(ip)
        return True
    except ValueError:
        pass
    try:   # Java's InetAddress.getByName also accepts a resolvable host name
        socket.getaddrinfo(ip, None)
        return True
    except (OSError, UnicodeError):
        return False


def _validate_value(valid_keys: dict, name: str, value: float):
    spec = valid_keys.get(name)
    if spec is None:
        return ErrorCode.INVALID_REQUEST, f"Invalid configuration key {name}"
    if value <= 0.0:
        return ErrorCode.INVALID_REQUEST, f"Quota {name} must be greater than 0"
    integral, limit = spec
    if integral:
        if value > limit:
            return ErrorCode.INVALID_REQUEST, f"Proposed value for {name} is too large for {_TYPE_NAMES[limit]}."
        if abs(value % 1.0) > 1e-6:
            return ErrorCode.INVALID_REQUEST, f"{name} cannot be a fractional value."
    return None


# -- DescribeClientQuotas (brokers) ---------------------------------------------------------------

def describe_client_quotas(quotas: dict, req) -> DR:
    """DescribeClientQuotas answered from ``quotas`` as Kafka's ``ClientQuotasImage.describe``:
    components match a type exactly (a name), its default (null name) or any entity that has the
    type; ``strict`` also requires the entity to have no other types. A bad filter is answered
    with the error and null entries."""
    try:
        exact, typed = _filter(req.components)
    except QuotaRequestError as e:
        return DR(throttle_time_ms=0, error_code=e.code, error_message=e.message, entries=None)
    entries = []
    for key in sorted(quotas, key=_sort_key):
        d = dict(key)
        if req.strict and len(d) != len(exact) + len(typed):
            continue
        if any(t not in d or d[t] != name for t, name in exact.items()) or any(t not in d for t in typed):
            continue
        entries.append(DR.EntryData(entity=[DR.EntityData(entity_type=t, entity_name=n) for t, n in key],
                                    values=[DR.ValueData(key=k, value=v) for k, v in sorted(quotas[key].items())]))
    return DR(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message="", entries=entries)


def _filter(components):
    exact: dict[str, str | None] = {}
    typed: set[str] = set()
    for c in components:
        if not c.entity_type:
            raise QuotaRequestError(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
        if c.entity_type in exact or c.entity_type in typed:
            raise QuotaRequestError(ErrorCode.INVALID_REQUEST,
                                    f"Entity type {c.entity_type} cannot appear more than once in the filter.")
        if c.entity_type not in (IP, USER, CLIENT_ID):
            raise QuotaRequestError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {c.entity_type}")
        if c.match_type == MATCH_EXACT:
            if c.match is None:
                raise QuotaRequestError(ErrorCode.INVALID_REQUEST,
                                        "Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[c.entity_type] = c.match
        elif c.match_type == MATCH_DEFAULT:
            if c.match is not None:
                raise QuotaRequestError(ErrorCode.INVALID_REQUEST,
                                        "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
            exact[c.entity_type] = None
        elif c.match_type == MATCH_SPECIFIED:
            if c.match is not None:
                raise QuotaRequestError(ErrorCode.INVALID_REQUEST,
                                        "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
            typed.add(c.entity_type)
        else:
            raise QuotaRequestError(ErrorCode.INVALID_REQUEST, f"Unknown match type {c.match_type}")
    used = set(exact) | typed
    if IP in used and (USER in used or CLIENT_ID in used):
        raise QuotaRequestError(ErrorCode.INVALID_REQUEST,
                                "Invalid entity filter component combination. IP filter component should not be "
                                "used with user or clientId filter component.")
    return exact, typed
