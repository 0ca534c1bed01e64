// control.db's routing index: where a row is, across organizations, and across the migration that
// made it compact.
import Database from 'better-sqlite3'
import { drizzle } from 'drizzle-orm/better-sqlite3'
import { migrate } from 'drizzle-orm/better-sqlite3/migrator'
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { openControlFile, ROUTED_TABLES } from '../../../projector/storage/control-file.ts'
import { organizationTables } from '../../../schema/events.ts'
import { ORG_A, ORG_B, uuid } from '../../support/debezium.ts'

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'control-file-'))
  dirs.push(dir)
  return dir
}

describe('the routing index', () => {
  it('finds the organization of each row, per table, and tells a move from a repeat', () => {
    const control = openControlFile(join(tempDir(), 'control.db'))
    try {
      control.transaction(() => {
        expect(control.route('providers', uuid(1), ORG_A)).toBeUndefined()
        expect(control.route('provider_identifiers', uuid(1), ORG_B)).toBeUndefined()
        expect(control.route('providers', uuid(1), ORG_A)).toBeUndefined()
      })
      expect(control.routeOf('providers', uuid(1))).toBe(ORG_A)
      expect(control.routeOf('provider_identifiers', uuid(1))).toBe(ORG_B)
      expect(control.routeOf('providers', uuid(2))).toBeUndefined()
      // Upper-case text names the same uuid (Debezium sends lower case; the key is its bytes).
      expect(control.routeOf('providers', uuid(1).toUpperCase())).toBe(ORG_A)

      expect(control.transaction(() => control.route('providers', uuid(1), ORG_B))).toBe(ORG_A)
      expect(control.routeOf('providers', uuid(1))).toBe(ORG_B)
    } finally {
      control.close()
    }
  })

  it('commits a batch’s routes unsynced for its caller to sync, and every other commit synced', () => {
    const path = join(tempDir(), 'control.db')
    const control = openControlFile(path)
    const synchronous = () => control.db.pragma('synchronous', { simple: true })
    try {
      control.transaction(() => {
        // FULL (2): SQLite syncs the log before the commit returns.
        expect(synchronous()).toBe(2)
        control.route('providers', uuid(1), ORG_A)
      })
      expect(control.takeUnsyncedWal()).toBeUndefined()

      control.transaction(() => {
        // NORMAL (1): the commit appends to the log, for the caller to sync with the files' logs.
        expect(synchronous()).toBe(1)
        control.route('providers', uuid(2), ORG_A)
      }, 'byCaller')
      expect(synchronous()).toBe(2)
      expect(control.takeUnsyncedWal()).toBe(`${path}-wal`)
      expect(control.takeUnsyncedWal()).toBeUndefined()

      // Joined to a held transaction (an initial load's), it commits with it, synced.
      control.begin()
      control.transaction(() => control.route('providers', uuid(3), ORG_A), 'byCaller')
      control.commit()
      expect(control.takeUnsyncedWal()).toBeUndefined()
      expect(control.routeOf('providers', uuid(3))).toBe(ORG_A)
    } finally {
      control.close()
    }
  })

  it('forgets what a rolled-back transaction routed, organizations included', () => {
    const path = join(tempDir(), 'control.db')
    const control = openControlFile(path)
    try {
      expect(() =>
        control.transaction(() => {
          control.route('providers', uuid(1), ORG_A)
          throw new Error('boom')
        }),
      ).toThrow('boom')
      expect(control.routeOf('providers', uuid(1))).toBeUndefined()
      control.transaction(() => control.route('providers', uuid(2), ORG_B))
      expect(control.routeOf('providers', uuid(2))).toBe(ORG_B)
    } finally {
      control.close()
    }
    const reopened = openControlFile(path)
    try {
      expect(reopened.routeOf('providers', uuid(2))).toBe(ORG_B)
    } finally {
      reopened.close()
    }
  })

  it('has a code for every organization table, each its own', () => {
    expect(Object.keys(ROUTED_TABLES).sort()).toEqual([...organizationTables].sort())
    expect(new Set(Object.values(ROUTED_TABLES)).size).toBe(organizationTables.length)
  })

  it('keeps the routes a control.db recorded before the index was compacted', () => {
    const dir = tempDir()
    const path = join(dir, 'control.db')
    // control.db as the first migration left it, with routes in its text table.
    const migrations = fileURLToPath(new URL('../../../schema/migrations/control', import.meta.url))
    const first = join(dir, 'migrations')
    mkdirSync(join(first, 'meta'), { recursive: true })
    const journal = JSON.parse(readFileSync(join(migrations, 'meta/_journal.json'), 'utf8')) as {
      entries: { tag: string }[]
    }
    journal.entries = journal.entries.slice(0, 1)
    writeFileSync(join(first, 'meta/_journal.json'), JSON.stringify(journal))
    copyFileSync(
      join(migrations, `${journal.entries[0]!.tag}.sql`),
      join(first, `${journal.entries[0]!.tag}.sql`),
    )
    const old = new Database(path)
    migrate(drizzle(old), { migrationsFolder: first })
    const insert = old.prepare(
      'INSERT INTO row_routes (source_table, id, organization_id) VALUES (?, ?, ?)',
    )
    insert.run('providers', uuid(1), ORG_A)
    insert.run('documents', uuid(2), ORG_B)
    insert.run('enrollment_requirements', uuid(3), ORG_A)
    old.close()

    const control = openControlFile(path)
    try {
      expect(control.routeOf('providers', uuid(1))).toBe(ORG_A)
      expect(control.routeOf('documents', uuid(2))).toBe(ORG_B)
      expect(control.routeOf('enrollment_requirements', uuid(3))).toBe(ORG_A)
      expect(control.routeOf('providers', uuid(2))).toBeUndefined()
      // New routes go on from the organizations carried over.
      control.transaction(() => control.route('providers', uuid(4), ORG_B))
      expect(control.routeOf('providers', uuid(4))).toBe(ORG_B)
    } finally {
      control.close()
    }
  })
})
