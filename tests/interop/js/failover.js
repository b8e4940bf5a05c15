// kafkajs 2.2 across a leader failover, for tests/cluster/test_client_failover.py.
//
// node failover.js produce '{"brokers": [...], "topic": "t", "partitions": 3, "records": 300, "paceMs": 10}'
//   A producer (acks=all, maxInFlightRequests 1, idempotent unless "idempotent": false) sends the records numbered 0..records-1, record n
//   to partition n % partitions, one record per send() (see test_client_failover.py: a send() spanning
//   partitions meets a kafkajs flaw when a leader moves), one send() at a time. After each send() it prints one JSON
//   line: {"acked": [n, ...]} when kafkajs resolved it, {"failed": [n, ...], "error": "..."} when it threw
//   (its retries exhausted). The test reads these lines while it runs (it SIGKILLs a leader mid-stream).
// node failover.js consume '{"brokers": [...], "topic": "t", "ends": {"0": 100, ...}, "group": "g"}'
//   A group consumer from the beginning, until every partition's last offset reached its end (the high
//   watermark the test measured); prints {"records": [[partition, offset, value], ...]}.
// kafkajs logs (WARN and up) go to stderr, so that stdout carries only these JSON lines.
'use strict'

const { Kafka, logLevel } = require('kafkajs')

const [mode, json] = process.argv.slice(2)
const args = JSON.parse(json)
const out = (obj) => process.stdout.write(JSON.stringify(obj) + '\n')
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

const kafka = new Kafka({
  clientId: 'epoch-failover',
  brokers: args.brokers,
  logLevel: logLevel.WARN,
  logCreator: () => ({ namespace, level, log }) => {
    const { message, ...extra } = log
    process.stderr.write(`${new Date().toISOString()} ${level} [${namespace}] ${message} ${JSON.stringify(extra)}\n`)
  },
})

async function produce() {
  const producer = kafka.producer({ idempotent: args.idempotent !== false, maxInFlightRequests: 1 })
  await producer.connect()
  try {
    for (let n = 0; n < args.records; n++) {
      try {
        await producer.send({ topic: args.topic, acks: -1,
          messages: [{ partition: n % args.partitions, value: String(n) }] })
        out({ acked: [n] })
      } catch (err) {
        out({ failed: [n], error: `${err.name}: ${err.message}` })
      }
      await sleep(args.paceMs)
    }
  } finally {
    await producer.disconnect()
  }
}

async function consume() {
  const consumer = kafka.consumer({ groupId: args.group, maxWaitTimeInMs: 200, sessionTimeout: 10000,
    rebalanceTimeout: 10000, heartbeatInterval: 500 })
  await consumer.connect()
  const records = []
  const next = {}  // partition -> offset after the last record seen
  try {
    await consumer.subscribe({ topic: args.topic, fromBeginning: true })
    let done
    const finished = new Promise((resolve) => { done = resolve })
    const reached = () => Object.entries(args.ends).every(([p, end]) => end === 0 || (next[p] || 0) >= end)
    if (reached()) done()
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        records.push([partition, Number(message.offset), message.value.toString()])
        next[partition] = Number(message.offset) + 1
        if (reached()) done()
      },
    })
    const timer = setTimeout(done, args.timeoutMs || 20000)
    await finished
    clearTimeout(timer)
  } finally {
    await consumer.disconnect()
  }
  out({ records })
}

const modes = { produce, consume }
modes[mode]().then(
  () => process.exit(0),
  (err) => {
    out({ fatal: `${err.name}: ${err.message}` })
    process.exit(1)
  },
)
