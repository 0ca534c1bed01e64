// The applier across organizations: what one batch does to several organization files.
import Database from 'better-sqlite3'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pino from 'pino'
import { afterEach, describe, expect, it } from 'vitest'
import { createApplier } from '../../../projector/apply.ts'
import { prepareGeneration } from '../../../src/layout.ts'
import { ORG_A, ORG_B, providerRow, record, uuid } from '../../support/debezium.ts'

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

function applierIn() {
  const dataDir = mkdtempSync(join(tmpdir(), 'replica-apply-'))
  dirs.push(dataDir)
  const generation = prepareGeneration(dataDir, 'g1')
  const applier = createApplier({
    generation,
    topicPrefix: 'product',
    logger: pino({ level: 'silent' }),
    offsetGuard: true,
    walCheckpointBytes: 1 << 30,
    clock: () => new Date('2026-11-22T10:00:00.000Z'),
  })
  const providerIds = (organizationId: string): string[] => {
    const db = new Database(generation.organizationPath(organizationId), { readonly: true })
    try {
      return db.prepare('SELECT id FROM doc_providers ORDER BY id').pluck().all() as string[]
    } finally {
      db.close()
    }
  }
  return { applier, providerIds }
}

describe('applyBatch', () => {
  it('a truncate clears every organization, also one whose first rows came earlier in the batch', () => {
    const { applier, providerIds } = applierIn()
    applier.applyBatch([
      record({ table: 'providers', op: 'c', after: providerRow(uuid(1), ORG_A) }),
    ])
    expect(providerIds(ORG_A)).toEqual([uuid(1)])

    applier.applyBatch([
      record({ table: 'providers', op: 'c', after: providerRow(uuid(2), ORG_B), lsn: 2 }),
      record({ table: 'providers', op: 't', lsn: 3 }),
      record({ table: 'providers', op: 'c', after: providerRow(uuid(3), ORG_B), lsn: 4 }),
    ])
    applier.close()
    expect(providerIds(ORG_A)).toEqual([])
    // Inserted before the truncate: gone; after it: kept.
    expect(providerIds(ORG_B)).toEqual([uuid(3)])
  })
})
