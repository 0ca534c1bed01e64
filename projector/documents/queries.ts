// Every statement the document layer runs, prepared once per database: drizzle's query builder
// re-renders SQL on each call, a prepared statement only binds.
//
// Orderings are the ones spec/resources.md fixes, completed with the row id so that the order is
// total (equal mirror content, identical text). Text compares with SQLite's BINARY collation
// (code point order, case-sensitive). An enrollment location whose service location has not
// arrived has a null name: it sorts after every named location (NULLS LAST), then by id.
import { asc, desc, eq, getTableColumns, sql } from 'drizzle-orm'
import type { AnySQLiteColumn } from 'drizzle-orm/sqlite-core'
import {
  documentDocs,
  documents,
  enrollmentDocs,
  enrollmentLinesOfBusiness,
  enrollmentLocationParticipations,
  enrollmentRequirements,
  enrollments,
  expirableDocs,
  groupEnrollmentDocs,
  groupEnrollmentLinesOfBusiness,
  groupEnrollments,
  groupIdentifiers,
  groupMemberships,
  providerDocs,
  providerGroupDocs,
  providerGroups,
  providerIdentifiers,
  providers,
  serviceLocations,
} from '../../schema/organization-db.ts'
import type { OrganizationDb } from '../../src/sqlite.ts'

const id = sql.placeholder('id')

const identifierColumns = {
  id: providerIdentifiers.id,
  type: providerIdentifiers.type,
  value: providerIdentifiers.value,
  issuedOn: providerIdentifiers.issuedOn,
  expiresOn: providerIdentifiers.expiresOn,
  metadata: providerIdentifiers.metadata,
}

const groupIdentifierColumns = {
  id: groupIdentifiers.id,
  type: groupIdentifiers.type,
  value: groupIdentifiers.value,
  issuedOn: groupIdentifiers.issuedOn,
  expiresOn: groupIdentifiers.expiresOn,
  metadata: groupIdentifiers.metadata,
}

/** Reads of the mirror: each child list selects exactly the response entry, in key order. */
export function prepareMirrorReads(db: OrganizationDb) {
  return {
    provider: db.select().from(providers).where(eq(providers.id, id)).prepare(),
    providerMemberships: db
      .select({
        providerGroupId: providerGroups.id,
        name: providerGroups.name,
        npi: providerGroups.npi,
        tin: providerGroups.tin,
      })
      .from(groupMemberships)
      // Inner join: a membership whose group has not arrived is left out.
      .innerJoin(providerGroups, eq(providerGroups.id, groupMemberships.providerGroupId))
      .where(eq(groupMemberships.providerId, id))
      .orderBy(asc(providerGroups.name), asc(providerGroups.id), asc(groupMemberships.id))
      .prepare(),
    providerIdentifiers: db
      .select(identifierColumns)
      .from(providerIdentifiers)
      .where(eq(providerIdentifiers.providerId, id))
      .orderBy(asc(providerIdentifiers.type), asc(providerIdentifiers.id))
      .prepare(),

    providerGroup: db.select().from(providerGroups).where(eq(providerGroups.id, id)).prepare(),
    groupServiceLocations: db
      .select({
        id: serviceLocations.id,
        name: serviceLocations.name,
        address: serviceLocations.address,
        addressLine2: serviceLocations.addressLine2,
        city: serviceLocations.city,
        state: serviceLocations.state,
        zip: serviceLocations.zip,
        phone: serviceLocations.phone,
        isPrimary: serviceLocations.isPrimary,
      })
      .from(serviceLocations)
      .where(eq(serviceLocations.providerGroupId, id))
      .orderBy(
        desc(serviceLocations.isPrimary),
        asc(serviceLocations.name),
        asc(serviceLocations.id),
      )
      .prepare(),
    groupIdentifiers: db
      .select(groupIdentifierColumns)
      .from(groupIdentifiers)
      .where(eq(groupIdentifiers.providerGroupId, id))
      .orderBy(asc(groupIdentifiers.type), asc(groupIdentifiers.id))
      .prepare(),

    enrollment: db.select().from(enrollments).where(eq(enrollments.id, id)).prepare(),
    embeddedProvider: db
      .select({
        id: providers.id,
        firstName: providers.firstName,
        middleName: providers.middleName,
        lastName: providers.lastName,
        suffix: providers.suffix,
        npi: providers.npi,
      })
      .from(providers)
      .where(eq(providers.id, id))
      .prepare(),
    enrollmentRequirements: db
      .select({
        id: enrollmentRequirements.id,
        name: enrollmentRequirements.name,
        isComplete: enrollmentRequirements.isComplete,
        completedAt: enrollmentRequirements.completedAt,
      })
      .from(enrollmentRequirements)
      .where(eq(enrollmentRequirements.enrollmentId, id))
      .orderBy(asc(enrollmentRequirements.position), asc(enrollmentRequirements.id))
      .prepare(),
    enrollmentLinesOfBusiness: db
      .select({
        id: enrollmentLinesOfBusiness.id,
        lineOfBusiness: enrollmentLinesOfBusiness.lineOfBusiness,
        status: enrollmentLinesOfBusiness.status,
        effectiveDate: enrollmentLinesOfBusiness.effectiveDate,
      })
      .from(enrollmentLinesOfBusiness)
      .where(eq(enrollmentLinesOfBusiness.enrollmentId, id))
      .orderBy(asc(enrollmentLinesOfBusiness.lineOfBusiness), asc(enrollmentLinesOfBusiness.id))
      .prepare(),
    enrollmentLocations: db
      .select({
        id: enrollmentLocationParticipations.id,
        serviceLocationId: enrollmentLocationParticipations.serviceLocationId,
        // Left join: null name, city and state until the service location arrives.
        name: serviceLocations.name,
        city: serviceLocations.city,
        state: serviceLocations.state,
        isActive: enrollmentLocationParticipations.isActive,
        activatedOn: enrollmentLocationParticipations.activatedOn,
      })
      .from(enrollmentLocationParticipations)
      .leftJoin(
        serviceLocations,
        eq(serviceLocations.id, enrollmentLocationParticipations.serviceLocationId),
      )
      .where(eq(enrollmentLocationParticipations.enrollmentId, id))
      .orderBy(
        sql`${serviceLocations.name} asc nulls last`,
        asc(enrollmentLocationParticipations.id),
      )
      .prepare(),

    groupEnrollment: db
      .select()
      .from(groupEnrollments)
      .where(eq(groupEnrollments.id, id))
      .prepare(),
    embeddedGroup: db
      .select({
        id: providerGroups.id,
        name: providerGroups.name,
        npi: providerGroups.npi,
        tin: providerGroups.tin,
      })
      .from(providerGroups)
      .where(eq(providerGroups.id, id))
      .prepare(),
    groupEnrollmentLinesOfBusiness: db
      .select({
        id: groupEnrollmentLinesOfBusiness.id,
        lineOfBusiness: groupEnrollmentLinesOfBusiness.lineOfBusiness,
        status: groupEnrollmentLinesOfBusiness.status,
        effectiveDate: groupEnrollmentLinesOfBusiness.effectiveDate,
      })
      .from(groupEnrollmentLinesOfBusiness)
      .where(eq(groupEnrollmentLinesOfBusiness.groupEnrollmentId, id))
      .orderBy(
        asc(groupEnrollmentLinesOfBusiness.lineOfBusiness),
        asc(groupEnrollmentLinesOfBusiness.id),
      )
      .prepare(),

    document: db.select().from(documents).where(eq(documents.id, id)).prepare(),
    providerIdentifier: db
      .select()
      .from(providerIdentifiers)
      .where(eq(providerIdentifiers.id, id))
      .prepare(),
    groupIdentifier: db
      .select()
      .from(groupIdentifiers)
      .where(eq(groupIdentifiers.id, id))
      .prepare(),

    // Fan-outs (indexed by schema/organization-db.ts).
    enrollmentsOfProvider: db
      .select({ id: enrollments.id })
      .from(enrollments)
      .where(eq(enrollments.providerId, id))
      .prepare(),
    membersOfGroup: db
      .selectDistinct({ id: groupMemberships.providerId })
      .from(groupMemberships)
      .where(eq(groupMemberships.providerGroupId, id))
      .prepare(),
    groupEnrollmentsOfGroup: db
      .select({ id: groupEnrollments.id })
      .from(groupEnrollments)
      .where(eq(groupEnrollments.providerGroupId, id))
      .prepare(),
    enrollmentsAtLocation: db
      .selectDistinct({ id: enrollmentLocationParticipations.enrollmentId })
      .from(enrollmentLocationParticipations)
      .where(eq(enrollmentLocationParticipations.serviceLocationId, id))
      .prepare(),
  }
}

export type MirrorReads = ReturnType<typeof prepareMirrorReads>

type DocumentTable =
  | typeof providerDocs
  | typeof providerGroupDocs
  | typeof enrollmentDocs
  | typeof groupEnrollmentDocs
  | typeof documentDocs
  | typeof expirableDocs

/**
 * Insert or replace every column of a served document, by id. Values bind by column key; the
 * returned function types them (drizzle's prepared `run` takes any record).
 */
function prepareUpsert<T extends DocumentTable>(
  db: OrganizationDb,
  table: T,
): (row: T['$inferInsert']) => void {
  const columns = Object.entries<AnySQLiteColumn>(getTableColumns(table))
  const values = Object.fromEntries(columns.map(([key]) => [key, sql.placeholder(key)]))
  const replace = Object.fromEntries(
    columns
      .filter(([, column]) => !column.primary)
      .map(([key, column]) => [key, sql.raw(`excluded."${column.name}"`)]),
  )
  const target: DocumentTable = table // widened: drizzle's builder types do not resolve on T
  const statement = db
    .insert(target)
    .values(values as never)
    .onConflictDoUpdate({ target: target.id, set: replace })
    .prepare()
  return (row) => {
    statement.run(row)
  }
}

/** Reads and writes of the served documents. */
export function prepareDocumentStore(db: OrganizationDb) {
  const storedHash = (table: Exclude<DocumentTable, typeof providerDocs>) => {
    const statement = db.select({ hash: table.hash }).from(table).where(eq(table.id, id)).prepare()
    return (documentId: string): string | undefined => statement.get({ id: documentId })?.hash
  }
  /** Deletes a served document; true if there was one. */
  const remove = (table: DocumentTable) => {
    const statement = db.delete(table).where(eq(table.id, id)).prepare()
    return (documentId: string): boolean => statement.run({ id: documentId }).changes > 0
  }
  const providerStamps = db
    .select({
      hash: providerDocs.hash,
      updatedAt: providerDocs.updatedAt,
      sensitiveHash: providerDocs.sensitiveHash,
      sensitiveUpdatedAt: providerDocs.sensitiveUpdatedAt,
    })
    .from(providerDocs)
    .where(eq(providerDocs.id, id))
    .prepare()
  return {
    provider: {
      /** Both variants' hash and stamp: each keeps its stamp unless its own content changed. */
      stored: (documentId: string) => providerStamps.get({ id: documentId }),
      write: prepareUpsert(db, providerDocs),
      remove: remove(providerDocs),
    },
    providerGroup: {
      storedHash: storedHash(providerGroupDocs),
      write: prepareUpsert(db, providerGroupDocs),
      remove: remove(providerGroupDocs),
    },
    enrollment: {
      storedHash: storedHash(enrollmentDocs),
      write: prepareUpsert(db, enrollmentDocs),
      remove: remove(enrollmentDocs),
    },
    groupEnrollment: {
      storedHash: storedHash(groupEnrollmentDocs),
      write: prepareUpsert(db, groupEnrollmentDocs),
      remove: remove(groupEnrollmentDocs),
    },
    document: {
      storedHash: storedHash(documentDocs),
      write: prepareUpsert(db, documentDocs),
      remove: remove(documentDocs),
    },
    expirable: {
      storedHash: storedHash(expirableDocs),
      write: prepareUpsert(db, expirableDocs),
      remove: remove(expirableDocs),
    },
  }
}

export type DocumentStore = ReturnType<typeof prepareDocumentStore>
