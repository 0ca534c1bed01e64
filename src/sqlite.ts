// Opening the replica's SQLite files the same way everywhere.
import Database from 'better-sqlite3'
import { drizzle, type BetterSQLite3Database } from 'drizzle-orm/better-sqlite3'
import { migrate } from 'drizzle-orm/better-sqlite3/migrator'
import { readMigrationFiles } from 'drizzle-orm/migrator'
import { fileURLToPath } from 'node:url'
import * as controlSchema from '../schema/control-db.ts'
import * as organizationSchema from '../schema/organization-db.ts'

export type SqliteDatabase = Database.Database
export type OrganizationDb = BetterSQLite3Database<typeof organizationSchema>
export type ControlDb = BetterSQLite3Database<typeof controlSchema>

const migrations = {
  organization: fileURLToPath(new URL('../schema/migrations/organization', import.meta.url)),
  control: fileURLToPath(new URL('../schema/migrations/control', import.meta.url)),
  routes: fileURLToPath(new URL('../schema/migrations/routes', import.meta.url)),
}

/**
 * How a writer's file keeps what a transaction changed until it commits:
 * - `wal`: a write-ahead log, so readers never block the writer.
 * - `rollback`: each page is written to the file itself, once, and its old content to a journal
 *   first (TRUNCATE: the journal is emptied at commit, not deleted). Readers and the writer's
 *   commits block each other, so only for a file nothing reads
 *   (projector/storage/organization-file.ts).
 *
 * Both with synchronous=FULL by default: a commit is on disk when it returns. The Kafka offsets of
 * a batch are committed after its files, so a power cut must not take back a commit SQLite
 * reported; with WAL's usual NORMAL it could (the last transactions before the cut), and the
 * projector, resuming from the committed offsets, would never apply those events again.
 *
 * Who makes a commit durable (`Commits`):
 * - `synced`: SQLite, before the commit returns (synchronous=FULL). control.db's, but for a live
 *   batch's routes, which its writer syncs with the files' logs (projector/storage/control-file.ts).
 * - `byWriter`: a writer that syncs its commits itself before it reports them (organization
 *   files: the lanes sync the logs a batch wrote together, at its end, projector/storage/wal.ts).
 *   With WAL that is synchronous=NORMAL: a commit appends to the log without an fsync,
 *   checkpoints still sync, and the log's checksummed frames keep the file whole through a power
 *   cut; a rollback journal stays FULL (unsynced, a cut could tear the file).
 * - `atPublish`: a file of a generation that nothing serves and nothing resumes from until it is
 *   published (a rebuild's): a cut before that abandons the whole generation, torn files and all,
 *   so a rollback journal's commits are not synced (synchronous=OFF), the journal itself is kept
 *   in memory (`journalMode`), and the generation is synced whole before it is published
 *   (projector/storage/durable.ts). WAL stays NORMAL.
 */
export type Journal = 'wal' | 'rollback'
export type Commits = 'synced' | 'byWriter' | 'atPublish'

/**
 * The single writer's connection, journaling as asked (WAL unless the caller knows better).
 * `pageBytes`: the page size of a database made here (SQLite's default, 4096, if absent); an
 * existing one keeps its own.
 */
export function openForWriting(
  path: string,
  kind: keyof typeof migrations,
  journal: Journal = 'wal',
  commits: Commits = 'synced',
  pageBytes?: number,
): SqliteDatabase {
  const db = new Database(path)
  // Taken only by a database with nothing in it yet, before its journal mode is WAL.
  if (pageBytes !== undefined) db.pragma(`page_size = ${pageBytes}`)
  db.pragma('busy_timeout = 5000')
  useJournal(db, journal, commits)
  if (!isMigrated(db, kind)) migrate(drizzle(db), { migrationsFolder: migrations[kind] })
  return db
}

/** The `when` of each kind's newest migration, read once per process. */
const newestMigration = new Map<keyof typeof migrations, number>()

/**
 * Whether a file has every migration already: one look-up where drizzle's migrator reads and
 * hashes the migrations folder and opens a transaction on every call (3.8 ms a file; a projector
 * with thousands of organization files opens them by the thousand).
 */
function isMigrated(db: SqliteDatabase, kind: keyof typeof migrations): boolean {
  let newest = newestMigration.get(kind)
  if (newest === undefined) {
    newest = Math.max(
      ...readMigrationFiles({ migrationsFolder: migrations[kind] }).map((m) => m.folderMillis),
    )
    newestMigration.set(kind, newest)
  }
  const table = db
    .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '__drizzle_migrations'")
    .pluck()
    .get()
  if (table === undefined) return false
  const applied = db.prepare('SELECT max(created_at) FROM __drizzle_migrations').pluck().get()
  return applied !== null && Number(applied) >= newest
}

/**
 * A statement prepared on its first use. An organization file's connection then holds only the
 * statements its batches ran: prepared up front, the mirror's and the documents' cost each
 * connection 1.2 MB and 30 ms (200 files opened on this machine), and a projector or a rebuild
 * with thousands of small organizations opens thousands.
 */
export function preparedOnUse<S>(prepare: () => S): () => S {
  let statement: S | undefined
  return () => (statement ??= prepare())
}

/**
 * Switches a writer's journal. Outside a transaction only; leaving WAL needs the file to itself
 * (SQLite refuses, after busy_timeout, while another connection has it open).
 */
export function useJournal(
  db: SqliteDatabase,
  journal: Journal,
  commits: Commits = 'synced',
): void {
  db.pragma(`journal_mode = ${journalMode(journal, commits)}`)
  db.pragma(`synchronous = ${synchronous(journal, commits)}`)
}

/**
 * A rollback journal is a file (TRUNCATE: created at a file's first write, emptied at each
 * commit), except for an `atPublish` file's: in memory. A crash abandons that file's whole
 * generation, so the journal only has to undo a transaction that fails in this process (a lane's
 * error, a full disk), which it does from memory. A rebuild over 3,000 organizations makes a
 * file, and so a journal, for each: alternated runs, 430,000 events, 19.8-23.7 s to the swap
 * (median 21.8) against 22.2-24.5 (23.3); at full size, where each file weighs a quarter as much,
 * within the noise, and the peak within 25 MB (docs/many-organizations.md).
 */
function journalMode(journal: Journal, commits: Commits): 'WAL' | 'TRUNCATE' | 'MEMORY' {
  if (journal === 'wal') return 'WAL'
  return commits === 'atPublish' ? 'MEMORY' : 'TRUNCATE'
}

function synchronous(journal: Journal, commits: Commits): 'FULL' | 'NORMAL' | 'OFF' {
  if (commits === 'synced') return 'FULL'
  if (journal === 'wal') return 'NORMAL'
  return commits === 'atPublish' ? 'OFF' : 'FULL'
}

/** Sizes a connection's SQLite page cache, in KiB (the projector's budget: cache-budget.ts). */
export function setCacheKiB(db: SqliteDatabase, kib: number): void {
  db.pragma(`cache_size = ${-Math.floor(kib)}`)
}

/**
 * A transaction held open across calls (an initial load's, see projector/lanes/apply.ts). `forget`
 * drops what the caller remembers of writes a rollback undid.
 */
export function heldTransaction(db: SqliteDatabase, forget: () => void) {
  let holding = false
  return {
    begin(): void {
      if (db.inTransaction) return
      db.exec('BEGIN')
      holding = true
    },
    commit(): void {
      holding = false
      if (db.inTransaction) db.exec('COMMIT')
    },
    rollback(): void {
      holding = false
      if (!db.inTransaction) return
      db.exec('ROLLBACK')
      forget()
    },
    /**
     * `body` as a transaction of its own, or, while `begin`'s is held, as part of that one with
     * no savepoint: a failure there rolls all of it back (the load's callers do). A savepoint
     * copies every page it first touches to a sub-journal, a temporary file: with uuid keys that
     * is almost every page a batch writes (the million-event load: 2.6M of its 4.1M page writes).
     */
    joinable: <A extends unknown[], R>(body: (...args: A) => R): ((...args: A) => R) => {
      const own = db.transaction(body)
      return (...args: A): R => (holding ? body(...args) : own(...args))
    },
  }
}

/**
 * `body` as part of the transaction open on `db`, or as a transaction of its own when none is.
 * Never a savepoint, as better-sqlite3's nested `transaction()` would open: a savepoint copies
 * every page it first touches to a sub-journal (`joinable`). A failure inside an open transaction
 * is rolled back with all of it by whoever opened it.
 */
export function inOpenTransaction<A extends unknown[], R>(
  db: SqliteDatabase,
  body: (...args: A) => R,
): (...args: A) => R {
  const own = db.transaction(body)
  return (...args: A): R => (db.inTransaction ? body(...args) : own(...args))
}

/**
 * How much of a file a reader maps into memory (SQLite reads the rest, and the WAL, by read()).
 * A list page read from SQLite walks some 250 pages (each provider's row overflows its leaf), and
 * a page the pager must read() costs a system call and a copy; mapped, the pager takes it from
 * the OS's page cache in place. It matters most under live writes: every commit of the projector
 * empties a reader's own page cache, a mapping stays. Only the file's size is ever mapped, so
 * this is a bound, not an allocation; the api never writes, and the projector's files never
 * shrink (no VACUUM, no auto_vacuum), so a mapped page never vanishes under a reader.
 */
export const READER_MMAP_BYTES = 1 << 30

/** A reader's connection (the api): read-only, never creates the file, mapped (above). */
export function openForReading(path: string): SqliteDatabase {
  const db = new Database(path, { readonly: true, fileMustExist: true })
  db.pragma('busy_timeout = 5000')
  db.pragma(`mmap_size = ${READER_MMAP_BYTES}`)
  return db
}

export function organizationDb(db: SqliteDatabase): OrganizationDb {
  return drizzle(db, { schema: organizationSchema })
}

export function controlDb(db: SqliteDatabase): ControlDb {
  return drizzle(db, { schema: controlSchema })
}
