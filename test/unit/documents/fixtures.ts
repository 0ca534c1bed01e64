// A real organization file in a temp dir, a way to change its mirror the way the projector does
// (upsert or delete a row, remembering the version before), and mirror rows with defaults.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { eq } from 'drizzle-orm'
import * as schema from '../../../schema/organization-db.ts'
import { openForWriting, organizationDb, type SqliteDatabase } from '../../../src/sqlite.ts'
import {
  createDocumentRefresher,
  type DetailedRefreshStats,
  type DocumentRefresher,
  type MirrorChange,
  type MirrorRows,
  type MirrorTable,
  type PriorStamp,
} from '../../../projector/documents/index.ts'

export const mirrorTables = {
  providers: schema.providers,
  provider_identifiers: schema.providerIdentifiers,
  provider_groups: schema.providerGroups,
  group_memberships: schema.groupMemberships,
  service_locations: schema.serviceLocations,
  group_identifiers: schema.groupIdentifiers,
  enrollments: schema.enrollments,
  enrollment_requirements: schema.enrollmentRequirements,
  enrollment_lines_of_business: schema.enrollmentLinesOfBusiness,
  enrollment_location_participations: schema.enrollmentLocationParticipations,
  group_enrollments: schema.groupEnrollments,
  group_enrollment_lines_of_business: schema.groupEnrollmentLinesOfBusiness,
  documents: schema.documents,
} as const satisfies Record<MirrorTable, unknown>

const docTables = {
  doc_providers: schema.providerDocs,
  doc_provider_groups: schema.providerGroupDocs,
  doc_enrollments: schema.enrollmentDocs,
  doc_group_enrollments: schema.groupEnrollmentDocs,
  doc_documents: schema.documentDocs,
  doc_expirables: schema.expirableDocs,
} as const

type DocTable = keyof typeof docTables
type DocRow<T extends DocTable> = (typeof docTables)[T]['$inferSelect']

export interface TestFile {
  db: SqliteDatabase
  refresher: DocumentRefresher
  /** Upserts a mirror row; the change is queued for the next `refresh`. */
  put<T extends MirrorTable>(table: T, row: MirrorRows[T]): void
  /** Deletes a mirror row; the change is queued for the next `refresh`. */
  remove(table: MirrorTable, id: string): void
  /** Refreshes the queued changes in one transaction, as the projector does after a batch. */
  refresh(stamp: string): DetailedRefreshStats
  /** The stored document row, or undefined. */
  doc<T extends DocTable>(table: T, id: string): DocRow<T> | undefined
  /** The stored body parsed (`sensitive` for the provider's sensitive variant). */
  body(table: DocTable, id: string, variant?: 'sensitive'): Record<string, unknown>
  close(): void
}

export function openTestFile(
  options: { priorStamp?: PriorStamp; buildPageRows?: number } = {},
): TestFile {
  const dir = mkdtempSync(join(tmpdir(), 'documents-'))
  const db = openForWriting(join(dir, 'organization.db'), 'organization')
  const orm = organizationDb(db)
  const refresher = createDocumentRefresher(db, options)
  let pending: MirrorChange[] = []

  const find = (table: MirrorTable, id: string) => {
    const t = mirrorTables[table]
    return orm.select().from(t).where(eq(t.id, id)).get()
  }

  return {
    db,
    refresher,
    put(table, row) {
      const t = mirrorTables[table]
      const previous = find(table, row.id)
      orm
        .insert(t)
        .values(row as never)
        .onConflictDoUpdate({ target: t.id, set: row as never })
        .run()
      pending.push({ table, id: row.id, previous, current: find(table, row.id) } as MirrorChange)
    },
    remove(table, id) {
      const t = mirrorTables[table]
      const previous = find(table, id)
      orm.delete(t).where(eq(t.id, id)).run()
      pending.push({ table, id, previous, current: undefined } as MirrorChange)
    },
    refresh(stamp) {
      const changes = pending
      pending = []
      return db.transaction(() => refresher.refresh(changes, stamp))()
    },
    doc(table, id) {
      const t = docTables[table]
      return orm.select().from(t).where(eq(t.id, id)).get()
    },
    body(table, id, variant) {
      const row = this.doc(table, id)
      if (row === undefined) throw new Error(`no ${table} ${id}`)
      const text =
        variant === 'sensitive' ? (row as DocRow<'doc_providers'>).sensitiveBody : row.body
      return JSON.parse(text) as Record<string, unknown>
    },
    close() {
      db.close()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

// ---- Mirror rows with defaults -------------------------------------------------------------------

const created = { createdAt: '2024-01-02T03:04:05.678Z', updatedAt: '2024-01-02T03:04:05.678Z' }
const position = { sourceLsn: 1, fromSnapshot: false, organizationKey: 1 }

type Row<T extends MirrorTable> = MirrorRows[T]
type Overrides<T extends MirrorTable> = Partial<Row<T>> & { id: string }

export function provider(o: Overrides<'providers'>): Row<'providers'> {
  return {
    firstName: 'Ada',
    middleName: null,
    lastName: 'Lovelace',
    suffix: null,
    npi: '1234567890',
    isActive: true,
    telehealthServices: false,
    type: 'MD',
    caqhId: null,
    startDate: '2020-01-01',
    termedDate: null,
    taxonomyCode: null,
    specialty: 'Cardiology',
    specialtyTaxonomyCode: null,
    secondarySpecialty: null,
    secondarySpecialtyTaxonomyCode: null,
    additionalSpecialty1: null,
    additionalSpecialty1TaxonomyCode: null,
    additionalSpecialty2: null,
    additionalSpecialty2TaxonomyCode: null,
    additionalSpecialty3: null,
    additionalSpecialty3TaxonomyCode: null,
    additionalSpecialty4: null,
    additionalSpecialty4TaxonomyCode: null,
    additionalSpecialty5: null,
    additionalSpecialty5TaxonomyCode: null,
    billingAddress: '1 Main St',
    billingAddressLine2: null,
    billingCity: 'Springfield',
    billingState: 'IL',
    billingZip: '62701',
    personalAddress: null,
    personalAddressLine2: null,
    personalCity: null,
    personalCounty: null,
    personalState: null,
    personalZip: null,
    personalEmail: null,
    personalFax: null,
    personalPhone: null,
    otherEmails: '[]',
    languages: '["en","es"]',
    medicaidParticipation: null,
    medicareParticipation: null,
    medicaidStates: '[]',
    medicareStates: '["IL"]',
    birthCity: 'London',
    birthCountry: 'GB',
    dateOfBirth: '1815-12-10',
    ethnicity: null,
    ethnicityDetail: null,
    gender: 'F',
    ...created,
    ...position,
    ...o,
  }
}

export function providerIdentifier(
  o: Overrides<'provider_identifiers'> & { providerId: string },
): Row<'provider_identifiers'> {
  return {
    type: 'state_license',
    value: 'A-1',
    issuedOn: '2020-01-01',
    expiresOn: null,
    metadata: '{"state": "CA"}',
    ...created,
    ...position,
    ...o,
  }
}

export function providerGroup(o: Overrides<'provider_groups'>): Row<'provider_groups'> {
  return {
    name: 'Group',
    legalName: null,
    npi: null,
    tin: null,
    taxonomyCode: null,
    ...created,
    ...position,
    ...o,
  }
}

export function membership(
  o: Overrides<'group_memberships'> & { providerId: string; providerGroupId: string },
): Row<'group_memberships'> {
  return { ...created, ...position, ...o }
}

export function serviceLocation(
  o: Overrides<'service_locations'> & { providerGroupId: string },
): Row<'service_locations'> {
  return {
    name: 'Clinic',
    address: null,
    addressLine2: null,
    city: null,
    state: null,
    zip: null,
    phone: null,
    isPrimary: false,
    ...created,
    ...position,
    ...o,
  }
}

export function groupIdentifier(
  o: Overrides<'group_identifiers'> & { providerGroupId: string },
): Row<'group_identifiers'> {
  return {
    type: 'clia',
    value: 'C-1',
    issuedOn: null,
    expiresOn: null,
    metadata: '{}',
    ...created,
    ...position,
    ...o,
  }
}

export function enrollment(
  o: Overrides<'enrollments'> & { providerId: string },
): Row<'enrollments'> {
  return {
    providerGroupId: null,
    payer: 'Aetna',
    state: 'CA',
    status: 'in_progress',
    payerProviderId: null,
    submittedOn: null,
    approvedOn: null,
    effectiveDate: null,
    ...created,
    ...position,
    ...o,
  }
}

export function requirement(
  o: Overrides<'enrollment_requirements'> & { enrollmentId: string },
): Row<'enrollment_requirements'> {
  return {
    position: 1,
    name: 'W-9',
    isComplete: false,
    completedAt: null,
    ...created,
    ...position,
    ...o,
  }
}

export function enrollmentLine(
  o: Overrides<'enrollment_lines_of_business'> & { enrollmentId: string },
): Row<'enrollment_lines_of_business'> {
  return {
    lineOfBusiness: 'commercial',
    status: 'pending',
    effectiveDate: null,
    ...created,
    ...position,
    ...o,
  }
}

export function participation(
  o: Overrides<'enrollment_location_participations'> & {
    enrollmentId: string
    serviceLocationId: string
  },
): Row<'enrollment_location_participations'> {
  return { isActive: false, activatedOn: null, ...created, ...position, ...o }
}

export function groupEnrollment(
  o: Overrides<'group_enrollments'> & { providerGroupId: string },
): Row<'group_enrollments'> {
  return {
    payer: 'Aetna',
    state: null,
    status: 'submitted',
    payerGroupId: null,
    submittedOn: '2024-02-01',
    approvedOn: null,
    effectiveDate: null,
    ...created,
    ...position,
    ...o,
  }
}

export function groupEnrollmentLine(
  o: Overrides<'group_enrollment_lines_of_business'> & { groupEnrollmentId: string },
): Row<'group_enrollment_lines_of_business'> {
  return {
    lineOfBusiness: 'commercial',
    status: 'pending',
    effectiveDate: null,
    ...created,
    ...position,
    ...o,
  }
}

export function document(o: Overrides<'documents'>): Row<'documents'> {
  return {
    providerId: null,
    providerGroupId: null,
    type: 'license',
    fileName: 'license.pdf',
    contentType: 'application/pdf',
    sizeBytes: 1024,
    expiresOn: null,
    uploadedAt: '2024-01-02T03:04:05.678Z',
    ...created,
    ...position,
    ...o,
  }
}

/** Stamps of successive batches. */
export const T1 = '2025-01-01T00:00:00.001Z'
export const T2 = '2025-01-01T00:00:00.002Z'
export const T3 = '2025-01-01T00:00:00.003Z'
export const T4 = '2025-01-01T00:00:00.004Z'
