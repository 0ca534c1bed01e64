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
import { datasetOrganizations, generateDataset } from '../../../scripts/dataset/generate.ts'
import { loadProjectorConfig } from '../../../src/config.ts'
import { currentGeneration } from '../../../src/layout.ts'
import { testApplier } from '../../support/applier.ts'
import { identifierRow, providerRow, record, uuid } from '../../support/debezium.ts'

const dirs: string[] = []
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'replica-lanes-'))
  dirs.push(dir)
  return dir
}

const DATASET = { organizations: 6, providersPerOrganization: 12, updateRounds: 2, seed: 11 }
const organizations = datasetOrganizations(DATASET).map((o) => o.id)

/** The dataset, then events the bytes alone cannot route, in the schemaless shape. */
function lines(): string[] {
  // Two organizations that fall to different lanes of two (assigned in turn as first seen: the
  // dataset's organization rows come first, in this order).
  const assignment = new LaneAssignment(2)
  for (const id of organizations) assignment.laneOf(id)
  const from = organizations.find((id) => assignment.laneOf(id) === 0)!
  const to = organizations.find((id) => assignment.laneOf(id) === 1)!
  const moved = uuid(900_001)
  const deleted = uuid(900_002)
  const extra = [
    record({
      table: 'providers',
      op: 'c',
      after: providerRow(moved, from),
      lsn: 9e9,
      wrapped: false,
    }),
    record({
      table: 'provider_identifiers',
      op: 'c',
      after: identifierRow(uuid(900_003), moved, from),
      lsn: 9e9 + 1,
      wrapped: false,
    }),
    // The row moves to an organization of the other lane: it must leave the first file.
    record({
      table: 'providers',
      op: 'u',
      after: providerRow(moved, to, { last_name: 'Moved' }),
      lsn: 9e9 + 2,
      wrapped: false,
    }),
    record({ table: 'providers', op: 'c', after: providerRow(deleted, to), lsn: 9e9 + 3 }),
    // A delete carrying its key only, and its tombstone: routed by the routing index.
    record({ table: 'providers', op: 'd', before: { id: deleted }, lsn: 9e9 + 4, wrapped: false }),
    { ...record({ table: 'providers', op: 'd', before: { id: deleted } }), value: null },
    // A tombstone whose delete compaction removed: a delete by key, through the routing index;
    // and one of a row never seen: nothing.
    record({ table: 'providers', op: 'c', after: providerRow(uuid(900_006), from), lsn: 9e9 + 5 }),
    { ...record({ table: 'providers', op: 'd', before: { id: uuid(900_006) } }), value: null },
    { ...record({ table: 'providers', op: 'd', before: { id: uuid(900_007) } }), value: null },
    // Routes are written in the order of ids, events packed in their own order (lanes.ts): a
    // row that moves there and back, and one that moves to the other lane and is then deleted
    // by its key, each within a few events, end where one-by-one routing would leave them.
    ...[from, to, from].map((organizationId, i) =>
      record({
        table: 'providers',
        op: i === 0 ? 'c' : 'u',
        after: providerRow(uuid(900_004), organizationId, { last_name: `Round ${i}` }),
        lsn: 9e9 + 6 + i,
        wrapped: false,
      }),
    ),
    ...[from, to].map((organizationId, i) =>
      record({
        table: 'providers',
        op: i === 0 ? 'c' : 'u',
        after: providerRow(uuid(900_005), organizationId),
        lsn: 9e9 + 9 + i,
        wrapped: false,
      }),
    ),
    record({
      table: 'providers',
      op: 'd',
      before: { id: uuid(900_005) },
      lsn: 9e9 + 11,
      wrapped: false,
    }),
    // A truncate reaches every organization of every lane.
    record({ table: 'enrollment_requirements', op: 't', lsn: 9e9 + 12, wrapped: false }),
  ]
  return [...generateDataset(DATASET), ...extra.map((r) => JSON.stringify(r))]
}

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
