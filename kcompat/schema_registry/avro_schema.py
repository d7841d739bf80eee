"""AVRO schemas: parsed by the Apache ``avro`` package; compatibility by its reader/writer checker
(``avro.compatibility.ReaderWriterCompatibilityChecker``, Avro's own schema resolution rules, as
Confluent's registry uses Avro's Java ``SchemaCompatibility``)."""

from __future__ import annotations

import json

import avro.compatibility
import avro.errors
import avro.name
import avro.schema

_COMPACT = (",", ":")


def parse(text: str, references: list[tuple[str, str]]):
    """The ``avro.schema.Schema`` of ``text`` (JSON), after the ``references`` (``(name, schema
    text)`` defining the named types it uses, dependencies first). ValueError with the parser's
    message."""
    names = avro.name.Names()
    try:
        for _, ref in references:
            avro.schema.make_avsc_object(json.loads(ref), names)
        return avro.schema.make_avsc_object(json.loads(text), names)
    except (ValueError, TypeError, KeyError, AttributeError, avro.errors.AvroException) as e:
        raise ValueError(str(e) or type(e).__name__) from None


def canonical(text: str, parsed, normalize: bool, has_references: bool) -> str:
    """The stored form: the JSON compacted, or with ``normalize`` (and no references) the form the
    avro package writes back (primitive types as names, its attribute order)."""
    if normalize and not has_references:
        return json.dumps(parsed.to_json(), separators=_COMPACT)
    return json.dumps(json.loads(text), separators=_COMPACT)


def check(reader, writer) -> list[str]:
    """Why data written with ``writer`` cannot be read with ``reader`` (empty: it can), one message
    per incompatibility in Confluent's ``{errorType:..., description:..., additionalInfo:...}``
    shape."""
    result = avro.compatibility.ReaderWriterCompatibilityChecker().get_compatibility(reader, writer)
    if result.compatibility is avro.compatibility.SchemaCompatibilityType.compatible:
        return []
    out = []
    for kind, location, message in zip(result.incompatibilities, sorted(result.locations), sorted(result.messages)):
        out.append(f"{{errorType:'{kind.name.upper()}', description:'The type at path '{location}' in the new "
                   f"schema is not compatible with the old schema', additionalInfo:'{message}'}}")
    return out or ["{errorType:'TYPE_MISMATCH', description:'incompatible'}"]
