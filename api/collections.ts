// The SQL of each list and detail: which table, which stamp and body columns per view, which
// column each filter tests. Pages resume from an exact position with one row-value comparison,
// `(stamp, id) > (?, ?)`, which SQLite answers from the (filter, stamp, id) indexes of
// schema/organization-db.ts.
import type { Scope } from '../schema/resources.ts'
import { comparePositions } from './page.ts'
import type { Filters, ListName } from './params.ts'
import type { Position } from './cursor.ts'
import type { DocumentBodies, OrderedRowOf } from './document-bodies.ts'

/** Providers are served in two variants; every other resource has only the base one. */
export type View = 'base' | 'sensitive'

export interface Collection {
  readonly list: ListName
  readonly path: string
  readonly scope: Scope
  readonly table: string
  readonly columns: Record<View, { stamp: string; body: string; hash: string }>
  /** The column each filter of this list tests. */
  readonly filterColumns: Partial<Record<keyof Filters, string>>
  /** Whether /<path>/{id} exists. */
  readonly hasDetail: boolean
}

const base = { stamp: 'updated_at', body: 'body', hash: 'hash' }
const sameForBothViews = { base, sensitive: base }

export const collections = {
  providers: {
    list: 'providers',
    path: '/providers',
    scope: 'providers:read',
    table: 'doc_providers',
    columns: {
      base,
      sensitive: { stamp: 'sensitive_updated_at', body: 'sensitive_body', hash: 'sensitive_hash' },
    },
    filterColumns: { active: 'is_active' },
    hasDetail: true,
  },
  'provider-groups': {
    list: 'provider-groups',
    path: '/provider-groups',
    scope: 'groups:read',
    table: 'doc_provider_groups',
    columns: sameForBothViews,
    filterColumns: {},
    hasDetail: true,
  },
  enrollments: {
    list: 'enrollments',
    path: '/enrollments',
    scope: 'enrollments:read',
    table: 'doc_enrollments',
    columns: sameForBothViews,
    filterColumns: { status: 'status', payerKey: 'payer_key', providerId: 'provider_id' },
    hasDetail: true,
  },
  'group-enrollments': {
    list: 'group-enrollments',
    path: '/group-enrollments',
    scope: 'enrollments:read',
    table: 'doc_group_enrollments',
    columns: sameForBothViews,
    filterColumns: { status: 'status', payerKey: 'payer_key', groupId: 'provider_group_id' },
    hasDetail: true,
  },
  documents: {
    list: 'documents',
    path: '/documents',
    scope: 'documents:read',
    table: 'doc_documents',
    columns: sameForBothViews,
    filterColumns: { providerId: 'provider_id', groupId: 'provider_group_id' },
    hasDetail: false,
  },
} as const satisfies Record<Exclude<ListName, 'expirables'>, Collection>

export const expirables = {
  list: 'expirables',
  path: '/expirables',
  scope: 'providers:read',
} as const

export interface Sql {
  readonly sql: string
  readonly args: readonly (string | number)[]
}

/**
 * A page of a list is read on the (filters, stamp, id) index, in two or three statements run in one
 * read transaction (`readPage`), none of which turns a row into a JavaScript value:
 * - `edge` skips `limit - 1` index entries after the start and gives the positions `[stamp, id]`
 *   of the page's last row and of the row after it (present: another page follows);
 * - on a short last page it gives nothing, and `tail` gives the position of the list's last row;
 * - `bodies(last)` joins, inside SQLite, the stored JSON text of the rows from the start up to and
 *   including `last`, in page order, handed over as bytes (a BLOB); and, beside it, each row's
 *   id, stamp and stored hash (`versions`): what the page's ETag is made of (api/etag.ts).
 *
 * The start is the later of `updated_since` (inclusive: `(stamp, id) > (since, '')` is
 * `stamp >= since`, ids are never empty) and the cursor. The statements must see one state of the
 * file: a row the projector commits between them at or before the page's last position (a tie on
 * its stamp, say) would be joined into a page that already holds `limit` rows.
 */
export interface PageSql {
  readonly limit: number
  /** The position the page starts after: the later of `updated_since` and the cursor. */
  readonly from: Position
  /** Whether a filter other than `updated_since` narrows the list (its order in memory cannot). */
  readonly filtered: boolean
  readonly edge: Sql
  readonly tail: Sql
  /**
   * The ids and stamps (`id stamp`, joined by commas) of the page's rows and of the rows after
   * them, at least one if there is one (`rowsToRead`), in page order, in one statement read from
   * the page's index alone: enough for a page whose bodies are all known
   * (api/document-bodies.ts). NULL when the page is empty.
   */
  readonly stamps: Sql
  bodies(last: Position): Sql
}

export function pageSql(
  collection: Collection,
  view: View,
  filters: Filters,
  after: Position | undefined,
  limit: number,
): PageSql {
  const { stamp, body, hash } = collection.columns[view]
  const where: string[] = []
  const args: (string | number)[] = []
  for (const [filter, column] of Object.entries(collection.filterColumns)) {
    const value = filters[filter as keyof Filters]
    if (value === undefined) continue
    where.push(`${column} = ?`)
    args.push(typeof value === 'boolean' ? Number(value) : value)
  }
  const narrowed = where.length > 0
  const since: Position = [filters.updatedSince ?? '', '']
  const from = after !== undefined && comparePositions(after, since) > 0 ? after : since
  where.push(`(${stamp}, id) > (?, ?)`)
  args.push(...from)
  const table = collection.table
  const filtered = `FROM ${table} WHERE ${where.join(' AND ')}`
  const version = `id || ' ' || ${stamp} || ' ' || ${hash}`
  return {
    limit,
    from,
    filtered: narrowed,
    edge: {
      sql: `SELECT ${stamp}, id ${filtered} ORDER BY ${stamp}, id LIMIT 2 OFFSET ?`,
      args: [...args, limit - 1],
    },
    tail: {
      sql: `SELECT ${stamp}, id ${filtered} ORDER BY ${stamp} DESC, id DESC LIMIT 1`,
      args,
    },
    stamps: {
      // The limit is written into the statement, not bound: SQLite then runs it in a third of the
      // time (14.5 against 42 µs for 51 rows of providers). Rounded up to a power of two (51 rows
      // read as 64), so that a connection prepares at most eight of them per list, view and filters
      // whatever limits clients ask for; the rows past the page's next are not looked at.
      sql:
        `SELECT group_concat(id || ' ' || ${stamp}, ',') ` +
        `FROM (SELECT id, ${stamp} ${filtered} ORDER BY ${stamp}, id LIMIT ${rowsToRead(limit)})`,
      args,
    },
    bodies: (last) => ({
      // The ordered subquery is not flattened into the aggregate (SQLite does not flatten an
      // ORDERed subquery into an aggregate query), so group_concat receives the rows in order.
      // Each body's length in bytes comes with them, so that they can be told apart and kept.
      sql:
        `SELECT CAST(group_concat(${body}, ',') AS BLOB), group_concat(${version}, ','), ` +
        `group_concat(octet_length(${body}), ',') ` +
        `FROM (SELECT id, ${stamp}, ${hash}, ${body} ${filtered} ` +
        `AND (${stamp}, id) <= (?, ?) ORDER BY ${stamp}, id)`,
      args: [...args, ...last],
    }),
  }
}

/** What reading a page needs of an organization file (store.ts). */
export interface PageReader {
  rows(query: Sql): unknown[][]
  value(query: Sql): unknown
  snapshot<T>(read: () => T): T
}

/** What keeping a list's order in memory needs of an organization file besides (store.ts). */
export interface OrderReader extends PageReader {
  /** SQLite's data version of the file (store.ts): it moves when the projector commits. */
  dataVersion(): number
}

/** A list's order in memory (list-order.ts): its rows after a position, as the file holds them. */
export interface PageOrder {
  /** Up to `count` rows after `from`, in page order; undefined when the order is not held. */
  rowsAfter(file: OrderReader, from: Position, count: number): readonly OrderedRowOf[] | undefined
}

/** The statements that read one list view's order, unfiltered (list-order.ts). */
export interface OrderSql {
  /** The view's table and stamp column: the name a file's handle keeps its order under. */
  readonly view: string
  /** `[stamp, id]` of every row, in page order. */
  readonly all: Sql
  /** `[stamp, id]` of the rows after a position, in page order. */
  after(position: Position): Sql
  /** How many rows the view has. */
  readonly count: Sql
  /** How many rows lie from one position to another, both included. */
  between(first: Position, last: Position): Sql
}

export function orderSql(collection: Collection, view: View): OrderSql {
  const { stamp } = collection.columns[view]
  const positions = `SELECT ${stamp}, id FROM ${collection.table}`
  return {
    view: `${collection.table}.${stamp}`,
    all: { sql: `${positions} ORDER BY ${stamp}, id`, args: [] },
    after: (position) => ({
      sql: `${positions} WHERE (${stamp}, id) > (?, ?) ORDER BY ${stamp}, id`,
      args: position,
    }),
    count: { sql: `SELECT count(*) FROM ${collection.table}`, args: [] },
    between: (first, last) => ({
      sql:
        `SELECT count(*) FROM ${collection.table} ` +
        `WHERE (${stamp}, id) >= (?, ?) AND (${stamp}, id) <= (?, ?)`,
      args: [...first, ...last],
    }),
  }
}

export interface PageRead<Bodies extends Buffer | readonly Buffer[] = Buffer> {
  /**
   * The stored JSON texts of the page's rows, in page order, as UTF-8 bytes: joined by commas
   * when read from the file (SQLite hands them over as a BLOB, so they are copied into the
   * response, never decoded into a JavaScript string and encoded again: a page of 50 providers is
   * 130 KB, and that round trip was a third of the list route's time), or each row's when they
   * were all known (api/document-bodies.ts).
   */
  readonly bodies: Bodies
  /**
   * Each row's id, stamp and stored hash, in page order: a document's stored body changes only
   * with its hash, and its stamp with it (schema/organization-db.ts), so these name the bytes of
   * `bodies` exactly, in some 6 KB where the bodies are 130 KB (the ETag: api/etag.ts).
   */
  readonly versions: string
  /** The position of the page's last row when another page follows it. */
  readonly next: Position | undefined
}

/** A page with no rows: what `readPage` gives past the list's last row. */
export const EMPTY_PAGE: PageRead = { bodies: Buffer.alloc(0), versions: '', next: undefined }

/**
 * The position of the list's last row with these filters, `updated_since` aside (none: the list
 * is empty): a poll whose `updated_since` is past its stamp has an empty page (pageSql's start is
 * `stamp >= updated_since`).
 */
export function lastPositionSql(collection: Collection, view: View, filters: Filters): Sql {
  const { updatedSince: _since, ...others } = filters
  return pageSql(collection, view, others, undefined, 1).tail
}

/**
 * Reads one page of `page`. With `known` bodies, the page's ids and stamps are taken first, from
 * the list's `order` in memory when it is held (an unfiltered list), else read in one statement
 * (one state of the file): when every body is known at its stamp, that is the whole read.
 * Otherwise all of the page's statements run in one snapshot, and `known` learns its bodies.
 */
export function readPage(file: PageReader, page: PageSql): PageRead
export function readPage(
  file: OrderReader,
  page: PageSql,
  known: DocumentBodies,
  order?: PageOrder,
): PageRead<Buffer | readonly Buffer[]>
export function readPage(
  file: PageReader,
  page: PageSql,
  known?: DocumentBodies,
  order?: PageOrder,
): PageRead<Buffer | readonly Buffer[]> {
  if (known?.enabled === true) {
    // An order comes only with an OrderReader (the overload above).
    const ordered = page.filtered
      ? undefined
      : order?.rowsAfter(file as OrderReader, page.from, page.limit + 1)
    if (ordered !== undefined) {
      if (ordered.length === 0) return EMPTY_PAGE
      const assembled = known.pageOf(ordered, page.limit)
      if (assembled !== undefined) return assembled
    } else {
      const stamps = file.value(page.stamps) as string | null
      if (stamps === null) return EMPTY_PAGE
      const assembled = known.page(stamps, page.limit)
      if (assembled !== undefined) return assembled
    }
  }
  return file.snapshot(() => {
    const [last, following] = file.rows(page.edge) as Position[]
    const end = last ?? (file.rows(page.tail)[0] as Position | undefined)
    if (end === undefined) return EMPTY_PAGE
    const [bodies, versions, lengths] = file.rows(page.bodies(end))[0] as [Buffer, string, string]
    known?.learn(versions, bodies, lengths)
    return { bodies, versions, next: following === undefined ? undefined : end }
  })
}

/** The page's rows and the one after, rounded up to a power of two (a whole number, always). */
export function rowsToRead(limit: number): number {
  if (!Number.isSafeInteger(limit) || limit < 1) throw new Error(`not a page size: ${limit}`)
  return 2 ** Math.ceil(Math.log2(limit + 1))
}

export function detailSql(collection: Collection, view: View, id: string): Sql {
  return {
    sql: `SELECT ${collection.columns[view].body} FROM ${collection.table} WHERE id = ?`,
    args: [id],
  }
}

/**
 * One page of expirables: rows `[expiresOn, sourceType, sourceId, updatedAt, partialBody]` with
 * `today <= expiresOn <= lastDay`, in (expiresOn, sourceType, sourceId) order, after `after`.
 */
export function expirablesSql(
  today: string,
  lastDay: string,
  after: Position | undefined,
  limit: number,
): Sql {
  const start: Position = [today, '', '']
  const from = after !== undefined && comparePositions(after, start) > 0 ? after : start
  return {
    sql:
      'SELECT expires_on, source_type, source_id, updated_at, body FROM doc_expirables ' +
      'WHERE (expires_on, source_type, source_id) > (?, ?, ?) AND expires_on <= ? ' +
      'ORDER BY expires_on, source_type, source_id LIMIT ?',
    args: [...from, lastDay, limit],
  }
}
