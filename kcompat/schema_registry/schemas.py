"""Schema types (AVRO, JSON, PROTOBUF) behind one interface, and the compatibility levels.

A level names which versions of a subject a new schema is checked against and in which direction
(Confluent's ``CompatibilityLevel``): BACKWARD (the new schema reads data written with the latest
version), FORWARD (the latest version reads data written with the new one), FULL (both); the
``_TRANSITIVE`` variants check every live version instead of the latest; NONE checks nothing.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

# imported on first use: avro, jsonschema, protobuf and the ANTLR runtime take ~0.5 s to import,
# which a broker with an HTTP listener would otherwise pay at every start
TYPES = {"AVRO": "avro_schema", "JSON": "json_schema", "PROTOBUF": "protobuf_schema"}


def _module(schema_type: str):
    return importlib.import_module(f"kcompat.schema_registry.{TYPES[schema_type]}")
LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")
DEFAULT_LEVEL = "BACKWARD"


@dataclass(frozen=True)
class ParsedSchema:
    """``schema_type``; ``text``: the stored form (see each type's ``canonical``); ``parsed``:
    the type's own object; ``references``: ``({"name","subject","version"}, ...)``."""

    schema_type: str
    text: str
    parsed: object
    references: tuple = ()


def parse_schema(schema_type: str, text: str, references: list[dict], ref_texts: list[tuple[str, str]],
                 normalize: bool = False) -> ParsedSchema:
    """Parse ``text`` of ``schema_type`` with the referenced schemas (``(reference name, text)``,
    dependencies first).
    ValueError with the reason for an unknown type or an invalid schema."""
    if schema_type not in TYPES:
        raise ValueError(f"unknown schema type {schema_type}")
    module = _module(schema_type)
    parsed = module.parse(text, ref_texts)
    stored = module.canonical(text, parsed, normalize, bool(references))
    refs = tuple(sorted(({"name": r["name"], "subject": r["subject"], "version": r["version"]} for r in references),
                        key=lambda r: (r["name"], r["subject"], r["version"]))) if normalize else \
        tuple({"name": r["name"], "subject": r["subject"], "version": r["version"]} for r in references)
    return ParsedSchema(schema_type, stored, parsed, refs)


def incompatibilities(level: str, new: ParsedSchema, previous: list[ParsedSchema]) -> list[str]:
    """Messages saying why ``new`` breaks ``level`` against ``previous`` (live versions, oldest
    first); empty when compatible. Schemas of another type are incompatible."""
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    base = level.removesuffix("_TRANSITIVE")
    out: list[str] = []
    for old in reversed(against):
        if old.schema_type != new.schema_type:
            out.append(f"{{errorType:'TYPE_CHANGED', description:'schema type {old.schema_type} "
                       f"changed to {new.schema_type}'}}")
            continue
        module = _module(new.schema_type)
        if base in ("BACKWARD", "FULL"):
            out += module.check(new.parsed, old.parsed)
        if base in ("FORWARD", "FULL"):
            out += module.check(old.parsed, new.parsed)
        if out:
            break
    return out
