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

async function main() {
  const [mode, bootstrap, topic, partitions, per, group] = process.argv.slice(2);
  if (mode !== 'run' || !bootstrap || !topic || !group) fail('usage: txn_kafkajs.js run BOOTSTRAP TOPIC PARTITIONS PER GROUP');
  await run(bootstrap, topic, Number(partitions), Number(per), group);
}

// Exit only once stdout is flushed (see kafkajs_client.js).
main().then(
  () => process.stdout.write('', () => process.exit(0)),
  (e) => fail(e && e.stack ? e.stack : String(e)),
);
