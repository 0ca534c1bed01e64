// projector/storage/organization-file.ts on real organization files in a temp directory: the open
// files a writer keeps (useOrganizationFile), a load's deferred files, and who syncs a commit.
import Database from 'better-sqlite3'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { decodeRecord } from '../../../projector/decode/decode.ts'
import {
  openOrganizationFile,
  useOrganizationFile,
  type OrganizationEvent,
  type OrganizationFile,
} from '../../../projector/storage/organization-file.ts'
import { syncWal, syncWals } from '../../../projector/storage/wal.ts'
import { providerRow, record, uuid } from '../../support/debezium.ts'

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
        (file) => openedIds.push(file.fileKey),
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

describe("an organization file's commits", () => {
  const now = new Date('2026-01-01T00:00:00Z')
  let offset = 0
  /** A provider's insert as a file applies it. */
  const providerEvent = (organizationId: string, n: number): OrganizationEvent => {
    const decoded = decodeRecord(
      record({ table: 'providers', op: 'c', after: providerRow(uuid(n), organizationId) }),
      'product',
    )
    if (decoded.kind !== 'change') throw new Error(`not a change: ${decoded.kind}`)
    return {
      change: decoded.change as OrganizationEvent['change'],
      origin: { topic: 'product.public.providers', partition: 0, offset: offset++ },
    }
  }
  const tally = () => undefined

  // The lanes sync the logs a batch wrote together, before its offsets may be committed
  // (projector/storage/wal.ts): a commit whose log nobody was told to sync could be taken back by
  // a power cut after its offset was committed.
  it('in WAL hand their log over once to be synced; held ones once they commit', () => {
    const id = uuid(20)
    const path = join(dir, 'synced-by-writer.db')
    const file = openOrganizationFile(id, path, { offsetGuard: true })
    expect(file.takeUnsyncedWal()).toBeUndefined()
    file.apply([providerEvent(id, 21)], now, tally)
    expect(file.takeUnsyncedWal()).toBe(`${path}-wal`)
    expect(file.takeUnsyncedWal()).toBeUndefined()

    file.begin()
    file.apply([providerEvent(id, 22)], now, tally)
    expect(file.takeUnsyncedWal()).toBeUndefined()
    file.commit()
    expect(file.takeUnsyncedWal()).toBe(`${path}-wal`)

    // Closing syncs what was not handed over: nothing is left to a caller.
    file.apply([providerEvent(id, 23)], now, tally)
    file.close()
    expect(file.takeUnsyncedWal()).toBeUndefined()
  })

  it("under an initial load's rollback journal are synced by SQLite: nothing to hand over", () => {
    const id = uuid(24)
    const file = openOrganizationFile(id, join(dir, 'load.db'), {
      offsetGuard: false,
      deferDocuments: true,
    })
    file.apply([providerEvent(id, 25)], now, tally)
    file.begin()
    file.apply([providerEvent(id, 26)], now, tally)
    // The build's commit switches the file to WAL, after it was synced under the journal.
    file.buildDocuments(now)
    file.commit()
    expect(file.takeUnsyncedWal()).toBeUndefined()
    file.apply([providerEvent(id, 27)], now, tally)
    expect(file.takeUnsyncedWal()).toBe(`${join(dir, 'load.db')}-wal`)
    file.close()
  })
})

describe('syncing write-ahead logs', () => {
  it('syncs the logs that exist and passes over those a checkpoint removed; other errors fail', async () => {
    const id = uuid(30)
    const path = join(dir, 'to-sync.db')
    const file = openOrganizationFile(id, path, { offsetGuard: false })
    file.apply([], new Date(), () => undefined)
    const gone = join(dir, 'checkpointed-away.db-wal')
    expect(() => syncWal(gone)).not.toThrow()
    await expect(syncWals([`${path}-wal`, gone, `${path}-wal`])).resolves.toBeUndefined()
    // A log that cannot be opened for another reason is not known to be durable: the batch fails.
    await expect(syncWals([join(path, 'under-a-file-wal')])).rejects.toThrow(/ENOTDIR/)
    expect(() => syncWal(join(path, 'under-a-file-wal'))).toThrow(/ENOTDIR/)
    file.close()
  })
})
