// What makes a new file one that organizations share (src/organization-scope.ts): it says so in
// replica_meta (`layout`), and every index of its organizations' rows is led by the organization,
// so that what one organization reads is one range of an index, as in a file of its own: a page
// of its documents, its rows by parent (a provider's identifiers), and its rows in id order (the
// whole build's pages of parents, an index of their own here). Led by anything else, each
// organization's build scanned every organization's rows of the file (bench:tenants at 100 files:
// a rebuild 1.46x slower over 3,000 organizations than over seven).
import { organizationScopedTables } from '../../src/organization-scope.ts'
import type { SqliteDatabase } from '../../src/sqlite.ts'

/** Makes a new, empty file a shared one. Later migrations of these indexes must keep the lead. */
export function useSharedLayout(db: SqliteDatabase): void {
  const placeholders = organizationScopedTables.map(() => '?').join(', ')
  const indexes = db
    .prepare<string[], { name: string; sql: string }>(
      `SELECT name, sql FROM sqlite_master
        WHERE type = 'index' AND sql IS NOT NULL AND tbl_name IN (${placeholders})
        ORDER BY name`,
    )
    .all(...organizationScopedTables)
  db.transaction(() => {
    for (const index of indexes) {
      db.exec(`DROP INDEX "${index.name}"`)
      db.exec(organizationLed(index.sql))
    }
    for (const table of organizationScopedTables) {
      if (table.startsWith('doc_')) continue
      db.exec(`CREATE INDEX "${table}_organization" ON "${table}" (organization_key, id)`)
    }
    db.prepare(`INSERT INTO replica_meta (key, value) VALUES ('layout', 'shared')`).run()
  })()
}

/** An index's CREATE statement with the organization key first among its columns. */
export function organizationLed(createIndex: string): string {
  const open = createIndex.indexOf('(')
  if (open < 0) throw new Error(`not an index on columns: ${createIndex}`)
  return `${createIndex.slice(0, open + 1)}\`organization_key\`, ${createIndex.slice(open + 1)}`
}
