// KafkaJS's conformance scenario (scripts/conformance): lists the brokers, produces COUNT
// records, reads them back in GROUP and commits, then prints one JSON line with what it saw;
// any failure goes to stderr with exit 1.
//   node kafkajs_client.js BOOTSTRAP TOPIC GROUP COUNT [MODE RATE]
// MODE: all (the default) | produce | consume (the events scenario runs one of each at once);
// RATE: records a second when producing (0: all in one batch).
const { Kafka, logLevel } = require('kafkajs');

async function main() {
  const [bootstrap, topic, group, countArg, modeArg, rateArg] = process.argv.slice(2);
  const count = Number(countArg);
  const mode = modeArg || 'all';
  const rate = Number(rateArg || 0);
  // KAFKAJS_LOG=debug|info|warn|error: KafkaJS's own log on stderr (to see what it retried).
  const level = logLevel[(process.env.KAFKAJS_LOG || 'nothing').toUpperCase()] ?? logLevel.NOTHING;
  const kafka = new Kafka({ clientId: 'conformance-kafkajs', brokers: [bootstrap], logLevel: level });
  const admin = kafka.admin();
  await admin.connect();
  const cluster = await admin.describeCluster();
  const brokers = cluster.brokers.map((b) => `${b.host}:${b.port}`);
  await admin.disconnect();
  let produced = 0;
  if (mode !== 'consume') {
    const producer = kafka.producer();
    await producer.connect();
    if (rate > 0) {
      for (let i = 0; i < count; i++) {
        await producer.send({ topic, messages: [{ key: `k${i}`, value: `v${i}` }], acks: -1 });
        produced++;
        await new Promise((r) => setTimeout(r, 1000 / rate));
      }
    } else {
      const messages = [];
      for (let i = 0; i < count; i++) messages.push({ key: `k${i}`, value: `v${i}` });
      await producer.send({ topic, messages, acks: -1 });
      produced = count;
    }
    await producer.disconnect();
  }
  if (mode === 'produce') {
    console.log(JSON.stringify({ brokers, produced, consumed: 0, committed: true }));
    return;
  }
  const consumer = kafka.consumer({ groupId: group });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const seen = new Set();
  const deadline = mode === 'consume' ? 150000 : 60000;
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`consumed ${seen.size} of ${count} in ${deadline / 1000} s`)), deadline);
    consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        seen.add(message.value.toString());
        await consumer.commitOffsets([{ topic, partition, offset: (BigInt(message.offset) + 1n).toString() }]);
        if (seen.size >= count) { clearTimeout(timer); resolve(); }
      },
    }).catch(reject);
  });
  await consumer.disconnect();
  console.log(JSON.stringify({ brokers, produced, consumed: seen.size, committed: true }));
}

main().catch((e) => { console.error(`${e.name}: ${e.message}`); process.exit(1); });
