// Every statement the document layer runs, prepared once per database. The reads are written
// with drizzle's query builder and run as raw better-sqlite3 statements (rows as arrays, mapped by
// a loop): drizzle's prepared queries re-fill placeholders and map every value through its column
// on each call, which cost more than SQLite's own work here.
//
// Orderings are the ones spec/resources.md fixes, completed with the row id so that the order is
// total (equal mirror content, identical text). Text compares with SQLite's BINARY collation
// (code point order, case-sensitive). An enrollment location whose service location has not
// arrived has a null name: it sorts after every named location (NULLS LAST), then by id.
import type Database from 'better-sqlite3'
import { asc, Column, desc, eq, getTableColumns, is, Placeholder, sql } from 'drizzle-orm'
import { getTableConfig, type AnySQLiteColumn } from 'drizzle-orm/sqlite-core'
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

const MAPPED_AS_IS = new Set(['SQLiteText', 'SQLiteInteger', 'SQLiteBoolean'])

/** A select whose only parameter is the `id` placeholder, as drizzle builds it. */
interface SelectById<T> {
  toSQL(): { sql: string; params: unknown[] }
  _: { selectedFields: unknown }
  /** Only for the row type: never called. */
  all(): T[]
}

/** A prepared read by id: the row or rows drizzle would return, mapped the same way. */
export interface ReadById<T> {
  get(id: string): T | undefined
  all(id: string): T[]
}

/**
 * Prepares a drizzle select as a raw statement. Values are mapped as drizzle maps them: null
 * stays null, boolean columns read `Number(v) === 1`, every other column here is returned as is.
 */
function prepareRead<T>(sqlite: Database.Database, query: SelectById<T>): ReadById<T> {
  const { sql: text, params } = query.toSQL()
  for (const param of params) {
    if (!(is(param, Placeholder) && param.name === 'id')) {
      throw new Error(`unexpected parameter in ${text}`)
    }
  }
  const fields = Object.entries(query._.selectedFields as Record<string, unknown>)
  const keys = fields.map(([key]) => key)
  const booleans = fields.map(([key, field]) => {
    if (!is(field, Column) || !MAPPED_AS_IS.has(field.columnType)) {
      throw new Error(`${key}: only text, integer and boolean columns are mapped here`)
    }
    return field.columnType === 'SQLiteBoolean'
  })
  const statement = sqlite.prepare<unknown[], unknown[]>(text).raw(true)
  const bind = params.length
  const map = (values: unknown[]): T => {
    const row: Record<string, unknown> = {}
    for (let i = 0; i < keys.length; i++) {
      const value = values[i]
      row[keys[i]!] = value === null ? null : booleans[i] ? Number(value) === 1 : value
    }
    return row as T
  }
  const args = (id: string) => (bind === 1 ? [id] : new Array<string>(bind).fill(id))
  return {
    get(id) {
      const values = statement.get(args(id))
      return values === undefined ? undefined : map(values)
    },
    all: (id) => statement.all(args(id)).map(map),
  }
}

/** Reads of the mirror: each child list selects exactly the response entry, in key order. */
export function prepareMirrorReads(db: OrganizationDb, sqlite: Database.Database) {
  const read = <T>(query: SelectById<T>) => prepareRead(sqlite, query)
  return {
    provider: read(db.select().from(providers).where(eq(providers.id, id))),
    providerMemberships: read(
      db
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
        .orderBy(asc(providerGroups.name), asc(providerGroups.id), asc(groupMemberships.id)),
    ),
    providerIdentifiers: read(
      db
        .select(identifierColumns)
        .from(providerIdentifiers)
        .where(eq(providerIdentifiers.providerId, id))
        .orderBy(asc(providerIdentifiers.type), asc(providerIdentifiers.id)),
    ),

    providerGroup: read(db.select().from(providerGroups).where(eq(providerGroups.id, id))),
    groupServiceLocations: read(
      db
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
        ),
    ),
    groupIdentifiers: read(
      db
        .select(groupIdentifierColumns)
        .from(groupIdentifiers)
        .where(eq(groupIdentifiers.providerGroupId, id))
        .orderBy(asc(groupIdentifiers.type), asc(groupIdentifiers.id)),
    ),

    enrollment: read(db.select().from(enrollments).where(eq(enrollments.id, id))),
    embeddedProvider: read(
      db
        .select({
          id: providers.id,
          firstName: providers.firstName,
          middleName: providers.middleName,
          lastName: providers.lastName,
          suffix: providers.suffix,
          npi: providers.npi,
        })
        .from(providers)
        .where(eq(providers.id, id)),
    ),
    enrollmentRequirements: read(
      db
        .select({
          id: enrollmentRequirements.id,
          name: enrollmentRequirements.name,
          isComplete: enrollmentRequirements.isComplete,
          completedAt: enrollmentRequirements.completedAt,
        })
        .from(enrollmentRequirements)
        .where(eq(enrollmentRequirements.enrollmentId, id))
        .orderBy(asc(enrollmentRequirements.position), asc(enrollmentRequirements.id)),
    ),
    enrollmentLinesOfBusiness: read(
      db
        .select({
          id: enrollmentLinesOfBusiness.id,
          lineOfBusiness: enrollmentLinesOfBusiness.lineOfBusiness,
          status: enrollmentLinesOfBusiness.status,
          effectiveDate: enrollmentLinesOfBusiness.effectiveDate,
        })
        .from(enrollmentLinesOfBusiness)
        .where(eq(enrollmentLinesOfBusiness.enrollmentId, id))
        .orderBy(asc(enrollmentLinesOfBusiness.lineOfBusiness), asc(enrollmentLinesOfBusiness.id)),
    ),
    enrollmentLocations: read(
      db
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
        ),
    ),

    groupEnrollment: read(db.select().from(groupEnrollments).where(eq(groupEnrollments.id, id))),
    embeddedGroup: read(
      db
        .select({
          id: providerGroups.id,
          name: providerGroups.name,
          npi: providerGroups.npi,
          tin: providerGroups.tin,
        })
        .from(providerGroups)
        .where(eq(providerGroups.id, id)),
    ),
    groupEnrollmentLinesOfBusiness: read(
      db
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
        ),
    ),

    document: read(db.select().from(documents).where(eq(documents.id, id))),
    providerIdentifier: read(
      db.select().from(providerIdentifiers).where(eq(providerIdentifiers.id, id)),
    ),
    groupIdentifier: read(db.select().from(groupIdentifiers).where(eq(groupIdentifiers.id, id))),

    // Fan-outs (indexed by schema/organization-db.ts).
    enrollmentsOfProvider: read(
      db.select({ id: enrollments.id }).from(enrollments).where(eq(enrollments.providerId, id)),
    ),
    membersOfGroup: read(
      db
        .selectDistinct({ id: groupMemberships.providerId })
        .from(groupMemberships)
        .where(eq(groupMemberships.providerGroupId, id)),
    ),
    groupEnrollmentsOfGroup: read(
      db
        .select({ id: groupEnrollments.id })
        .from(groupEnrollments)
        .where(eq(groupEnrollments.providerGroupId, id)),
    ),
    enrollmentsAtLocation: read(
      db
        .selectDistinct({ id: enrollmentLocationParticipations.enrollmentId })
        .from(enrollmentLocationParticipations)
        .where(eq(enrollmentLocationParticipations.serviceLocationId, id)),
    ),
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

function columnsOf(table: DocumentTable) {
  return Object.entries<AnySQLiteColumn>(getTableColumns(table)).map(([key, column]) => ({
    key,
    name: column.name,
    boolean: column.columnType === 'SQLiteBoolean',
  }))
}

/**
 * Writes a served document unless the stored one has the same content: one upsert that does
 * nothing when the stored hash equals the new one (then its stamp and body stay). Returns whether
 * it wrote. Values bind by column key, booleans as 1/0 (as drizzle binds them).
 */
function prepareWrite<T extends DocumentTable>(
  sqlite: Database.Database,
  table: T,
  /** SET clauses by column name, for columns not simply replaced by the new value. */
  keep: Record<string, string> = {},
): (row: T['$inferInsert']) => boolean {
  const name = getTableConfig(table).name
  const columns = columnsOf(table)
  const changed = columns
    .filter((c) => c.name.endsWith('hash'))
    .map((c) => `"${name}"."${c.name}" IS NOT excluded."${c.name}"`)
  const statement = sqlite.prepare<unknown[]>(
    `INSERT INTO "${name}" (${columns.map((c) => `"${c.name}"`).join(', ')})
     VALUES (${columns.map(() => '?').join(', ')})
     ON CONFLICT ("id") DO UPDATE SET ${columns
       .filter((c) => c.name !== 'id')
       .map((c) => `"${c.name}" = ${keep[c.name] ?? `excluded."${c.name}"`}`)
       .join(', ')}
     WHERE ${changed.join(' OR ')}`,
  )
  const keys = columns.map((c) => c.key)
  const booleans = columns.map((c) => c.boolean)
  return (row) => {
    const values = new Array<unknown>(keys.length)
    for (let i = 0; i < keys.length; i++) {
      const value = (row as Record<string, unknown>)[keys[i]!]
      values[i] = booleans[i] ? (value ? 1 : 0) : (value ?? null)
    }
    return statement.run(values).changes > 0
  }
}

/** Reads and writes of the served documents. */
export function prepareDocumentStore(sqlite: Database.Database) {
  /** Deletes a served document; true if there was one. */
  const remove = (table: DocumentTable) => {
    const statement = sqlite.prepare<[string]>(
      `DELETE FROM "${getTableConfig(table).name}" WHERE "id" = ?`,
    )
    return (documentId: string): boolean => statement.run(documentId).changes > 0
  }
  // Each provider variant keeps its stamp and body unless its own content changed (the stored
  // body is the same content stamped with the stored stamp). SQLite evaluates every SET
  // expression against the row as it was.
  const keepUnless = (hash: string, column: string) =>
    `CASE WHEN "doc_providers"."${hash}" = excluded."${hash}" THEN "doc_providers"."${column}" ELSE excluded."${column}" END`
  return {
    provider: {
      /** Writes both variants unless both hashes are unchanged; true if it wrote. */
      write: prepareWrite(sqlite, providerDocs, {
        updated_at: keepUnless('hash', 'updated_at'),
        body: keepUnless('hash', 'body'),
        sensitive_updated_at: keepUnless('sensitive_hash', 'sensitive_updated_at'),
        sensitive_body: keepUnless('sensitive_hash', 'sensitive_body'),
      }),
      remove: remove(providerDocs),
    },
    providerGroup: {
      write: prepareWrite(sqlite, providerGroupDocs),
      remove: remove(providerGroupDocs),
    },
    enrollment: { write: prepareWrite(sqlite, enrollmentDocs), remove: remove(enrollmentDocs) },
    groupEnrollment: {
      write: prepareWrite(sqlite, groupEnrollmentDocs),
      remove: remove(groupEnrollmentDocs),
    },
    document: { write: prepareWrite(sqlite, documentDocs), remove: remove(documentDocs) },
    expirable: { write: prepareWrite(sqlite, expirableDocs), remove: remove(expirableDocs) },
  }
}

export type DocumentStore = ReturnType<typeof prepareDocumentStore>
