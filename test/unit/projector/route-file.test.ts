// The routing index: where a row is, across organizations, batch by batch; its organization codes;
// and the routes carried over from control.db, where they were kept before, across the migration
// that made them compact.
import Database from 'better-sqlite3'
import { drizzle } from 'drizzle-orm/better-sqlite3'
import { migrate } from 'drizzle-orm/better-sqlite3/migrator'
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { openControlFile } from '../../../projector/storage/control-file.ts'
import {
  NOT_FOUND,
  OrganizationCodes,
  openRouteFile,
  readRoutedOrganizations,
  ROUTED_TABLES,
  RouteBatchBuilder,
  RouteKind,
  SKIPPED,
  type RouteFile,
} from '../../../projector/storage/route-file.ts'
import { organizationTables, type OrganizationTable } from '../../../schema/events.ts'
import { generation } from '../../../src/layout.ts'
import { ORG_A, ORG_B, uuid } from '../../support/debezium.ts'

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'route-file-'))
  dirs.push(dir)
  return dir
}

type Ask = [OrganizationTable, string, organizationId?: string, kind?: number]

/** Resolves one batch: per route, the organization found, undefined, or 'skipped'. */
function resolve(
  file: RouteFile,
  codes: OrganizationCodes,
  asks: readonly Ask[],
): Array<string | undefined> {
  const batch = new RouteBatchBuilder(codes)
  for (const [table, id, organizationId, kind] of asks) {
    batch.add(
      table,
      id,
      kind ?? (organizationId === undefined ? RouteKind.Lookup : RouteKind.Route),
      organizationId,
    )
  }
  const routes = batch.build()
  const found = file.resolve(routes)
  codes.recorded(routes)
  return [...found].map((code) =>
    code === SKIPPED ? 'skipped' : code === NOT_FOUND ? undefined : codes.idOf(code),
  )
}

function opened(path = join(tempDir(), 'routes.db')) {
  const file = openRouteFile(path)
  return { file, codes: new OrganizationCodes(file.organizations()), path }
}

describe('the routing index', () => {
  it('finds the organization of each row, per table, and tells a move from a repeat', () => {
    const { file, codes } = opened()
    try {
      expect(
        resolve(file, codes, [
          ['providers', uuid(1), ORG_A],
          ['provider_identifiers', uuid(1), ORG_B],
          ['providers', uuid(1), ORG_A],
        ]),
      ).toEqual([undefined, undefined, undefined])
      expect(
        resolve(file, codes, [
          ['providers', uuid(1)],
          ['provider_identifiers', uuid(1)],
          ['providers', uuid(2)],
          // Upper-case text names the same uuid (Debezium sends lower case; the key is its bytes).
          ['providers', uuid(1).toUpperCase()],
        ]),
      ).toEqual([ORG_A, ORG_B, undefined, ORG_A])
      // A move answers the organization the row left.
      expect(resolve(file, codes, [['providers', uuid(1), ORG_B]])).toEqual([ORG_A])
      expect(resolve(file, codes, [['providers', uuid(1)]])).toEqual([ORG_B])
    } finally {
      file.close()
    }
  })

  it('resolves a batch in key order, yet each row’s routes in the batch’s order', () => {
    const { file, codes } = opened()
    try {
      // uuid(9) sorts after uuid(2): the batch is resolved out of its order, but uuid(9)'s own
      // move, lookup and move back see each other as one by one would.
      expect(
        resolve(file, codes, [
          ['providers', uuid(9), ORG_A],
          ['providers', uuid(9), ORG_B],
          ['providers', uuid(9)],
          ['providers', uuid(2), ORG_B],
          ['providers', uuid(9), ORG_A],
        ]),
      ).toEqual([undefined, ORG_A, ORG_B, undefined, ORG_B])
    } finally {
      file.close()
    }
  })

  it('routes a row of an organization not kept only if it is routed already', () => {
    const { file, codes } = opened()
    try {
      resolve(file, codes, [['providers', uuid(1), ORG_A]])
      expect(
        resolve(file, codes, [
          ['providers', uuid(1), ORG_B, RouteKind.RouteUnlessNew],
          ['providers', uuid(2), ORG_B, RouteKind.RouteUnlessNew],
        ]),
      ).toEqual([ORG_A, 'skipped'])
      expect(
        resolve(file, codes, [
          ['providers', uuid(1)],
          ['providers', uuid(2)],
        ]),
      ).toEqual([ORG_B, undefined])
    } finally {
      file.close()
    }
  })

  it('leaves a batch’s commit to its caller to sync, only when it wrote; a held one it syncs', () => {
    const { file, codes, path } = opened()
    try {
      resolve(file, codes, [['providers', uuid(1), ORG_A]])
      expect(file.takeUnsyncedWal()).toBe(`${path}-wal`)
      expect(file.takeUnsyncedWal()).toBeUndefined()
      // A known row routed again, a lookup, nothing at all: nothing written, nothing to sync.
      resolve(file, codes, [
        ['providers', uuid(1), ORG_A],
        ['providers', uuid(1)],
      ])
      resolve(file, codes, [])
      expect(file.takeUnsyncedWal()).toBeUndefined()
      // A move is written.
      resolve(file, codes, [['providers', uuid(1), ORG_B]])
      expect(file.takeUnsyncedWal()).toBe(`${path}-wal`)

      // Joined to a held transaction (an initial load's), it commits with it, synced there.
      file.begin()
      resolve(file, codes, [['providers', uuid(3), ORG_A]])
      expect(file.takeUnsyncedWal()).toBeUndefined()
      file.commit()
      expect(file.takeUnsyncedWal()).toBeUndefined()
      expect(resolve(file, codes, [['providers', uuid(3)]])).toEqual([ORG_A])
    } finally {
      file.close()
    }
  })

  it('forgets what a rolled-back transaction routed, organizations included', () => {
    const { file, codes, path } = opened()
    try {
      file.begin()
      resolve(file, codes, [['providers', uuid(1), ORG_A]])
      file.rollback()
      codes.reload(file.organizations())
      expect(codes.organizations()).toEqual([])
      expect(resolve(file, codes, [['providers', uuid(1)]])).toEqual([undefined])
      resolve(file, codes, [['providers', uuid(2), ORG_B]])
    } finally {
      file.close()
    }
    const reopened = opened(path)
    try {
      expect(reopened.codes.organizations()).toEqual([ORG_B])
      expect(resolve(reopened.file, reopened.codes, [['providers', uuid(2)]])).toEqual([ORG_B])
    } finally {
      reopened.file.close()
    }
  })

  it('lists a new organization with every batch until one of them reached the file', () => {
    const { file, codes, path } = opened()
    try {
      // A batch that names ORG_A is built, then never resolved (a bad line ended the run).
      const lost = new RouteBatchBuilder(codes)
      lost.add('providers', uuid(1), RouteKind.Route, ORG_A)
      expect(lost.build().newOrganizations).toEqual([[1, ORG_A]])
      // The next batch lists it again, and records it.
      const next = new RouteBatchBuilder(codes)
      next.add('providers', uuid(2), RouteKind.Route, ORG_A)
      const routes = next.build()
      expect(routes.newOrganizations).toEqual([[1, ORG_A]])
      file.resolve(routes)
      codes.recorded(routes)
      const after = new RouteBatchBuilder(codes)
      after.add('providers', uuid(3), RouteKind.Route, ORG_A)
      expect(after.build().newOrganizations).toEqual([])
    } finally {
      file.close()
    }
    const reopened = opened(path)
    try {
      expect(resolve(reopened.file, reopened.codes, [['providers', uuid(2)]])).toEqual([ORG_A])
    } finally {
      reopened.file.close()
    }
  })

  it('has a code for every organization table, each its own', () => {
    expect(Object.keys(ROUTED_TABLES).sort()).toEqual([...organizationTables].sort())
    expect(new Set(Object.values(ROUTED_TABLES)).size).toBe(organizationTables.length)
  })
})

describe('routes kept in control.db before', () => {
  /** A generation whose control.db is as the first migration left it, with routes in text. */
  function firstControlDb() {
    const dir = tempDir()
    const made = generation(dir, 'g1')
    mkdirSync(made.dir, { recursive: true })
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
    const old = new Database(made.controlPath)
    migrate(drizzle(old), { migrationsFolder: first })
    const insert = old.prepare(
      'INSERT INTO row_routes (source_table, id, organization_id) VALUES (?, ?, ?)',
    )
    insert.run('providers', uuid(1), ORG_A)
    insert.run('documents', uuid(2), ORG_B)
    insert.run('enrollment_requirements', uuid(3), ORG_A)
    old.close()
    // Compacted by control.db's own migrations, as an older projector left it.
    openControlFile(made.controlPath).close()
    return made
  }

  it('carries them over, once, and goes on from their organizations', () => {
    const made = firstControlDb()
    const expectRoutes = (file: RouteFile, codes: OrganizationCodes) =>
      expect(
        resolve(file, codes, [
          ['providers', uuid(1)],
          ['documents', uuid(2)],
          ['enrollment_requirements', uuid(3)],
          ['providers', uuid(2)],
        ]),
      ).toEqual([ORG_A, ORG_B, ORG_A, undefined])

    const file = openRouteFile(made.routesPath, made.controlPath)
    const codes = new OrganizationCodes(file.organizations())
    try {
      expectRoutes(file, codes)
      resolve(file, codes, [['providers', uuid(4), ORG_B]])
    } finally {
      file.close()
    }
    const control = new Database(made.controlPath, { readonly: true })
    try {
      expect(control.prepare('SELECT count(*) FROM routes').pluck().get()).toBe(0)
      expect(control.prepare('SELECT count(*) FROM route_organizations').pluck().get()).toBe(0)
    } finally {
      control.close()
    }
    expect(readRoutedOrganizations(made).sort()).toEqual([ORG_A, ORG_B].sort())

    const reopened = openRouteFile(made.routesPath, made.controlPath)
    const reopenedCodes = new OrganizationCodes(reopened.organizations())
    try {
      expectRoutes(reopened, reopenedCodes)
      expect(resolve(reopened, reopenedCodes, [['providers', uuid(4)]])).toEqual([ORG_B])
    } finally {
      reopened.close()
    }
  })

  it('reads the routed organizations of a generation not carried over yet from control.db', () => {
    const made = firstControlDb()
    expect(readRoutedOrganizations(made).sort()).toEqual([ORG_A, ORG_B].sort())
  })
})
