// For rebuilds: a new generation asks the previous one for the stamp of each document it writes,
// so a document whose content is unchanged keeps its `updatedAt` and is not re-sent to pollers.
import type Database from 'better-sqlite3'
import { and, eq, sql, type SQL } from 'drizzle-orm'
import { QueryBuilder, type AnySQLiteColumn } from 'drizzle-orm/sqlite-core'
import {
  documentDocs,
  enrollmentDocs,
  expirableDocs,
  groupEnrollmentDocs,
  providerDocs,
  providerGroupDocs,
} from '../../schema/organization-db.ts'
import { preparedOnUse } from '../../src/sqlite.ts'
import type { DocumentKind, PriorStamp } from './refresher.ts'

const qb = new QueryBuilder()

/** The text of a stamp's look-up: the stamp of the row with this id, if it has this hash. */
function stampQuery(stamp: AnySQLiteColumn, idColumn: AnySQLiteColumn, hash: AnySQLiteColumn) {
  const where: SQL | undefined = and(
    eq(idColumn, sql.placeholder('id')),
    eq(hash, sql.placeholder('hash')),
  )
  // Parameters in this order: id, then hash (`get` below binds them so).
  return qb.select({ stamp }).from(stamp.table).where(where).toSQL().sql
}

/**
 * Each kind's look-up, its text made once per process. A rebuild of thousands of organizations
 * opens the previous generation's file of each: drizzle building seven selects per file, and
 * preparing all seven up front, took 7% of a lane's time over 3,000 small organizations.
 */
const stampQueries: Record<DocumentKind, string> = {
  provider: stampQuery(providerDocs.updatedAt, providerDocs.id, providerDocs.hash),
  sensitiveProvider: stampQuery(
    providerDocs.sensitiveUpdatedAt,
    providerDocs.id,
    providerDocs.sensitiveHash,
  ),
  providerGroup: stampQuery(
    providerGroupDocs.updatedAt,
    providerGroupDocs.id,
    providerGroupDocs.hash,
  ),
  enrollment: stampQuery(enrollmentDocs.updatedAt, enrollmentDocs.id, enrollmentDocs.hash),
  groupEnrollment: stampQuery(
    groupEnrollmentDocs.updatedAt,
    groupEnrollmentDocs.id,
    groupEnrollmentDocs.hash,
  ),
  document: stampQuery(documentDocs.updatedAt, documentDocs.id, documentDocs.hash),
  expirable: stampQuery(expirableDocs.updatedAt, expirableDocs.id, expirableDocs.hash),
}

/**
 * A `priorStamp` reading the previous generation's file of the same organization (opened
 * read-only by the caller): the stored stamp when the stored hash equals `hash`, else undefined.
 * Each kind's statement is prepared on its first use.
 */
export function priorStampsFrom(previousGeneration: Database.Database): PriorStamp {
  const statement = (text: string) =>
    preparedOnUse(() => previousGeneration.prepare<[string, string], string | null>(text).pluck())
  const statements = Object.fromEntries(
    Object.entries(stampQueries).map(([kind, text]) => [kind, statement(text)]),
  ) as Record<DocumentKind, ReturnType<typeof statement>>
  return (kind, documentId, documentHash) =>
    statements[kind]().get(documentId, documentHash) ?? undefined
}

/** Every stamp of a file, as `kind, id, hash, stamp` rows: one scan of each documents table. */
const everyStamp = (
  Object.entries({
    provider: [providerDocs.updatedAt, providerDocs.id, providerDocs.hash],
    sensitiveProvider: [
      providerDocs.sensitiveUpdatedAt,
      providerDocs.id,
      providerDocs.sensitiveHash,
    ],
    providerGroup: [providerGroupDocs.updatedAt, providerGroupDocs.id, providerGroupDocs.hash],
    enrollment: [enrollmentDocs.updatedAt, enrollmentDocs.id, enrollmentDocs.hash],
    groupEnrollment: [
      groupEnrollmentDocs.updatedAt,
      groupEnrollmentDocs.id,
      groupEnrollmentDocs.hash,
    ],
    document: [documentDocs.updatedAt, documentDocs.id, documentDocs.hash],
    expirable: [expirableDocs.updatedAt, expirableDocs.id, expirableDocs.hash],
  } satisfies Record<DocumentKind, AnySQLiteColumn[]>) as [DocumentKind, AnySQLiteColumn[]][]
)
  .map(
    ([kind, [stamp, id, hash]]) =>
      qb
        .select({ kind: sql.raw(`'${kind}'`), id: id!, hash: hash!, stamp: stamp! })
        .from(stamp!.table)
        .toSQL().sql,
  )
  .join(' UNION ALL ')

/**
 * `priorStampsFrom` for a small file: its stamps read in one statement on the first look-up, then
 * answered from memory. An organization of a few dozen documents otherwise pays a statement
 * prepared for each kind and a look-up for each document (a fifth of a rebuild's last round over
 * 3,000 small organizations); a large file keeps the look-ups, which hold nothing in memory.
 */
export function priorStampsScanned(previousGeneration: Database.Database): PriorStamp {
  let stamps: Map<string, { hash: string | null; stamp: string | null }> | undefined
  const read = () => {
    const rows = previousGeneration.prepare<[], [string, string, string | null, string | null]>(
      everyStamp,
    )
    rows.raw()
    const byKey = new Map<string, { hash: string | null; stamp: string | null }>()
    for (const [kind, id, hash, stamp] of rows.iterate())
      byKey.set(`${kind} ${id}`, { hash, stamp })
    return byKey
  }
  return (kind, documentId, documentHash) => {
    const found = (stamps ??= read()).get(`${kind} ${documentId}`)
    return found !== undefined && found.hash === documentHash && found.stamp !== null
      ? found.stamp
      : undefined
  }
}
