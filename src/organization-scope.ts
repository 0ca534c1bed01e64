// Which organization a connection to an organization file sees.
//
// A file of its own holds one organization: the file is the scope, and a connection reads its
// tables as they are. A file shared by small organizations (docs/many-organizations.md) holds
// several, each row carrying its organization's key (schema/organization-db.ts
// `organization_key`), and every connection to it has a function naming the organization in
// scope (`organization_in_scope()`, defined on that connection alone) and, for each table, a
// temporary view of that organization's rows named as the table. SQLite resolves an unqualified
// name to the temporary view first, so every read the documents and the api make (their
// statements unchanged) sees one organization, and a reference to another organization's row (a
// membership naming its group) finds nothing, as it does across files. Views refuse writes: the
// projector's writes name the `main.` tables and carry the key.
// A shared connection sees nothing until it is scoped.
import { getTableColumns } from 'drizzle-orm'
import { getTableConfig, SQLiteTable } from 'drizzle-orm/sqlite-core'
import * as schema from '../schema/organization-db.ts'
import type { SqliteDatabase } from './sqlite.ts'

/** `own`: a file of one organization; `shared`: a file of several (replica_meta `layout`). */
export type FileLayout = 'own' | 'shared'

/** The function a shared file's views read the organization in scope from. */
const SCOPE_FUNCTION = 'organization_in_scope'

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
   * Scopes the connection's reads to the organization numbered `key`, from the next statement
   * on. Nothing is written: no rollback undoes it.
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
  let key = layout === 'own' ? OWN_ORGANIZATION : NO_ORGANIZATION
  if (layout === 'shared') {
    // A function, not a one-row table: setting the scope wrote a row, about 7 µs an api request
    // when the organizations of a file share its connection (api/store.ts), and a rollback undid
    // it. SQLite evaluates it once per statement where it seeks an index with it.
    db.function(SCOPE_FUNCTION, { deterministic: false }, () => key)
    for (const table of organizationScopedTables) {
      db.exec(
        `CREATE TEMP VIEW "${table}" AS SELECT * FROM main."${table}"
          WHERE organization_key = ${SCOPE_FUNCTION}()`,
      )
    }
  }
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

/** The key `organizationId`'s rows carry in the file; undefined if it has none there. */
export function organizationKeyIn(db: SqliteDatabase, organizationId: string): number | undefined {
  return db
    .prepare<[string], number>('SELECT key FROM main.file_organizations WHERE organization_id = ?')
    .pluck()
    .get(organizationId)
}
