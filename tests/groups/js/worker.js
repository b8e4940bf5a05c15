// The kafkajs twin of tests/groups/worker.py: `node worker.js BOOTSTRAP TOPIC GROUP SESSION_MS`, same stdout
// events and the same "close" command on stdin. kafkajs is found through NODE_PATH
// (tests/interop/js/node_modules).
const { Kafka, logLevel } = require('kafkajs');

const [bootstrap, topic, groupId, sessionMs] = process.argv.slice(2);
const start = Date.now();
const emit = (event) => process.stdout.write(JSON.stringify(event) + '\n');

const kafka = new Kafka({ clientId: 'groups-worker', brokers: [bootstrap], logLevel: logLevel.NOTHING });
const consumer = kafka.consumer({
  groupId, sessionTimeout: Number(sessionMs), heartbeatInterval: 500, rebalanceTimeout: 10000,
  maxWaitTimeInMs: 100, metadataMaxAge: 1000,
});

consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
  emit({ e: 'assigned', p: (payload.memberAssignment[topic] || []).slice().sort((a, b) => a - b),
    ms: Date.now() - start });
});

async function main() {
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      // Committed before it counts; a failed commit (the partition moved) is read again by its new owner.
      await consumer.commitOffsets([{ topic, partition, offset: (Number(message.offset) + 1).toString() }]);
      emit({ e: 'committed', p: partition, o: Number(message.offset), v: message.value.toString() });
    },
  });
}

let buffered = '';
process.stdin.on('data', async (chunk) => {
  buffered += chunk.toString();
  if (buffered.includes('close')) {
    await consumer.disconnect();
    emit({ e: 'closed' });
    process.exit(0);
  }
});

main().catch((error) => { process.stderr.write(String(error.stack || error) + '\n'); process.exit(1); });
