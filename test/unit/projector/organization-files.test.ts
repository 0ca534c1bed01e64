// useOrganizationFile (projector/storage/organization-file.ts): the open files a writer keeps, on
// real organization files in a temp directory.
import Database from 'better-sqlite3'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import {
  openOrganizationFile,
  useOrganizationFile,
  type OrganizationFile,
} from '../../../projector/storage/organization-file.ts'
import { uuid } from '../../support/debezium.ts'

const dir = mkdtempSync(join(tmpdir(), 'replica-open-files-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('useOrganizationFile', () => {
  it('opens a file once, keeps the most recently used, and closes the least recently used past the limit', () => {
    const files = new Map<string, OrganizationFile>()
    const [a, b, c] = [uuid(1), uuid(2), uuid(3)]
    const openedIds: string[] = []
    const use = (id: string) =>
      useOrganizationFile(
        files,
        id,
        2,
        () => openOrganizationFile(id, join(dir, `${id}.db`), { offsetGuard: false }),
        (file) => openedIds.push(file.organizationId),
      )

    const fileA = use(a)
    expect(use(a)).toBe(fileA)
    use(b)
    use(a) // a is now the most recently used: b goes first
    use(c)
    expect([...files.keys()]).toEqual([a, c])
    expect(openedIds).toEqual([a, b, c])
    expect(() => fileA.setCacheKiB(2000)).not.toThrow() // still open

    use(b) // reopened: a, the least recently used now, is closed
    expect([...files.keys()]).toEqual([c, b])
    expect(openedIds).toEqual([a, b, c, b])
    expect(() => fileA.setCacheKiB(2000)).toThrow(/not open/)
    for (const file of files.values()) file.close()
  })
})

describe('an organization file whose documents wait for the end of an initial load', () => {
  /** The journal another connection finds: WAL is recorded in the file, a rollback journal not. */
  const journalSeenBy = (path: string): string => {
    const reader = new Database(path, { readonly: true, fileMustExist: true })
    try {
      return reader.pragma('journal_mode', { simple: true }) as string
    } finally {
      reader.close()
    }
  }

  it('is written without a WAL until its documents are built, and with one from then on', () => {
    const path = join(dir, 'deferred.db')
    const file = openOrganizationFile(uuid(10), path, { offsetGuard: false, deferDocuments: true })
    expect(journalSeenBy(path)).not.toBe('wal')
    // Built inside the transaction an initial load holds: WAL once that commits.
    file.begin()
    file.buildDocuments(new Date('2026-01-01T00:00:00Z'))
    expect(file.documentsLive).toBe(true)
    expect(journalSeenBy(path)).not.toBe('wal')
    file.commit()
    expect(journalSeenBy(path)).toBe('wal')
    file.close()

    // Reopened before the replica has caught up, a built file keeps its WAL.
    const again = openOrganizationFile(uuid(10), path, { offsetGuard: false, deferDocuments: true })
    expect(again.documentsLive).toBe(true)
    expect(journalSeenBy(path)).toBe('wal')
    again.close()
  })

  it("sets the mirror's indexes aside until its documents are built, then creates the same ones", () => {
    const indexesOf = (path: string): string[] => {
      const reader = new Database(path, { readonly: true, fileMustExist: true })
      try {
        return reader
          .prepare("SELECT sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
          .pluck()
          .all()
          .map(String)
          .sort()
      } finally {
        reader.close()
      }
    }
    const livePath = join(dir, 'live.db')
    openOrganizationFile(uuid(12), livePath, { offsetGuard: false }).close()
    const everyIndex = indexesOf(livePath)
    expect(everyIndex.join('\n')).toMatch(/provider_identifiers_provider/)

    const path = join(dir, 'indexes-aside.db')
    const file = openOrganizationFile(uuid(13), path, { offsetGuard: false, deferDocuments: true })
    const aside = indexesOf(path)
    expect(aside.join('\n')).not.toMatch(/provider_identifiers_provider|group_memberships_group/)
    // The documents' own indexes stay: their tables are empty until the build.
    expect(aside.join('\n')).toMatch(/doc_providers_page/)
    file.close()
    // Reopened, still waiting: nothing changes.
    const again = openOrganizationFile(uuid(13), path, { offsetGuard: false, deferDocuments: true })
    expect(indexesOf(path)).toEqual(aside)
    again.buildDocuments(new Date('2026-01-01T00:00:00Z'))
    expect(indexesOf(path)).toEqual(everyIndex)
    again.close()
  })

  it('waits again, without a WAL, when the transaction that built its documents rolls back', () => {
    const path = join(dir, 'rolled-back.db')
    const file = openOrganizationFile(uuid(11), path, { offsetGuard: false, deferDocuments: true })
    file.begin()
    file.buildDocuments(new Date('2026-01-01T00:00:00Z'))
    file.rollback()
    expect(file.documentsLive).toBe(false)
    file.commit()
    expect(journalSeenBy(path)).not.toBe('wal')
    file.close()
  })
})
