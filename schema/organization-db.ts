// Tables of one organization's file (`orgs/<organizationId>.db`).
//
// Two kinds of table live here:
// - the mirror: the source rows the documents are built from, one table per source table, with
//   the never-exposed columns (ssn, internal_notes, storage_key) already dropped, plus the source
//   position of the version stored (`sourceLsn`, `fromSnapshot`) for the older-never-wins guard;
// - the served documents (`doc_*`): one row per API resource, holding the response JSON text
//   ready to be joined into a page, its hash (of the content without `updatedAt`) and its stamp.
//
// Value encodings in the mirror: uuids, text and dates ('YYYY-MM-DD') as text; timestamps as ISO
// 8601 UTC with milliseconds; booleans as 0/1; text[] and jsonb as JSON text.
import { index, integer, primaryKey, sqliteTable, text } from 'drizzle-orm/sqlite-core'

/**
 * The organization a row belongs to, as the file's `file_organizations` numbers it. A file of its
 * own holds one organization (key 1, the default, so that files written before shared files need
 * only the column added); a file shared by small organizations holds many, and every connection to
 * it reads through views scoped to one (projector/storage/scope.ts).
 */
const organization = {
  organizationKey: integer('organization_key').notNull().default(1),
}

const sourcePosition = {
  /** Debezium `source.lsn` of the stored version; 0 when the event carried none. */
  sourceLsn: integer('source_lsn').notNull(),
  /** 1 when the stored version came from a snapshot read (`op: r`): streamed changes win. */
  fromSnapshot: integer('from_snapshot', { mode: 'boolean' }).notNull(),
}

const timestamps = {
  createdAt: text('created_at').notNull(),
  updatedAt: text('updated_at').notNull(),
}

export const providers = sqliteTable('providers', {
  id: text('id').primaryKey(),
  firstName: text('first_name'),
  middleName: text('middle_name'),
  lastName: text('last_name'),
  suffix: text('suffix'),
  npi: text('npi').notNull(),
  isActive: integer('is_active', { mode: 'boolean' }).notNull(),
  telehealthServices: integer('telehealth_services', { mode: 'boolean' }).notNull(),
  type: text('type'),
  caqhId: text('caqh_id'),
  startDate: text('start_date'),
  termedDate: text('termed_date'),
  taxonomyCode: text('taxonomy_code'),
  specialty: text('specialty'),
  specialtyTaxonomyCode: text('specialty_taxonomy_code'),
  secondarySpecialty: text('secondary_specialty'),
  secondarySpecialtyTaxonomyCode: text('secondary_specialty_taxonomy_code'),
  additionalSpecialty1: text('additional_specialty_1'),
  additionalSpecialty1TaxonomyCode: text('additional_specialty_1_taxonomy_code'),
  additionalSpecialty2: text('additional_specialty_2'),
  additionalSpecialty2TaxonomyCode: text('additional_specialty_2_taxonomy_code'),
  additionalSpecialty3: text('additional_specialty_3'),
  additionalSpecialty3TaxonomyCode: text('additional_specialty_3_taxonomy_code'),
  additionalSpecialty4: text('additional_specialty_4'),
  additionalSpecialty4TaxonomyCode: text('additional_specialty_4_taxonomy_code'),
  additionalSpecialty5: text('additional_specialty_5'),
  additionalSpecialty5TaxonomyCode: text('additional_specialty_5_taxonomy_code'),
  billingAddress: text('billing_address'),
  billingAddressLine2: text('billing_address_line_2'),
  billingCity: text('billing_city'),
  billingState: text('billing_state'),
  billingZip: text('billing_zip'),
  personalAddress: text('personal_address'),
  personalAddressLine2: text('personal_address_line_2'),
  personalCity: text('personal_city'),
  personalCounty: text('personal_county'),
  personalState: text('personal_state'),
  personalZip: text('personal_zip'),
  personalEmail: text('personal_email'),
  personalFax: text('personal_fax'),
  personalPhone: text('personal_phone'),
  otherEmails: text('other_emails').notNull(),
  languages: text('languages').notNull(),
  medicaidParticipation: text('medicaid_participation'),
  medicareParticipation: text('medicare_participation'),
  medicaidStates: text('medicaid_states').notNull(),
  medicareStates: text('medicare_states').notNull(),
  birthCity: text('birth_city'),
  birthCountry: text('birth_country'),
  dateOfBirth: text('date_of_birth'),
  ethnicity: text('ethnicity'),
  ethnicityDetail: text('ethnicity_detail'),
  gender: text('gender'),
  ...timestamps,
  ...sourcePosition,
  ...organization,
})

export const providerIdentifiers = sqliteTable(
  'provider_identifiers',
  {
    id: text('id').primaryKey(),
    providerId: text('provider_id').notNull(),
    type: text('type').notNull(),
    value: text('value').notNull(),
    issuedOn: text('issued_on'),
    expiresOn: text('expires_on'),
    metadata: text('metadata').notNull(),
    ...timestamps,
    ...sourcePosition,
    ...organization,
  },
  (t) => [index('provider_identifiers_provider').on(t.providerId)],
)

export const providerGroups = sqliteTable('provider_groups', {
  id: text('id').primaryKey(),
  name: text('name').notNull(),
  legalName: text('legal_name'),
  npi: text('npi'),
  tin: text('tin'),
  taxonomyCode: text('taxonomy_code'),
  ...timestamps,
  ...sourcePosition,
  ...organization,
})

export const groupMemberships = sqliteTable(
  'group_memberships',
  {
    id: text('id').primaryKey(),
    providerId: text('provider_id').notNull(),
    providerGroupId: text('provider_group_id').notNull(),
    ...timestamps,
    ...sourcePosition,
    ...organization,
  },
  (t) => [
    index('group_memberships_provider').on(t.providerId),
    index('group_memberships_group').on(t.providerGroupId),
  ],
)

export const serviceLocations = sqliteTable(
  'service_locations',
  {
    id: text('id').primaryKey(),
    providerGroupId: text('provider_group_id').notNull(),
    name: text('name').notNull(),
    address: text('address'),
    addressLine2: text('address_line_2'),
    city: text('city'),
    state: text('state'),
    zip: text('zip'),
    phone: text('phone'),
    isPrimary: integer('is_primary', { mode: 'boolean' }).notNull(),
    ...timestamps,
    ...sourcePosition,
    ...organization,
  },
  (t) => [index('service_locations_group').on(t.providerGroupId)],
)

export const groupIdentifiers = sqliteTable(
  'group_identifiers',
  {
    id: text('id').primaryKey(),
    providerGroupId: text('provider_group_id').notNull(),
    type: text('type').notNull(),
    value: text('value').notNull(),
    issuedOn: text('issued_on'),
    expiresOn: text('expires_on'),
    metadata: text('metadata').notNull(),
    ...timestamps,
    ...sourcePosition,
    ...organization,
  },
  (t) => [index('group_identifiers_group').on(t.providerGroupId)],
)

export const enrollments = sqliteTable(
  'enrollments',
  {
    id: text('id').primaryKey(),
    providerId: text('provider_id').notNull(),
    providerGroupId: text('provider_group_id'),
    payer: text('payer').notNull(),
    state: text('state'),
    status: text('status').notNull(),
    payerProviderId: text('payer_provider_id'),
    submittedOn: text('submitted_on'),
    approvedOn: text('approved_on'),
    effectiveDate: text('effective_date'),
    ...timestamps,
    ...sourcePosition,
    ...organization,
  },
  (t) => [index('enrollments_provider').on(t.providerId)],
)

export const enrollmentRequirements = sqliteTable(
  'enrollment_requirements',
  {
    id: text('id').primaryKey(),
    enrollmentId: text('enrollment_id').notNull(),
    position: integer('position').notNull(),
    name: text('name').notNull(),
    isComplete: integer('is_complete', { mode: 'boolean' }).notNull(),
    completedAt: text('completed_at'),
    ...timestamps,
    ...sourcePosition,
    ...organization,
  },
  (t) => [index('enrollment_requirements_enrollment').on(t.enrollmentId)],
)

export const enrollmentLinesOfBusiness = sqliteTable(
  'enrollment_lines_of_business',
  {
    id: text('id').primaryKey(),
    enrollmentId: text('enrollment_id').notNull(),
    lineOfBusiness: text('line_of_business').notNull(),
    status: text('status').notNull(),
    effectiveDate: text('effective_date'),
    ...timestamps,
    ...sourcePosition,
    ...organization,
  },
  (t) => [index('enrollment_lines_of_business_enrollment').on(t.enrollmentId)],
)

export const enrollmentLocationParticipations = sqliteTable(
  'enrollment_location_participations',
  {
    id: text('id').primaryKey(),
    enrollmentId: text('enrollment_id').notNull(),
    serviceLocationId: text('service_location_id').notNull(),
    isActive: integer('is_active', { mode: 'boolean' }).notNull(),
    activatedOn: text('activated_on'),
    ...timestamps,
    ...sourcePosition,
    ...organization,
  },
  (t) => [
    index('enrollment_location_participations_enrollment').on(t.enrollmentId),
    index('enrollment_location_participations_location').on(t.serviceLocationId),
  ],
)

export const groupEnrollments = sqliteTable(
  'group_enrollments',
  {
    id: text('id').primaryKey(),
    providerGroupId: text('provider_group_id').notNull(),
    payer: text('payer').notNull(),
    state: text('state'),
    status: text('status').notNull(),
    payerGroupId: text('payer_group_id'),
    submittedOn: text('submitted_on'),
    approvedOn: text('approved_on'),
    effectiveDate: text('effective_date'),
    ...timestamps,
    ...sourcePosition,
    ...organization,
  },
  (t) => [index('group_enrollments_group').on(t.providerGroupId)],
)

export const groupEnrollmentLinesOfBusiness = sqliteTable(
  'group_enrollment_lines_of_business',
  {
    id: text('id').primaryKey(),
    groupEnrollmentId: text('group_enrollment_id').notNull(),
    lineOfBusiness: text('line_of_business').notNull(),
    status: text('status').notNull(),
    effectiveDate: text('effective_date'),
    ...timestamps,
    ...sourcePosition,
    ...organization,
  },
  (t) => [index('group_enrollment_lines_of_business_enrollment').on(t.groupEnrollmentId)],
)

export const documents = sqliteTable(
  'documents',
  {
    id: text('id').primaryKey(),
    providerId: text('provider_id'),
    providerGroupId: text('provider_group_id'),
    type: text('type').notNull(),
    fileName: text('file_name').notNull(),
    contentType: text('content_type').notNull(),
    sizeBytes: integer('size_bytes').notNull(),
    expiresOn: text('expires_on'),
    uploadedAt: text('uploaded_at').notNull(),
    ...timestamps,
    ...sourcePosition,
    ...organization,
  },
  (t) => [
    index('documents_provider').on(t.providerId),
    index('documents_group').on(t.providerGroupId),
  ],
)

/**
 * Deleted rows: the position of the delete, so that an older version of the row arriving later
 * (a replay, a snapshot read racing the stream) does not bring it back.
 */
export const deletedRows = sqliteTable(
  'deleted_rows',
  {
    sourceTable: text('source_table').notNull(),
    id: text('id').notNull(),
    sourceLsn: integer('source_lsn').notNull(),
  },
  (t) => [primaryKey({ columns: [t.sourceTable, t.id] })],
)

// ---- Served documents ------------------------------------------------------------------------

const servedDocument = {
  id: text('id').primaryKey(),
  /** The replica's visibility stamp: ISO 8601 UTC with milliseconds; moves only when `hash` does. */
  updatedAt: text('updated_at').notNull(),
  /** Hash of the response content without `updatedAt`. */
  hash: text('hash').notNull(),
  /** The complete response object as JSON text, `updatedAt` included. */
  body: text('body').notNull(),
  ...organization,
}

/**
 * Providers have two variants: `body` for keys without `providers:read:sensitive`, and
 * `sensitiveBody` with the six sensitive fields. Each has its own hash and stamp, so a change to
 * a sensitive field moves `updatedAt` only for the keys that can see it.
 */
export const providerDocs = sqliteTable(
  'doc_providers',
  {
    ...servedDocument,
    sensitiveUpdatedAt: text('sensitive_updated_at').notNull(),
    sensitiveHash: text('sensitive_hash').notNull(),
    sensitiveBody: text('sensitive_body').notNull(),
    isActive: integer('is_active', { mode: 'boolean' }).notNull(),
  },
  (t) => [
    index('doc_providers_page').on(t.updatedAt, t.id),
    index('doc_providers_sensitive_page').on(t.sensitiveUpdatedAt, t.id),
    index('doc_providers_active_page').on(t.isActive, t.updatedAt, t.id),
    index('doc_providers_active_sensitive_page').on(t.isActive, t.sensitiveUpdatedAt, t.id),
  ],
)

export const providerGroupDocs = sqliteTable('doc_provider_groups', servedDocument, (t) => [
  index('doc_provider_groups_page').on(t.updatedAt, t.id),
])

export const enrollmentDocs = sqliteTable(
  'doc_enrollments',
  {
    ...servedDocument,
    providerId: text('provider_id').notNull(),
    status: text('status').notNull(),
    /** The payer name lower-cased: the `payer` filter matches exactly, ignoring case. */
    payerKey: text('payer_key').notNull(),
  },
  (t) => [
    index('doc_enrollments_page').on(t.updatedAt, t.id),
    index('doc_enrollments_provider_page').on(t.providerId, t.updatedAt, t.id),
    index('doc_enrollments_status_page').on(t.status, t.updatedAt, t.id),
    index('doc_enrollments_payer_page').on(t.payerKey, t.updatedAt, t.id),
  ],
)

export const groupEnrollmentDocs = sqliteTable(
  'doc_group_enrollments',
  {
    ...servedDocument,
    providerGroupId: text('provider_group_id').notNull(),
    status: text('status').notNull(),
    payerKey: text('payer_key').notNull(),
  },
  (t) => [
    index('doc_group_enrollments_page').on(t.updatedAt, t.id),
    index('doc_group_enrollments_group_page').on(t.providerGroupId, t.updatedAt, t.id),
    index('doc_group_enrollments_status_page').on(t.status, t.updatedAt, t.id),
    index('doc_group_enrollments_payer_page').on(t.payerKey, t.updatedAt, t.id),
  ],
)

export const documentDocs = sqliteTable(
  'doc_documents',
  {
    ...servedDocument,
    providerId: text('provider_id'),
    providerGroupId: text('provider_group_id'),
  },
  (t) => [
    index('doc_documents_page').on(t.updatedAt, t.id),
    index('doc_documents_provider_page').on(t.providerId, t.updatedAt, t.id),
    index('doc_documents_group_page').on(t.providerGroupId, t.updatedAt, t.id),
  ],
)

/**
 * The precomputed expirables view. `body` is the response object WITHOUT its last two keys and
 * without the closing brace: the api appends `,"daysUntilExpiration":N,"updatedAt":"..."}`,
 * because the day count depends on the date the request is served.
 */
export const expirableDocs = sqliteTable(
  'doc_expirables',
  {
    id: text('id').primaryKey(),
    sourceType: text('source_type').notNull(),
    sourceId: text('source_id').notNull(),
    expiresOn: text('expires_on').notNull(),
    updatedAt: text('updated_at').notNull(),
    hash: text('hash').notNull(),
    body: text('body').notNull(),
    ...organization,
  },
  (t) => [index('doc_expirables_page').on(t.expiresOn, t.sourceType, t.sourceId)],
)

// ---- Bookkeeping -----------------------------------------------------------------------------

/**
 * The last Kafka offset this file applied, per topic-partition, written in the same transaction
 * as the rows: a redelivered record at or below it is skipped (exactly-once effect).
 */
export const appliedOffsets = sqliteTable(
  'applied_offsets',
  {
    topic: text('topic').notNull(),
    partition: integer('partition').notNull(),
    /** Kafka offsets are int64; real ones stay far below 2^53, so a JS number holds them. */
    offset: integer('offset').notNull(),
  },
  (t) => [primaryKey({ columns: [t.topic, t.partition] })],
)

/**
 * The organizations whose rows the file holds, each numbered by the key its rows carry. A file of
 * its own holds one, key 1; a shared file numbers each organization as its first row arrives.
 */
export const fileOrganizations = sqliteTable('file_organizations', {
  key: integer('key').primaryKey(),
  organizationId: text('organization_id').notNull().unique(),
})

/** Small facts about the file: `organization_id`, `last_stamp` (stamps never go backwards). */
export const replicaMeta = sqliteTable('replica_meta', {
  key: text('key').primaryKey(),
  value: text('value').notNull(),
})
