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

/** Where each kind of document keeps its id, its content's hash and its stamp. */
const stampColumns: Record<
  DocumentKind,
  { stamp: AnySQLiteColumn; id: AnySQLiteColumn; hash: AnySQLiteColumn }
> = {
  provider: { stamp: providerDocs.updatedAt, id: providerDocs.id, hash: providerDocs.hash },
  sensitiveProvider: {
    stamp: providerDocs.sensitiveUpdatedAt,
    id: providerDocs.id,
    hash: providerDocs.sensitiveHash,
  },
  providerGroup: {
    stamp: providerGroupDocs.updatedAt,
    id: providerGroupDocs.id,
    hash: providerGroupDocs.hash,
  },
  enrollment: { stamp: enrollmentDocs.updatedAt, id: enrollmentDocs.id, hash: enrollmentDocs.hash },
  groupEnrollment: {
    stamp: groupEnrollmentDocs.updatedAt,
    id: groupEnrollmentDocs.id,
    hash: groupEnrollmentDocs.hash,
  },
  document: { stamp: documentDocs.updatedAt, id: documentDocs.id, hash: documentDocs.hash },
  expirable: { stamp: expirableDocs.updatedAt, id: expirableDocs.id, hash: expirableDocs.hash },
}
const kinds = Object.keys(stampColumns) as DocumentKind[]

/**
 * Each kind's look-up, its text made once per process: the stamp of the row with this id, if it
 * has this hash (parameters: id, then hash). A rebuild of thousands of organizations opens the
 * previous generation's file of each: drizzle building seven selects per file, and preparing all
 * seven up front, took 7% of a lane's time over 3,000 small organizations.
 */
const stampQueries = Object.fromEntries(
  kinds.map((kind) => {
    const { stamp, id, hash } = stampColumns[kind]
    const where: SQL | undefined = and(
      eq(id, sql.placeholder('id')),
      eq(hash, sql.placeholder('hash')),
    )
    return [kind, qb.select({ stamp }).from(stamp.table).where(where).toSQL().sql]
  }),
) as Record<DocumentKind, string>

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
const everyStamp = kinds
  .map((kind) => {
    const { stamp, id, hash } = stampColumns[kind]
    return qb
      .select({ kind: sql.raw(`'${kind}'`), id, hash, stamp })
      .from(stamp.table)
      .toSQL().sql
  })
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
