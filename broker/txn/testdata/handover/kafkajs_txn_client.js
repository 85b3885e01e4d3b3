const { Kafka, logLevel } = require('kafkajs');
(async () => {
  const [addr, topic] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: 'js', brokers: [addr], logLevel: logLevel.WARN });
  const admin = kafka.admin(); await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 2 }] }); await admin.disconnect();
  const producer = kafka.producer({ transactionalId: 'js-tx', idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  for (let i = 0; i < 3; i++) {
    const txn = await producer.transaction();
    await txn.send({ topic, messages: [{ value: 'a' + i }, { value: 'b' + i }] });
    if (i === 1) await txn.abort(); else await txn.commit();
  }
  await producer.disconnect();
  console.log('ok');
})().catch(e => { console.error('ERR', e); process.exit(1); });
