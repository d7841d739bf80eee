"""The built-in schema registry against a real kcompat process with the HTTP listener on:
confluent-kafka's SchemaRegistryClient and its Avro, JSON Schema and Protobuf serializers producing
and consuming through kcompat; every REST endpoint with Confluent's answers and error codes;
nothing written for a bad or oversized body; the state rebuilt from ``_schemas`` after a restart,
whose records are in Confluent's format."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
import uuid

import confluent_kafka as ck
import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from kcompat.testing.ports import free_ports
from tests.support.broker_process import BrokerProcess

V1 = "application/vnd.schemaregistry.v1+json"
USER_V1 = {"type": "record", "name": "User", "namespace": "demo", "fields": [{"name": "name", "type": "string"}]}
USER_V2 = {**USER_V1, "fields": USER_V1["fields"] + [{"name": "age", "type": "int", "default": 0}]}
USER_BAD = {**USER_V1, "fields": USER_V1["fields"] + [{"name": "age", "type": "int"}]}


class Registry:
    """Plain HTTP calls to one node's registry."""

    def __init__(self, url: str) -> None:
        self.url = url

    def call(self, method: str, path: str, body=None, ctype: str | None = V1, accept: str | None = None):
        """(status, parsed JSON or text, headers)."""
        data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
        headers = {"Content-Type": ctype} if ctype and data is not None else {}
        if accept:
            headers["Accept"] = accept
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                status, raw, hdrs = r.status, r.read(), r.headers
        except urllib.error.HTTPError as e:
            status, raw, hdrs = e.code, e.read(), e.headers
        try:
            return status, json.loads(raw), hdrs
        except ValueError:
            return status, raw.decode(), hdrs

    def ok(self, method: str, path: str, body=None):
        status, out, _ = self.call(method, path, body)
        assert status == 200, (method, path, status, out)
        return out

    def error(self, method: str, path: str, body=None, **kw) -> tuple[int, int]:
        status, out, _ = self.call(method, path, body, **kw)
        assert isinstance(out, dict) and "message" in out, out
        return status, out["error_code"]


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    (port,) = free_ports(1)
    overrides = {"http.listeners": f"HTTP://127.0.0.1:{port}"}
    with BrokerProcess(tmp_path_factory.mktemp("sr") / "data", overrides) as b:
        yield b, Registry(f"http://127.0.0.1:{port}")


@pytest.fixture
def sr(node):
    return node[1]


def subject() -> str:
    return f"s-{uuid.uuid4().hex[:8]}"


def register(sr: Registry, subj: str, schema, schema_type: str | None = None, references=None, query: str = ""):
    body = {"schema": schema if isinstance(schema, str) else json.dumps(schema)}
    if schema_type:
        body["schemaType"] = schema_type
    if references:
        body["references"] = references
    return sr.call("POST", f"/subjects/{subj}/versions{query}", body)


def roundtrip(bootstrap: str, topic: str, serialize, deserialize, values: list) -> list:
    producer = ck.Producer({"bootstrap.servers": bootstrap})
    for v in values:
        producer.produce(topic, value=serialize(v, SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(30) == 0
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    out = []
    try:
        while len(out) < len(values):
            m = consumer.poll(30)
            assert m is not None, f"only {len(out)} of {len(values)} records consumed"
            assert m.error() is None, m.error()
            out.append(deserialize(m.value(), SerializationContext(topic, MessageField.VALUE)))
    finally:
        consumer.close()
    return out


# -- confluent-kafka's client and serializers -------------------------------------------------------------

def test_avro_serializer_roundtrip_and_evolution(node):
    broker, sr = node
    client = SchemaRegistryClient({"url": sr.url})
    topic = f"avro-{uuid.uuid4().hex[:6]}"
    ser = AvroSerializer(client, json.dumps(USER_V1))
    de = AvroDeserializer(client)
    assert roundtrip(broker.bootstrap, topic, ser, de, [{"name": "ann"}, {"name": "bob"}]) == \
        [{"name": "ann"}, {"name": "bob"}]
    subj = f"{topic}-value"
    assert client.get_subjects().count(subj) == 1
    latest = client.get_latest_version(subj)
    assert latest.version == 1 and json.loads(latest.schema.schema_str) == USER_V1
    # incompatible under BACKWARD (a new field without default): 409 with the details
    with pytest.raises(SchemaRegistryError) as e:
        client.register_schema(subj, Schema(json.dumps(USER_BAD), "AVRO"))
    assert (e.value.http_status_code, e.value.error_code) == (409, 409)
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in e.value.error_message
    assert client.test_compatibility(subj, Schema(json.dumps(USER_BAD), "AVRO")) is False
    assert client.test_compatibility(subj, Schema(json.dumps(USER_V2), "AVRO")) is True
    v2 = client.register_schema(subj, Schema(json.dumps(USER_V2), "AVRO"))
    assert v2 > latest.schema_id
    # accepted once the subject's level is NONE
    assert client.set_compatibility(subj, "NONE") == {"compatibility": "NONE"}
    assert client.get_compatibility(subj) == "NONE"
    v3 = client.register_schema(subj, Schema(json.dumps(USER_BAD), "AVRO"))
    assert v3 > v2 and client.get_versions(subj) == [1, 2, 3]
    # a consumer reads the old records with the new reader schema
    reader = AvroDeserializer(client, json.dumps(USER_V2))
    consumer = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "v2-reader",
                            "auto.offset.reset": "earliest"})
    consumer.assign([ck.TopicPartition(topic, 0, 0)])
    m = consumer.poll(30)
    consumer.close()
    assert reader(m.value(), SerializationContext(topic, MessageField.VALUE)) == {"name": "ann", "age": 0}


def test_json_serializer_roundtrip(node):
    broker, sr = node
    client = SchemaRegistryClient({"url": sr.url})
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
              "properties": {"id": {"type": "integer"}, "item": {"type": "string"}}, "required": ["id"]}
    topic = f"json-{uuid.uuid4().hex[:6]}"
    ser = JSONSerializer(json.dumps(schema), client)
    de = JSONDeserializer(json.dumps(schema), schema_registry_client=client)
    values = [{"id": 1, "item": "pen"}, {"id": 2}]
    assert roundtrip(broker.bootstrap, topic, ser, de, values) == values
    reg = client.get_latest_version(f"{topic}-value")
    assert reg.schema.schema_type == "JSON" and json.loads(reg.schema.schema_str) == schema


def order_class():
    """A protobuf message class built at run time (what protoc would generate)."""
    fd = descriptor_pb2.FileDescriptorProto(name=f"order_{uuid.uuid4().hex[:6]}.proto", package="demo",
                                            syntax="proto3")
    m = fd.message_type.add(name="Order")
    F = descriptor_pb2.FieldDescriptorProto
    m.field.add(name="id", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    m.field.add(name="tags", number=2, type=F.TYPE_STRING, label=F.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("demo.Order"))


def test_protobuf_serializer_roundtrip(node):
    broker, sr = node
    client = SchemaRegistryClient({"url": sr.url})
    Order = order_class()
    topic = f"proto-{uuid.uuid4().hex[:6]}"
    ser = ProtobufSerializer(Order, client, {"use.deprecated.format": False})
    de = ProtobufDeserializer(Order, {"use.deprecated.format": False})
    values = [Order(id=7, tags=["a", "b"]), Order(id=8)]
    assert roundtrip(broker.bootstrap, topic, ser, de, values) == values
    reg = client.get_latest_version(f"{topic}-value")
    assert reg.schema.schema_type == "PROTOBUF"


# -- the REST API ---------------------------------------------------------------------------------------

def test_register_read_and_lookup(sr):
    U1, U2 = {**USER_V1, "name": "LookupUser"}, {**USER_V2, "name": "LookupUser"}
    s = subject()
    status, out, hdrs = register(sr, s, U1)
    assert status == 200 and set(out) == {"id"} and hdrs["Content-Type"].startswith(V1)
    sid = out["id"]
    assert register(sr, s, U1)[1] == {"id": sid}                     # same schema: same id, no version
    assert sr.ok("GET", f"/subjects/{s}/versions") == [1]
    v = sr.ok("GET", f"/subjects/{s}/versions/1")
    assert v == {"subject": s, "version": 1, "id": sid, "schema": json.dumps(U1, separators=(",", ":"))}
    assert sr.ok("GET", f"/subjects/{s}/versions/latest") == v
    assert sr.ok("GET", f"/subjects/{s}/versions/-1") == v
    assert sr.ok("GET", f"/subjects/{s}/versions/1/schema") == U1
    assert sr.ok("GET", f"/schemas/ids/{sid}") == {"schema": v["schema"]}
    assert sr.ok("GET", f"/schemas/ids/{sid}/schema") == U1
    s2 = subject()
    assert register(sr, s2, U1)[1] == {"id": sid}                    # another subject shares the id
    assert sr.ok("GET", f"/schemas/ids/{sid}/subjects") == sorted([s, s2])
    assert sr.ok("GET", f"/schemas/ids/{sid}/versions") == sorted([{"subject": s, "version": 1},
                                                                    {"subject": s2, "version": 1}],
                                                                   key=lambda d: d["subject"])
    assert {s, s2} <= set(sr.ok("GET", "/subjects"))
    assert sr.ok("GET", f"/subjects?subjectPrefix={s}") == [s]
    assert sorted(sr.ok("GET", "/schemas/types")) == ["AVRO", "JSON", "PROTOBUF"]
    found = sr.ok("POST", f"/subjects/{s}", {"schema": json.dumps(U1)})
    assert found == v
    assert sr.error("POST", f"/subjects/{s}", {"schema": json.dumps(U2)}) == (404, 40403)
    assert sr.error("POST", f"/subjects/{subject()}", {"schema": json.dumps(U1)}) == (404, 40401)
    assert s in [x["subject"] for x in sr.ok("GET", f"/schemas?subjectPrefix={s}")]
    assert sr.ok("GET", "/contexts") == ["."]


def test_normalize(sr):
    s = subject()
    spaced = '{ "type" : "record", "name" : "N", "fields" : [ {"name":"a","type":{"type":"string"}} ] }'
    sid = register(sr, s, spaced, query="?normalize=true")[1]["id"]
    stored = sr.ok("GET", f"/subjects/{s}/versions/1")["schema"]
    assert json.loads(stored) == {"type": "record", "name": "N", "fields": [{"name": "a", "type": "string"}]}
    # another spelling of the same schema, normalized, is the same version
    same = '{"name":"N","type":"record","fields":[{"type":"string","name":"a"}]}'
    assert sr.ok("POST", f"/subjects/{s}?normalize=true", {"schema": same})["id"] == sid
    assert register(sr, s, same, query="?normalize=true")[1] == {"id": sid}
    assert sr.ok("GET", f"/subjects/{s}/versions") == [1]


def test_references_and_referencedby(sr):
    base, top = subject(), subject()
    addr = {"type": "record", "name": "Address", "namespace": "demo", "fields": [{"name": "city", "type": "string"}]}
    aid = register(sr, base, addr)[1]["id"]
    person = {"type": "record", "name": "Person", "namespace": "demo",
              "fields": [{"name": "home", "type": "demo.Address"}]}
    refs = [{"name": "demo.Address", "subject": base, "version": 1}]
    status, out, _ = register(sr, top, person)
    assert (status, out["error_code"]) == (422, 42201)                    # unknown type without the reference
    pid = register(sr, top, person, references=refs)[1]["id"]
    assert sr.ok("GET", f"/subjects/{top}/versions/1")["references"] == refs
    assert sr.ok("GET", f"/subjects/{base}/versions/1/referencedby") == [pid]
    assert sr.ok("GET", f"/schemas/ids/{pid}")["references"] == refs
    # a referenced version cannot be deleted
    assert sr.error("DELETE", f"/subjects/{base}/versions/1") == (422, 42206)
    assert sr.error("DELETE", f"/subjects/{base}") == (422, 42206)
    missing = [{"name": "demo.Address", "subject": base, "version": 9}]
    assert register(sr, subject(), person, references=missing)[1]["error_code"] == 42201
    client = SchemaRegistryClient({"url": sr.url})
    reg = client.get_latest_version(top)
    assert reg.schema.references == [SchemaReference("demo.Address", base, 1)] and aid != pid


def test_soft_and_permanent_deletes(sr):
    s = subject()
    sr.ok("PUT", f"/config/{s}", {"compatibility": "NONE"})
    ids = [register(sr, s, {"type": "enum", "name": "E", "symbols": [f"A{i}"]})[1]["id"] for i in range(3)]
    assert sr.error("DELETE", f"/subjects/{s}/versions/2?permanent=true") == (404, 40407)
    assert sr.ok("DELETE", f"/subjects/{s}/versions/2") == 2
    assert sr.error("DELETE", f"/subjects/{s}/versions/2") == (404, 40406)
    assert sr.ok("GET", f"/subjects/{s}/versions") == [1, 3]
    assert sr.ok("GET", f"/subjects/{s}/versions?deleted=true") == [1, 2, 3]
    assert sr.error("GET", f"/subjects/{s}/versions/2") == (404, 40402)
    assert sr.ok("GET", f"/subjects/{s}/versions/2?deleted=true")["id"] == ids[1]
    assert sr.ok("GET", f"/schemas/ids/{ids[1]}/subjects") == []
    assert sr.ok("GET", f"/schemas/ids/{ids[1]}/subjects?deleted=true") == [s]
    assert sr.ok("DELETE", f"/subjects/{s}/versions/2?permanent=true") == 2
    assert sr.ok("GET", f"/subjects/{s}/versions?deleted=true") == [1, 3]
    assert sr.error("GET", f"/schemas/ids/{ids[1]}") == (404, 40403)
    assert sr.ok("DELETE", f"/subjects/{s}/versions/latest") == 3
    assert sr.ok("GET", f"/subjects/{s}/versions/latest")["version"] == 1
    # the subject: soft, then permanent
    assert sr.error("DELETE", f"/subjects/{s}?permanent=true") == (404, 40405)
    assert sr.ok("DELETE", f"/subjects/{s}") == [1]
    assert sr.error("DELETE", f"/subjects/{s}") == (404, 40404)
    assert s not in sr.ok("GET", "/subjects") and s in sr.ok("GET", "/subjects?deleted=true")
    assert sr.error("GET", f"/subjects/{s}/versions") == (404, 40401)
    assert sorted(sr.ok("DELETE", f"/subjects/{s}?permanent=true")) == [1, 3]
    assert s not in sr.ok("GET", "/subjects?deleted=true")
    assert sr.error("DELETE", f"/subjects/{s}") == (404, 40401)
    # registering again starts at version 1 and keeps ids increasing
    new = register(sr, s, {"type": "enum", "name": "E", "symbols": ["Z"]})[1]["id"]
    assert new > max(ids) and sr.ok("GET", f"/subjects/{s}/versions") == [1]


def test_config_and_compatibility_endpoints(sr):
    assert sr.ok("GET", "/config") == {"compatibilityLevel": "BACKWARD"}
    s = subject()
    register(sr, s, USER_V1)
    assert sr.error("GET", f"/config/{s}") == (404, 40408)
    assert sr.ok("GET", f"/config/{s}?defaultToGlobal=true") == {"compatibilityLevel": "BACKWARD"}
    for level in ("BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE", "NONE",
                  "backward"):
        assert sr.ok("PUT", f"/config/{s}", {"compatibility": level}) == {"compatibility": level.upper()}
        assert sr.ok("GET", f"/config/{s}") == {"compatibilityLevel": level.upper()}
    assert sr.error("PUT", f"/config/{s}", {"compatibility": "SIDEWAYS"}) == (422, 42203)
    assert sr.error("PUT", "/config", {"compatibility": 3}) == (422, 42203)
    assert sr.ok("DELETE", f"/config/{s}") == {"compatibilityLevel": "BACKWARD"}
    assert sr.error("DELETE", f"/config/{s}") == (404, 40408)
    url = f"/compatibility/subjects/{s}/versions/latest"
    assert sr.ok("POST", url, {"schema": json.dumps(USER_V2)}) == {"is_compatible": True}
    out = sr.ok("POST", url + "?verbose=true", {"schema": json.dumps(USER_BAD)})
    assert out["is_compatible"] is False and "READER_FIELD_MISSING_DEFAULT_VALUE" in out["messages"][0]
    assert sr.ok("POST", f"/compatibility/subjects/{s}/versions", {"schema": json.dumps(USER_V2)}) == \
        {"is_compatible": True}
    assert sr.error("POST", f"/compatibility/subjects/{s}/versions/7", {"schema": json.dumps(USER_V2)}) == (404, 40402)
    missing = f"/compatibility/subjects/{subject()}/versions/1"
    assert sr.error("POST", missing, {"schema": json.dumps(USER_V1)}) == (404, 40401)
    # global level FULL refuses what BACKWARD accepts (a field removed without default in the old)
    sr.ok("PUT", "/config", {"compatibility": "FORWARD"})
    try:
        narrower = {**USER_V2, "fields": [{"name": "age", "type": "int", "default": 0}]}
        assert register(sr, s, narrower)[0] == 409
        assert register(sr, s, USER_V2)[0] == 200
    finally:
        assert sr.ok("DELETE", "/config") == {"compatibilityLevel": "FORWARD"}
    assert sr.ok("GET", "/config") == {"compatibilityLevel": "BACKWARD"}


def test_modes(sr):
    s = subject()
    assert sr.ok("GET", "/mode") == {"mode": "READWRITE"}
    register(sr, s, USER_V1)
    assert sr.ok("PUT", f"/mode/{s}", {"mode": "READONLY"}) == {"mode": "READONLY"}
    assert sr.ok("GET", f"/mode/{s}") == {"mode": "READONLY"}
    assert sr.error("POST", f"/subjects/{s}/versions", {"schema": json.dumps(USER_V2)}) == (422, 42205)
    assert sr.error("DELETE", f"/subjects/{s}/versions/1") == (422, 42205)
    assert sr.ok("GET", f"/subjects/{s}/versions") == [1]                # reads still served
    assert sr.error("PUT", f"/mode/{s}", {"mode": "SLEEPING"}) == (422, 42204)
    assert sr.error("PUT", f"/mode/{s}", {"mode": "IMPORT"}) == (422, 42205)   # it has schemas
    assert sr.ok("DELETE", f"/mode/{s}") == {"mode": "READONLY"}
    assert sr.error("DELETE", f"/mode/{s}") == (404, 40409)
    # IMPORT: explicit ids and versions, no compatibility check
    imp = subject()
    assert sr.ok("PUT", f"/mode/{imp}", {"mode": "IMPORT"}) == {"mode": "IMPORT"}
    body = {"schema": json.dumps(USER_BAD), "id": 90001, "version": 5}
    assert sr.ok("POST", f"/subjects/{imp}/versions", body) == {"id": 90001}
    assert sr.ok("GET", f"/subjects/{imp}/versions/5")["id"] == 90001
    sr.ok("DELETE", f"/mode/{imp}")
    assert sr.error("POST", f"/subjects/{imp}/versions", {**body, "version": 6, "id": 90002}) == (422, 42205)
    # the next id allocated is above the imported one
    assert register(sr, subject(), {"type": "fixed", "name": "F", "size": 3})[1]["id"] > 90001


def test_errors_and_bad_bodies_change_nothing(sr):
    s = subject()
    register(sr, s, USER_V1)
    before = sr.ok("GET", "/subjects?deleted=true")
    assert sr.error("GET", f"/subjects/{subject()}/versions/1") == (404, 40401)
    assert sr.error("GET", f"/subjects/{s}/versions/2") == (404, 40402)
    assert sr.error("GET", f"/subjects/{s}/versions/0") == (422, 42202)
    assert sr.error("GET", f"/subjects/{s}/versions/abc") == (422, 42202)
    assert sr.error("GET", "/schemas/ids/987654") == (404, 40403)
    assert sr.error("POST", f"/subjects/{s}/versions", b"{not json") == (400, 400)
    assert sr.error("POST", f"/subjects/{s}/versions", b"[1, 2]") == (400, 400)
    assert sr.error("POST", f"/subjects/{s}/versions", {"schema": "{\"type\": \"recordz\"}"}) == (422, 42201)
    assert sr.error("POST", f"/subjects/{s}/versions", {"schema": "{}", "schemaType": "XML"}) == (422, 42201)
    assert sr.error("POST", f"/subjects/{s}/versions", {"schema": "message {", "schemaType": "PROTOBUF"}) == \
        (422, 42201)
    assert sr.error("POST", f"/subjects/{s}/versions", {"schema": json.dumps(USER_V1)}, ctype="text/plain") == \
        (415, 415)
    big = {"schema": json.dumps({"type": "enum", "name": "Big", "symbols": [f"S{i}" for i in range(200000)]})}
    assert sr.error("POST", f"/subjects/{subject()}/versions", big) == (413, 413)
    assert sr.error("GET", "/subjects", accept="text/html") == (406, 406)
    assert sr.error("GET", f"/subjects/{s}/versions/1/nothing") == (404, 404)
    assert sr.call("GET", "/subjects", accept="application/json")[2]["Content-Type"].startswith("application/json")
    assert sr.ok("GET", "/subjects?deleted=true") == before
    assert sr.ok("GET", f"/subjects/{s}/versions") == [1]


def test_state_survives_a_restart_in_confluents_format(tmp_path):
    (port,) = free_ports(1)
    overrides = {"http.listeners": f"HTTP://127.0.0.1:{port}"}
    sr = Registry(f"http://127.0.0.1:{port}")
    b = BrokerProcess(tmp_path / "data", overrides)
    with b:
        ids = [register(sr, "keep", USER_V1)[1]["id"], register(sr, "keep", USER_V2)[1]["id"]]
        sr.ok("PUT", "/config/keep", {"compatibility": "FULL"})
        sr.ok("DELETE", "/subjects/keep/versions/1")
        json_id = register(sr, "other", {"type": "string"}, schema_type="JSON")[1]["id"]
        consumer = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": "dump", "enable.auto.commit": False})
        consumer.assign([ck.TopicPartition("_schemas", 0, 0)])
        keys = []
        while len(keys) < 5:
            m = consumer.poll(10)
            assert m is not None and m.error() is None
            if json.loads(m.key())["keytype"] != "NOOP":   # the writer's announcement
                keys.append(json.loads(m.key()))
        consumer.close()
    assert keys == [
        {"keytype": "SCHEMA", "subject": "keep", "version": 1, "magic": 1},
        {"keytype": "SCHEMA", "subject": "keep", "version": 2, "magic": 1},
        {"keytype": "CONFIG", "subject": "keep", "magic": 0},
        {"keytype": "SCHEMA", "subject": "keep", "version": 1, "magic": 1},
        {"keytype": "SCHEMA", "subject": "other", "version": 1, "magic": 1}]
    with BrokerProcess(tmp_path / "data", overrides):
        assert sr.ok("GET", "/subjects") == ["keep", "other"]
        assert sr.ok("GET", "/subjects/keep/versions") == [2]
        assert sr.ok("GET", "/subjects/keep/versions?deleted=true") == [1, 2]
        assert sr.ok("GET", "/config/keep") == {"compatibilityLevel": "FULL"}
        assert sr.ok("GET", f"/schemas/ids/{json_id}") == {"schemaType": "JSON", "schema": '{"type":"string"}'}
        new = register(sr, "keep", {**USER_V2, "doc": "v3"})[1]["id"]
        assert new > max(ids + [json_id])


def test_protobuf_text_with_a_reference_served_serialized(sr):
    """.proto text as the Java serializer registers it, importing another registered .proto; the
    compiled descriptors (``?format=serialized``) are what confluent-kafka's ProtobufDeserializer
    fetches to read a record written with that id."""
    common, main = subject(), subject()
    money = 'syntax = "proto3";\npackage demo.common;\nmessage Money {\n  int64 cents = 1;\n  string currency = 2;\n}\n'
    invoice = ('syntax = "proto3";\npackage demo;\nimport "money.proto";\nmessage Invoice {\n  string id = 1;\n'
               '  demo.common.Money total = 2;\n  map<string, int32> lines = 3;\n}\n')
    assert register(sr, common, money, schema_type="PROTOBUF")[0] == 200
    refs = [{"name": "money.proto", "subject": common, "version": 1}]
    assert register(sr, main, invoice, schema_type="PROTOBUF")[1]["error_code"] == 42201   # import unresolved
    bad = invoice.replace("demo.common.Money", "demo.common.Cash")
    assert register(sr, main, bad, schema_type="PROTOBUF", references=refs)[1]["error_code"] == 42201
    sid = register(sr, main, invoice, schema_type="PROTOBUF", references=refs)[1]["id"]
    assert sr.ok("GET", f"/schemas/ids/{sid}")["schema"] == invoice.strip()        # stored as given
    pool = descriptor_pool.DescriptorPool()
    for path in (f"/subjects/{common}/versions/1?format=serialized", f"/schemas/ids/{sid}?format=serialized"):
        fd = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(sr.ok("GET", path)["schema"]))
        fd.name = "money.proto" if "subjects" in path else "invoice.proto"
        pool.Add(fd)
    Invoice = message_factory.GetMessageClass(pool.FindMessageTypeByName("demo.Invoice"))
    msg = Invoice(id="i-1", lines={"pen": 2})
    msg.total.cents, msg.total.currency = 250, "EUR"
    framed = b"\x00" + sid.to_bytes(4, "big") + b"\x00" + msg.SerializeToString()   # Confluent framing
    client = SchemaRegistryClient({"url": sr.url})
    de = ProtobufDeserializer(Invoice, {"use.deprecated.format": False}, schema_registry_client=client)
    assert de(framed, SerializationContext("invoices", MessageField.VALUE)) == msg
    # a compatible evolution (a field added) and an incompatible one (a type changed)
    grown = invoice[:invoice.rindex("}")] + "  bool paid = 4;\n}\n"
    assert register(sr, main, grown, schema_type="PROTOBUF", references=refs)[0] == 200
    broken = grown.replace("string id = 1", "int32 id = 1")
    status, out, _ = register(sr, main, broken, schema_type="PROTOBUF", references=refs)
    assert status == 409 and "FIELD_SCALAR_KIND_CHANGED" in out["message"]
