// control.db's rows checked against PostgreSQL's: organizations (whether the api serves them, and
// their billing state) and API keys (by hash, with their scopes, expiry and revocation). No
// document is built from these, so the document comparison cannot see them, yet a revocation the
// replica missed is a key it still accepts. Compared column by column, as stored, between the
// control.db built from the snapshot and the live one, read in one read transaction.
import Database from 'better-sqlite3'
import type { ControlTable } from '../../schema/events.ts'
import { IDS_PER_LIST, type IdSample } from '../documents/index.ts'
import type { AppliedOffset } from './lag.ts'

export interface ControlTableDiff {
  table: ControlTable
  /** Rows in both with the same content. */
  equal: number
  /** In both, with different content. */
  differing: IdSample
  /** In PostgreSQL, not in the replica. */
  missing: IdSample
  /** In the replica, not in PostgreSQL. */
  extra: IdSample
}

/** What is compared of each table: every stored column but where the row came from. */
const compared: Record<ControlTable, { owner: string; columns: string[] }> = {
  organizations: {
    owner: 'id',
    columns: ['name', 'api_enabled', 'billing_status', 'created_at', 'updated_at'],
  },
  api_keys: {
    owner: 'organization_id',
    columns: [
      'organization_id',
      'name',
      'key_hash',
      'scopes',
      'created_at',
      'expires_at',
      'revoked_at',
    ],
  },
}

/**
 * Compares the control tables of `expectedPath` (built from PostgreSQL) with `actualPath`'s (the
 * live control.db), of `organizations` only when given.
 */
export function compareControlFiles(
  expectedPath: string,
  actualPath: string,
  options: { organizations?: readonly string[]; idsPerList?: number } = {},
): { tables: ControlTableDiff[]; appliedOffsets: AppliedOffset[] } {
  const limit = options.idsPerList ?? IDS_PER_LIST
  const only = options.organizations === undefined ? null : JSON.stringify(options.organizations)
  const db = new Database(expectedPath, { readonly: true, fileMustExist: true })
  try {
    db.prepare('ATTACH DATABASE ? AS actual').run(actualPath)
    // The live file's applied offsets in the same transaction as its rows: what was compared.
    const read = db.transaction(() => ({
      tables: (Object.keys(compared) as ControlTable[]).map((table) =>
        compareTable(db, table, only, limit),
      ),
      appliedOffsets: db
        .prepare('SELECT topic, partition, offset FROM actual.applied_offsets')
        .all() as AppliedOffset[],
    }))
    return read()
  } finally {
    db.close()
  }
}

function compareTable(
  db: Database.Database,
  table: ControlTable,
  only: string | null,
  limit: number,
): ControlTableDiff {
  const { owner, columns } = compared[table]
  const scope = (alias: string) =>
    `(@only IS NULL OR ${alias}.${owner} IN (SELECT value FROM json_each(@only)))`
  const expected = `main.${table}`
  const actual = `actual.${table}`
  const differs = columns.map((c) => `e.${c} IS NOT a.${c}`).join(' OR ')
  const both = `FROM ${expected} e JOIN ${actual} a ON a.id = e.id WHERE ${scope('e')}`
  const ids = (query: string): IdSample => {
    const count = db.prepare(`SELECT count(*) FROM (${query})`).pluck().get({ only }) as number
    const first =
      count === 0
        ? []
        : (db.prepare(`${query} ORDER BY 1 LIMIT @limit`).pluck().all({ only, limit }) as string[])
    return { count, ids: first }
  }
  return {
    table,
    equal: db
      .prepare(`SELECT count(*) ${both} AND NOT (${differs})`)
      .pluck()
      .get({ only }) as number,
    differing: ids(`SELECT e.id ${both} AND (${differs})`),
    missing: ids(
      `SELECT e.id FROM ${expected} e WHERE ${scope('e')}
         AND NOT EXISTS (SELECT 1 FROM ${actual} a WHERE a.id = e.id)`,
    ),
    extra: ids(
      `SELECT a.id FROM ${actual} a WHERE ${scope('a')}
         AND NOT EXISTS (SELECT 1 FROM ${expected} e WHERE e.id = a.id)`,
    ),
  }
}
