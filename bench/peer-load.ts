// Loads a generated dataset (an NDJSON file of Debezium records, scripts/dataset) into a real
// PostgreSQL with the product's schema (schema/source.sql): the state the product database was
// in when Debezium wrote those events. Each record's `after` row is upserted and each delete
// deleted, in file order, a run of records of one table and one kind per statement
// (json_populate_recordset). Foreign keys are not checked during the load (as pg_restore does):
// a snapshot reads some parents after their children.
//
// Then the indexes the provider list needs, which schema/source.sql (keys only) does not declare:
// any PostgreSQL serving this page has them.
import { spawn } from 'node:child_process'
import { createReadStream } from 'node:fs'
import { createInterface } from 'node:readline'
import Database from 'better-sqlite3'
import pg from 'pg'
import { isoDate, TABLES, type TableName } from '../scripts/dataset/debezium.ts'
import { isolatedChildEnv } from '../src/config.ts'
import { currentGeneration } from '../src/layout.ts'
import { repoRoot } from '../test/harness/paths.ts'

/** Rows per statement at most. */
const BATCH_ROWS = 2000

/** What the provider page reads by: organization and list order, then each provider's children. */
export const PEER_INDEXES = [
  'create index providers_page on providers (organization_id, updated_at, id)',
  'create index provider_identifiers_provider on provider_identifiers (provider_id, type, id)',
  'create index group_memberships_provider on group_memberships (provider_id)',
  'create index api_keys_hash on api_keys (key_hash) include (organization_id, scopes, expires_at, revoked_at)',
] as const

interface Run {
  table: TableName
  kind: 'upsert' | 'delete'
  /** By id: the last record of a row in the run wins. */
  rows: Map<string, Record<string, unknown> | null>
}

const upsertSql = new Map<TableName, string>()

function upsert(table: TableName): string {
  let sql = upsertSql.get(table)
  if (sql === undefined) {
    const columns = TABLES[table].map((c) => c.name).filter((c) => c !== 'id')
    sql =
      `insert into ${table} select * from json_populate_recordset(null::${table}, $1::json) ` +
      `on conflict (id) do update set ${columns.map((c) => `${c} = excluded.${c}`).join(', ')}`
    upsertSql.set(table, sql)
  }
  return sql
}

/** A Debezium `after` row as json_populate_recordset reads it: dates as text, jsonb parsed. */
function sourceRow(table: TableName, after: Record<string, unknown>): Record<string, unknown> {
  const row: Record<string, unknown> = {}
  for (const column of TABLES[table]) {
    const value = after[column.name]
    if (value === null || value === undefined) row[column.name] = null
    else if (column.type === 'date') row[column.name] = isoDate(value as number)
    else if (column.type === 'jsonb') row[column.name] = JSON.parse(value as string) as unknown
    else row[column.name] = value
  }
  return row
}

interface Payload {
  op: string
  after: Record<string, unknown> | null
  source: { table: string }
}

/** The Debezium payload of a record's value, with or without the JsonConverter's schema. */
function payloadOf(value: unknown): Payload | undefined {
  if (value === null || typeof value !== 'object') return undefined
  const v = value as { payload?: unknown }
  const payload = ('payload' in v ? v.payload : value) as Payload | null
  return payload !== null && typeof payload.op === 'string' ? payload : undefined
}

/** Loads `path` into the database `client` is connected to; returns the rows written. */
export async function loadEvents(client: pg.ClientBase, path: string): Promise<number> {
  let written = 0
  let run: Run | undefined
  const flush = async () => {
    if (run === undefined || run.rows.size === 0) return
    const { table, kind, rows } = run
    run = undefined
    if (kind === 'delete') {
      await client.query(`delete from ${table} where id = any($1::uuid[])`, [[...rows.keys()]])
    } else {
      await client.query(upsert(table), [JSON.stringify([...rows.values()])])
    }
    written += rows.size
  }
  await client.query('set session_replication_role = replica')
  for await (const line of createInterface({
    input: createReadStream(path),
    crlfDelay: Infinity,
  })) {
    if (line === '') continue
    const record = JSON.parse(line) as {
      key: { payload?: { id: string }; id?: string }
      value: unknown
    }
    const payload = payloadOf(record.value)
    if (payload === undefined) continue // a tombstone
    const table = payload.source.table as TableName
    if (!(table in TABLES)) continue
    const id = record.key.payload?.id ?? record.key.id
    if (id === undefined) continue
    const kind = payload.op === 'd' ? 'delete' : 'upsert'
    if (
      run !== undefined &&
      (run.table !== table || run.kind !== kind || run.rows.size >= BATCH_ROWS)
    ) {
      await flush()
    }
    run ??= { table, kind, rows: new Map() }
    run.rows.set(
      id,
      kind === 'delete' ? null : sourceRow(table, payload.after as Record<string, unknown>),
    )
  }
  await flush()
  await client.query('set session_replication_role = origin')
  return written
}

/** The indexes of PEER_INDEXES, then fresh planner statistics. */
export async function indexAndAnalyze(client: pg.ClientBase): Promise<void> {
  for (const sql of PEER_INDEXES) await client.query(sql)
  await client.query('vacuum analyze')
}

/**
 * Sets each provider's `updated_at` to the replica's `updatedAt` of its document (base
 * variant): the replica's stamp is when it made the document visible, which no source column
 * holds, and both routes order the list by it. With the same stamps, both serve the same pages.
 */
export async function copyStamps(
  client: pg.ClientBase,
  stamps: ReadonlyArray<{ id: string; updatedAt: string }>,
): Promise<void> {
  for (let i = 0; i < stamps.length; i += 5000) {
    await client.query(
      'update providers p set updated_at = s."updatedAt" ' +
        'from json_to_recordset($1::json) as s(id uuid, "updatedAt" timestamptz) where p.id = s.id',
      [JSON.stringify(stamps.slice(i, i + 5000))],
    )
  }
}

/** The projector command on the file, in a child process (bench/projector.ts does the same). */
export function projectFile(path: string, dataDir: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', 'projector/main.ts', '--from-file', path],
      {
        cwd: repoRoot,
        env: isolatedChildEnv(process.env, { DATA_DIR: dataDir, LOG_LEVEL: 'warn' }),
        stdio: ['ignore', 'ignore', 'inherit'],
      },
    )
    child.on('error', reject)
    child.on('close', (code) =>
      code === 0 ? resolve() : reject(new Error(`projector exited ${code}`)),
    )
  })
}

/** Every provider document's base stamp, from the replica's organization files. */
export function replicaStamps(
  dataDir: string,
  organizationIds: readonly string[],
): { id: string; updatedAt: string }[] {
  const gen = currentGeneration(dataDir)
  if (gen === undefined) throw new Error('the projector published no generation')
  const stamps: { id: string; updatedAt: string }[] = []
  for (const organizationId of organizationIds) {
    const db = new Database(gen.organizationPath(organizationId, null), { readonly: true })
    try {
      stamps.push(
        ...(db.prepare('SELECT id, updated_at AS updatedAt FROM doc_providers').all() as {
          id: string
          updatedAt: string
        }[]),
      )
    } finally {
      db.close()
    }
  }
  return stamps
}

/** A client of the database at `url` for the time of `use`. */
export async function withClient<T>(
  url: string,
  use: (client: pg.Client) => Promise<T>,
): Promise<T> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return await use(client)
  } finally {
    await client.end()
  }
}

/**
 * The dataset at `path` in PostgreSQL (`url`, schema/source.sql loaded) and in the replica
 * (`dataDir`), side by side; then PostgreSQL's provider stamps made the replica's, and the
 * indexes. Returns the rows written to PostgreSQL and the providers of the replica.
 */
export async function loadBothSides(
  path: string,
  url: string,
  dataDir: string,
  organizationIds: readonly string[],
): Promise<{ rows: number; providers: number }> {
  const [rows] = await Promise.all([
    withClient(url, (client) => loadEvents(client, path)),
    projectFile(path, dataDir),
  ])
  const stamps = replicaStamps(dataDir, organizationIds)
  await withClient(url, async (client) => {
    await copyStamps(client, stamps)
    await indexAndAnalyze(client)
  })
  return { rows, providers: stamps.length }
}

/** A body as JSON text without insignificant whitespace, keys in their order. */
export function canonicalJson(body: string): string {
  return JSON.stringify(JSON.parse(body))
}
