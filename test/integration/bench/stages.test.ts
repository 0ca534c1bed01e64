// bench:projector:stages reports a ceiling for the projector only if it does the projector's
// work. Here, on a small generated dataset: the organization files its one-thread write path
// leaves serve the same documents as the projector's from the same file, and every stage it
// times took time.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pino from 'pino'
import { afterAll, describe, expect, it } from 'vitest'
import { benchDataset } from '../../../bench/dataset.ts'
import { runWritePath } from '../../../bench/write-path.ts'
import { compareDocumentFiles, hasDifferences } from '../../../projector/documents/compare.ts'
import { createProjector } from '../../../projector/projector.ts'
import { loadProjectorConfig } from '../../../src/config.ts'
import { organizationFiles } from '../../support/applier.ts'

const EVENTS = 20_000

describe('bench:projector:stages', () => {
  const dirs: string[] = []
  const tempDir = (name: string) => {
    const dir = mkdtempSync(join(tmpdir(), `stages-${name}-`))
    dirs.push(dir)
    return dir
  }
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
  })

  it('builds the documents the projector builds from the same file, timing every stage', async () => {
    const dataset = await benchDataset(EVENTS, () => undefined, 'schemaless')
    const benchDir = tempDir('bench')
    const { events, nanos, cpuMicros } = await runWritePath(
      dataset.path,
      benchDir,
      Number.MAX_SAFE_INTEGER,
      'product',
    )
    expect(events).toBe(dataset.events)
    for (const [stage, spent] of Object.entries(nanos))
      expect(spent, `${stage} took no time`).toBeGreaterThan(0n)
    expect(cpuMicros).toBeGreaterThan(0)

    const replicaDir = tempDir('replica')
    const projector = createProjector({
      config: loadProjectorConfig({ DATA_DIR: replicaDir, ADMIN_PORT: '0' }),
      logger: pino({ level: 'silent' }),
    })
    try {
      await projector.runFile(dataset.path)
    } finally {
      await projector.stop()
    }

    const replica = organizationFiles(replicaDir)
    const organizations = dataset.organizations.map((o) => o.id).sort()
    expect([...replica.keys()].sort()).toEqual(organizations)
    for (const organizationId of organizations) {
      const diffs = compareDocumentFiles(
        join(benchDir, `${organizationId}.db`),
        replica.get(organizationId),
      )
      expect(hasDifferences(diffs), `${organizationId}: ${JSON.stringify(diffs)}`).toBe(false)
      // Equal because both hold documents, not because both are empty.
      expect(diffs.find((d) => d.resource === 'providers')?.equal).toBeGreaterThan(0)
    }
  })
})
