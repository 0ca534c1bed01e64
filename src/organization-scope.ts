// Which organization a connection to an organization file sees.
//
// A file of its own holds one organization: the file is the scope, and a connection reads its
// tables as they are. A file shared by small organizations (docs/many-organizations.md) holds
// several, each row carrying its organization's key (schema/organization-db.ts
// `organization_key`), and every connection to it holds a one-row temporary table naming the
// organization in scope and, for each table, a temporary view of that organization's rows named
// as the table. SQLite resolves an unqualified name to the temporary view first, so every read the
// documents and the api make (their statements unchanged) sees one organization, and a reference
// to another organization's row (a membership naming its group) finds nothing, as it does across
// files. Views refuse writes: the projector's writes name the `main.` tables and carry the key.
// A shared connection sees nothing until it is scoped.
import { getTableColumns } from 'drizzle-orm'
import { getTableConfig, SQLiteTable } from 'drizzle-orm/sqlite-core'
import * as schema from '../schema/organization-db.ts'
import type { SqliteDatabase } from './sqlite.ts'

/** `own`: a file of one organization; `shared`: a file of several (replica_meta `layout`). */
export type FileLayout = 'own' | 'shared'

/** The key of no organization: a shared connection's scope until it is entered. */
export const NO_ORGANIZATION = 0

/** The key of the one organization of a file of its own. */
export const OWN_ORGANIZATION = 1

/** The tables whose rows carry their organization's key: the mirror and the documents. */
export const organizationScopedTables: readonly string[] = (Object.values(schema) as unknown[])
  .filter((value): value is SQLiteTable => value instanceof SQLiteTable)
  .filter((table) =>
    Object.values(getTableColumns(table)).some((c) => c.name === 'organization_key'),
  )
  .map((table) => getTableConfig(table).name)

export interface OrganizationScope {
  readonly layout: FileLayout
  /** The key of the organization in scope (file_organizations). */
  readonly key: number
  /**
   * Scopes the connection's reads to the organization numbered `key`. Written on every call: a
   * rolled-back transaction also undoes the scope it set, so a remembered key could be stale.
   */
  enter(key: number): void
}

export function fileLayout(db: SqliteDatabase): FileLayout {
  const layout = db
    .prepare<[], string>(`SELECT value FROM main.replica_meta WHERE key = 'layout'`)
    .pluck()
    .get()
  return layout === 'shared' ? 'shared' : 'own'
}

/**
 * The scope of a connection just opened, before it prepares any read (a statement prepared
 * earlier would name the tables themselves until SQLite prepares it again).
 */
export function scopeConnection(
  db: SqliteDatabase,
  layout: FileLayout = fileLayout(db),
): OrganizationScope {
  if (layout === 'own') {
    let key = OWN_ORGANIZATION
    return {
      layout,
      get key() {
        return key
      },
      enter(next) {
        key = next
      },
    }
  }
  // In memory: SQLite would back the temporary database with a file of its own per connection.
  db.pragma('temp_store = MEMORY')
  db.exec(`CREATE TEMP TABLE organization_scope (key INTEGER NOT NULL)`)
  db.prepare(`INSERT INTO temp.organization_scope (key) VALUES (?)`).run(NO_ORGANIZATION)
  for (const table of organizationScopedTables) {
    db.exec(
      `CREATE TEMP VIEW "${table}" AS SELECT * FROM main."${table}"
        WHERE organization_key = (SELECT key FROM temp.organization_scope)`,
    )
  }
  const set = db.prepare<[number]>(`UPDATE temp.organization_scope SET key = ?`)
  let key = NO_ORGANIZATION
  return {
    layout,
    get key() {
      return key
    },
    enter(next) {
      set.run(next)
      key = next
    },
  }
}

/** The key `organizationId`'s rows carry in the file; undefined if it has none there. */
export function organizationKeyIn(db: SqliteDatabase, organizationId: string): number | undefined {
  return db
    .prepare<[string], number>('SELECT key FROM main.file_organizations WHERE organization_id = ?')
    .pluck()
    .get(organizationId)
}
