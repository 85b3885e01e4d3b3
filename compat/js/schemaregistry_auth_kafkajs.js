// @kafkajs/confluent-schema-registry with basic auth, for weir's
// compatibility tests (compat/schemaregistry_auth_test.go; installed into
// compat/js/node_modules by `npm ci`, see .ci/run):
//
//   node schemaregistry_auth_kafkajs.js REGISTRY_URL USER PASSWORD SUBJECT
//
// Registers an Avro schema under SUBJECT with auth {username, password},
// then encodes and decodes a value with it (the decode reads the schema
// back by id). Prints JSON lines in the shape of
// compat/py/schemaregistry_auth_confluent.py: registered, fetched, or
// refused with the registry's status and error code. Anything else exits
// non-zero with a message on stderr.
'use strict';

const { SchemaRegistry, SchemaType } = require('@kafkajs/confluent-schema-registry');

const SCHEMA = JSON.stringify({ type: 'record', name: 'Order', namespace: 'weir.compat', fields: [{ name: 'id', type: 'long' }] });

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

async function main() {
  const [url, username, password, subject] = process.argv.slice(2);
  if (!subject) {
    process.stderr.write('usage: schemaregistry_auth_kafkajs.js REGISTRY_URL USER PASSWORD SUBJECT\n');
    process.exit(2);
  }
  const registry = new SchemaRegistry({ host: url, auth: { username, password }, retry: { retries: 0 } });
  let id;
  try {
    ({ id } = await registry.register({ type: SchemaType.AVRO, schema: SCHEMA }, { subject }));
  } catch (e) {
    if (e.status) {
      emit({ event: 'refused', status: e.status, code: e.errorCode || 0, message: e.message });
      return;
    }
    throw e;
  }
  emit({ event: 'registered', id });
  // A fresh client, so that decoding asks the registry for the schema.
  const reader = new SchemaRegistry({ host: url, auth: { username, password }, retry: { retries: 0 } });
  const value = await reader.decode(await registry.encode(id, { id: 42 }));
  if (value.id !== 42) {
    throw new Error(`decoded ${JSON.stringify(value)}`);
  }
  emit({ event: 'fetched', id });
}

main().catch((e) => {
  process.stderr.write(`schemaregistry_auth_kafkajs: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
