// The mirror: source rows kept as they are in the product (minus what is never stored), one table
// per source table, in whichever SQLite file the row belongs to. Applying a change is an upsert
// or a delete by primary key, guarded by the row's source position so that an older version
// never overwrites a newer one.
import { getTableColumns } from 'drizzle-orm'
import { getTableConfig, type SQLiteTable } from 'drizzle-orm/sqlite-core'
import { unavailable, type SourceTable } from '../../schema/events.ts'
import { OWN_ORGANIZATION } from '../../src/organization-scope.ts'
import { preparedOnUse, type SqliteDatabase } from '../../src/sqlite.ts'
import type { Position, RowChange } from '../decode/decode.ts'

export type MirrorRow = Record<string, unknown>

/** One row's change over a batch: the stored version before it and after it. */
export interface MirrorChange {
  table: SourceTable
  id: string
  previous: MirrorRow | undefined
  current: MirrorRow | undefined
}

/**
 * `absent`: a delete of a row never seen; `tombstone`: a tombstone that found its row already
 * gone, as it does right after its delete (counted apart, so that `absent` keeps meaning a row
 * this replica never saw).
 */
export type ApplyOutcome = 'applied' | 'older' | 'absent' | 'tombstone'

interface StoredPosition {
  lsn: number
  snapshot: boolean
}

/**
 * Whether an incoming version replaces the stored one. Source positions order versions of one
 * row; at an equal (or unknown, 0) position a streamed change wins over a snapshot read, and of
 * two of the same kind the later-delivered one wins (so a duplicate re-applies the same content).
 */
export function supersedes(incoming: StoredPosition, stored: StoredPosition): boolean {
  if (incoming.lsn !== stored.lsn) return incoming.lsn > stored.lsn
  return !incoming.snapshot || stored.snapshot
}

interface Column {
  key: string
  name: string
  kind: 'boolean' | 'other'
  notNull: boolean
}

interface TableStatements {
  columns: Column[]
  select: (id: string) => MirrorRow | undefined
  selectAll: () => MirrorRow[]
  upsert: (values: unknown[]) => void
  /** Inserts a row that is not stored yet; false (and nothing done) if it is. */
  insertNew: (values: unknown[]) => boolean
  delete: (id: string) => void
  deleteAll: () => void
}

export interface Mirror {
  /**
   * Applies one change; pushes the resulting row changes to `changes`, unless it is undefined:
   * nobody reads them (an initial load's files build their documents once, at the end), and the
   * row objects they hold were most of what a load allocated per event. An upsert's row is stored
   * with `organizationKey` (src/organization-scope.ts), in tables that carry one.
   */
  apply(
    change: RowChange,
    changes: MirrorChange[] | undefined,
    organizationKey?: number,
  ): ApplyOutcome
  /** The stored row, in the mirror's (camelCase) shape. */
  get(table: SourceTable, id: string): MirrorRow | undefined
}

/**
 * The file's delete positions (`deleted_rows`): a row deleted at a position stays deleted for any
 * older version that arrives after it (a replay, or a snapshot read racing the stream).
 */
function deleteLedger(db: SqliteDatabase, table: string) {
  const get = preparedOnUse(() =>
    db.prepare<[string, string], { source_lsn: number }>(
      `SELECT source_lsn FROM ${table} WHERE source_table = ? AND id = ?`,
    ),
  )
  const put = preparedOnUse(() =>
    db.prepare<[string, string, number]>(
      `INSERT INTO ${table} (source_table, id, source_lsn) VALUES (?, ?, ?)
     ON CONFLICT (source_table, id) DO UPDATE SET source_lsn = max(source_lsn, excluded.source_lsn)`,
    ),
  )
  const clear = preparedOnUse(() =>
    db.prepare<[string, string]>(`DELETE FROM ${table} WHERE source_table = ? AND id = ?`),
  )
  // Delete positions are rare: while the file has none, a new row need not look one up. Set
  // once any may exist (a rolled-back delete leaves it set, which only costs lookups).
  let mayHaveAny = db.prepare(`SELECT 1 FROM ${table} LIMIT 1`).pluck().get() !== undefined
  return {
    get mayHaveAny() {
      return mayHaveAny
    },
    record(source: SourceTable, id: string, lsn: number): void {
      mayHaveAny = true
      put().run(source, id, lsn)
    },
    /** Whether a version at `position` may come back after the row's recorded delete. */
    allows(source: SourceTable, id: string, position: StoredPosition): boolean {
      if (!mayHaveAny) return true
      const deleted = get().get(source, id)
      if (deleted === undefined) return true
      if (!supersedes(position, { lsn: deleted.source_lsn, snapshot: false })) return false
      clear().run(source, id)
      return true
    },
  }
}

type DeleteLedger = ReturnType<typeof deleteLedger>

/**
 * A mirror over the given tables of one file. `tables` maps source table names to their drizzle
 * definitions; `deletedRows` is the file's table of delete positions.
 */
export function createMirror(
  db: SqliteDatabase,
  tables: Partial<Record<SourceTable, SQLiteTable>>,
  deletedRowsTable = 'deleted_rows',
): Mirror {
  // Each table's statements are prepared on its first change (src/sqlite.ts `preparedOnUse`).
  const statements = new Map<SourceTable, TableStatements>()
  const deleted = deleteLedger(db, deletedRowsTable)

  function table(name: SourceTable): TableStatements {
    let t = statements.get(name)
    if (t === undefined) {
      const definition = tables[name]
      if (definition === undefined) throw new Error(`table ${name} is not mirrored in this file`)
      t = prepareTable(db, definition)
      statements.set(name, t)
    }
    return t
  }

  return {
    get: (name, id) => table(name).select(id),
    apply(change, changes, organizationKey = OWN_ORGANIZATION) {
      const t = table(change.table)
      if (change.kind === 'truncate') return applyTruncate(t, change.table, changes)
      const upsert = change.kind === 'upsert' ? { change, organizationKey } : undefined
      if (upsert !== undefined && !deleted.mayHaveAny && insertNew(t, upsert, changes)) {
        return 'applied'
      }
      const previous = t.select(change.id)
      if (change.kind === 'delete') return applyDelete(t, deleted, change, previous, changes)
      return applyUpsert(t, deleted, upsert!, previous, changes)
    },
  }
}

/** An upsert, and the key of the organization whose row it stores. */
interface Upsert {
  change: Extract<RowChange, { kind: 'upsert' }>
  organizationKey: number
}

/** What a stored row is made of: the decoded row, its source position, its organization. */
interface UpsertSource {
  row: Record<string, unknown>
  position: Position
  organizationKey: number
}

function storedPosition(row: MirrorRow): StoredPosition {
  return { lsn: row.sourceLsn as number, snapshot: row.fromSnapshot as boolean }
}

function applyTruncate(
  t: TableStatements,
  table: SourceTable,
  changes: MirrorChange[] | undefined,
): ApplyOutcome {
  if (changes !== undefined) {
    for (const row of t.selectAll()) {
      changes.push({ table, id: row.id as string, previous: row, current: undefined })
    }
  }
  t.deleteAll()
  return 'applied'
}

/**
 * Most upserts of a replay are new rows: the insert is tried first, and the stored version (to
 * guard, and to keep unchanged TOASTed values) is read only when there is one. False: it exists.
 */
function insertNew(
  t: TableStatements,
  { change, organizationKey }: Upsert,
  changes: MirrorChange[] | undefined,
): boolean {
  const values: unknown[] = []
  const wanted = changes !== undefined
  const source = { row: change.row, position: change.position, organizationKey }
  const current = mirrorRow(t.columns, source, undefined, values, wanted)
  if (!t.insertNew(values)) return false
  changes?.push({ table: change.table, id: change.id, previous: undefined, current })
  return true
}

function applyDelete(
  t: TableStatements,
  deleted: DeleteLedger,
  change: Extract<RowChange, { kind: 'delete' }>,
  previous: MirrorRow | undefined,
  changes: MirrorChange[] | undefined,
): ApplyOutcome {
  if (change.tombstone === true) {
    // No position to guard with: in its partition a tombstone comes after every version of its
    // key, so whatever is stored goes. Its row's position is remembered as the delete's, so a
    // replayed older version cannot come back (a tombstone that finds nothing leaves no trace:
    // nothing of its key can follow it but newer versions).
    if (previous === undefined) return 'tombstone'
    deleted.record(change.table, change.id, storedPosition(previous).lsn)
  } else {
    deleted.record(change.table, change.id, change.position.lsn)
    if (previous === undefined) return 'absent'
    const incoming = { lsn: change.position.lsn, snapshot: false }
    if (!supersedes(incoming, storedPosition(previous))) return 'older'
  }
  t.delete(change.id)
  changes?.push({ table: change.table, id: change.id, previous, current: undefined })
  return 'applied'
}

function applyUpsert(
  t: TableStatements,
  deleted: DeleteLedger,
  { change, organizationKey }: Upsert,
  previous: MirrorRow | undefined,
  changes: MirrorChange[] | undefined,
): ApplyOutcome {
  if (previous !== undefined) {
    if (!supersedes(change.position, storedPosition(previous))) return 'older'
  } else if (!deleted.allows(change.table, change.id, change.position)) {
    return 'older'
  }
  const values: unknown[] = []
  const wanted = changes !== undefined
  const source = { row: change.row, position: change.position, organizationKey }
  const current = mirrorRow(t.columns, source, previous, values, wanted)
  t.upsert(values)
  changes?.push({ table: change.table, id: change.id, previous, current })
  return 'applied'
}

/**
 * The stored form of a decoded row: unchanged TOASTed columns keep their stored value. Pushes the
 * values to bind, in column order, to `values`; the row itself is built only if `wanted`.
 */
function mirrorRow(
  columns: Column[],
  { row, position, organizationKey }: UpsertSource,
  previous: MirrorRow | undefined,
  values: unknown[],
  wanted: boolean,
): MirrorRow | undefined {
  const out: MirrorRow | undefined = wanted ? {} : undefined
  for (const c of columns) {
    let value: unknown
    if (c.key === 'sourceLsn') value = position.lsn
    else if (c.key === 'fromSnapshot') value = position.snapshot
    else if (c.key === 'organizationKey') value = organizationKey
    else {
      value = row[c.name]
      if (value === unavailable) value = previous?.[c.key] ?? emptyValue(c)
    }
    if (out !== undefined) out[c.key] = value
    values.push(bind(value, c))
  }
  return out
}

// A TOASTed column of a row the mirror has never seen: the value is unknowable; an empty one
// keeps NOT NULL columns valid until the next change of that column brings the real value.
function emptyValue(c: Column): unknown {
  if (!c.notNull) return null
  if (JSON_OBJECT_COLUMNS.has(c.name)) return '{}'
  if (JSON_ARRAY_COLUMNS.has(c.name)) return '[]'
  return c.kind === 'boolean' ? false : ''
}

const JSON_OBJECT_COLUMNS = new Set(['metadata'])
const JSON_ARRAY_COLUMNS = new Set([
  'other_emails',
  'languages',
  'medicaid_states',
  'medicare_states',
  'scopes',
])

function bind(value: unknown, c: Column): unknown {
  if (c.kind === 'boolean') return value === true ? 1 : 0
  return value
}

/** A table's columns and statements' text: the same for every file, so made once per process. */
interface TableShape {
  columns: Column[]
  select: string
  selectAll: string
  upsert: string
  insertNew: string
  delete: string
  deleteAll: string
}

const shapes = new WeakMap<SQLiteTable, TableShape>()

function shapeOf(table: SQLiteTable): TableShape {
  let shape = shapes.get(table)
  if (shape !== undefined) return shape
  const config = getTableConfig(table)
  const columns: Column[] = Object.entries(getTableColumns(table)).map(([key, col]) => ({
    key,
    name: col.name,
    kind: col.columnType === 'SQLiteBoolean' ? 'boolean' : 'other',
    notNull: col.notNull,
  }))
  const names = columns.map((c) => c.name)
  // The tables themselves (`main.`), not the views a shared file's connection reads through
  // (src/organization-scope.ts): the mirror applies every organization's rows of its file.
  const qualified = `main.${config.name}`
  const selectSql = `SELECT ${names.join(', ')} FROM ${qualified}`
  const insert = `INSERT INTO ${qualified} (${names.join(', ')}) VALUES (${names.map(() => '?').join(', ')})`
  shape = {
    columns,
    select: `${selectSql} WHERE id = ?`,
    selectAll: selectSql,
    upsert: `${insert}
     ON CONFLICT (id) DO UPDATE SET ${names
       .filter((n) => n !== 'id')
       .map((n) => `${n} = excluded.${n}`)
       .join(', ')}`,
    insertNew: `${insert}
     ON CONFLICT (id) DO NOTHING`,
    delete: `DELETE FROM ${qualified} WHERE id = ?`,
    deleteAll: `DELETE FROM ${qualified}`,
  }
  shapes.set(table, shape)
  return shape
}

function prepareTable(db: SqliteDatabase, table: SQLiteTable): TableStatements {
  const shape = shapeOf(table)
  const { columns } = shape
  const select = preparedOnUse(() => db.prepare<[string], unknown[]>(shape.select).raw(true))
  const selectAll = preparedOnUse(() => db.prepare<[], unknown[]>(shape.selectAll).raw(true))
  const upsert = preparedOnUse(() => db.prepare(shape.upsert))
  const insertNew = preparedOnUse(() => db.prepare(shape.insertNew))
  const del = preparedOnUse(() => db.prepare<[string]>(shape.delete))
  const delAll = preparedOnUse(() => db.prepare(shape.deleteAll))

  const toRow = (raw: unknown[]): MirrorRow => {
    const row: MirrorRow = {}
    for (let i = 0; i < columns.length; i++) {
      const c = columns[i]!
      const v = raw[i]
      row[c.key] = c.kind === 'boolean' ? v === 1 : v
    }
    return row
  }
  return {
    columns,
    select: (id) => {
      const raw = select().get(id)
      return raw === undefined ? undefined : toRow(raw)
    },
    selectAll: () => selectAll().all().map(toRow),
    upsert: (values) => void upsert().run(values),
    insertNew: (values) => insertNew().run(values).changes > 0,
    delete: (id) => void del().run(id),
    deleteAll: () => void delAll().run(),
  }
}
