// @kafkajs/confluent-schema-registry driver for weir's compatibility tests,
// run by compat/schemaregistry_test.go (installed into compat/js/node_modules
// by `npm ci`, see .ci/run):
//
//   node schemaregistry_kafkajs.js avro|json|protobuf BOOTSTRAP REGISTRY_URL TOPIC COUNT
//
// Registers v1 of the format's schema under TOPIC-value, produces COUNT
// records encoded with it (kafkajs, acks=all), registers a compatible v2 and
// produces COUNT more, asks the registry to register an incompatible v3 and
// expects a 409, then consumes the 2*COUNT records and decodes them with the
// registry (by the id in each record). It prints JSON lines in the shape of
// compat/py/schemaregistry_confluent.py: registered, produced, refused,
// consumed. Errors exit non-zero with a message on stderr; every wait is
// bounded.
'use strict';

const fs = require('fs');
const { Kafka, logLevel } = require('kafkajs');
const { SchemaRegistry, SchemaType } = require('@kafkajs/confluent-schema-registry');

const DEADLINE_MS = 60000;

function fail(msg) {
  try {
    fs.writeSync(2, `schemaregistry_kafkajs: ${msg}\n`);
  } catch (e) {
    // stderr gone: the exit code still tells
  }
  process.exit(1);
}

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

const avro = (fields) => JSON.stringify({ type: 'record', name: 'Order', namespace: 'weir.compat', fields });
const json = (props, required) => JSON.stringify({
  type: 'object', properties: props, required, additionalProperties: false,
});
const proto = (fields) => `syntax = "proto3";\npackage weir.compat;\nmessage Order {\n${fields}\n}\n`;

// Per format: v1, a compatible v2, an incompatible v3, and a value of each
// version (v2 values carry the added field).
const FORMATS = {
  avro: {
    type: SchemaType.AVRO,
    v1: avro([{ name: 'id', type: 'long' }, { name: 'item', type: 'string' }]),
    // v2 adds a field with a default: backward compatible.
    v2: avro([{ name: 'id', type: 'long' }, { name: 'item', type: 'string' }, { name: 'note', type: 'string', default: '' }]),
    // v3 adds a field without a default: backward incompatible.
    v3: avro([{ name: 'id', type: 'long' }, { name: 'item', type: 'string' }, { name: 'note', type: 'string', default: '' }, { name: 'qty', type: 'int' }]),
  },
  json: {
    type: SchemaType.JSON,
    v1: json({ id: { type: 'integer' }, item: { type: 'string' } }, ['id']),
    // v2 adds an optional property to a closed content model.
    v2: json({ id: { type: 'integer' }, item: { type: 'string' }, note: { type: 'string' } }, ['id']),
    // v3 makes the new property required: backward incompatible.
    v3: json({ id: { type: 'integer' }, item: { type: 'string' }, note: { type: 'string' } }, ['id', 'note']),
  },
  protobuf: {
    type: SchemaType.PROTOBUF,
    v1: proto('  int64 id = 1;\n  string item = 2;'),
    // v2 adds a field.
    v2: proto('  int64 id = 1;\n  string item = 2;\n  string note = 3;'),
    // v3 changes item's type: incompatible.
    v3: proto('  int64 id = 1;\n  int64 item = 2;\n  string note = 3;'),
  },
};

function value(mode, version, i, count) {
  const v = { id: version * count + i, item: `item-${i}` };
  if (version === 1) v.note = 'v2';
  return v;
}

// plain turns a decoded value into plain JSON (protobuf messages carry
// int64 as Long, which serializes as a string or an object).
function plain(mode, v) {
  if (mode !== 'protobuf') return v;
  const obj = v.$type.toObject(v, { longs: Number, defaults: false });
  return obj;
}

async function main() {
  const [mode, bootstrap, url, topic, countArg] = process.argv.slice(2);
  const f = FORMATS[mode];
  if (!f || !countArg) fail('usage: schemaregistry_kafkajs.js avro|json|protobuf BOOTSTRAP REGISTRY_URL TOPIC COUNT');
  const count = Number(countArg);
  const subject = `${topic}-value`;
  const timer = setTimeout(() => fail(`not done after ${DEADLINE_MS} ms`), DEADLINE_MS);

  const registry = new SchemaRegistry({ host: url });
  const kafka = new Kafka({ clientId: 'weir-compat-sr', brokers: [bootstrap], logLevel: logLevel.WARN });
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();

  for (const [version, schema] of [f.v1, f.v2].entries()) {
    const { id } = await registry.register({ type: f.type, schema }, { subject });
    const messages = [];
    for (let i = 0; i < count; i++) {
      const v = value(mode, version, i, count);
      messages.push({ value: await registry.encode(id, v) });
      emit({ event: 'produced', value: v });
    }
    await producer.send({ topic, acks: -1, messages });
  }
  await producer.disconnect();

  try {
    await registry.register({ type: f.type, schema: f.v3 }, { subject });
    fail('the registry accepted an incompatible schema');
  } catch (e) {
    if (e.status === undefined) throw e;
    const body = e.body || {};
    emit({ event: 'refused', status: e.status, code: body.error_code || e.status, message: e.message });
  }

  const consumer = kafka.consumer({ groupId: `weir-compat-sr-${mode}` });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  let got = 0;
  await new Promise((resolve, reject) => {
    consumer.run({
      eachMessage: async ({ message }) => {
        try {
          const v = await registry.decode(message.value);
          emit({ event: 'consumed', value: plain(mode, v), offset: Number(message.offset) });
        } catch (e) {
          reject(e);
          return;
        }
        if (++got === 2 * count) resolve();
      },
    }).catch(reject);
  });
  await consumer.disconnect();

  const versions = await fetchJSON(`${url}/subjects/${encodeURIComponent(subject)}/versions`);
  for (const v of versions) {
    const s = await fetchJSON(`${url}/subjects/${encodeURIComponent(subject)}/versions/${v}`);
    emit({ event: 'registered', version: v, id: s.id });
  }
  clearTimeout(timer);
}

async function fetchJSON(u) {
  const r = await fetch(u);
  if (!r.ok) fail(`GET ${u}: ${r.status}`);
  return r.json();
}

main().catch((e) => fail(e && e.stack ? e.stack : String(e)));
