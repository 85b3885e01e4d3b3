// kafkajs consumer-group driver for weir's compatibility tests, run by
// compat/kafkajs_group_test.go:
//
//   node kafkajs_group.js BOOTSTRAP TOPIC GROUP
//
// The topic must exist. One process runs a producer and two consumers of
// group GROUP (kafkajs' default round-robin assigner, eager protocol) while
// the producer keeps producing, one record per send with acks=-1 (so each
// send's base offset is that record's offset):
//
//   1. alone: c1 runs until it owns every partition and has read records;
//   2. join:  c2 runs; both until the partitions are split between them and
//             each has read records since;
//   3. leave: c2 disconnects (LeaveGroup); c1 runs until it owns every
//             partition again;
//   4. drain: production stops; c1 reads until every acknowledged record
//             is committed, then disconnects (phase "close").
//
// Every record is committed synchronously (commitOffsets) right after it is
// read. Output is JSON lines with "ev" one of produced, consumed, assign,
// commit, phase; the Go driver checks them. Errors exit non-zero with a
// message on stderr; every wait is bounded.
'use strict';

const fs = require('fs');
const { Kafka, Partitioners, logLevel } = require('kafkajs');

const DEADLINE_MS = 60000;

function fail(msg) {
  try {
    fs.writeSync(2, `kafkajs_group: ${msg}\n`);
  } catch (e) {
    // stderr gone: the exit code still tells
  }
  process.exit(1);
}

function emit(ev) {
  process.stdout.write(JSON.stringify(ev) + '\n');
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(what, cond) {
  while (!cond()) {
    if (Date.now() > deadline) fail(`${what} not done within ${DEADLINE_MS}ms`);
    await sleep(20);
  }
}

let deadline = 0;

async function main() {
  const [bootstrap, topic, group] = process.argv.slice(2);
  if (!bootstrap || !topic || !group) fail('usage: kafkajs_group.js BOOTSTRAP TOPIC GROUP');
  deadline = Date.now() + DEADLINE_MS;
  const kafka = new Kafka({
    clientId: 'weir-compat',
    brokers: [bootstrap],
    logLevel: logLevel.WARN,
    connectionTimeout: 10000,
    requestTimeout: 30000,
    retry: { retries: 5, initialRetryTime: 100 },
  });

  // Steady producer.
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  const acked = new Map(); // partition -> next offset after the last acknowledged record
  let producing = true;
  let seq = 0;
  const produced = (async () => {
    while (producing) {
      const i = seq++;
      const key = `key-${i}`;
      const value = `value-${i}`;
      const meta = await producer.send({ topic, acks: -1, messages: [{ key, value }] });
      for (const m of meta) {
        if (m.errorCode !== 0) fail(`produce ${key}: error code ${m.errorCode}`);
        const offset = Number(m.baseOffset);
        emit({ ev: 'produced', key, value, partition: m.partition, offset });
        acked.set(m.partition, Math.max(acked.get(m.partition) || 0, offset + 1));
      }
      await sleep(5);
    }
  })().catch((e) => fail(`produce: ${e && e.stack ? e.stack : e}`));

  const committed = new Map(); // partition -> last committed offset (both members)
  function member(name) {
    const m = { name, owned: [], consumed: 0 };
    m.consumer = kafka.consumer({
      groupId: group,
      sessionTimeout: 6000,
      rebalanceTimeout: 10000,
      heartbeatInterval: 300,
      maxWaitTimeInMs: 100,
    });
    m.consumer.on(m.consumer.events.GROUP_JOIN, (e) => {
      m.owned = (e.payload.memberAssignment[topic] || []).slice().sort((a, b) => a - b);
      emit({ ev: 'assign', consumer: name, partitions: m.owned });
    });
    m.consumer.on(m.consumer.events.CRASH, (e) => fail(`${name} crashed: ${e.payload.error}`));
    m.start = async () => {
      await m.consumer.connect();
      await m.consumer.subscribe({ topic, fromBeginning: true });
      await m.consumer.run({
        autoCommit: false,
        eachMessage: async ({ partition, message }) => {
          const offset = Number(message.offset);
          emit({
            ev: 'consumed', consumer: name, key: message.key.toString('utf8'),
            value: message.value.toString('utf8'), partition, offset,
          });
          m.consumed++;
          const next = offset + 1;
          if (next > (committed.get(partition) || 0)) {
            await m.consumer.commitOffsets([{ topic, partition, offset: String(next) }]);
            committed.set(partition, next);
            emit({ ev: 'commit', consumer: name, partition, offset: next });
          }
        },
      });
    };
    return m;
  }

  const admin = kafka.admin();
  await admin.connect();
  const md = await admin.fetchTopicMetadata({ topics: [topic] });
  await admin.disconnect();
  const nparts = md.topics[0].partitions.length;

  const c1 = member('c1');
  const c2 = member('c2');

  emit({ ev: 'phase', name: 'alone' });
  await c1.start();
  await waitFor('alone', () => c1.owned.length === nparts && c1.consumed >= 20);

  emit({ ev: 'phase', name: 'join' });
  await c2.start();
  const split = () => c1.owned.length > 0 && c2.owned.length > 0 &&
    c1.owned.length + c2.owned.length === nparts &&
    new Set([...c1.owned, ...c2.owned]).size === nparts;
  await waitFor('join', split);
  const at1 = c1.consumed;
  const at2 = c2.consumed;
  await waitFor('join (reading)', () => split() && c1.consumed >= at1 + 3 && c2.consumed >= at2 + 3);

  emit({ ev: 'phase', name: 'leave' });
  await c2.consumer.disconnect();
  await waitFor('leave', () => c1.owned.length === nparts);

  emit({ ev: 'phase', name: 'drain' });
  producing = false;
  await produced;
  await producer.disconnect();
  await waitFor('drain', () => [...acked].every(([p, o]) => (committed.get(p) || 0) >= o));
  emit({ ev: 'phase', name: 'close' });
  await c1.consumer.disconnect();
}

// Exit only once stdout is flushed (see kafkajs_client.js).
main().then(
  () => process.stdout.write('', () => process.exit(0)),
  (e) => fail(`${e && e.stack ? e.stack : e}`),
);
