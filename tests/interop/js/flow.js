// kafkajs 2.2 flows for tests/interop/test_interop_kafkajs.py.
//
// Input (stdin, JSON): {"brokers": ["host:port"], "steps": [{"op": ..., ...}, ...]}
// Optional "ssl" and "sasl" keys secure the connection (see security() below).
// Output (stdout, JSON): {"results": [<one result per step>]} or {"error": {name, message, type}}.
// Keys, values and header values travel base64-encoded; null stays null.
//
// kafkajs ships only gzip; snappy, lz4 and zstd are plug-in codecs. We register kafkajs-snappy
// (pure JS) and small adapters over lz4js (pure JS, LZ4 frame format as Kafka uses) and
// zstd-codec (emscripten build), so no native module is compiled at install time.
// kafkajs has no assign(): "consume" is a group consumer that seeks once it is assigned.
'use strict'

const fs = require('fs')
const { Kafka, CompressionTypes, CompressionCodecs, logLevel } = require('kafkajs')
const SnappyCodec = require('kafkajs-snappy')
const lz4 = require('lz4js')
const { ZstdCodec } = require('zstd-codec')

CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec
CompressionCodecs[CompressionTypes.LZ4] = () => ({
  compress: async (encoder) => Buffer.from(lz4.compress(encoder.buffer)),
  decompress: async (buffer) => Buffer.from(lz4.decompress(buffer)),
})
const zstdSimple = new Promise((resolve) => ZstdCodec.run((zstd) => resolve(new zstd.Simple())))
CompressionCodecs[CompressionTypes.ZSTD] = () => ({
  compress: async (encoder) => Buffer.from((await zstdSimple).compress(encoder.buffer, 3)),
  decompress: async (buffer) => Buffer.from((await zstdSimple).decompress(buffer)),
})

const CODECS = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
}

const b64 = (buf) => (buf === null || buf === undefined ? null : Buffer.from(buf).toString('base64'))
const unb64 = (s) => (s === null ? null : Buffer.from(s, 'base64'))

// kafkajs headers are an object: a repeated name holds an array of values, in order.
function headersToObject(pairs) {
  const out = {}
  for (const [name, value] of pairs) {
    const v = unb64(value)
    if (!(name in out)) out[name] = v
    else if (Array.isArray(out[name])) out[name].push(v)
    else out[name] = [out[name], v]
  }
  return out
}

function headersToPairs(obj) {
  const out = []
  for (const [name, v] of Object.entries(obj || {})) {
    for (const item of Array.isArray(v) ? v : [v]) out.push([name, b64(item)])
  }
  return out
}

async function withAdmin(kafka, fn) {
  const admin = kafka.admin()
  await admin.connect()
  try {
    return await fn(admin)
  } finally {
    await admin.disconnect()
  }
}

const ops = {
  async metadata(kafka, step) {
    return withAdmin(kafka, async (admin) => {
      const cluster = await admin.describeCluster()
      const md = await admin.fetchTopicMetadata({ topics: step.topics })
      return { cluster, topics: md.topics }
    })
  },

  async create(kafka, step) {
    return withAdmin(kafka, (admin) =>
      admin.createTopics({
        waitForLeaders: true,
        topics: [{ topic: step.topic, numPartitions: step.partitions || 1, replicationFactor: 1 }],
      }),
    )
  },

  async delete(kafka, step) {
    return withAdmin(kafka, async (admin) => {
      await admin.deleteTopics({ topics: [step.topic], timeout: 10000 })
      return admin.listTopics()
    })
  },

  async listTopics(kafka) {
    return withAdmin(kafka, (admin) => admin.listTopics())
  },

  async produce(kafka, step) {
    const producer = kafka.producer(
      step.idempotent ? { idempotent: true, maxInFlightRequests: 1 } : { allowAutoTopicCreation: false },
    )
    await producer.connect()
    try {
      const acks = { 0: 0, 1: 1, all: -1 }[step.acks || 'all']
      const res = await producer.send({
        topic: step.topic,
        acks,
        compression: CODECS[step.codec || 'none'],
        messages: step.records.map((r) => ({
          partition: 0,
          key: unb64(r.key),
          value: unb64(r.value),
          headers: headersToObject(r.headers),
          timestamp: String(r.timestamp),
        })),
      })
      return res
    } finally {
      await producer.disconnect()
    }
  },

  // One transaction of a transactional producer: its values (base64) to partition 0, then commit or abort.
  async transaction(kafka, step) {
    const producer = kafka.producer({ transactionalId: step.transactionalId, idempotent: true,
      maxInFlightRequests: 1 })
    await producer.connect()
    try {
      const txn = await producer.transaction()
      await txn.send({ topic: step.topic, messages: step.values.map((v) => ({ partition: 0, value: unb64(v) })) })
      if (step.commit) await txn.commit()
      else await txn.abort()
      return { committed: step.commit }
    } finally {
      await producer.disconnect()
    }
  },

  // kafkajs consumers read committed records only unless "readUncommitted" is set.
  async consume(kafka, step) {
    const consumer = kafka.consumer({ groupId: step.group, maxWaitTimeInMs: 200, sessionTimeout: 10000,
      rebalanceTimeout: 10000, heartbeatInterval: 500, readUncommitted: Boolean(step.readUncommitted) })
    await consumer.connect()
    const out = []
    try {
      // With a seek, start from the latest offset: every record then delivered proves the seek.
      const seek = step.offset !== undefined && step.offset !== null
      await consumer.subscribe({ topic: step.topic, fromBeginning: !seek })
      let done
      const finished = new Promise((resolve) => { done = resolve })
      await consumer.run({
        autoCommit: false,
        eachMessage: async ({ partition, message }) => {
          out.push({
            partition,
            offset: Number(message.offset),
            key: b64(message.key),
            value: b64(message.value),
            headers: headersToPairs(message.headers),
            timestamp: Number(message.timestamp),
          })
          if (out.length >= step.count) done()
        },
      })
      if (seek) consumer.seek({ topic: step.topic, partition: 0, offset: String(step.offset) })
      const timer = setTimeout(done, step.timeoutMs || 30000)
      await finished
      clearTimeout(timer)
    } finally {
      await consumer.disconnect()
    }
    return out
  },

  async offsets(kafka, step) {
    return withAdmin(kafka, async (admin) => ({
      latest: await admin.fetchTopicOffsets(step.topic),
      byTimestamp: await Promise.all(
        step.timestamps.map((ts) => admin.fetchTopicOffsetsByTimestamp(step.topic, ts)),
      ),
    }))
  },
}

// Optional TLS and SASL (tests/security): "ssl": {"ca", "cert"?, "key"?} are PEM file paths, the server is
// verified against "ca" (host name included); "sasl": {"mechanism", "username", "password"}.
function security(input) {
  const out = {}
  if (input.ssl) {
    out.ssl = { rejectUnauthorized: true, ca: [fs.readFileSync(input.ssl.ca, 'utf8')] }
    for (const name of ['cert', 'key']) {
      if (input.ssl[name]) out.ssl[name] = fs.readFileSync(input.ssl[name], 'utf8')
    }
  }
  if (input.sasl) out.sasl = input.sasl
  return out
}

async function main() {
  const chunks = []
  for await (const chunk of process.stdin) chunks.push(chunk)
  const input = JSON.parse(Buffer.concat(chunks).toString('utf8'))
  const kafka = new Kafka({
    clientId: 'epoch-interop',
    brokers: input.brokers,
    logLevel: logLevel.ERROR,
    retry: { retries: 3, initialRetryTime: 100 },
    ...security(input),
  })
  const results = []
  for (const step of input.steps) results.push(await ops[step.op](kafka, step))
  return results
}

main().then(
  (results) => {
    process.stdout.write(JSON.stringify({ results }))
    process.exit(0)
  },
  (err) => {
    process.stdout.write(JSON.stringify({ error: { name: err.name, message: err.message, type: err.type } }))
    process.exit(1)
  },
)
