// One applier (issue 20): every entry point that applies change events serves the same documents
// from the same stream, held against the single-threaded applier fed the records directly: the
// live projector over Kafka on 1, 2 and 4 lanes, `--from-file` on 4 lanes (1 and 2: lanes.test.ts),
// `--rebuild` (a new generation replayed from Kafka, published) and `--rebuild --org` (built
// aside, the single-threaded applier keeping some organizations, handed over to a live projector).
import Database from 'better-sqlite3'
import type { Producer } from 'kafkajs'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { compareDocumentFiles, hasDifferences } from '../../../projector/documents/compare.ts'
import { parseRecordLine } from '../../../projector/decode/file-line.ts'
import { createProjector, type Projector } from '../../../projector/projector.ts'
import type { RebuildReport } from '../../../projector/rebuild/report.ts'
import { readOrganizationFiles } from '../../../projector/storage/control-file.ts'
import { loadProjectorConfig } from '../../../src/config.ts'
import { currentGeneration, type Generation } from '../../../src/layout.ts'
import { kafkaClient, startKafka, type StartedKafka } from '../../harness/kafka.ts'
import { testApplier } from '../../support/applier.ts'
import { lines, movedBetween, streamOrganizations } from '../../support/lane-stream.ts'
import { runEntry } from '../../support/processes.ts'

let kafka: StartedKafka
let producer: Producer
const dirs: string[] = []
const running: Projector[] = []
const all = lines()
/** The reference: every record through the single-threaded applier, a clean replay. */
let reference: Generation

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  dirs.push(dir)
  return dir
}

beforeAll(async () => {
  const made = testApplier(
    { offsetGuard: false, deferDocumentsUntilCaughtUp: true },
    tempDir('replica-entry-ref-'),
  )
  const records = all.map((line, i) => parseRecordLine(line, i + 1))
  for (let i = 0; i < records.length; i += 500) made.applier.applyBatch(records.slice(i, i + 500))
  await made.applier.markCaughtUp()
  made.applier.close()
  reference = made.generation
  // Documents to compare, so that equality is not that of two empty files.
  for (const organizationId of streamOrganizations) {
    const db = new Database(reference.organizationPath(organizationId), { readonly: true })
    const providers = db.prepare('SELECT count(*) FROM doc_providers').pluck().get() as number
    db.close()
    expect(providers, organizationId).toBeGreaterThan(0)
  }

  kafka = await startKafka()
  producer = kafkaClient(kafka.brokers).producer()
  await producer.connect()
  // Each topic's records in their order (Kafka keeps no order across topics).
  const byTopic = new Map<string, Array<{ key: string | null; value: string | null }>>()
  for (const line of all) {
    const r = JSON.parse(line) as { topic: string; key: unknown; value: unknown }
    let messages = byTopic.get(r.topic)
    if (messages === undefined) byTopic.set(r.topic, (messages = []))
    messages.push({
      key: r.key === null ? null : JSON.stringify(r.key),
      value:
        r.value === null ? null : typeof r.value === 'string' ? r.value : JSON.stringify(r.value),
    })
  }
  // In slices: the broker refuses a request past its max message size.
  for (const [topic, messages] of byTopic) {
    for (let i = 0; i < messages.length; i += 20) {
      await producer.send({ topic, messages: messages.slice(i, i + 20) })
    }
  }
}, 180_000)

afterAll(async () => {
  for (const projector of running) await projector.stop().catch(() => undefined)
  await producer?.disconnect()
  await kafka?.stop()
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

function env(dataDir: string, groupId: string, lanes: number): Record<string, string> {
  return {
    DATA_DIR: dataDir,
    KAFKA_BROKERS: kafka.brokers.join(','),
    KAFKA_GROUP_ID: groupId,
    ADMIN_PORT: '0',
    LANES: String(lanes),
    LOG_LEVEL: 'warn',
  }
}

function projectorFor(dataDir: string, groupId: string, lanes: number): Projector {
  const config = loadProjectorConfig(env(dataDir, groupId, lanes))
  const projector = createProjector({ config, logger: pino({ level: 'silent' }) })
  running.push(projector)
  return projector
}

async function eventually<T>(
  probe: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 90_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error('condition not reached in time')
    await sleep(200)
  }
}

async function ready(projector: Projector): Promise<void> {
  await eventually(async () =>
    (await fetch(`${projector.adminAddress()!}/readyz`)).status === 200 ? true : undefined,
  )
}

/** The organization's file served now in `dataDir`'s current generation. */
function served(dataDir: string, organizationId: string): string {
  const generation = currentGeneration(dataDir)!
  const files = readOrganizationFiles(generation.controlPath)
  return generation.organizationPath(organizationId, files.get(organizationId))
}

/** Every organization's documents in `dataDir` are the reference's. */
function expectSameDocuments(dataDir: string, organizations = streamOrganizations): void {
  for (const organizationId of organizations) {
    const diffs = compareDocumentFiles(
      reference.organizationPath(organizationId),
      served(dataDir, organizationId),
    )
    expect(hasDifferences(diffs), `${organizationId}: ${JSON.stringify(diffs)}`).toBe(false)
  }
}

describe('every entry point', { timeout: 300_000 }, () => {
  it('--from-file on four lanes', async () => {
    const dataDir = tempDir('replica-entry-file-')
    const path = join(dataDir, '..', `${dataDir.split('/').at(-1)}.ndjson`)
    writeFileSync(path, all.join('\n') + '\n')
    dirs.push(path)
    const projector = projectorFor(dataDir, 'unused', 4)
    const summary = await projector.runFile(path, { batchSize: 97 })
    await projector.stop()
    expect(summary.deadLettered).toBe(0)
    expectSameDocuments(dataDir)
  })

  const live = new Map<number, string>()
  for (const lanes of [1, 2, 4]) {
    it(`live over Kafka on ${lanes} lane(s)`, async () => {
      const dataDir = tempDir(`replica-entry-kafka-${lanes}-`)
      const projector = projectorFor(dataDir, `it-entry-${lanes}`, lanes)
      await projector.startKafka()
      await ready(projector)
      await projector.stop()
      expectSameDocuments(dataDir)
      live.set(lanes, dataDir)
    })
  }

  it('--rebuild, then --rebuild --org under the live projector', async () => {
    const dataDir = live.get(2)!
    const first = currentGeneration(dataDir)!.name
    const rebuilding = projectorFor(dataDir, 'it-entry-rebuild', 2)
    await rebuilding.startKafka({ rebuild: true })
    await eventually(() => (currentGeneration(dataDir)!.name !== first ? true : undefined))
    await ready(rebuilding)
    expectSameDocuments(dataDir)

    // The organizations rows moved between, each kept alone by a rebuild of its own: the other's
    // rows come and go through the routing index only.
    const { from, to } = movedBetween()
    const before = new Map([from, to].map((id) => [id, served(dataDir, id)]))
    const run = await runEntry(
      'projector/main.ts',
      ['--rebuild', '--org', `${from},${to}`, '--json'],
      env(dataDir, 'it-entry-rebuild', 2),
      180_000,
    )
    expect(run.code, run.stderr).toBe(0)
    const report = JSON.parse(run.stdout) as RebuildReport
    expect(report.organizations.map((o) => o.swapped?.file !== undefined)).toEqual([true, true])
    for (const [id, path] of before) expect(served(dataDir, id)).not.toBe(path)
    expectSameDocuments(dataDir, [from, to])
    await rebuilding.stop()
  })
})
