// `npm run bench:projector`: how fast the projector applies change events, next to how fast
// kafkajs alone can consume the same records, in the same run (these machines are noisy: compare
// ratios, not absolute numbers).
//
//   npm run bench:projector [-- --events 1000000] [--kafka-events 200000] [--no-kafka] [--no-file]
//
// 1. A generated dataset (scripts/dataset) of --events Debezium events, cached in .cache/bench.
// 2. File source: the real projector command (`projector --from-file`) in a child process, timed;
//    its peak RSS is read from the child's own resource usage.
// 3. Kafka (a real broker from the test harness): the first --kafka-events records are produced to
//    their topics, then consumed by a bare kafkajs consumer group (no work per message) and by the
//    projector, each timed from before it connects: kafkajs alone to its last record, the projector
//    to its offsets committed and /readyz (documents built).
// Ends with one line of JSON: {"events", "eventsPerSecond", "kafkaOnlyEventsPerSecond",
// "projectorKafkaEventsPerSecond", "peakRssMb"}.
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { parseArgs } from 'node:util'
import type { Admin, Kafka } from 'kafkajs'
import pino from 'pino'
import { createProjector } from '../projector/projector.ts'
import { changeTopics } from '../projector/sources/kafka.ts'
import { isolatedChildEnv, loadProjectorConfig } from '../src/config.ts'
import { kafkaClient, startKafka } from '../test/harness/kafka.ts'
import { repoRoot } from '../test/harness/paths.ts'
import { benchDataset } from './dataset.ts'
import { produceFile } from './produce.ts'

const { values } = parseArgs({
  options: {
    events: { type: 'string', default: '1000000' },
    'kafka-events': { type: 'string', default: '200000' },
    'no-kafka': { type: 'boolean', default: false },
    'no-file': { type: 'boolean', default: false },
  },
})
const targetEvents = Number(values.events)
const kafkaEvents = Number(values['kafka-events'])
if (!Number.isSafeInteger(targetEvents) || targetEvents < 1)
  throw new Error('--events must be a positive integer')
if (!Number.isSafeInteger(kafkaEvents) || kafkaEvents < 1)
  throw new Error('--kafka-events must be a positive integer')

/** LANES passes through to the projector (its default: one lane per core). */
const lanes: Record<string, string> =
  process.env.LANES === undefined ? {} : { LANES: process.env.LANES }

function log(line: string): void {
  process.stderr.write(`${line}\n`)
}

/** The projector command on the file, in a child process; its last log line is the summary. */
function projectFile(
  path: string,
  dataDir: string,
): Promise<{ records: number; seconds: number; peakRssMb: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', 'projector/main.ts', '--from-file', path],
      {
        cwd: repoRoot,
        env: isolatedChildEnv(process.env, { DATA_DIR: dataDir, LOG_LEVEL: 'info', ...lanes }),
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    )
    let last = ''
    createInterface({ input: child.stdout }).on('line', (line) => (last = line))
    child.on('error', reject)
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`projector exited ${code}`))
      const summary = JSON.parse(last) as { records: number; seconds: number; peakRssMb: number }
      resolve(summary)
    })
  })
}

async function endOffsets(admin: Admin, topics: string[]): Promise<Map<string, bigint>> {
  const ends = new Map<string, bigint>()
  for (const topic of topics) {
    for (const p of await admin.fetchTopicOffsets(topic))
      ends.set(`${topic}:${p.partition}`, BigInt(p.high))
  }
  return ends
}

async function waitCommitted(
  admin: Admin,
  groupId: string,
  topics: string[],
  ends: Map<string, bigint>,
): Promise<void> {
  for (;;) {
    const committed = await admin.fetchOffsets({ groupId, topics })
    const done = committed.every((t) =>
      t.partitions.every((p) => {
        const end = ends.get(`${t.topic}:${p.partition}`) ?? 0n
        return end === 0n || (p.offset !== '-1' && BigInt(p.offset) >= end)
      }),
    )
    if (done) return
    await new Promise((r) => setTimeout(r, 100))
  }
}

async function waitReady(adminUrl: string | undefined): Promise<void> {
  if (adminUrl === undefined) throw new Error('the projector has no admin address')
  while ((await fetch(`${adminUrl}/readyz`)).status !== 200) {
    await new Promise((r) => setTimeout(r, 50))
  }
}

async function kafkaOnly(kafka: Kafka, topics: string[], total: number): Promise<number> {
  const consumer = kafka.consumer({
    groupId: 'bench-kafkajs-only',
    maxBytesPerPartition: 8 * 1024 * 1024,
    maxBytes: 32 * 1024 * 1024,
  })
  // Timed as the projector is, from before connecting (joining a group takes a moment) to the
  // last record: both rates carry the same start-up.
  const started = process.hrtime.bigint()
  await consumer.connect()
  await consumer.subscribe({ topics, fromBeginning: true })
  let seen = 0
  const done = new Promise<void>((resolve) => {
    void consumer.run({
      eachBatch: async ({ batch }) => {
        // The same minimal work the projector cannot avoid: the bytes become text.
        for (const m of batch.messages) if (m.value !== null) m.value.toString()
        seen += batch.messages.length
        if (seen >= total) resolve()
      },
    })
  })
  await done
  const seconds = Number(process.hrtime.bigint() - started) / 1e9
  await consumer.disconnect()
  return seen / seconds
}

async function main(): Promise<void> {
  const { path, events } = await benchDataset(targetEvents, log)
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-projector-'))
  try {
    let file = { records: events, seconds: Number.NaN, peakRssMb: null as number | null }
    let eventsPerSecond: number | null = null
    if (values['no-file'] !== true) {
      log(`file source: projecting ${events} events...`)
      file = await projectFile(path, join(dataDir, 'file'))
      eventsPerSecond = Math.round(file.records / file.seconds)
      log(`  ${eventsPerSecond} events/s, peak RSS ${file.peakRssMb} MB`)
    }

    let kafkaOnlyEventsPerSecond: number | null = null
    let projectorKafkaEventsPerSecond: number | null = null
    if (values['no-kafka'] !== true) {
      log('starting Kafka...')
      const broker = await startKafka()
      try {
        const kafka = kafkaClient(broker.brokers, 'bench')
        const topics = changeTopics('product')
        const admin = kafka.admin()
        await admin.connect()
        await admin.createTopics({
          waitForLeaders: true,
          topics: topics.map((topic) => ({ topic })),
        })
        log(`producing the first ${kafkaEvents} records...`)
        const produced = await produceFile(kafka, path, kafkaEvents, topics)
        const ends = await endOffsets(admin, topics)

        log('kafkajs alone...')
        kafkaOnlyEventsPerSecond = Math.round(await kafkaOnly(kafka, topics, produced))
        log(`  ${kafkaOnlyEventsPerSecond} records/s`)

        log('projector on Kafka...')
        const config = loadProjectorConfig({
          DATA_DIR: join(dataDir, 'kafka'),
          KAFKA_BROKERS: broker.brokers.join(','),
          KAFKA_GROUP_ID: 'bench-projector',
          ADMIN_PORT: '0',
          LOG_LEVEL: 'warn',
          ...lanes,
        })
        const projector = createProjector({ config, logger: pino({ level: 'warn' }) })
        const t0 = process.hrtime.bigint()
        await projector.startKafka()
        await waitCommitted(admin, 'bench-projector', topics, ends)
        const committedSeconds = Number(process.hrtime.bigint() - t0) / 1e9
        // Committed is not yet served: an initial load builds its documents once it has caught
        // up, and only then is ready. The clock stops there.
        await waitReady(projector.adminAddress())
        const seconds = Number(process.hrtime.bigint() - t0) / 1e9
        log(
          `  all committed after ${committedSeconds.toFixed(1)} s, ready after ${seconds.toFixed(1)} s`,
        )
        await projector.stop()
        projectorKafkaEventsPerSecond = Math.round(produced / seconds)
        log(
          `  ${projectorKafkaEventsPerSecond} events/s (${((projectorKafkaEventsPerSecond / kafkaOnlyEventsPerSecond) * 100).toFixed(0)}% of kafkajs alone)`,
        )
        await admin.disconnect()
      } finally {
        await broker.stop()
      }
    }
    process.stdout.write(
      `${JSON.stringify({ events: file.records, eventsPerSecond, kafkaOnlyEventsPerSecond, projectorKafkaEventsPerSecond, peakRssMb: file.peakRssMb })}\n`,
    )
  } finally {
    rmSync(dataDir, { recursive: true, force: true })
  }
}

await main()
