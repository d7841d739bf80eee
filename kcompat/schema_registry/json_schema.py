"""JSON schemas: parsed and checked against their metaschema with the ``jsonschema`` package;
compatibility by the rules Confluent documents for JSON Schema (reader = the schema that reads,
writer = the one data was written with). Covered, with Confluent's difference names:

- ``type``: a writer type the reader does not accept -> TYPE_CHANGED (integer read as number is
  fine; number read as integer -> TYPE_NARROWED); a reader ``type`` where the writer had none ->
  TYPE_CHANGED.
- objects, open (``additionalProperties`` absent/true/a schema) or closed (``false``) content
  models: a property in the reader only -> PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL if the writer is
  open, REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL if the writer is closed and the property
  is required without a default (an optional one is compatible); a property in the writer only ->
  PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL if the reader is closed (compatible if open);
  ``required`` gaining a name without a default -> REQUIRED_ATTRIBUTE_ADDED;
  ``additionalProperties`` true -> false: ADDITIONAL_PROPERTIES_REMOVED.
- ``enum``: a writer value missing from the reader -> ENUM_ARRAY_NARROWED; an enum added ->
  ENUM_ARRAY_NARROWED; ``const`` changed -> CONST_CHANGED.
- bounds: maxLength/maxItems/maxProperties/maximum/exclusiveMaximum decreased (or added) ->
  MAX_*_DECREASED / ..._ADDED, the min* bounds increased (or added) -> MIN_*_INCREASED.
- ``items`` (one schema) and the schemas of common properties are compared recursively.

Not covered (compared only for equality, a change reported as COMBINED_TYPE_CHANGED):
``oneOf``/``anyOf``/``allOf``/``not``; ``$ref`` targets are compared by their reference string.
"""

from __future__ import annotations

import json

import jsonschema.exceptions
import jsonschema.validators

_COMPACT = (",", ":")
_MAX = {"maxLength": "MAX_LENGTH", "maxItems": "MAX_ITEMS", "maxProperties": "MAX_PROPERTIES",
        "maximum": "MAXIMUM", "exclusiveMaximum": "EXCLUSIVE_MAXIMUM"}
_MIN = {"minLength": "MIN_LENGTH", "minItems": "MIN_ITEMS", "minProperties": "MIN_PROPERTIES",
        "minimum": "MINIMUM", "exclusiveMinimum": "EXCLUSIVE_MINIMUM"}
_COMBINED = ("oneOf", "anyOf", "allOf", "not")


def parse(text: str, references: list[tuple[str, str]]):
    """The schema object (dict or bool) of ``text``; ValueError unless it is JSON and valid against
    its metaschema (``$schema``, draft 2020-12 when absent). ``references`` (``(name, schema
    text)``) must parse too."""
    for _, ref in references:
        parse(ref, [])
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise ValueError(f"not JSON: {e}") from None
    if not isinstance(obj, (dict, bool)):
        raise ValueError("a JSON schema is an object or a boolean")
    try:
        jsonschema.validators.validator_for(obj).check_schema(obj)
    except jsonschema.exceptions.SchemaError as e:
        raise ValueError(e.message) from None
    return obj


def canonical(text: str, parsed, normalize: bool, has_references: bool) -> str:
    """Compacted JSON; keys sorted with ``normalize``."""
    return json.dumps(parsed, separators=_COMPACT, sort_keys=normalize)


def _msg(kind: str, path: str, what: str) -> str:
    return f"{{errorType:'{kind}', description:'{what} at path '{path}''}}"


def _types(s: dict) -> set[str] | None:
    t = s.get("type")
    if t is None:
        return None
    return {t} if isinstance(t, str) else set(t)


def _open(s: dict) -> bool:
    return s.get("additionalProperties", True) is not False


def check(reader, writer) -> list[str]:
    """Why data valid against ``writer`` may be invalid against ``reader`` (empty: compatible)."""
    out: list[str] = []
    _compare(reader, writer, "#", out)
    return out


def _compare(r, w, path: str, out: list[str]) -> None:
    if r is True or r == {}:
        return
    if r is False:
        if w is not False:
            out.append(_msg("TYPE_CHANGED", path, "The new schema accepts nothing"))
        return
    if w is True or w is False:
        w = {} if w is True else {"not": {}}
    rt, wt = _types(r), _types(w)
    if rt is not None:
        if wt is None:
            out.append(_msg("TYPE_CHANGED", path, "The new schema restricts the type"))
        else:
            for t in sorted(wt - rt):
                if t == "integer" and "number" in rt:
                    continue
                kind = "TYPE_NARROWED" if t == "number" and "integer" in rt else "TYPE_CHANGED"
                out.append(_msg(kind, path, f"The new schema does not accept type {t}"))
    if "enum" in r:
        if "enum" not in w:
            out.append(_msg("ENUM_ARRAY_NARROWED", path, "The new schema adds an enum"))
        elif any(v not in r["enum"] for v in w["enum"]):
            out.append(_msg("ENUM_ARRAY_NARROWED", path, "The new schema removes enum values"))
    if "const" in r and w.get("const", object()) != r["const"]:
        out.append(_msg("CONST_CHANGED", path, "The new schema changes the constant"))
    for key, name in _MAX.items():
        if key in r and not isinstance(r[key], bool):
            if key not in w:
                out.append(_msg(f"{name}_ADDED", path, f"The new schema adds {key}"))
            elif r[key] < w[key]:
                out.append(_msg(f"{name}_DECREASED", path, f"The new schema decreases {key}"))
    for key, name in _MIN.items():
        if key in r and not isinstance(r[key], bool):
            if key not in w:
                out.append(_msg(f"{name}_ADDED", path, f"The new schema adds {key}"))
            elif r[key] > w[key]:
                out.append(_msg(f"{name}_INCREASED", path, f"The new schema increases {key}"))
    for key in _COMBINED:
        if r.get(key) != w.get(key):
            out.append(_msg("COMBINED_TYPE_CHANGED", path, f"The new schema changes {key}"))
    if isinstance(r.get("items"), dict) and isinstance(w.get("items"), dict):
        _compare(r["items"], w["items"], f"{path}/items", out)
    _compare_objects(r, w, path, out)


def _compare_objects(r: dict, w: dict, path: str, out: list[str]) -> None:
    rp, wp = r.get("properties") or {}, w.get("properties") or {}
    r_open, w_open = _open(r), _open(w)
    r_req, w_req = set(r.get("required") or ()), set(w.get("required") or ())
    for name in sorted(set(rp) - set(wp)):
        p = f"{path}/properties/{name}"
        if w_open:
            if rp[name] not in (True, {}):
                out.append(_msg("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", p,
                                "The new schema has an open content model and has a property which is missing in "
                                "the old schema"))
        elif name in r_req and not (isinstance(rp[name], dict) and "default" in rp[name]):
            out.append(_msg("REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", p,
                            "The new schema has a required property which is missing in the old schema"))
    for name in sorted(set(wp) - set(rp)):
        p = f"{path}/properties/{name}"
        if not r_open:
            out.append(_msg("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", p,
                            "The new schema has a closed content model and lacks a property of the old schema"))
        elif isinstance(r.get("additionalProperties"), dict):
            _compare(r["additionalProperties"], wp[name], p, out)
    for name in sorted(set(rp) & set(wp)):
        _compare(rp[name], wp[name], f"{path}/properties/{name}", out)
    for name in sorted(r_req - w_req):
        if not (isinstance(rp.get(name), dict) and "default" in rp[name]):
            out.append(_msg("REQUIRED_ATTRIBUTE_ADDED", f"{path}/required/{name}",
                            f"The new schema requires '{name}'"))
    if w_open and not r_open:
        out.append(_msg("ADDITIONAL_PROPERTIES_REMOVED", path, "The new schema closes the content model"))
    elif isinstance(r.get("additionalProperties"), dict) and isinstance(w.get("additionalProperties"), dict):
        _compare(r["additionalProperties"], w["additionalProperties"], f"{path}/additionalProperties", out)
