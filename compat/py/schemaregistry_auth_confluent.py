"""confluent-kafka-python SchemaRegistryClient with basic auth, for weir's
compatibility tests (compat/schemaregistry_auth_test.go), run with the
system interpreter (/usr/bin/python3; Debian python3-confluent-kafka):

  schemaregistry_auth_confluent.py REGISTRY_URL USER PASSWORD SUBJECT

Registers an Avro schema under SUBJECT with basic.auth.user.info set to
USER:PASSWORD, then reads it back by id. Prints JSON lines:
{"event": "registered", "id": ID}, {"event": "fetched", "id": ID} or, when
the registry refuses, {"event": "refused", "status": S, "code": C,
"message": M}. Anything else exits non-zero with a message on stderr.
"""

import json
import sys

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

SCHEMA = json.dumps({"type": "record", "name": "Order", "namespace": "weir.compat",
                     "fields": [{"name": "id", "type": "long"}]})


def emit(**kw):
    print(json.dumps(kw), flush=True)


def main():
    if len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    url, user, password, subject = sys.argv[1:]
    client = SchemaRegistryClient({"url": url, "basic.auth.user.info": user + ":" + password})
    try:
        sid = client.register_schema(subject, Schema(SCHEMA, "AVRO"))
        emit(event="registered", id=sid)
        got = client.get_schema(sid)
        if json.loads(got.schema_str) != json.loads(SCHEMA):
            print("schemaregistry_auth_confluent: read back another schema", file=sys.stderr)
            sys.exit(1)
        emit(event="fetched", id=sid)
    except SchemaRegistryError as e:
        emit(event="refused", status=e.http_status_code, code=e.error_code, message=e.error_message)


main()
