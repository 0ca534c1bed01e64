// projector/storage/durable.ts: what a rebuild syncs before it publishes its generation.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { syncFiles, syncGeneration } from '../../../projector/storage/durable.ts'
import { prepareGeneration } from '../../../src/layout.ts'
import { uuid } from '../../support/debezium.ts'

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

describe('syncGeneration', () => {
  it('syncs every database file and log of the generation, control.db and the routing index', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'replica-durable-'))
    dirs.push(dataDir)
    const generation = prepareGeneration(dataDir, 'g2')
    writeFileSync(generation.controlPath, 'control')
    writeFileSync(generation.routesPath, 'routes')
    writeFileSync(`${generation.routesPath}-wal`, 'routes log')
    for (const name of [`${uuid(1)}.db`, `${uuid(1)}.db-wal`, `${uuid(2)}.v2.db`]) {
      writeFileSync(join(generation.organizationsDir, name), 'x')
    }
    // Not the generation's content: an emptied journal, a log's index, a copy not renamed yet.
    for (const name of [`${uuid(2)}.v2.db-journal`, `${uuid(1)}.db-shm`, `${uuid(3)}.db.new`]) {
      writeFileSync(join(generation.organizationsDir, name), '')
    }
    // control.db has no log here: skipped, not an error.
    await expect(syncGeneration(generation)).resolves.toBe(6)
  })

  it('fails on a file it cannot open, rather than publish what it did not sync', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'replica-durable-'))
    dirs.push(dataDir)
    writeFileSync(join(dataDir, 'a-file'), 'x')
    await expect(syncFiles([join(dataDir, 'a-file', 'under-a-file.db')])).rejects.toThrow(/ENOTDIR/)
  })
})
