"""The registry's pure parts: compatibility rules of each schema type (Avro through the avro
package's checker, JSON Schema and Protobuf by Confluent's documented rules), the ``_schemas``
record format and the state replayed from it."""

from __future__ import annotations

import base64
import json

import pytest
from google.protobuf import descriptor_pb2

from kcompat.schema_registry import errors, records
from kcompat.schema_registry.schemas import incompatibilities
from kcompat.schema_registry.state import RegistryState

AVRO_V1 = json.dumps({"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]})
AVRO_ADD_DEFAULT = json.dumps({"type": "record", "name": "User", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int", "default": 0}]})
AVRO_ADD_NO_DEFAULT = json.dumps({"type": "record", "name": "User", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int"}]})


def parse(st: RegistryState, schema_type: str, text, references=None, normalize=False):
    return st.parse(schema_type, text, references or [], normalize)


def kinds(messages: list[str]) -> list[str]:
    return [m.split("errorType:'")[1].split("'")[0] for m in messages]


def replay(st: RegistryState, recs) -> None:
    for k, v in recs:
        st.apply(k, v)


@pytest.mark.parametrize("level,new,ok", [
    ("BACKWARD", AVRO_ADD_DEFAULT, True), ("BACKWARD", AVRO_ADD_NO_DEFAULT, False),
    ("FORWARD", AVRO_ADD_NO_DEFAULT, True), ("FULL", AVRO_ADD_NO_DEFAULT, False),
    ("FULL", AVRO_ADD_DEFAULT, True), ("NONE", AVRO_ADD_NO_DEFAULT, True)])
def test_avro_levels(level, new, ok):
    st = RegistryState()
    assert (not incompatibilities(level, parse(st, "AVRO", new), [parse(st, "AVRO", AVRO_V1)])) is ok


def test_avro_transitive_checks_every_version():
    st = RegistryState()
    v1 = parse(st, "AVRO", AVRO_V1)
    v2 = parse(st, "AVRO", json.dumps({"type": "record", "name": "User", "fields": [
        {"name": "name", "type": "string"}, {"name": "age", "type": "int", "default": 1}]}))
    # v3 drops the default: fine against v2 read FORWARD, but v1 lacks 'age' entirely
    v3 = parse(st, "AVRO", AVRO_ADD_NO_DEFAULT)
    assert incompatibilities("BACKWARD", v3, [v2]) == []
    assert kinds(incompatibilities("BACKWARD_TRANSITIVE", v3, [v1, v2])) == ["READER_FIELD_MISSING_DEFAULT_VALUE"]


def obj(props: dict, required=(), additional=None, **extra) -> str:
    s = {"type": "object", "properties": props, **extra}
    if required:
        s["required"] = list(required)
    if additional is not None:
        s["additionalProperties"] = additional
    return json.dumps(s)


@pytest.mark.parametrize("old,new,expected", [
    # open content model: removing is compatible, adding is not
    (obj({"a": {"type": "string"}, "b": {"type": "string"}}), obj({"a": {"type": "string"}}), []),
    (obj({"a": {"type": "string"}}), obj({"a": {"type": "string"}, "b": {"type": "string"}}),
     ["PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"]),
    # closed content model: adding an optional property is compatible, removing one is not
    (obj({"a": {"type": "string"}}, additional=False),
     obj({"a": {"type": "string"}, "b": {"type": "string"}}, additional=False), []),
    (obj({"a": {"type": "string"}}, additional=False),
     obj({"a": {"type": "string"}, "b": {"type": "string"}}, required=["b"], additional=False),
     ["REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", "REQUIRED_ATTRIBUTE_ADDED"]),
    (obj({"a": {"type": "string"}, "b": {"type": "string"}}, additional=False),
     obj({"a": {"type": "string"}}, additional=False), ["PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"]),
    (obj({"a": {"type": "string"}}), obj({"a": {"type": "string"}}, required=["a"]), ["REQUIRED_ATTRIBUTE_ADDED"]),
    (obj({"a": {"type": "string"}}, required=["a"]), obj({"a": {"type": "string"}}), []),
    (obj({"a": {"type": "integer"}}), obj({"a": {"type": "number"}}), []),
    (obj({"a": {"type": "number"}}), obj({"a": {"type": "integer"}}), ["TYPE_NARROWED"]),
    (obj({"a": {"type": "string"}}), obj({"a": {"type": "boolean"}}), ["TYPE_CHANGED"]),
    (obj({"a": {"enum": ["x", "y"]}}), obj({"a": {"enum": ["x", "y", "z"]}}), []),
    (obj({"a": {"enum": ["x", "y"]}}), obj({"a": {"enum": ["x"]}}), ["ENUM_ARRAY_NARROWED"]),
    (obj({"a": {"type": "string", "maxLength": 5}}), obj({"a": {"type": "string", "maxLength": 3}}),
     ["MAX_LENGTH_DECREASED"]),
    (obj({}), obj({}, additional=False), ["ADDITIONAL_PROPERTIES_REMOVED"]),
    (json.dumps({"type": "array", "items": {"type": "string"}}),
     json.dumps({"type": "array", "items": {"type": "integer"}}), ["TYPE_CHANGED"]),
])
def test_json_schema_backward_rules(old, new, expected):
    st = RegistryState()
    assert kinds(incompatibilities("BACKWARD", parse(st, "JSON", new), [parse(st, "JSON", old)])) == expected


PROTO_V1 = 'syntax = "proto3";\npackage demo;\nmessage Order {\n  int32 id = 1;\n  string note = 2;\n}\n'


@pytest.mark.parametrize("new,expected", [
    (PROTO_V1.replace("  string note = 2;\n", ""), []),                              # field removed
    (PROTO_V1.replace("}\n", "  repeated int64 tags = 3;\n}\n"), []),                # field added
    (PROTO_V1.replace("int32 id", "int64 id"), []),                                   # same wire group
    (PROTO_V1.replace("string note", "bytes note"), []),
    (PROTO_V1.replace("int32 id", "string id"), ["FIELD_SCALAR_KIND_CHANGED"]),
    (PROTO_V1.replace("string note", "repeated string note"), ["FIELD_LABEL_CHANGED"]),
    (PROTO_V1.replace("package demo", "package other"), ["PACKAGE_CHANGED"]),
    (PROTO_V1.replace("message Order", "message Purchase"), ["MESSAGE_REMOVED"]),
    (PROTO_V1.replace("  int32 id = 1;\n  string note = 2;\n", "  oneof k {\n int32 id = 1;\n string note = 2;\n }\n"),
     ["MULTIPLE_FIELDS_MOVED_TO_ONEOF"]),
])
def test_protobuf_rules(new, expected):
    st = RegistryState()
    assert kinds(incompatibilities("BACKWARD", parse(st, "PROTOBUF", new), [parse(st, "PROTOBUF", PROTO_V1)])) \
        == expected


def test_protobuf_serialized_descriptor_compares_with_text():
    fd = descriptor_pb2.FileDescriptorProto(name="o.proto", package="demo", syntax="proto3")
    m = fd.message_type.add(name="Order")
    m.field.add(name="id", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    st = RegistryState()
    serialized = parse(st, "PROTOBUF", base64.b64encode(fd.SerializeToString()).decode())
    assert kinds(incompatibilities("BACKWARD", serialized, [parse(st, "PROTOBUF", PROTO_V1)])) \
        == ["FIELD_SCALAR_KIND_CHANGED"]


def test_protobuf_normalize_gives_one_layout():
    st = RegistryState()
    spaced = 'syntax = "proto3";   package demo;\n// a comment\nmessage Order {int32 id = 1;   string note = 2;}'
    a, b = parse(st, "PROTOBUF", spaced, normalize=True), parse(st, "PROTOBUF", PROTO_V1, normalize=True)
    assert a.text == b.text and "comment" not in a.text
    assert parse(st, "PROTOBUF", spaced).text != b.text


@pytest.mark.parametrize("schema_type,text", [
    ("AVRO", "{not json"), ("AVRO", json.dumps({"type": "record", "name": "R"})),
    ("AVRO", json.dumps({"type": "nosuchtype"})), ("JSON", json.dumps({"type": 12})), ("JSON", "[1]"),
    ("PROTOBUF", "message {"), ("PROTOBUF", "syntax = \"proto3\"; message M { int32 a = ; }"), ("AVRO", ""),
    ("PROTOBUF", "syntax = \"proto3\"; message M { Unknown u = 1; }"),                 # unresolved type
    ("PROTOBUF", "syntax = \"proto3\"; message M { int32 a = 1; string b = 1; }"),     # number used twice
    ("PROTOBUF", "syntax = \"proto3\"; import \"nowhere.proto\"; message M { int32 a = 1; }"),
])
def test_invalid_schemas_are_42201(schema_type, text):
    with pytest.raises(errors.RegistryError) as e:
        parse(RegistryState(), schema_type, text)
    assert (e.value.status, e.value.code) == (422, 42201)


def test_record_format_is_confluents():
    assert records.schema_key("s", 3) == b'{"keytype":"SCHEMA","subject":"s","version":3,"magic":1}'
    assert records.config_key(None) == b'{"keytype":"CONFIG","subject":null,"magic":0}'
    assert records.mode_key("s") == b'{"keytype":"MODE","subject":"s","magic":0}'
    assert records.delete_subject_key("s") == b'{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}'
    st = RegistryState()
    recs, result = st.plan_register("s", parse(st, "JSON", '{"type":"object"}'))
    assert result == {"id": 1}
    assert json.loads(recs[0][1]) == {"subject": "s", "version": 1, "id": 1, "schemaType": "JSON",
                                      "schema": '{"type":"object"}', "deleted": False}


def test_replay_ids_versions_and_deletes():
    st = RegistryState()
    a, b = parse(st, "AVRO", AVRO_V1), parse(st, "AVRO", AVRO_ADD_DEFAULT)
    recs, _ = st.plan_register("x", a)
    assert st.plan_register("x", a)[0] == recs   # nothing applied yet: planning changes nothing
    replay(st, recs)
    assert st.plan_register("x", a) == ([], {"id": 1})         # already there: no record
    replay(st, st.plan_register("y", a)[0])                    # same schema, other subject: same id
    replay(st, st.plan_register("x", b)[0])
    assert [(s, v.version, v.id) for s in ("x", "y") for v in st.versions[s].values()] == \
        [("x", 1, 1), ("x", 2, 2), ("y", 1, 1)]
    with pytest.raises(errors.RegistryError) as e:
        st.plan_delete_subject("x", permanent=True)
    assert e.value.code == 40405
    recs, versions = st.plan_delete_subject("x", permanent=False)
    assert versions == [1, 2] and json.loads(recs[0][0])["keytype"] == "DELETE_SUBJECT"
    replay(st, recs)
    assert st.subjects() == ["y"] and st.subjects(deleted=True) == ["x", "y"]
    replay(st, st.plan_delete_subject("x", permanent=True)[0])
    assert st.subjects(deleted=True) == ["y"]
    assert st.plan_register("x", a)[1] == {"id": 1}            # the id of the same schema under y
    assert st.plan_register("x", b)[1] == {"id": 3}            # id 2 is gone with x; ids never go back
    replay(st, [(records.clear_subject_key("y"), b'{"subject":"y"}')])
    assert st.subjects(deleted=True) == [] and st.max_id == 2
    assert st.plan_register("z", parse(st, "AVRO", json.dumps({"type": "string"})))[1] == {"id": 3}


def test_undecodable_records_are_skipped():
    st = RegistryState()
    for k, v in [(b"not json", b"{}"), (None, b"{}"), (b'{"keytype":"SCHEMA"}', b'{"id": "x"}'), (b"[]", None),
                 (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}', b'{"subject":"s"}')]:
        st.apply(k, v)
    assert st.subjects(deleted=True) == [] and st.max_id == 0
