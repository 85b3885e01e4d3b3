// kafkajs transactional driver for compat/txn_kafkajs_test.go:
//
//   node txn_kafkajs.js run BOOTSTRAP TOPIC PARTITIONS PER GROUP
//
// Creates TOPIC, then runs three transactions with transactional id
// "weir-compat-kafkajs-txn": each sends PER records to every partition
// (values "t<txn>-p<partition>-<i>"); transactions 0 and 2 commit, 1 aborts.
// Then a consumer of group GROUP with readUncommitted: false reads from the
// beginning and prints one JSON line {"value","partition","offset"} per
// record until it read the 2*PARTITIONS*PER committed ones. Because the last
// transaction commits and writes to every partition, any aborted record the
// broker failed to hide would come before it in its partition, so it would
// be printed before the consumer stops. Errors exit non-zero with a message
// on stderr; every wait is bounded.
//
//   node txn_kafkajs.js fence BOOTSTRAP TOPIC
//
// Producer A (transactional id "weir-compat-kafkajs-fence") commits "a0";
// producer B with the same id connects (bumping the epoch) and commits "b0";
// A's next transaction must fail. Prints {"fenced": "<kafkajs error type>", "detail": "<stack>"}
// and B commits "b1" last. (Its Go test waits for the broker to answer
// INVALID_PRODUCER_EPOCH instead of PRODUCER_FENCED to AddPartitionsToTxn
// v0/v1, as Kafka does for clients older than KIP-588: kafkajs reports code
// 90 as an unknown error.)
//
//   node txn_kafkajs.js offsets BOOTSTRAP TOPIC GROUP
//
// In one transaction sends a record and the offset 5 of TOPIC/0 for GROUP
// (AddOffsetsToTxn + TxnOffsetCommit), commits; in a second sends offset 9
// and aborts. The Go test checks GROUP's committed offset is 5.
'use strict';

const fs = require('fs');
const { Kafka, logLevel } = require('kafkajs');

const DEADLINE_MS = 15000;
const TXN_ID = 'weir-compat-kafkajs-txn';

function fail(msg) {
  try {
    fs.writeSync(2, `txn_kafkajs: ${msg}\n`);
  } catch (e) {
    // stderr gone: the exit code still tells
  }
  process.exit(1);
}

async function run(bootstrap, topic, partitions, per, group) {
  const kafka = new Kafka({
    clientId: 'weir-compat-txn',
    brokers: [bootstrap],
    logLevel: logLevel.WARN,
    connectionTimeout: 5000,
    requestTimeout: 10000,
    retry: { retries: 5, initialRetryTime: 100 },
  });
  const admin = kafka.admin();
  await admin.connect();
  const created = await admin.createTopics({
    topics: [{ topic, numPartitions: partitions, replicationFactor: 1 }],
    waitForLeaders: true,
    timeout: 10000,
  });
  await admin.disconnect();
  if (!created) fail(`create topic ${topic}: already exists`);

  const producer = kafka.producer({ transactionalId: TXN_ID, idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  for (let t = 0; t < 3; t++) {
    const txn = await producer.transaction();
    const messages = [];
    for (let p = 0; p < partitions; p++) {
      for (let i = 0; i < per; i++) messages.push({ partition: p, value: `t${t}-p${p}-${i}` });
    }
    await txn.send({ topic, acks: -1, messages });
    if (t === 1) await txn.abort();
    else await txn.commit();
  }
  await producer.disconnect();

  const want = 2 * partitions * per;
  const consumer = kafka.consumer({
    groupId: group,
    readUncommitted: false,
    sessionTimeout: 10000,
    rebalanceTimeout: 10000,
    maxWaitTimeInMs: 100,
  });
  let got = 0;
  const timer = setTimeout(() => fail(`read ${got} of ${want} committed records within ${DEADLINE_MS}ms`), DEADLINE_MS);
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await new Promise((resolve, reject) => {
    consumer.on(consumer.events.CRASH, (e) => reject(e.payload.error));
    consumer
      .run({
        autoCommit: false,
        eachMessage: async ({ partition, message }) => {
          if (got >= want) return;
          process.stdout.write(JSON.stringify({
            value: message.value.toString('utf8'),
            partition,
            offset: Number(message.offset),
          }) + '\n');
          got++;
          if (got === want) resolve();
        },
      })
      .catch(reject);
  });
  clearTimeout(timer);
  await consumer.disconnect();
}

function kafkaClient(bootstrap) {
  return new Kafka({
    clientId: 'weir-compat-txn',
    brokers: [bootstrap],
    logLevel: logLevel.NOTHING,
    connectionTimeout: 5000,
    requestTimeout: 10000,
    retry: { retries: 2, initialRetryTime: 100 },
  });
}

async function commitOne(producer, topic, value) {
  const txn = await producer.transaction();
  await txn.send({ topic, acks: -1, messages: [{ partition: 0, value }] });
  await txn.commit();
}

async function fence(bootstrap, topic) {
  const kafka = kafkaClient(bootstrap);
  const opts = { transactionalId: 'weir-compat-kafkajs-fence', idempotent: true, maxInFlightRequests: 1 };
  const a = kafka.producer(opts);
  await a.connect();
  await commitOne(a, topic, 'a0');
  const b = kafka.producer(opts);
  await b.connect();
  await commitOne(b, topic, 'b0');
  let fenced = '';
  let detail = '';
  try {
    await commitOne(a, topic, 'a1');
  } catch (e) {
    fenced = (e && (e.type || (e.cause && e.cause.type) || e.name)) || String(e);
    detail = `${e && e.stack}`;
  }
  if (fenced === '') fail('fenced producer committed a1');
  await commitOne(b, topic, 'b1');
  await b.disconnect();
  await a.disconnect().catch(() => {});
  process.stdout.write(JSON.stringify({ fenced, detail }) + '\n');
}

async function offsets(bootstrap, topic, group) {
  const producer = kafkaClient(bootstrap).producer({
    transactionalId: 'weir-compat-kafkajs-offsets', idempotent: true, maxInFlightRequests: 1,
  });
  await producer.connect();
  for (const [offset, commit] of [['5', true], ['9', false]]) {
    const txn = await producer.transaction();
    await txn.send({ topic, acks: -1, messages: [{ partition: 0, value: `o${offset}` }] });
    await txn.sendOffsets({ consumerGroupId: group, topics: [{ topic, partitions: [{ partition: 0, offset }] }] });
    if (commit) await txn.commit();
    else await txn.abort();
  }
  await producer.disconnect();
}

async function main() {
  const [mode, bootstrap, topic, ...rest] = process.argv.slice(2);
  if (!bootstrap || !topic) fail('usage: txn_kafkajs.js run|fence|offsets BOOTSTRAP TOPIC ...');
  switch (mode) {
    case 'run': return run(bootstrap, topic, Number(rest[0]), Number(rest[1]), rest[2]);
    case 'fence': return fence(bootstrap, topic);
    case 'offsets': return offsets(bootstrap, topic, rest[0]);
    default: fail(`unknown mode ${mode}`);
  }
}

// Exit only once stdout is flushed (see kafkajs_client.js).
main().then(
  () => process.stdout.write('', () => process.exit(0)),
  (e) => fail(e && e.stack ? e.stack : String(e)),
);
