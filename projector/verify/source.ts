// The product database as `verify` reads it: one connection, one REPEATABLE READ READ ONLY
// transaction (every table read as of the same instant), each table in keyset pages by primary
// key (bounded memory, no server-side cursor, no extra dependency). Only the columns the replica
// stores are selected, so never-stored columns (ssn, internal_notes, storage_key) never leave
// PostgreSQL, and the grants checked first are exactly what the reads need.
//
// Values are asked for as text where Debezium's encoding differs from pg's default parsing, and
// turned into what Debezium writes (records.ts); the projector's own decoder does the rest.
import pg from 'pg'
import { rowSchemas, sourceTables, type SourceTable } from '../../schema/events.ts'

/** A problem found before anything was compared: one line for the operator, exit 2. */
export class VerifyRefused extends Error {
  override name = 'VerifyRefused'
}

export interface SourceSnapshot {
  /** `pg_current_wal_lsn()` once the snapshot was taken, as PostgreSQL writes it ('0/16B3748'). */
  lsn: string
  /** The same position as a number (Debezium's `source.lsn`). */
  lsnNumber: number
  /** The database clock at the snapshot. */
  at: Date
}

export interface SlotPosition {
  /** Whether a replication slot of that name exists. */
  exists: boolean
  active: boolean
  /** What the slot's consumer (Debezium) confirmed it has written to Kafka. */
  confirmedFlushLsn: number | undefined
}

export interface ProductDatabase {
  readonly snapshot: SourceSnapshot
  /** Approximate rows of the tables (PostgreSQL's statistics), for the progress total. */
  estimatedRows(): Promise<number | undefined>
  /**
   * Reads every row of `table` (of `organizations` only, when given) in pages of `pageRows`, in
   * primary-key order, handing each page to `onPage` before the next is read.
   */
  readTable(
    table: SourceTable,
    organizations: readonly string[] | undefined,
    onPage: (rows: Record<string, unknown>[]) => void | Promise<void>,
  ): Promise<void>
  /** Which of these organization ids the organizations table holds, in the snapshot. */
  organizationsIn(ids: readonly string[]): Promise<Set<string>>
  /** Where Debezium's slot stands now (read outside the snapshot's data: slots are live state). */
  slot(name: string): Promise<SlotPosition>
  close(): Promise<void>
}

const TIMESTAMPTZ = 1184
const DATE = 1082
const JSON_OID = 114
const JSONB = 3802
const INT8 = 20

/** '0/16B3748' to its byte position. */
export function lsnToNumber(lsn: string): number {
  const [high, low] = lsn.split('/')
  return parseInt(high!, 16) * 2 ** 32 + parseInt(low!, 16)
}

/**
 * A timestamptz as PostgreSQL writes it in UTC ('2025-03-04 05:06:07.123456+00') to ISO 8601,
 * as Debezium's ZonedTimestamp is ('2025-03-04T05:06:07.123456Z').
 */
export function timestampText(text: string): string {
  if (text.length > 19 && text[10] === ' ' && text.endsWith('+00')) {
    return `${text.slice(0, 10)}T${text.slice(11, -3)}Z`
  }
  return text.replace(' ', 'T')
}

/** host:port/database as user: where DATABASE_URL points, never its password. */
export function describeUrl(url: string): string {
  try {
    const u = new URL(url)
    const user = u.username === '' ? '' : ` as ${decodeURIComponent(u.username)}`
    return `${u.hostname}:${u.port || '5432'}${u.pathname}${user}`
  } catch {
    return 'DATABASE_URL'
  }
}

export async function openProductDatabase(
  url: string,
  options: { pageRows: number; tables?: readonly SourceTable[] },
): Promise<ProductDatabase> {
  const where = describeUrl(url)
  const client = new pg.Client({
    connectionString: url,
    application_name: 'replica-verify',
    connectionTimeoutMillis: 10_000,
  })
  client.setTypeParser(TIMESTAMPTZ, 'text', timestampText)
  client.setTypeParser(DATE, 'text', (text: string) => text)
  client.setTypeParser(JSONB, 'text', (text: string) => text)
  client.setTypeParser(JSON_OID, 'text', (text: string) => text)
  // As the decoder takes a bigint: a number within 2^53, its decimal text past it.
  client.setTypeParser(INT8, 'text', (text: string) =>
    Number.isSafeInteger(Number(text)) ? Number(text) : text,
  )
  // A lost connection mid-read surfaces as the failing query's error; this keeps it from also
  // being an unhandled 'error' event.
  client.on('error', () => undefined)
  try {
    await client.connect()
  } catch (error) {
    throw new VerifyRefused(`cannot connect to ${where}: ${oneLine(error)}`)
  }
  try {
    await client.query(`SET TIME ZONE 'UTC'`)
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY')
    // The first statement takes the snapshot; the position is read in the same statement.
    const position = await client.query<{ lsn: string; at: Date }>(
      `SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()
                    ELSE pg_current_wal_lsn() END)::text AS lsn,
              now() AS at`,
    )
    const { lsn, at } = position.rows[0]!
    // Every table the replica stores, control.db's too: a key revoked in PostgreSQL and still
    // accepted by the replica is drift no document shows.
    const tables = options.tables ?? sourceTables
    const columns = await checkGrants(client, tables, where)
    return {
      snapshot: { lsn, lsnNumber: lsnToNumber(lsn), at: new Date(at) },
      async estimatedRows() {
        const result = await client.query<{ rows: string | null }>(
          `SELECT sum(greatest(c.reltuples, 0))::bigint::text AS rows
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'public' AND c.relname = ANY($1)`,
          [tables],
        )
        const rows = Number(result.rows[0]?.rows ?? 0)
        return rows > 0 ? rows : undefined
      },
      async readTable(table, organizations, onPage) {
        const list = columns
          .get(table)!
          .map((c) => `"${c}"`)
          .join(', ')
        // $1: page size; $2: the organizations; $3: the last id read (all pages but the first).
        // Unnamed statements are planned with their values: the NULL case folds away.
        const owner = table === 'organizations' ? 'id' : 'organization_id'
        const filter = `($2::uuid[] IS NULL OR ${owner} = ANY($2::uuid[]))`
        const query = (next: boolean) =>
          `SELECT ${list} FROM public."${table}" WHERE ${filter}${next ? ' AND id > $3::uuid' : ''} ORDER BY id LIMIT $1`
        const firstPage = query(false)
        const nextPage = query(true)
        let after: string | undefined
        for (;;) {
          const params: unknown[] = [options.pageRows, organizations ?? null]
          if (after !== undefined) params.push(after)
          const page = await client.query(after === undefined ? firstPage : nextPage, params)
          if (page.rows.length > 0) await onPage(page.rows as Record<string, unknown>[])
          if (page.rows.length < options.pageRows) return
          after = String((page.rows.at(-1) as { id: string }).id)
        }
      },
      async organizationsIn(ids) {
        const result = await client.query<{ id: string }>(
          'SELECT id::text AS id FROM public.organizations WHERE id = ANY($1::uuid[])',
          [ids],
        )
        return new Set(result.rows.map((r) => r.id))
      },
      async slot(name) {
        const result = await client.query<{ active: boolean; lsn: string | null }>(
          `SELECT active, confirmed_flush_lsn::text AS lsn FROM pg_replication_slots
            WHERE slot_name = $1`,
          [name],
        )
        const row = result.rows[0]
        if (row === undefined) return { exists: false, active: false, confirmedFlushLsn: undefined }
        return {
          exists: true,
          active: row.active,
          confirmedFlushLsn: row.lsn === null ? undefined : lsnToNumber(row.lsn),
        }
      },
      async close() {
        await client.query('ROLLBACK').catch(() => undefined)
        await client.end().catch(() => undefined)
      },
    }
  } catch (error) {
    await client.end().catch(() => undefined)
    if (error instanceof VerifyRefused) throw error
    throw new VerifyRefused(`cannot read ${where}: ${oneLine(error)}`)
  }
}

/**
 * Checks, before reading anything, that the role may read every column the replica stores, and
 * names the first grant missing. Returns the columns to select per table: those the replica
 * stores that the table still has (a nullable column dropped in the product reads as null, as
 * in the projector).
 */
async function checkGrants(
  client: pg.Client,
  tables: readonly SourceTable[],
  where: string,
): Promise<Map<SourceTable, string[]>> {
  const role = (await client.query<{ role: string }>('SELECT current_user AS role')).rows[0]!.role
  const schema = await client.query<{ usable: boolean }>(
    `SELECT has_schema_privilege('public', 'USAGE') AS usable`,
  )
  if (schema.rows[0]?.usable !== true) {
    throw new VerifyRefused(
      `role ${role} lacks USAGE on schema public of ${where} (GRANT USAGE ON SCHEMA public TO ${role})`,
    )
  }
  const existing = await client.query<{ table: string; column: string }>(
    `SELECT c.relname AS table, a.attname AS column
       FROM pg_attribute a
       JOIN pg_class c ON c.oid = a.attrelid
       JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = 'public' AND c.relname = ANY($1) AND a.attnum > 0 AND NOT a.attisdropped`,
    [tables],
  )
  const present = new Map<string, Set<string>>()
  for (const { table, column } of existing.rows) {
    let set = present.get(table)
    if (set === undefined) present.set(table, (set = new Set()))
    set.add(column)
  }
  const columns = new Map<SourceTable, string[]>()
  for (const table of tables) {
    const have = present.get(table)
    if (have === undefined) throw new VerifyRefused(`${where} has no table public.${table}`)
    columns.set(
      table,
      Object.keys(rowSchemas[table].shape).filter((c) => have.has(c)),
    )
  }
  const privileges = await client.query<{ table: string; column: string }>(
    `SELECT t.table, t.column FROM unnest($1::text[], $2::text[]) AS t("table", "column")
      WHERE NOT has_column_privilege('public.' || quote_ident(t.table), t.column, 'SELECT')`,
    [
      [...columns].flatMap(([table, cols]) => cols.map(() => table)),
      [...columns].flatMap(([, cols]) => cols),
    ],
  )
  const missing = privileges.rows[0]
  if (missing !== undefined) {
    throw new VerifyRefused(
      `role ${role} lacks SELECT on public.${missing.table} (column ${missing.column}) of ${where} (GRANT SELECT ON public.${missing.table} TO ${role})`,
    )
  }
  return columns
}

function oneLine(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error)
  const raw = (error as { code?: unknown }).code
  const code = typeof raw === 'string' ? raw : undefined
  const text = message.split('\n')[0]!.trim() || (code ?? 'unknown error')
  // PostgreSQL's SQLSTATE (e.g. 42501) helps a search; a Node error code is in the text already.
  return code !== undefined && !text.includes(code) && /^[0-9A-Z]{5}$/.test(code)
    ? `${text} (${code})`
    : text
}
