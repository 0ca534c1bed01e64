// Debezium change events for the source tables (schema/source.sql), as the PostgreSQL connector
// writes them through Kafka Connect's JsonConverter: with the `{schema, payload}` wrapper
// (schemas.enable=true, Debezium's default) or without it.
//
// Column encodings are Debezium's defaults: uuid and text as strings; boolean; integer and bigint
// as numbers; `date` as days since the epoch (io.debezium.time.Date); timestamptz as an ISO 8601
// string (io.debezium.time.ZonedTimestamp, microseconds); jsonb as a JSON string
// (io.debezium.data.Json); text[] as an array of strings. Each is decoded to the mirror's storage
// form (see schema/organization-db.ts): dates 'YYYY-MM-DD', timestamps ISO with milliseconds,
// jsonb and text[] as JSON text.
//
// Schema evolution: columns the replica does not know are ignored (the product adds columns
// without asking); a NOT NULL column that is missing makes the event bad; a nullable column that
// is missing reads as null, so dropping a nullable column in the product stops nothing.
//
// Never stored: ssn, internal_notes, storage_key are not declared below, so decoding drops them;
// payer_portal_logins is not a table here at all.
import { z } from 'zod'

/** What Debezium sends for an unchanged TOASTed column (REPLICA IDENTITY DEFAULT). */
export const UNAVAILABLE_VALUE = '__debezium_unavailable_value'

/** Marks a column whose value the event does not carry: the stored value stays. */
export const unavailable = Symbol('unavailable')
export type Unavailable = typeof unavailable

const MS_PER_DAY = 86_400_000
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
const ISO_TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}(:?\d{2})?)$/

export function epochDaysToDate(days: number): string {
  return new Date(days * MS_PER_DAY).toISOString().slice(0, 10)
}

/** Debezium's ZonedTimestamp (microseconds, any offset) to ISO 8601 UTC with milliseconds. */
export function normalizeTimestamp(value: string): string | undefined {
  if (!ISO_TIMESTAMP.test(value)) return undefined
  const ms = Date.parse(value)
  return Number.isNaN(ms) ? undefined : new Date(ms).toISOString()
}

// ---- Column codecs -----------------------------------------------------------------------------

const uuid = z.string().regex(UUID, 'expected a uuid').transform((s) => s.toLowerCase())

const text = z.string().transform((s): string | Unavailable => (s === UNAVAILABLE_VALUE ? unavailable : s))

const timestamp = z.string().transform((s, ctx): string | Unavailable => {
  if (s === UNAVAILABLE_VALUE) return unavailable
  const normalized = normalizeTimestamp(s)
  if (normalized === undefined) {
    ctx.addIssue({ code: 'custom', message: 'expected an ISO 8601 timestamp' })
    return z.NEVER
  }
  return normalized
})

// Debezium's default time.precision.mode=adaptive writes days since the epoch; a string form
// (some converters) is accepted when it is already 'YYYY-MM-DD'.
const date = z.union([
  z
    .number()
    .int()
    .min(-719_162)
    .max(2_932_896)
    .transform((days) => epochDaysToDate(days)),
  z.string().regex(/^\d{4}-\d{2}-\d{2}$/, 'expected days since the epoch or YYYY-MM-DD'),
])

const jsonb = z.string().transform((s, ctx): string | Unavailable => {
  if (s === UNAVAILABLE_VALUE) return unavailable
  try {
    // Re-serialized so equal values are stored (and hashed) identically.
    return JSON.stringify(JSON.parse(s) as unknown)
  } catch {
    ctx.addIssue({ code: 'custom', message: 'expected a JSON document' })
    return z.NEVER
  }
})

const textArray = z
  .array(z.string().nullable())
  .transform((a): string | Unavailable =>
    a.length === 1 && a[0] === UNAVAILABLE_VALUE ? unavailable : JSON.stringify(a),
  )

const integer = z.number().int()
const bigint = z.number().int()
const boolean = z.boolean()

/** A nullable source column: null when absent (the column may have been dropped). */
function nullable<T extends z.ZodType>(codec: T) {
  return codec.nullable().optional().transform((v) => (v === undefined ? null : v))
}

// ---- Tables ------------------------------------------------------------------------------------

const tenant = { id: uuid, organization_id: uuid }
const stamps = { created_at: timestamp, updated_at: timestamp }

export const rowSchemas = {
  organizations: z.object({
    id: uuid,
    name: text,
    api_enabled: boolean,
    billing_status: text,
    ...stamps,
  }),
  api_keys: z.object({
    ...tenant,
    name: text,
    key_hash: z.string().regex(/^[0-9a-fA-F]{64}$/, 'expected a hex SHA-256').transform((s) => s.toLowerCase()),
    scopes: textArray,
    created_at: timestamp,
    expires_at: nullable(timestamp),
    revoked_at: nullable(timestamp),
  }),
  providers: z.object({
    ...tenant,
    first_name: nullable(text),
    middle_name: nullable(text),
    last_name: nullable(text),
    suffix: nullable(text),
    npi: text,
    is_active: boolean,
    telehealth_services: boolean,
    type: nullable(text),
    caqh_id: nullable(text),
    start_date: nullable(date),
    termed_date: nullable(date),
    taxonomy_code: nullable(text),
    specialty: nullable(text),
    specialty_taxonomy_code: nullable(text),
    secondary_specialty: nullable(text),
    secondary_specialty_taxonomy_code: nullable(text),
    additional_specialty_1: nullable(text),
    additional_specialty_1_taxonomy_code: nullable(text),
    additional_specialty_2: nullable(text),
    additional_specialty_2_taxonomy_code: nullable(text),
    additional_specialty_3: nullable(text),
    additional_specialty_3_taxonomy_code: nullable(text),
    additional_specialty_4: nullable(text),
    additional_specialty_4_taxonomy_code: nullable(text),
    additional_specialty_5: nullable(text),
    additional_specialty_5_taxonomy_code: nullable(text),
    billing_address: nullable(text),
    billing_address_line_2: nullable(text),
    billing_city: nullable(text),
    billing_state: nullable(text),
    billing_zip: nullable(text),
    personal_address: nullable(text),
    personal_address_line_2: nullable(text),
    personal_city: nullable(text),
    personal_county: nullable(text),
    personal_state: nullable(text),
    personal_zip: nullable(text),
    personal_email: nullable(text),
    personal_fax: nullable(text),
    personal_phone: nullable(text),
    other_emails: textArray,
    languages: textArray,
    medicaid_participation: nullable(text),
    medicare_participation: nullable(text),
    medicaid_states: textArray,
    medicare_states: textArray,
    birth_city: nullable(text),
    birth_country: nullable(text),
    date_of_birth: nullable(date),
    ethnicity: nullable(text),
    ethnicity_detail: nullable(text),
    gender: nullable(text),
    ...stamps,
  }),
  provider_identifiers: z.object({
    ...tenant,
    provider_id: uuid,
    type: text,
    value: text,
    issued_on: nullable(date),
    expires_on: nullable(date),
    metadata: jsonb,
    ...stamps,
  }),
  provider_groups: z.object({
    ...tenant,
    name: text,
    legal_name: nullable(text),
    npi: nullable(text),
    tin: nullable(text),
    taxonomy_code: nullable(text),
    ...stamps,
  }),
  group_memberships: z.object({
    ...tenant,
    provider_id: uuid,
    provider_group_id: uuid,
    ...stamps,
  }),
  service_locations: z.object({
    ...tenant,
    provider_group_id: uuid,
    name: text,
    address: nullable(text),
    address_line_2: nullable(text),
    city: nullable(text),
    state: nullable(text),
    zip: nullable(text),
    phone: nullable(text),
    is_primary: boolean,
    ...stamps,
  }),
  group_identifiers: z.object({
    ...tenant,
    provider_group_id: uuid,
    type: text,
    value: text,
    issued_on: nullable(date),
    expires_on: nullable(date),
    metadata: jsonb,
    ...stamps,
  }),
  enrollments: z.object({
    ...tenant,
    provider_id: uuid,
    provider_group_id: nullable(uuid),
    payer: text,
    state: nullable(text),
    status: text,
    payer_provider_id: nullable(text),
    submitted_on: nullable(date),
    approved_on: nullable(date),
    effective_date: nullable(date),
    ...stamps,
  }),
  enrollment_requirements: z.object({
    ...tenant,
    enrollment_id: uuid,
    position: integer,
    name: text,
    is_complete: boolean,
    completed_at: nullable(timestamp),
    ...stamps,
  }),
  enrollment_lines_of_business: z.object({
    ...tenant,
    enrollment_id: uuid,
    line_of_business: text,
    status: text,
    effective_date: nullable(date),
    ...stamps,
  }),
  enrollment_location_participations: z.object({
    ...tenant,
    enrollment_id: uuid,
    service_location_id: uuid,
    is_active: boolean,
    activated_on: nullable(date),
    ...stamps,
  }),
  group_enrollments: z.object({
    ...tenant,
    provider_group_id: uuid,
    payer: text,
    state: nullable(text),
    status: text,
    payer_group_id: nullable(text),
    submitted_on: nullable(date),
    approved_on: nullable(date),
    effective_date: nullable(date),
    ...stamps,
  }),
  group_enrollment_lines_of_business: z.object({
    ...tenant,
    group_enrollment_id: uuid,
    line_of_business: text,
    status: text,
    effective_date: nullable(date),
    ...stamps,
  }),
  documents: z.object({
    ...tenant,
    provider_id: nullable(uuid),
    provider_group_id: nullable(uuid),
    type: text,
    file_name: text,
    content_type: text,
    size_bytes: bigint,
    expires_on: nullable(date),
    uploaded_at: timestamp,
    ...stamps,
  }),
} as const

export type SourceTable = keyof typeof rowSchemas
/** Tables whose rows live in control.db rather than in an organization file. */
export type ControlTable = 'organizations' | 'api_keys'
export type TenantTable = Exclude<SourceTable, 'organizations'>
export type OrganizationTable = Exclude<SourceTable, ControlTable>

export type SourceRow<T extends SourceTable> = z.output<(typeof rowSchemas)[T]>

export const sourceTables = Object.keys(rowSchemas) as SourceTable[]
export const organizationTables = sourceTables.filter(
  (t): t is OrganizationTable => t !== 'organizations' && t !== 'api_keys',
)

export function isSourceTable(name: string): name is SourceTable {
  return Object.hasOwn(rowSchemas, name)
}

/** Tables that exist in the product but must never be read, stored or forwarded. */
export const neverStoredTables: ReadonlySet<string> = new Set(['payer_portal_logins'])

// ---- Envelope ----------------------------------------------------------------------------------

export const snapshotMarkers = [
  'true',
  'false',
  'first',
  'first_in_data_collection',
  'last_in_data_collection',
  'last',
  'incremental',
] as const

export const sourceBlock = z.object({
  table: z.string().min(1),
  schema: z.string().optional(),
  db: z.string().optional(),
  ts_ms: z.number().int().optional(),
  // Older connectors wrote a boolean; current ones one of seven strings.
  snapshot: z
    .union([z.enum(snapshotMarkers), z.boolean().transform((b) => (b ? 'true' : 'false'))])
    .nullable()
    .optional(),
  lsn: z.number().int().nonnegative().nullable().optional(),
  txId: z.number().int().nullable().optional(),
})

export const envelope = z.object({
  op: z.enum(['c', 'u', 'd', 'r', 't']),
  before: z.record(z.string(), z.unknown()).nullable().optional(),
  after: z.record(z.string(), z.unknown()).nullable().optional(),
  source: sourceBlock,
  ts_ms: z.number().int().nullable().optional(),
})

export type Envelope = z.infer<typeof envelope>
export type Operation = Envelope['op']
