// A lane that fails (here: an organization file that is not a database any more) stops the
// projector with one clear log line, and the consumer group's committed offset is not past what
// every lane applied; once the file is back, a restart applies what was missed, and skips what
// the healthy lane had applied already.
import Database from 'better-sqlite3'
import type { Producer } from 'kafkajs'
import { copyFileSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PassThrough } from 'node:stream'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createProjector, type Projector } from '../../../projector/projector.ts'
import { loadProjectorConfig } from '../../../src/config.ts'
import { currentGeneration } from '../../../src/layout.ts'
import { kafkaClient, startKafka, type StartedKafka } from '../../harness/kafka.ts'
import { ORG_A, ORG_B, organizationRow, providerRow, record, uuid } from '../../support/debezium.ts'

let kafka: StartedKafka
let producer: Producer
const dirs: string[] = []

beforeAll(async () => {
  kafka = await startKafka()
  producer = kafkaClient(kafka.brokers).producer()
  await producer.connect()
})

afterAll(async () => {
  await producer?.disconnect()
  await kafka?.stop()
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

/** Produces the records one by one; returns each one's offset. */
async function produce(records: ReturnType<typeof record>[]): Promise<string[]> {
  const offsets: string[] = []
  for (const r of records) {
    const [meta] = await producer.send({
      topic: r.topic,
      messages: [{ key: JSON.stringify(r.key), value: JSON.stringify(r.value) }],
    })
    offsets.push(meta!.baseOffset!)
  }
  return offsets
}

const GROUP = 'lane-failure'

function projectorFor(
  dataDir: string,
  onFatal?: (error: Error) => void,
  logStream?: PassThrough,
): Projector {
  const config = loadProjectorConfig({
    DATA_DIR: dataDir,
    KAFKA_BROKERS: kafka.brokers.join(','),
    KAFKA_GROUP_ID: GROUP,
    ADMIN_PORT: '0',
    LANES: '2',
  })
  const logger = logStream === undefined ? pino({ level: 'silent' }) : pino(logStream)
  return createProjector({ config, logger, ...(onFatal === undefined ? {} : { onFatal }) })
}

async function eventually<T>(probe: () => T | undefined | Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + 60_000
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error('condition not reached in time')
    await new Promise((r) => setTimeout(r, 200))
  }
}

function hasProvider(path: string, id: string): boolean {
  if (!existsSync(path)) return false
  const db = new Database(path, { readonly: true })
  try {
    return db.prepare('SELECT 1 FROM doc_providers WHERE id = ?').get(id) !== undefined
  } catch {
    return false
  } finally {
    db.close()
  }
}

async function committedOffset(topic: string): Promise<bigint> {
  const admin = kafkaClient(kafka.brokers).admin()
  await admin.connect()
  try {
    const [committed] = await admin.fetchOffsets({ groupId: GROUP, topics: [topic] })
    return BigInt(committed!.partitions.find((p) => p.partition === 0)!.offset)
  } finally {
    await admin.disconnect()
  }
}

async function metricsOf(projector: Projector): Promise<string> {
  return (await fetch(`${projector.adminAddress()!}/metrics`)).text()
}

describe('a lane that fails', () => {
  it('stops the projector, commits nothing past what every lane applied, and a restart resumes', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'replica-lane-failure-'))
    dirs.push(dataDir)
    const topic = 'product.public.providers'
    await produce([
      record({ table: 'organizations', op: 'r', after: organizationRow(ORG_A) }),
      record({ table: 'organizations', op: 'r', after: organizationRow(ORG_B) }),
      record({ table: 'providers', op: 'r', after: providerRow(uuid(1), ORG_A), lsn: 1 }),
      record({ table: 'providers', op: 'r', after: providerRow(uuid(2), ORG_B), lsn: 2 }),
    ])
    const first = projectorFor(dataDir)
    await first.startKafka()
    const generation = currentGeneration(dataDir)!
    const fileA = generation.organizationPath(ORG_A)
    const fileB = generation.organizationPath(ORG_B)
    await eventually(() => (hasProvider(fileB, uuid(2)) ? true : undefined))
    await eventually(async () =>
      (await fetch(`${first.adminAddress()!}/readyz`)).status === 200 ? true : undefined,
    )
    await first.stop()
    const before = await committedOffset(topic)

    // Organization B's file is damaged: its lane cannot open it.
    const saved = join(dataDir, 'b.saved')
    copyFileSync(fileB, saved)
    for (const suffix of ['-wal', '-shm']) rmSync(`${fileB}${suffix}`, { force: true })
    writeFileSync(fileB, 'this is not a database, and it is long enough to be read as a header')

    // The two organizations are on different lanes (assigned in turn as first seen).
    const [offsetA, offsetB] = await produce([
      record({ table: 'providers', op: 'c', after: providerRow(uuid(3), ORG_A), lsn: 3 }),
      record({ table: 'providers', op: 'c', after: providerRow(uuid(4), ORG_B), lsn: 4 }),
    ])
    const logs: Array<Record<string, unknown>> = []
    const logStream = new PassThrough()
    logStream.on('data', (chunk: Buffer) => {
      for (const line of chunk
        .toString()
        .split('\n')
        .filter((l) => l !== '')) {
        logs.push(JSON.parse(line) as Record<string, unknown>)
      }
    })
    let fatal: Error | undefined
    const failing = projectorFor(dataDir, (error) => (fatal = error), logStream)
    await failing.startKafka()
    await eventually(() => fatal)
    await failing.stop()

    const failure = logs.find((l) => l.level === 50 && typeof l.lane === 'number')
    expect(failure).toMatchObject({
      msg: 'a lane failed: the projector stops, committing nothing past what every lane applied',
    })
    expect(String(failure!.error)).toMatch(/not a database/)
    // Nothing past what every lane applied: B's event was not applied, so its offset is not
    // committed (a committed offset is the next one to read).
    const after = await committedOffset(topic)
    expect(after).toBeGreaterThanOrEqual(before)
    expect(after).toBeLessThanOrEqual(BigInt(offsetB!))
    expect(BigInt(offsetA!)).toBeLessThan(BigInt(offsetB!))

    // The file is restored: a restart applies B's event, and A's (applied by the healthy lane
    // before the stop, in its own transaction with its offset) is skipped, not applied twice.
    rmSync(fileB)
    copyFileSync(saved, fileB)
    const again = projectorFor(dataDir)
    await again.startKafka()
    await eventually(() => (hasProvider(fileB, uuid(4)) ? true : undefined))
    expect(hasProvider(fileA, uuid(3))).toBe(true)
    // A lane commits its file before the main thread counts the batch: the event is visible a
    // moment before the counters move, so wait for the count, then check both outcomes.
    const metrics = await eventually(async () => {
      const text = await metricsOf(again)
      const counted = ['applied', 'duplicate'].every((outcome) =>
        text.includes(`replica_projector_events_total{table="providers",outcome="${outcome}"}`),
      )
      return counted ? text : undefined
    })
    await again.stop()
    expect(metrics).toMatch(
      /replica_projector_events_total\{table="providers",outcome="applied"\} 1\n/,
    )
    expect(metrics).toMatch(
      /replica_projector_events_total\{table="providers",outcome="duplicate"\} 1\n/,
    )
  }, 180_000)
})
