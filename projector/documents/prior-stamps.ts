// For rebuilds: a new generation asks the previous one for the stamp of each document it writes,
// so a document whose content is unchanged keeps its `updatedAt` and is not re-sent to pollers.
import type Database from 'better-sqlite3'
import { and, eq, sql } from 'drizzle-orm'
import {
  documentDocs,
  enrollmentDocs,
  expirableDocs,
  groupEnrollmentDocs,
  providerDocs,
  providerGroupDocs,
} from '../../schema/organization-db.ts'
import { organizationDb } from '../../src/sqlite.ts'
import type { DocumentKind, PriorStamp } from './refresher.ts'

const id = sql.placeholder('id')
const hash = sql.placeholder('hash')

/**
 * A `priorStamp` reading the previous generation's file of the same organization (opened
 * read-only by the caller): the stored stamp when the stored hash equals `hash`, else undefined.
 */
export function priorStampsFrom(previousGeneration: Database.Database): PriorStamp {
  const db = organizationDb(previousGeneration)
  const stampOf = (
    table:
      | typeof providerDocs
      | typeof providerGroupDocs
      | typeof enrollmentDocs
      | typeof groupEnrollmentDocs
      | typeof documentDocs
      | typeof expirableDocs,
  ) =>
    db
      .select({ stamp: table.updatedAt })
      .from(table)
      .where(and(eq(table.id, id), eq(table.hash, hash)))
      .prepare()
  const statements: Record<DocumentKind, ReturnType<typeof stampOf>> = {
    provider: stampOf(providerDocs),
    sensitiveProvider: db
      .select({ stamp: providerDocs.sensitiveUpdatedAt })
      .from(providerDocs)
      .where(and(eq(providerDocs.id, id), eq(providerDocs.sensitiveHash, hash)))
      .prepare(),
    providerGroup: stampOf(providerGroupDocs),
    enrollment: stampOf(enrollmentDocs),
    groupEnrollment: stampOf(groupEnrollmentDocs),
    document: stampOf(documentDocs),
    expirable: stampOf(expirableDocs),
  }
  return (kind, documentId, documentHash) =>
    statements[kind].get({ id: documentId, hash: documentHash })?.stamp
}
