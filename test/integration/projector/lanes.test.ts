// Lanes (projector/lanes/lanes.ts): organizations applied on worker threads serve exactly what the
// single-threaded applier serves, whatever lane each organization falls to, including the events
// the main thread routes itself (key-only deletes, bare tombstones, a row moving between organizations of two
// lanes, a truncate).
import Database from 'better-sqlite3'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pino from 'pino'
import { afterAll, describe, expect, it } from 'vitest'
import { compareDocumentFiles, hasDifferences } from '../../../projector/documents/compare.ts'
import { LaneAssignment } from '../../../projector/routing/lane-hint.ts'
import { createProjector } from '../../../projector/projector.ts'
import { parseRecordLine } from '../../../projector/decode/file-line.ts'
import { loadProjectorConfig } from '../../../src/config.ts'
import { currentGeneration } from '../../../src/layout.ts'
import { testApplier } from '../../support/applier.ts'
import { uuid } from '../../support/debezium.ts'
import { lines, streamOrganizations } from '../../support/lane-stream.ts'

const dirs: string[] = []
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'replica-lanes-'))
  dirs.push(dir)
  return dir
}

const organizations = streamOrganizations

async function projectWithLanes(path: string, lanes: number): Promise<string> {
  const dataDir = tempDir()
  const config = loadProjectorConfig({ DATA_DIR: dataDir, LANES: String(lanes) })
  const projector = createProjector({ config, logger: pino({ level: 'silent' }) })
  try {
    // Small batches: many hand-overs, and a batch in flight while the next is routed.
    const summary = await projector.runFile(path, { batchSize: 97 })
    expect(summary.deadLettered).toBe(0)
  } finally {
    await projector.stop()
  }
  return dataDir
}

function organizationPath(dataDir: string, organizationId: string): string {
  return currentGeneration(dataDir)!.organizationPath(organizationId)
}

function providerIds(path: string): string[] {
  const db = new Database(path, { readonly: true })
  try {
    return db.prepare('SELECT id FROM doc_providers ORDER BY id').pluck().all() as string[]
  } finally {
    db.close()
  }
}

describe('lanes', () => {
  it('serve the same documents on one lane and on two as the single-threaded applier', async () => {
    const dir = tempDir()
    const path = join(dir, 'events.ndjson')
    const all = lines()
    writeFileSync(path, all.join('\n') + '\n')

    // The reference: every record through the single-threaded applier, a clean replay.
    const reference = testApplier(
      { offsetGuard: false, deferDocumentsUntilCaughtUp: true },
      tempDir(),
    )
    const records = all.map((line, i) => parseRecordLine(line, i + 1))
    for (let i = 0; i < records.length; i += 500) {
      reference.applier.applyBatch(records.slice(i, i + 500))
    }
    await reference.applier.markCaughtUp()
    reference.applier.close()

    const oneLane = await projectWithLanes(path, 1)
    const twoLanes = await projectWithLanes(path, 2)
    for (const organizationId of organizations) {
      const expected = reference.generation.organizationPath(organizationId)
      expect(providerIds(expected).length).toBeGreaterThan(0)
      for (const actual of [oneLane, twoLanes]) {
        const diffs = compareDocumentFiles(expected, organizationPath(actual, organizationId))
        expect(hasDifferences(diffs), `${organizationId}: ${JSON.stringify(diffs)}`).toBe(false)
      }
    }
    // What the extra events did, so that equality is not equality of two wrong answers.
    const assignment = new LaneAssignment(2)
    for (const id of organizations) assignment.laneOf(id)
    const from = organizations.find((id) => assignment.laneOf(id) === 0)!
    const to = organizations.find((id) => assignment.laneOf(id) === 1)!
    expect(providerIds(organizationPath(twoLanes, from))).not.toContain(uuid(900_001))
    expect(providerIds(organizationPath(twoLanes, to))).toContain(uuid(900_001))
    expect(providerIds(organizationPath(twoLanes, to))).not.toContain(uuid(900_002))
    expect(providerIds(organizationPath(twoLanes, from))).not.toContain(uuid(900_006))
    expect(providerIds(organizationPath(twoLanes, from))).toContain(uuid(900_004))
    expect(providerIds(organizationPath(twoLanes, to))).not.toContain(uuid(900_004))
    for (const organizationId of [from, to]) {
      expect(providerIds(organizationPath(twoLanes, organizationId))).not.toContain(uuid(900_005))
    }
  }, 120_000)
})
