"""confluent-kafka-python schema registry driver for weir's compatibility tests.

Run by compat/schemaregistry_test.go with the system interpreter
(/usr/bin/python3; Debian python3-confluent-kafka, python3-jsonschema,
python3-protobuf, python3-requests):

  schemaregistry_confluent.py json     BOOTSTRAP REGISTRY_URL TOPIC COUNT
  schemaregistry_confluent.py protobuf BOOTSTRAP REGISTRY_URL TOPIC COUNT

Each mode uses SchemaRegistryClient and the format's serializer and
deserializer: it produces COUNT records with schema v1 (the serializer
registers it under TOPIC-value), COUNT more with a compatible v2 (registered
the same way), asks the registry to register an incompatible v3 and expects
a 409, then consumes the 2*COUNT records back with the deserializer. It
prints JSON lines: {"event": "registered", "version": N, "id": ID},
{"event": "produced", "value": V}, {"event": "refused", "status": S, "code":
C, "message": M}, {"event": "consumed", "value": V, "offset": O}. Any other
outcome exits non-zero with a message on stderr. Every wait is bounded.
"""

import json
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition, OFFSET_BEGINNING
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

DEADLINE_S = 60


def fail(msg):
    print("schemaregistry_confluent: " + msg, file=sys.stderr)
    sys.exit(1)


def emit(**kw):
    print(json.dumps(kw), flush=True)


# --- JSON Schema ---------------------------------------------------------

JSON_V1 = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order", "type": "object",
    "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
    "required": ["id"], "additionalProperties": False,
})
# v2 adds an optional property to a closed content model: backward compatible.
JSON_V2 = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order", "type": "object",
    "properties": {"id": {"type": "integer"}, "item": {"type": "string"}, "note": {"type": "string"}},
    "required": ["id"], "additionalProperties": False,
})
# v3 narrows id from integer to string: backward incompatible.
JSON_V3 = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order", "type": "object",
    "properties": {"id": {"type": "string"}, "item": {"type": "string"}, "note": {"type": "string"}},
    "required": ["id"], "additionalProperties": False,
})


def json_mode(client, topic, count):
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
    values = []
    sers = [JSONSerializer(JSON_V1, client, conf={"auto.register.schemas": True}),
            JSONSerializer(JSON_V2, client, conf={"auto.register.schemas": True})]
    for v, ser in enumerate(sers):
        for i in range(count):
            value = {"id": v * count + i, "item": "item-%d" % i}
            if v == 1:
                value["note"] = "v2"
            values.append((ser, value))
    produce(topic, values)
    refuse(client, topic + "-value", Schema(JSON_V3, "JSON"))
    de = JSONDeserializer(JSON_V2)
    consume(topic, 2 * count, lambda b: de(b, SerializationContext(topic, MessageField.VALUE)))


# --- Protobuf --------------------------------------------------------------

def proto_class(fields):
    """A message class ex.Order built at run time (no protoc): fields are
    (name, number, FieldDescriptorProto type)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    fdp = descriptor_pb2.FileDescriptorProto(name="order.proto", package="weir.compat", syntax="proto3")
    m = fdp.message_type.add(name="Order")
    for name, number, typ in fields:
        m.field.add(name=name, number=number, type=typ,
                    label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.MessageFactory(pool).GetPrototype(pool.FindMessageTypeByName("weir.compat.Order"))


def protobuf_mode(client, topic, count):
    from google.protobuf import descriptor_pb2, json_format
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
    T = descriptor_pb2.FieldDescriptorProto
    v1 = proto_class([("id", 1, T.TYPE_INT64), ("item", 2, T.TYPE_STRING)])
    # v2 adds a field: compatible.
    v2 = proto_class([("id", 1, T.TYPE_INT64), ("item", 2, T.TYPE_STRING), ("note", 3, T.TYPE_STRING)])
    values = []
    for v, cls in enumerate([v1, v2]):
        ser = ProtobufSerializer(cls, client, conf={"auto.register.schemas": True})
        for i in range(count):
            msg = cls(id=v * count + i, item="item-%d" % i)
            if v == 1:
                msg.note = "v2"
            values.append((ser, msg))
    produce(topic, values, to_json=lambda m: json_format.MessageToDict(m, preserving_proto_field_name=True))
    # v3 turns item into an int64: incompatible.
    refuse(client, topic + "-value", Schema(
        "syntax = \"proto3\"; package weir.compat; message Order { int64 id = 1; int64 item = 2; string note = 3; }",
        "PROTOBUF"))
    de = ProtobufDeserializer(v2)
    consume(topic, 2 * count,
            lambda b: json_format.MessageToDict(de(b, SerializationContext(topic, MessageField.VALUE)),
                                                preserving_proto_field_name=True))


# --- shared ----------------------------------------------------------------

def produce(topic, values, to_json=lambda v: v):
    p = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all", "enable.idempotence": True})
    errors = []

    def report(err, msg):
        if err is not None:
            errors.append(str(err))

    for ser, value in values:
        payload = ser(value, SerializationContext(topic, MessageField.VALUE))
        p.produce(topic, value=payload, on_delivery=report)
        emit(event="produced", value=to_json(value))
    if p.flush(DEADLINE_S) != 0:
        fail("produce: records still queued after %ds" % DEADLINE_S)
    if errors:
        fail("produce: " + "; ".join(errors))


def refuse(client, subject, schema):
    try:
        client.register_schema(subject, schema)
    except SchemaRegistryError as e:
        emit(event="refused", status=e.http_status_code, code=e.error_code, message=e.error_message)
        return
    fail("the registry accepted an incompatible schema")


def consume(topic, count, decode):
    c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "unused", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = 0
    deadline = time.time() + DEADLINE_S
    while got < count:
        if time.time() > deadline:
            fail("consume: %d of %d records after %ds" % (got, count, DEADLINE_S))
        msg = c.poll(1.0)
        if msg is None:
            continue
        if msg.error():
            fail("consume: %s" % msg.error())
        emit(event="consumed", value=decode(msg.value()), offset=msg.offset())
        got += 1
    c.close()


def main():
    global BOOTSTRAP
    if len(sys.argv) != 6 or sys.argv[1] not in ("json", "protobuf"):
        fail("usage: schemaregistry_confluent.py json|protobuf BOOTSTRAP REGISTRY_URL TOPIC COUNT")
    mode, BOOTSTRAP, url, topic, count = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    client = SchemaRegistryClient({"url": url})
    if mode == "json":
        json_mode(client, topic, count)
    else:
        protobuf_mode(client, topic, count)
    for v in client.get_versions(topic + "-value"):
        emit(event="registered", version=v, id=client.get_version(topic + "-value", v).schema_id)


BOOTSTRAP = ""

if __name__ == "__main__":
    main()
