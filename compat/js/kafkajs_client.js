// kafkajs driver for weir's compatibility tests, run by compat/kafkajs_test.go
// (kafkajs is installed into compat/js/node_modules by `npm ci`, see .ci/run):
//
//   node kafkajs_client.js create  BOOTSTRAP TOPIC PARTITIONS
//   node kafkajs_client.js produce BOOTSTRAP TOPIC < records.jsonl
//   node kafkajs_client.js consume BOOTSTRAP TOPIC COUNT GROUP
//
// produce reads {"key","value"} JSON lines and prints one JSON line per record
// {"key","value","partition","offset"} (offsets from the produce response's
// base offsets); consume joins consumer group GROUP (kafkajs consumers always
// use a group), reads from the beginning and prints every record in the same
// shape, exiting once COUNT were read. Errors exit non-zero with a message on
// stderr; every wait is bounded.
'use strict';

const fs = require('fs');
const { Kafka, Partitioners, CompressionTypes, logLevel } = require('kafkajs');

const DEADLINE_MS = 60000;

// fail reports on stderr (synchronously, so the message is complete) and
// exits at once; pending stdout does not matter on failure.
function fail(msg) {
  try {
    fs.writeSync(2, `kafkajs_client: ${msg}\n`);
  } catch (e) {
    // stderr gone: the exit code still tells
  }
  process.exit(1);
}

// security returns kafkajs's ssl and sasl settings from the environment
// (compat/security_test.go; nothing set: PLAINTEXT): WEIR_SEC_PROTOCOL
// (SSL, SASL_SSL, SASL_PLAINTEXT), WEIR_SEC_CA, WEIR_SEC_MECHANISM (PLAIN,
// SCRAM-SHA-256, SCRAM-SHA-512), WEIR_SEC_USER, WEIR_SEC_PASSWORD.
function security() {
  const e = process.env;
  const out = {};
  if (e.WEIR_SEC_PROTOCOL === 'SSL' || e.WEIR_SEC_PROTOCOL === 'SASL_SSL') {
    out.ssl = { ca: [fs.readFileSync(e.WEIR_SEC_CA, 'utf-8')] };
  }
  if (e.WEIR_SEC_MECHANISM) {
    out.sasl = { mechanism: e.WEIR_SEC_MECHANISM.toLowerCase(), username: e.WEIR_SEC_USER, password: e.WEIR_SEC_PASSWORD };
  }
  return out;
}

function client(bootstrap) {
  return new Kafka({
    ...security(),
    clientId: 'weir-compat',
    brokers: [bootstrap],
    logLevel: logLevel.WARN,
    connectionTimeout: 10000,
    requestTimeout: 30000,
    retry: { retries: 5, initialRetryTime: 100 },
  });
}

function readStdin() {
  return new Promise((resolve, reject) => {
    const chunks = [];
    process.stdin.on('data', (c) => chunks.push(c));
    process.stdin.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    process.stdin.on('error', reject);
  });
}

async function create(bootstrap, topic, partitions) {
  const admin = client(bootstrap).admin();
  await admin.connect();
  const created = await admin.createTopics({
    topics: [{ topic, numPartitions: partitions, replicationFactor: 1 }],
    waitForLeaders: true,
    timeout: 30000,
  });
  await admin.disconnect();
  if (!created) fail(`create topic ${topic}: already exists`);
}

async function produce(bootstrap, topic) {
  const records = (await readStdin()).split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l));
  // DefaultPartitioner is kafkajs' Java-compatible (murmur2) partitioner.
  const producer = client(bootstrap).producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  // Several sends of 40 records, so each produce request carries batches for
  // several partitions, and partitions get several batches over time.
  let acked = 0;
  for (let i = 0; i < records.length; i += 40) {
    const chunk = records.slice(i, i + 40);
    const meta = await producer.send({
      topic,
      acks: -1,
      compression: CompressionTypes.GZIP,
      messages: chunk.map((r) => ({ key: r.key, value: r.value })),
    });
    for (const m of meta) {
      if (m.errorCode !== 0) fail(`produce to partition ${m.partition}: error code ${m.errorCode}`);
      if (Number(m.baseOffset) < 0) fail(`produce to partition ${m.partition}: base offset ${m.baseOffset}`);
    }
    acked += chunk.length;
  }
  await producer.disconnect();
  // kafkajs reports base offsets per partition, not where each record went;
  // the Go driver checks placement from the log and from the consumer.
  process.stderr.write(`kafkajs_client: ${acked} records acknowledged\n`);
}

async function consume(bootstrap, topic, count, group) {
  const consumer = client(bootstrap).consumer({
    groupId: group,
    sessionTimeout: 30000,
    rebalanceTimeout: 30000,
    maxWaitTimeInMs: 100,
    maxBytesPerPartition: 4 << 20,
  });
  let got = 0;
  const timer = setTimeout(() => fail(`read ${got} of ${count} records within ${DEADLINE_MS}ms`), DEADLINE_MS);
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await new Promise((resolve, reject) => {
    consumer.on(consumer.events.CRASH, (e) => reject(e.payload.error));
    consumer
      .run({
        autoCommit: true,
        eachMessage: async ({ partition, message }) => {
          if (got >= count) return;
          process.stdout.write(JSON.stringify({
            key: message.key.toString('utf8'),
            value: message.value.toString('utf8'),
            partition,
            offset: Number(message.offset),
          }) + '\n');
          got++;
          if (got === count) resolve();
        },
      })
      .catch(reject);
  });
  clearTimeout(timer);
  await consumer.disconnect();
}

async function main() {
  const [mode, bootstrap, topic, n, group] = process.argv.slice(2);
  if (!mode || !bootstrap || !topic) fail('usage: kafkajs_client.js create|produce|consume BOOTSTRAP TOPIC [N] [GROUP]');
  switch (mode) {
    case 'create': return create(bootstrap, topic, Number(n));
    case 'produce': return produce(bootstrap, topic);
    case 'consume': return consume(bootstrap, topic, Number(n), group);
    default: fail(`unknown mode ${mode}`);
  }
}

// Exit only once stdout is flushed: writes to a pipe may complete
// asynchronously, and process.exit would cut a large last line. The write
// callback of an empty chunk runs after every earlier chunk was written.
// (Exiting explicitly, rather than waiting for the event loop to drain,
// bounds the run even if a client leaves a timer behind.)
main().then(
  () => process.stdout.write('', () => process.exit(0)),
  (e) => fail(`${e && e.stack ? e.stack : e}`),
);
