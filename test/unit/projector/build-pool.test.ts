// Catch-up's document build on worker threads (build-pool.ts): the same files as on the
// projector's own thread, and no batch while the workers write.
import Database from 'better-sqlite3'
import { readdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import pino from 'pino'
import { afterEach, describe, expect, it } from 'vitest'
import { shareJobs } from '../../../projector/lanes/build-pool.ts'
import { parseRecordLine } from '../../../projector/decode/file-line.ts'
import { generateDataset } from '../../../scripts/dataset/generate.ts'
import { DOCUMENT_TABLES, testApplier } from '../../support/applier.ts'

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

const records = [
  ...generateDataset({ organizations: 3, providersPerOrganization: 25, updateRounds: 2, seed: 5 }),
].map((line, i) => parseRecordLine(line, i + 1))

/** Every document row of every organization file, stamps and bodies included. */
function documents(organizationsDir: string): Record<string, unknown[]> {
  const out: Record<string, unknown[]> = {}
  for (const name of readdirSync(organizationsDir)
    .filter((f) => f.endsWith('.db'))
    .sort()) {
    const db = new Database(join(organizationsDir, name), { readonly: true })
    try {
      for (const table of DOCUMENT_TABLES) {
        out[`${name}/${table}`] = db.prepare(`SELECT * FROM ${table} ORDER BY id`).all()
      }
    } finally {
      db.close()
    }
  }
  return out
}

/** An applier that has loaded `records` (unless `dataDir` holds them already), not caught up. */
function load(documentBuildWorkers: number, dataDir?: string) {
  const logs: Array<{ msg: string }> = []
  const logger = pino(
    { level: 'info' },
    { write: (line: string) => void logs.push(JSON.parse(line) as { msg: string }) },
  )
  const loaded = testApplier(
    {
      logger,
      offsetGuard: false,
      deferDocumentsUntilCaughtUp: true,
      documentBuildWorkers,
      clock: () => new Date('2026-11-22T10:00:00.000Z'),
    },
    dataDir,
    (made) => dirs.push(made),
  )
  const { applier, generation } = loaded
  if (dataDir === undefined) {
    for (let i = 0; i < records.length; i += 500) applier.applyBatch(records.slice(i, i + 500))
  }
  return { applier, organizationsDir: generation.organizationsDir, dataDir: loaded.dataDir, logs }
}

describe('shareJobs', () => {
  it('gives each lane about the same bytes, largest files first', () => {
    const jobs = [5, 1, 9, 3, 7, 2].map((bytes) => ({ bytes }))
    const lanes = shareJobs(jobs, 2)
    expect(lanes.map((lane) => lane.map((j) => j.bytes))).toEqual([
      [9, 3, 2],
      [7, 5, 1],
    ])
  })

  it('leaves out the lanes it has nothing for', () => {
    expect(shareJobs([{ bytes: 1 }], 3)).toEqual([[{ bytes: 1 }]])
    expect(shareJobs([], 2)).toEqual([])
  })
})

describe('building documents on worker threads', () => {
  it('writes byte for byte what the projector thread writes, for every organization', async () => {
    const here = load(0)
    const hereStats = await here.applier.markCaughtUp()
    here.applier.close()

    const there = load(1)
    const thereStats = await there.applier.markCaughtUp()
    there.applier.close()

    // Built there, not here after a worker failed (that is logged, and also correct).
    const messages = there.logs.map((line) => line.msg)
    expect(there.logs.filter((l) => l.msg.includes('in parallel'))).toEqual([])
    expect(messages.filter((m) => m.startsWith('built the documents'))).toHaveLength(3)
    expect(thereStats).toEqual(hereStats)
    expect(hereStats.rewritten).toBeGreaterThan(300)
    const built = documents(there.organizationsDir)
    expect(Object.keys(built)).toHaveLength(3 * DOCUMENT_TABLES.length)
    expect(built).toEqual(documents(here.organizationsDir))
  }, 60_000)

  it('stops the workers when stopped mid-build; the next start builds what a whole build does', async () => {
    const whole = load(0)
    await whole.applier.markCaughtUp()
    whole.applier.close()

    const stopped = load(1)
    const building = stopped.applier.markCaughtUp()
    // As the projector stops: the build first (a Kafka batch may be waiting on it), then files.
    stopped.applier.stopBuilding()
    await building
    expect(stopped.applier.caughtUp).toBe(false)
    expect(stopped.applier.control.caughtUpAt()).toBeUndefined()
    stopped.applier.close()
    // Stopped before any worker could start: nothing was built, nothing half-built.
    expect(Object.values(documents(stopped.organizationsDir)).flat()).toEqual([])
    const resumed = load(1, stopped.dataDir)
    await resumed.applier.markCaughtUp()
    expect(resumed.applier.caughtUp).toBe(true)
    expect(resumed.applier.control.caughtUpAt()).toBeDefined()
    resumed.applier.close()
    expect(documents(resumed.organizationsDir)).toEqual(documents(whole.organizationsDir))
  }, 60_000)

  it('refuses a batch while the workers write, and is live once they are done', async () => {
    const { applier } = load(2)
    const caughtUp = applier.markCaughtUp()
    expect(applier.buildInProgress()).toBeDefined()
    expect(() => applier.applyBatch(records.slice(0, 1))).toThrow(/worker threads/)
    await caughtUp
    expect(applier.buildInProgress()).toBeUndefined()
    expect(applier.control.caughtUpAt()).toBeDefined()
    // Live from now on: a replayed event is applied with its documents, and changes nothing.
    expect(applier.applyBatch(records.slice(0, 50)).documents.rewritten).toBe(0)
    applier.close()
  }, 60_000)
})
