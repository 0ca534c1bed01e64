// Stamps for a rebuilt organization file as it replaces the live one
// (projector/storage/handover.ts).
//
// A document whose content is the live file's (its hash, and the text the live file serves) keeps
// the live stamp: pollers are not sent it again. Every other one takes `stamp`, newer than every
// stamp the live file handed out: built earlier, aside, it may carry a stamp older than a cursor
// a poller already holds, and that poller would never see it.
import type { SqliteDatabase } from '../../src/sqlite.ts'
import { servedContent } from './compare.ts'
import { withUpdatedAt } from './json.ts'

interface StampedColumns {
  stamp: string
  hash: string
  /** The column of the served JSON text, absent where the api appends the stamp itself. */
  body?: string
}

const stampedDocuments: ReadonlyArray<{ table: string; variants: StampedColumns[] }> = [
  {
    table: 'doc_providers',
    variants: [
      { stamp: 'updated_at', hash: 'hash', body: 'body' },
      { stamp: 'sensitive_updated_at', hash: 'sensitive_hash', body: 'sensitive_body' },
    ],
  },
  { table: 'doc_provider_groups', variants: [{ stamp: 'updated_at', hash: 'hash', body: 'body' }] },
  { table: 'doc_enrollments', variants: [{ stamp: 'updated_at', hash: 'hash', body: 'body' }] },
  {
    table: 'doc_group_enrollments',
    variants: [{ stamp: 'updated_at', hash: 'hash', body: 'body' }],
  },
  { table: 'doc_documents', variants: [{ stamp: 'updated_at', hash: 'hash', body: 'body' }] },
  // The api appends `updatedAt` to an expirable's body (schema/organization-db.ts).
  { table: 'doc_expirables', variants: [{ stamp: 'updated_at', hash: 'hash' }] },
]

/**
 * Restamps the documents of `db` against the live file attached to it as `live`: the live stamp
 * where the content is the same, `stamp` where it is not (or the document is new). Returns how
 * many document variants took `stamp`. Runs inside the caller's transaction.
 */
export function restampAgainstLive(db: SqliteDatabase, stamp: string): number {
  let stampedNew = 0
  for (const { table, variants } of stampedDocuments) {
    for (const v of variants) {
      // The same content: the same hash, and the live file serves the same text (a body
      // corrupted under its hash is served as it is: its repair must reach pollers).
      const served = (alias: string) =>
        servedContent(
          alias,
          v.body === undefined ? { body: 'body' } : { body: v.body, stamp: v.stamp },
        )
      const same = `l.${v.hash} = d.${v.hash} AND ${served('l')} = ${served('d')}`
      // Only the rows whose stamp is not already the one they must have.
      const rows = db
        .prepare(
          `SELECT d.id AS id, d.${v.stamp} AS current, ${v.body === undefined ? 'NULL' : `d.${v.body}`} AS body,
                  CASE WHEN ${same} THEN l.${v.stamp} END AS kept
             FROM main.${table} d LEFT JOIN live.${table} l ON l.id = d.id
            WHERE CASE WHEN ${same} THEN l.${v.stamp} ELSE ? END
                  IS NOT d.${v.stamp}`,
        )
        .all(stamp) as Array<{
        id: string
        current: string
        body: string | null
        kept: string | null
      }>
      const update = db.prepare(
        v.body === undefined
          ? `UPDATE main.${table} SET ${v.stamp} = ? WHERE id = ?`
          : `UPDATE main.${table} SET ${v.stamp} = ?, ${v.body} = ? WHERE id = ?`,
      )
      for (const row of rows) {
        const next = row.kept ?? stamp
        if (row.kept === null) stampedNew++
        if (row.body === null) update.run(next, row.id)
        else update.run(next, restampBody(row.body, row.current, next), row.id)
      }
    }
  }
  return stampedNew
}

/**
 * A served body with another `updatedAt`: every stored body ends with `,"updatedAt":<stamp>}`
 * (json.ts `withUpdatedAt`); anything else is a defect, not something to guess around.
 */
export function restampBody(body: string, current: string, next: string): string {
  const tail = `,"updatedAt":${JSON.stringify(current)}}`
  if (!body.endsWith(tail)) throw new Error('a stored document does not end with its updatedAt')
  return withUpdatedAt(`${body.slice(0, -tail.length)}}`, next)
}
