// Both of the JsonConverter's encodings from a real Debezium: one PostgreSQL, one Kafka Connect
// worker with two connectors on the same tables, the deployed one with schemas.enable=true (under
// the prefix `wrapped`; deployed, it ships schemaless) and the same with schemas.enable=false
// (prefix `schemaless`), which the rest of the e2e suite runs as shipped. The same rows
// and changes reach both; a projector on each, over Kafka and from a file of the same records,
// must serve the same documents, the projector being told nothing about the encoding.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import Database from 'better-sqlite3'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { compareDocumentFiles, hasDifferences } from '../../../projector/documents/compare.ts'
import { createProjector } from '../../../projector/projector.ts'
import { changeTopics } from '../../../projector/sources/kafka.ts'
import { loadProjectorConfig } from '../../../src/config.ts'
import { startConnect, type StartedConnect } from '../../harness/connect.ts'
import { collectRecords, type CapturedRecord } from '../../harness/consume.ts'
import {
  afterConnectorStarts,
  beforeConnectorStarts,
  FINAL_MARKER,
  ids,
} from '../../harness/fixture-sql.ts'
import { kafkaClient, startKafka, type StartedKafka } from '../../harness/kafka.ts'
import { startPostgres, type StartedPostgres } from '../../harness/postgres.ts'
import { waitFor } from '../../harness/process.ts'
import { DOCUMENT_TABLES, organizationFiles } from '../../support/applier.ts'

const ENCODINGS = { wrapped: 'true', schemaless: 'false' } as const
type Encoding = keyof typeof ENCODINGS

let postgres: StartedPostgres
let kafka: StartedKafka
let connect: StartedConnect
const dirs: string[] = []
const records = {} as Record<Encoding, CapturedRecord[]>

function tempDir(name: string): string {
  const dir = mkdtempSync(join(tmpdir(), `envelopes-${name}-`))
  dirs.push(dir)
  return dir
}

/**
 * A change topic under a prefix; not the heartbeat table's, which grows every second and would
 * never let the count below settle.
 */
function isChangeTopic(topic: string, prefix: string): boolean {
  return topic.startsWith(`${prefix}.public.`) && topic !== `${prefix}.public.replica_heartbeat`
}

/** The change topics' high watermarks under a prefix, summed. */
async function recordCount(prefix: string): Promise<number> {
  const admin = kafkaClient(kafka.brokers).admin()
  await admin.connect()
  try {
    const topics = (await admin.listTopics()).filter((t) => isChangeTopic(t, prefix))
    let total = 0
    for (const topic of topics) {
      for (const p of await admin.fetchTopicOffsets(topic)) total += Number(p.high)
    }
    return total
  } finally {
    await admin.disconnect()
  }
}

/** Every record under `prefix` once its organizations topic has the final change and all settle. */
async function capture(prefix: string): Promise<CapturedRecord[]> {
  await collectRecords(
    kafka.brokers,
    [`${prefix}.public.organizations`],
    (seen) => seen.some((r) => (r.valueText ?? '').includes(FINAL_MARKER)),
    120_000,
  )
  let total = -1
  for (let stable = 0; stable < 2;) {
    await sleep(1500)
    const now = await recordCount(prefix)
    stable = now === total ? stable + 1 : 0
    total = now
  }
  const admin = kafkaClient(kafka.brokers).admin()
  await admin.connect()
  const topics = (await admin.listTopics()).filter((t) => isChangeTopic(t, prefix))
  await admin.disconnect()
  return collectRecords(kafka.brokers, topics, (seen) => seen.length >= total, 120_000)
}

beforeAll(async () => {
  ;[postgres, kafka] = await Promise.all([startPostgres(), startKafka()])
  await postgres.query(beforeConnectorStarts)
  connect = await startConnect({
    brokers: kafka.brokers,
    postgres,
    topicPrefix: 'wrapped',
    overrides: {
      'slot.name': 'wrapped',
      'publication.name': 'wrapped',
      'key.converter.schemas.enable': ENCODINGS.wrapped,
      'value.converter.schemas.enable': ENCODINGS.wrapped,
    },
  })
  // The second connector on the same worker: its own slot, publication and prefix, no schemas.
  const schemaless = {
    name: `${connect.connector.name}-schemaless`,
    config: {
      ...connect.connector.config,
      'topic.prefix': 'schemaless',
      'slot.name': 'schemaless',
      'publication.name': 'schemaless',
      'key.converter.schemas.enable': ENCODINGS.schemaless,
      'value.converter.schemas.enable': ENCODINGS.schemaless,
    },
  }
  const created = await fetch(`${connect.restUrl}/connectors`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(schemaless),
  })
  expect(created.status).toBe(201)
  // Both snapshot what exists now; what follows must be streamed to both.
  await waitFor(
    'both connectors to stream',
    () => {
      const log = readFileSync(connect.logFile, 'utf8')
      return Promise.resolve(
        log.split('Processing messages (io.debezium.connector.postgresql').length > 2
          ? true
          : undefined,
      )
    },
    { timeoutMs: 180_000, intervalMs: 500 },
  )
  for (const statement of afterConnectorStarts) await postgres.query(statement)
  records.wrapped = await capture('wrapped')
  records.schemaless = await capture('schemaless')
}, 600_000)

afterAll(async () => {
  await connect?.stop()
  await Promise.all([kafka?.stop(), postgres?.stop()])
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

function documentCount(path: string): number {
  const db = new Database(path, { readonly: true })
  try {
    return DOCUMENT_TABLES.map(
      (t) => (db.prepare(`select count(*) as n from ${t}`).get() as { n: number }).n,
    ).reduce((a, b) => a + b, 0)
  } finally {
    db.close()
  }
}

async function projectKafka(encoding: Encoding): Promise<string> {
  const dataDir = tempDir(`kafka-${encoding}`)
  const config = loadProjectorConfig({
    DATA_DIR: dataDir,
    KAFKA_BROKERS: kafka.brokers.join(','),
    KAFKA_GROUP_ID: `envelopes-${encoding}`,
    TOPIC_PREFIX: encoding,
    ADMIN_PORT: '0',
  })
  const projector = createProjector({ config, logger: pino({ level: 'silent' }) })
  await projector.startKafka()
  try {
    const admin = kafkaClient(kafka.brokers).admin()
    await admin.connect()
    try {
      const topics = changeTopics(encoding)
      const ends = new Map<string, number>()
      for (const topic of topics) {
        for (const p of await admin.fetchTopicOffsets(topic)) {
          ends.set(`${topic}:${p.partition}`, Number(p.high))
        }
      }
      await waitFor(
        `the ${encoding} projector to commit every record`,
        async () => {
          const committed = await admin.fetchOffsets({ groupId: `envelopes-${encoding}`, topics })
          return committed.every((t) =>
            t.partitions.every(
              (p) => Number(p.offset) >= (ends.get(`${t.topic}:${p.partition}`) ?? 0),
            ),
          )
            ? true
            : undefined
        },
        { timeoutMs: 120_000, intervalMs: 200 },
      )
      await waitFor(
        `the ${encoding} projector to be ready`,
        async () =>
          (await fetch(`${projector.adminAddress()}/readyz`)).status === 200 ? true : undefined,
        { timeoutMs: 120_000, intervalMs: 200 },
      )
    } finally {
      await admin.disconnect()
    }
  } finally {
    await projector.stop()
  }
  return dataDir
}

/**
 * The file source on the same records, with keys and values as the exact text Kafka held. Returns
 * the data directory and its dead letters (table, offset, reason).
 */
async function projectFile(encoding: Encoding): Promise<{ dataDir: string; letters: string[] }> {
  const dataDir = tempDir(`file-${encoding}`)
  const path = join(dataDir, 'records.ndjson')
  writeFileSync(
    path,
    records[encoding]
      .map(
        (r) =>
          `{"topic":${JSON.stringify(r.topic)},"partition":${r.partition},"offset":${JSON.stringify(r.offset)},"key":${r.keyText ?? 'null'},"value":${r.valueText ?? 'null'}}\n`,
      )
      .join(''),
  )
  const config = loadProjectorConfig({ DATA_DIR: dataDir, TOPIC_PREFIX: encoding, ADMIN_PORT: '0' })
  const projector = createProjector({ config, logger: pino({ level: 'silent' }) })
  try {
    const summary = await projector.runFile(path)
    const letters =
      summary.deadLetterFile === undefined
        ? []
        : readFileSync(summary.deadLetterFile, 'utf8')
            .split('\n')
            .filter((line) => line !== '')
            .map((line) => {
              const letter = JSON.parse(line) as {
                topic: string
                offset: string
                headers: Record<string, string>
              }
              const table = letter.topic.slice(encoding.length)
              return `${table}@${letter.offset}: ${letter.headers['dlq.reason']}`
            })
    return { dataDir, letters }
  } finally {
    await projector.stop()
  }
}

/** Asserts that two data directories serve the same documents, organization by organization. */
function expectSameDocuments(expectedDir: string, actualDir: string): void {
  const expected = organizationFiles(expectedDir)
  const actual = organizationFiles(actualDir)
  expect([...actual.keys()].sort()).toEqual([...expected.keys()].sort())
  for (const [organizationId, path] of expected) {
    const diffs = compareDocumentFiles(path, actual.get(organizationId))
    expect(hasDifferences(diffs), `${organizationId}: ${JSON.stringify(diffs)}`).toBe(false)
  }
}

describe('Debezium with and without schemas', () => {
  it('writes the same changes both ways, the schema block only in one', () => {
    const payloads = (encoding: Encoding) =>
      records[encoding].filter((r) => r.value !== null).map((r) => r.value as object)
    expect(payloads('wrapped').length).toBeGreaterThan(20)
    expect(payloads('schemaless')).toHaveLength(payloads('wrapped').length)
    for (const value of payloads('wrapped'))
      expect(Object.keys(value)).toEqual(['schema', 'payload'])
    for (const value of payloads('schemaless')) {
      expect(Object.keys(value)).not.toContain('schema')
      expect(value).toHaveProperty('op')
    }
    const bytes = (encoding: Encoding) =>
      records[encoding].reduce((n, r) => n + (r.valueText?.length ?? 0), 0)
    expect(bytes('schemaless') * 2).toBeLessThan(bytes('wrapped'))
  })

  it('projects both into the same documents, over Kafka and from a file', async () => {
    const wrapped = await projectKafka('wrapped')
    const files = organizationFiles(wrapped)
    // Organization A and B, and documents in them: the comparison below compares something.
    expect([...files.keys()].sort()).toEqual([ids.orgA, ids.orgB].sort())
    for (const path of files.values()) expect(documentCount(path)).toBeGreaterThan(0)

    expectSameDocuments(wrapped, await projectKafka('schemaless'))
    const [fromFile, fromSchemalessFile] = [
      await projectFile('wrapped'),
      await projectFile('schemaless'),
    ]
    expectSameDocuments(wrapped, fromFile.dataDir)
    expectSameDocuments(wrapped, fromSchemalessFile.dataDir)
    // The fixture's size_bytes beyond 2^53 is a valid bigint, read exactly whichever the
    // encoding (it was dead-lettered before): nothing is.
    expect(fromFile.letters).toEqual([])
    expect(fromSchemalessFile.letters).toEqual([])
  })
})
