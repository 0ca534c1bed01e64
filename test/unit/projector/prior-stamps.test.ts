// A rebuild's look-ups of the replaced generation's stamps, over more organizations than it keeps
// files open for.
import Database from 'better-sqlite3'
import { readdirSync, readlinkSync, rmSync } from 'node:fs'
import { afterEach, describe, expect, it } from 'vitest'
import { openPriorGeneration, PRIOR_FILES_OPEN } from '../../../projector/storage/prior-stamps.ts'
import { testApplier } from '../../support/applier.ts'
import { providerRow, record, uuid } from '../../support/debezium.ts'

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

/** Database files under `dir` this process holds open (a file's -wal and -shm count with it). */
function openFilesUnder(dir: string): number {
  const files = new Set<string>()
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const target = readlinkSync(`/proc/self/fd/${fd}`)
      if (target.startsWith(dir)) files.add(target.replace(/-(wal|shm)$/, ''))
    } catch {
      // closed meanwhile
    }
  }
  return files.size
}

describe('openPriorGeneration', () => {
  it.runIf(process.platform === 'linux')(
    'finds every organization’s stamps while keeping at most PRIOR_FILES_OPEN files open',
    () => {
      const organizations = Array.from({ length: PRIOR_FILES_OPEN + 6 }, (_, i) => uuid(5000 + i))
      const { applier, generation } = testApplier({ offsetGuard: false }, undefined, (made) =>
        dirs.push(made),
      )
      applier.applyBatch(
        organizations.map((organizationId, i) =>
          record({
            table: 'providers',
            op: 'c',
            after: providerRow(uuid(i + 1), organizationId),
            lsn: i + 1,
          }),
        ),
      )
      applier.close()
      const stored = organizations.map((organizationId, i) => {
        const db = new Database(generation.organizationPath(organizationId), { readonly: true })
        const row = db
          .prepare('SELECT hash, updated_at AS stamp FROM doc_providers WHERE id = ?')
          .get(uuid(i + 1)) as { hash: string; stamp: string }
        db.close()
        return row
      })

      const prior = openPriorGeneration(generation)
      const lookUp = (i: number, hash = stored[i]!.hash) =>
        prior.priorStamp(organizations[i]!, 'provider', uuid(i + 1), hash)
      organizations.forEach((_, i) => expect(lookUp(i)).toBe(stored[i]!.stamp))
      expect(openFilesUnder(generation.dir)).toBeLessThanOrEqual(PRIOR_FILES_OPEN)
      // The first organizations' files were closed for later ones: opened again when asked.
      expect(lookUp(0)).toBe(stored[0]!.stamp)
      expect(lookUp(1, 'another hash')).toBeUndefined()
      expect(prior.priorStamp(uuid(9999), 'provider', uuid(1), stored[0]!.hash)).toBeUndefined()

      prior.close()
      expect(openFilesUnder(generation.dir)).toBe(0)
      expect(lookUp(0)).toBeUndefined()
    },
  )

  it("reads a shared file's stamps from the version its key is served from", () => {
    let now = new Date('2026-01-01T00:00:00.000Z')
    const { applier, generation } = testApplier(
      { offsetGuard: false, clock: () => now, organizationFiles: 1 },
      undefined,
      (made) => dirs.push(made),
    )
    applier.applyBatch([
      record({ table: 'providers', op: 'c', after: providerRow(uuid(1), uuid(7001)), lsn: 1 }),
    ])
    const key = 'shared-0000.db'
    const source = new Database(generation.filePath(key), { readonly: true })
    const { hash, stamp } = source
      .prepare('SELECT hash, updated_at AS stamp FROM doc_providers WHERE id = ?')
      .get(uuid(1)) as { hash: string; stamp: string }
    source.prepare('VACUUM INTO ?').run(generation.filePath(key, 'shared-0000.r1.db'))
    source.close()
    // The rebuilt version, swapped in, gives the document another content and a later stamp;
    // the first file, replaced, still lies beside it (removed after a grace period).
    const rebuilt = new Database(generation.filePath(key, 'shared-0000.r1.db'))
    rebuilt.prepare(`UPDATE doc_providers SET hash = 'rebuilt' WHERE id = ?`).run(uuid(1))
    rebuilt.close()
    now = new Date('2026-01-02T00:00:00.000Z')
    applier.replaceFile(key, 'shared-0000.r1.db')
    applier.close()

    const prior = openPriorGeneration(generation)
    try {
      expect(prior.priorStamp(uuid(7001), 'provider', uuid(1), hash)).toBeUndefined()
      const later = prior.priorStamp(uuid(7001), 'provider', uuid(1), 'rebuilt')
      expect(later! > stamp).toBe(true)
    } finally {
      prior.close()
    }
  })
})

describe('a stamp carried from the previous generation', () => {
  it('is a stamp the file holds: every later batch is stamped after it', () => {
    // The previous generation was written on a host whose clock ran 5 s ahead of this one's: the
    // stamp an unchanged document keeps is later than this host's clock. A document written after
    // it must still sort after it, or a poller past the carried stamp never sees the change
    // (cursors resume after an exact position; api/list-order.ts catches up from it too).
    const organizationId = uuid(7100)
    const carried = '2026-01-01T00:00:05.000Z'
    let now = new Date('2026-01-01T00:00:00.000Z')
    const { applier, generation } = testApplier(
      {
        offsetGuard: false,
        clock: () => now,
        priorStamp: (organization, kind, id) =>
          organization === organizationId && kind === 'provider' && id === uuid(1)
            ? carried
            : undefined,
      },
      undefined,
      (made) => dirs.push(made),
    )
    const stampOf = (id: string) => {
      const db = new Database(generation.organizationPath(organizationId), { readonly: true })
      try {
        return (
          db.prepare('SELECT updated_at AS stamp FROM doc_providers WHERE id = ?').get(id) as {
            stamp: string
          }
        ).stamp
      } finally {
        db.close()
      }
    }
    try {
      applier.applyBatch([
        record({
          table: 'providers',
          op: 'c',
          after: providerRow(uuid(1), organizationId),
          lsn: 1,
        }),
      ])
      expect(stampOf(uuid(1))).toBe(carried)
      now = new Date('2026-01-01T00:00:01.000Z')
      applier.applyBatch([
        record({
          table: 'providers',
          op: 'c',
          after: providerRow(uuid(2), organizationId),
          lsn: 2,
        }),
      ])
      expect(stampOf(uuid(2)) > carried).toBe(true)
    } finally {
      applier.close()
    }
  })
})
