// What makes a new file one that organizations share (src/organization-scope.ts): it says so in
// replica_meta (`layout`), and its documents' page indexes are led by the organization, so that a
// page of one organization's documents is one range of the index, as it is in a file of its own.
import type { SqliteDatabase } from '../../src/sqlite.ts'

/** Makes a new, empty file a shared one. */
export function useSharedLayout(db: SqliteDatabase): void {
  const pageIndexes = db
    .prepare<[], { name: string; sql: string }>(
      `SELECT name, sql FROM sqlite_master
        WHERE type = 'index' AND sql IS NOT NULL AND tbl_name LIKE 'doc\\_%' ESCAPE '\\'
        ORDER BY name`,
    )
    .all()
  db.transaction(() => {
    for (const index of pageIndexes) {
      db.exec(`DROP INDEX "${index.name}"`)
      db.exec(organizationLed(index.sql))
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
