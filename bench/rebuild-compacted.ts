// `npm run bench:rebuild:compacted`: a rebuild from compacted change topics against the same
// history kept whole, in one run.
//
//   npm run bench:rebuild:compacted [-- --rows 100000] [--versions 10]
//
// 1. The generated dataset's snapshot (scripts/dataset, schemaless, no update rounds: about
//    --rows rows over every table) is produced --versions times: first as it is (snapshot
//    reads), then again as updates (op u, each round at a later source lsn, the same column
//    values: a replay costs the same per event whatever changed). About rows x versions events.
// 2. Into two sets of topics on one real broker (the test harness's, its cleaner checking for
//    work every second): `compacted.public.*` with the shipped settings
//    (projector/sources/topic-config.ts) and 1 MB segments (the cleaner never touches a topic's
//    active segment, 1 GB by default: a bench's topics would fit in one), the records stamped two
//    hours ago so that the shipped hour of min.compaction.lag.ms has passed; and
//    `history.public.*` as the topics used to be kept (cleanup.policy=delete, retention.ms=-1).
// 3. It waits until the cleaner has compacted (the records left stop changing, and fewer than
//    were produced: checked, not assumed).
// 4. A rebuild of each: the projector on an empty data directory with a consumer group of its
//    own (what `--rebuild` does before its swap), timed from its start to /readyz (replayed and
//    documents built). Then the two replicas must serve the same documents, text for text
//    (stamps aside), or the bench fails.
// Ends with one line of JSON:
//   {"eventsProduced","eventsAfterCompaction","rebuildSeconds","uncompactedRebuildSeconds"}
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { parseArgs } from 'node:util'
import type { Kafka } from 'kafkajs'
import { changeTopics } from '../projector/sources/kafka.ts'
import { CHANGE_TOPIC_CONFIG } from '../projector/sources/topic-config.ts'
import { datasetSizeFor } from '../scripts/dataset/generate.ts'
import { kafkaClient, startKafka } from '../test/harness/kafka.ts'
import { makeTempDir } from '../test/harness/process.ts'
import { servedState, startProjector, stateDifferences } from '../test/support/e2e.ts'
import { generatedDataset } from './dataset.ts'
import { produceFile } from './produce.ts'
import { readyz, waitUntil } from './wait.ts'

const log = (line: string) => process.stderr.write(`${line}\n`)

function parseOptions(): { rows: number; versions: number } {
  const { values } = parseArgs({
    options: {
      rows: { type: 'string', default: '100000' },
      versions: { type: 'string', default: '10' },
    },
  })
  const rows = Number(values.rows)
  const versions = Number(values.versions)
  if (!Number.isInteger(rows) || rows < 100) throw new Error('--rows: a whole number, 100 or more')
  if (!Number.isInteger(versions) || versions < 2) throw new Error('--versions: 2 or more')
  return { rows, versions }
}

/** Round `round` of a snapshot read, as an update at a later source position. */
function asUpdate(round: number): (value: string) => string {
  return (value) =>
    value
      .replace('"op":"r"', '"op":"u"')
      .replace(/"snapshot":"[a-z_]+"/, '"snapshot":"false"')
      .replace(/"lsn":(\d+)/, (_, lsn: string) => `"lsn":${Number(lsn) + round * 1e10}`)
}

/** Records the topics hold now: read from their first offsets to their ends. */
async function recordsIn(kafka: Kafka, topics: string[]): Promise<number> {
  const admin = kafka.admin()
  await admin.connect()
  const ends = new Map<string, number>()
  for (const topic of topics) {
    for (const p of await admin.fetchTopicOffsets(topic)) {
      if (Number(p.high) > Number(p.low)) ends.set(`${topic}:${p.partition}`, Number(p.high))
    }
  }
  await admin.disconnect()
  if (ends.size === 0) return 0
  const consumer = kafka.consumer({ groupId: `bench-count-${Date.now()}`, sessionTimeout: 10_000 })
  await consumer.connect()
  let count = 0
  const left = new Set(ends.keys())
  try {
    await consumer.subscribe({ topics, fromBeginning: true })
    await new Promise<void>((resolve, reject) => {
      consumer
        .run({
          eachBatchAutoResolve: true,
          eachBatch: async ({ batch }) => {
            count += batch.messages.length
            const last = batch.messages.at(-1)
            const at = `${batch.topic}:${batch.partition}`
            if (last !== undefined && Number(last.offset) >= (ends.get(at) ?? 0) - 1)
              left.delete(at)
            if (left.size === 0) resolve()
            return Promise.resolve()
          },
        })
        .catch(reject)
    })
  } finally {
    await consumer.disconnect()
  }
  return count
}

async function main(): Promise<void> {
  const { rows, versions } = parseOptions()
  const size = datasetSizeFor(rows, 0)
  const dataset = await generatedDataset(size, log, 'schemaless')
  const work = makeTempDir('bench-rebuild-compacted')
  const logDir = join(work.path, 'logs')
  mkdirSync(logDir, { recursive: true })
  log('starting Kafka...')
  const broker = await startKafka()
  try {
    const kafka = kafkaClient(broker.brokers, 'bench-rebuild-compacted')
    const sets = {
      compacted: { ...CHANGE_TOPIC_CONFIG, 'segment.bytes': String(1024 * 1024) },
      history: { 'cleanup.policy': 'delete', 'retention.ms': '-1' },
    }
    const admin = kafka.admin()
    await admin.connect()
    await admin.createTopics({
      waitForLeaders: true,
      topics: Object.entries(sets).flatMap(([prefix, config]) =>
        changeTopics(prefix).map((topic) => ({
          topic,
          configEntries: Object.entries(config).map(([name, value]) => ({ name, value })),
        })),
      ),
    })
    await admin.disconnect()

    // Two hours ago: past the shipped min.compaction.lag.ms (an hour), so the shipped settings
    // compact these records as they would compact a production topic's older history.
    const timestampMs = Date.now() - 2 * 3_600_000
    let eventsProduced = 0
    let t0 = performance.now()
    for (let round = 0; round < versions; round++) {
      const transform = round === 0 ? undefined : asUpdate(round)
      for (const prefix of Object.keys(sets)) {
        const produced = await produceFile(
          kafka,
          dataset.path,
          Number.POSITIVE_INFINITY,
          changeTopics(prefix),
          prefix,
          { transform, timestampMs },
        )
        if (prefix === 'compacted') eventsProduced += produced
      }
      log(`  round ${round + 1} of ${versions} produced (${eventsProduced} events a set so far)`)
    }
    log(`produced ${eventsProduced} events to each set in ${seconds(t0)} s`)

    log('waiting for the cleaner to compact the compacted set...')
    t0 = performance.now()
    let eventsAfterCompaction = eventsProduced
    let stable = 0
    await waitUntil(
      'the compacted topics to stop shrinking',
      async () => {
        await sleep(5_000)
        const now = await recordsIn(kafka, changeTopics('compacted'))
        stable = now === eventsAfterCompaction ? stable + 1 : 0
        eventsAfterCompaction = now
        log(`  ${now} records left`)
        return stable >= 2 && now < eventsProduced
      },
      30 * 60_000,
    )
    log(`compacted to ${eventsAfterCompaction} records (${seconds(t0)} s)`)

    const rebuild = async (prefix: string): Promise<{ seconds: number; dataDir: string }> => {
      const dataDir = join(work.path, prefix)
      const started = performance.now()
      const projector = await startProjector({
        brokers: broker.brokers,
        dataDir,
        groupId: `bench-rebuild-${prefix}`,
        logDir,
        label: `projector-${prefix}`,
        env: { TOPIC_PREFIX: prefix, LOG_LEVEL: 'warn' },
      })
      try {
        await waitUntil(
          `the ${prefix} rebuild ready`,
          () => readyz(projector.adminUrl),
          60 * 60_000,
        )
        return { seconds: (performance.now() - started) / 1000, dataDir }
      } finally {
        await projector.stop()
      }
    }
    log('rebuilding from the compacted topics...')
    const compacted = await rebuild('compacted')
    log(`  ${compacted.seconds.toFixed(1)} s`)
    log('rebuilding from the whole history...')
    const history = await rebuild('history')
    log(`  ${history.seconds.toFixed(1)} s`)

    const differences = stateDifferences(
      servedState(history.dataDir),
      servedState(compacted.dataDir),
    )
    if (differences.length > 0) {
      throw new Error(`the two rebuilds serve different documents:\n${differences.join('\n')}`)
    }
    const ratio = compacted.seconds / history.seconds
    log(
      `same documents served. ${eventsProduced} events produced, ${eventsAfterCompaction} after ` +
        `compaction (${((100 * eventsAfterCompaction) / eventsProduced).toFixed(1)}%); rebuild ` +
        `${compacted.seconds.toFixed(1)} s vs ${history.seconds.toFixed(1)} s uncompacted: ` +
        `${ratio.toFixed(2)}x (target <= 0.25x)`,
    )
    process.stdout.write(
      `${JSON.stringify({
        eventsProduced,
        eventsAfterCompaction,
        rebuildSeconds: Math.round(compacted.seconds * 10) / 10,
        uncompactedRebuildSeconds: Math.round(history.seconds * 10) / 10,
      })}\n`,
    )
  } finally {
    await broker.stop()
    work.remove()
  }
}

function seconds(since: number): string {
  return ((performance.now() - since) / 1000).toFixed(1)
}

await main()
