// The mirror's indexes on parent ids (a provider's identifiers, a group's locations...) serve
// only the document build: the mirror itself reads and writes rows by id. While a file's
// documents wait for the end of an initial load, each row's insert into them was a random B-tree
// insert per index (uuid keys); created once before the build, each is one sort.
import type { SqliteDatabase } from '../../src/sqlite.ts'

/** replica_meta's record of the indexes set aside: their CREATE statements, as JSON. */
const META_KEY = 'deferred_indexes'

/**
 * Drops the secondary indexes of `tables` and records how to create them again, in one
 * transaction: a file is never without both. Nothing to do if they are already set aside.
 * Migrations that change these indexes must run on files whose indexes are in place.
 */
export function setIndexesAside(db: SqliteDatabase, tables: readonly string[]): void {
  if (recorded(db) !== undefined) return
  const placeholders = tables.map(() => '?').join(', ')
  const indexes = db
    .prepare<string[], { name: string; sql: string }>(
      `SELECT name, sql FROM main.sqlite_master
        WHERE type = 'index' AND sql IS NOT NULL AND tbl_name IN (${placeholders})
        ORDER BY name`,
    )
    .all(...tables)
  if (indexes.length === 0) return
  db.transaction(() => {
    for (const index of indexes) db.exec(`DROP INDEX main."${index.name}"`)
    db.prepare('INSERT INTO replica_meta (key, value) VALUES (?, ?)').run(
      META_KEY,
      JSON.stringify(indexes.map((i) => i.sql)),
    )
  })()
}

/**
 * Creates the indexes `setIndexesAside` dropped, if any, and forgets them, in one transaction (a
 * savepoint inside the caller's).
 */
export function restoreIndexes(db: SqliteDatabase): void {
  const statements = recorded(db)
  if (statements === undefined) return
  db.transaction(() => {
    // The index is the file's (`main.`): a shared file's connection has views named as the tables.
    for (const sql of statements) db.exec(sql.replace(/^CREATE INDEX /, 'CREATE INDEX main.'))
    db.prepare('DELETE FROM replica_meta WHERE key = ?').run(META_KEY)
  })()
}

function recorded(db: SqliteDatabase): string[] | undefined {
  const value = db
    .prepare<[string], string>('SELECT value FROM replica_meta WHERE key = ?')
    .pluck()
    .get(META_KEY)
  return value === undefined ? undefined : (JSON.parse(value) as string[])
}
