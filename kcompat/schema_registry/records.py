"""Keys and values of the ``_schemas`` topic in the JSON format Confluent's Schema Registry
writes (its ``SchemaRegistryKey`` subclasses and their values), so that a topic written by kcompat
can be read by that registry and tools that know the format, and the other way round.

Keys (JSON objects, fields in this order)::

    {"keytype":"SCHEMA","subject":S,"version":N,"magic":1}
    {"keytype":"CONFIG","subject":S or null,"magic":0}
    {"keytype":"MODE","subject":S or null,"magic":0}
    {"keytype":"DELETE_SUBJECT","subject":S,"magic":0}
    {"keytype":"CLEAR_SUBJECT","subject":S,"magic":0}
    {"keytype":"NOOP","magic":0}

Values: SCHEMA ``{"subject","version","id","schemaType" (absent for AVRO),"references"
(absent when none),"schema","deleted"}``; CONFIG ``{"compatibilityLevel": LEVEL}``; MODE
``{"mode": MODE}``; DELETE_SUBJECT ``{"subject": S, "version": latest deleted}``; CLEAR_SUBJECT
``{"subject": S}``. A null value (tombstone) removes the key (a permanently deleted version, a
removed subject config or mode). kcompat's NOOP carries ``{"kcompatWriter": node id, "url": URL,
"epoch": leader epoch}`` naming the node that writes (Confluent's reader skips NOOP records
without reading their value).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

SCHEMA, CONFIG, MODE, DELETE_SUBJECT, CLEAR_SUBJECT, NOOP = (
    "SCHEMA", "CONFIG", "MODE", "DELETE_SUBJECT", "CLEAR_SUBJECT", "NOOP")
_COMPACT = (",", ":")


def _dump(obj) -> bytes:
    return json.dumps(obj, separators=_COMPACT, ensure_ascii=False).encode()


def schema_key(subject: str, version: int) -> bytes:
    return _dump({"keytype": SCHEMA, "subject": subject, "version": version, "magic": 1})


def config_key(subject: str | None) -> bytes:
    return _dump({"keytype": CONFIG, "subject": subject, "magic": 0})


def mode_key(subject: str | None) -> bytes:
    return _dump({"keytype": MODE, "subject": subject, "magic": 0})


def delete_subject_key(subject: str) -> bytes:
    return _dump({"keytype": DELETE_SUBJECT, "subject": subject, "magic": 0})


def clear_subject_key(subject: str) -> bytes:
    return _dump({"keytype": CLEAR_SUBJECT, "subject": subject, "magic": 0})


def noop_key() -> bytes:
    return _dump({"keytype": NOOP, "magic": 0})


@dataclass
class SchemaValue:
    """One version of a subject: the value of a SCHEMA record. ``references``: list of
    ``{"name","subject","version"}``; ``schema_type`` AVRO, JSON or PROTOBUF."""

    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = "AVRO"
    references: list[dict] = field(default_factory=list)
    deleted: bool = False

    def to_json(self, identity: bool = True) -> dict:
        """The REST API's shape: ``subject``, ``version``, ``id`` (with ``identity``),
        ``schemaType`` unless AVRO, ``references`` if any, ``schema``."""
        d: dict = {"subject": self.subject, "version": self.version, "id": self.id} if identity else {}
        if self.schema_type != "AVRO":
            d["schemaType"] = self.schema_type
        if self.references:
            d["references"] = self.references
        d["schema"] = self.schema
        return d

    def encode(self) -> bytes:
        return _dump({**self.to_json(), "deleted": self.deleted})

    @classmethod
    def decode(cls, d: dict) -> "SchemaValue":
        return cls(subject=str(d["subject"]), version=int(d["version"]), id=int(d["id"]), schema=str(d["schema"]),
                   schema_type=str(d.get("schemaType") or "AVRO"), references=list(d.get("references") or []),
                   deleted=bool(d.get("deleted", False)))


def config_value(level: str) -> bytes:
    return _dump({"compatibilityLevel": level})


def mode_value(mode: str) -> bytes:
    return _dump({"mode": mode})


def delete_subject_value(subject: str, version: int) -> bytes:
    return _dump({"subject": subject, "version": version})


def noop_value(node_id: int, url: str, epoch: int) -> bytes:
    return _dump({"kcompatWriter": node_id, "url": url, "epoch": epoch})


def decode(key: bytes | None, value: bytes | None) -> tuple[dict, dict | None] | None:
    """``(key object, value object or None)``; None for a record that is not valid JSON objects
    (skipped by the reader, as Confluent's reader logs and skips what it cannot deserialize)."""
    if key is None:
        return None
    try:
        k = json.loads(key)
        v = json.loads(value) if value is not None else None
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(k, dict) or (v is not None and not isinstance(v, dict)):
        return None
    return k, v
