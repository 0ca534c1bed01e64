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

/** Days since the epoch to 'YYYY-MM-DD', as `Date` writes it. */
export function epochDaysToDate(days: number): string {
  if (!Number.isInteger(days) || days < -719_162 || days > 2_932_896) {
    return new Date(days * MS_PER_DAY).toISOString().slice(0, 10)
  }
  // Years 1 to 9999: the proleptic Gregorian calendar by integer arithmetic (H. Hinnant's
  // civil_from_days), without a Date and its string.
  const shifted = days + 719_468
  const era = Math.floor(shifted / 146_097)
  const dayOfEra = shifted - era * 146_097
  const yearOfEra = Math.floor(
    (dayOfEra -
      Math.floor(dayOfEra / 1460) +
      Math.floor(dayOfEra / 36_524) -
      Math.floor(dayOfEra / 146_096)) /
      365,
  )
  const dayOfYear =
    dayOfEra - (365 * yearOfEra + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100))
  const monthFromMarch = Math.floor((5 * dayOfYear + 2) / 153)
  const day = dayOfYear - Math.floor((153 * monthFromMarch + 2) / 5) + 1
  const month = monthFromMarch < 10 ? monthFromMarch + 3 : monthFromMarch - 9
  const year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
  return `${year < 1000 ? String(year).padStart(4, '0') : year}-${month < 10 ? '0' : ''}${month}-${day < 10 ? '0' : ''}${day}`
}

/** Debezium's ZonedTimestamp (microseconds, any offset) to ISO 8601 UTC with milliseconds. */
export function normalizeTimestamp(value: string): string | undefined {
  const utc = utcTimestamp(value)
  if (utc !== undefined) return utc
  if (!ISO_TIMESTAMP.test(value)) return undefined
  const ms = Date.parse(value)
  return Number.isNaN(ms) ? undefined : new Date(ms).toISOString()
}

/**
 * What Debezium writes (`YYYY-MM-DDTHH:MM:SS[.fraction]Z`, UTC), when every field is in range
 * (days up to 28): the answer of Date.parse and toISOString (milliseconds truncated), computed on
 * the text. Anything else: undefined, for the general path.
 */
function utcTimestamp(v: string): string | undefined {
  const n = v.length
  if (n < 20 || n > 30 || v.charCodeAt(n - 1) !== 0x5a /* Z */) return undefined
  if (
    v.charCodeAt(4) !== 0x2d ||
    v.charCodeAt(7) !== 0x2d ||
    v.charCodeAt(10) !== 0x54 ||
    v.charCodeAt(13) !== 0x3a ||
    v.charCodeAt(16) !== 0x3a
  ) {
    return undefined
  }
  if (!(isDigit(v, 0) && isDigit(v, 1) && isDigit(v, 2) && isDigit(v, 3))) return undefined
  const month = twoDigits(v, 5)
  const day = twoDigits(v, 8)
  const hour = twoDigits(v, 11)
  const minute = twoDigits(v, 14)
  const second = twoDigits(v, 17)
  if (month < 1 || month > 12 || day < 1 || day > 28 || hour > 23 || minute > 59 || second > 59) {
    return undefined
  }
  if (n === 20) return `${v.slice(0, 19)}.000Z`
  if (v.charCodeAt(19) !== 0x2e || n < 22) return undefined
  for (let i = 20; i < n - 1; i++) if (!isDigit(v, i)) return undefined
  const fraction = n >= 24 ? v.slice(20, 23) : v.slice(20, n - 1).padEnd(3, '0')
  return `${v.slice(0, 19)}.${fraction}Z`
}

function isDigit(s: string, i: number): boolean {
  const c = s.charCodeAt(i)
  return c >= 0x30 && c <= 0x39
}

/** The two-digit number at `i`, or -1. */
function twoDigits(s: string, i: number): number {
  return isDigit(s, i) && isDigit(s, i + 1)
    ? (s.charCodeAt(i) - 0x30) * 10 + s.charCodeAt(i + 1) - 0x30
    : -1
}

// ---- Column codecs -----------------------------------------------------------------------------
//
// Each codec is a zod schema with a transform (the contract, and the wording of every error), and
// is registered with its two halves for fast decoding (see decodeRow): the same schema without the
// transform, and the conversion alone.

/** A conversion's answer for a value the codec's schema would reject. */
const INVALID = Symbol('invalid')
type Convert = (value: unknown) => unknown

const fastCodecs = new Map<z.ZodType, { plain: z.ZodType; convert: Convert }>()

function codec<T extends z.ZodType>(schema: T, plain: z.ZodType, convert: Convert): T {
  fastCodecs.set(schema, { plain, convert })
  return schema
}

const identity: Convert = (value) => value
const lowerCase = (s: string) => s.toLowerCase()
const orUnavailable = (s: string): string | Unavailable =>
  s === UNAVAILABLE_VALUE ? unavailable : s

function timestampOrUnavailable(s: string): string | Unavailable | undefined {
  return s === UNAVAILABLE_VALUE ? unavailable : normalizeTimestamp(s)
}

/** Re-serialized so equal values are stored (and hashed) identically; undefined if not JSON. */
function jsonbOrUnavailable(s: string): string | Unavailable | undefined {
  if (s === UNAVAILABLE_VALUE) return unavailable
  const known = normalizedJson.get(s)
  if (known !== undefined) return known
  let normalized: string
  try {
    normalized = JSON.stringify(JSON.parse(s) as unknown)
  } catch {
    return undefined
  }
  // Values repeat a lot (the same few metadata shapes): a bounded memo of recent ones.
  if (s.length <= 1024) {
    if (normalizedJson.size >= 4096) normalizedJson.clear()
    normalizedJson.set(s, normalized)
  }
  return normalized
}
const normalizedJson = new Map<string, string>()

function textArrayOrUnavailable(a: readonly (string | null)[]): string | Unavailable {
  return a.length === 1 && a[0] === UNAVAILABLE_VALUE ? unavailable : JSON.stringify(a)
}

const uuidText = z.string().regex(UUID, 'expected a uuid')
const uuid = codec(uuidText.transform(lowerCase), uuidText, (s) => lowerCase(s as string))

const text = codec(z.string().transform(orUnavailable), z.string(), (s) =>
  orUnavailable(s as string),
)

const timestamp = codec(
  z.string().transform((s, ctx): string | Unavailable => {
    const value = timestampOrUnavailable(s)
    if (value === undefined) {
      ctx.addIssue({ code: 'custom', message: 'expected an ISO 8601 timestamp' })
      return z.NEVER
    }
    return value
  }),
  z.string(),
  (s) => timestampOrUnavailable(s as string) ?? INVALID,
)

// Debezium's default time.precision.mode=adaptive writes days since the epoch; a string form
// (some converters) is accepted when it is already 'YYYY-MM-DD'.
const epochDays = z.number().int().min(-719_162).max(2_932_896)
const dateText = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}$/, 'expected days since the epoch or YYYY-MM-DD')
const date = codec(
  z.union([epochDays.transform((days) => epochDaysToDate(days)), dateText]),
  z.union([epochDays, dateText]),
  (v) => (typeof v === 'number' ? epochDaysToDate(v) : v),
)

const jsonb = codec(
  z.string().transform((s, ctx): string | Unavailable => {
    const value = jsonbOrUnavailable(s)
    if (value === undefined) {
      ctx.addIssue({ code: 'custom', message: 'expected a JSON document' })
      return z.NEVER
    }
    return value
  }),
  z.string(),
  (s) => jsonbOrUnavailable(s as string) ?? INVALID,
)

const stringArray = z.array(z.string().nullable())
const textArray = codec(stringArray.transform(textArrayOrUnavailable), stringArray, (a) =>
  textArrayOrUnavailable(a as (string | null)[]),
)

const keyHashText = z.string().regex(/^[0-9a-fA-F]{64}$/, 'expected a hex SHA-256')
const keyHash = codec(keyHashText.transform(lowerCase), keyHashText, (s) => lowerCase(s as string))

const integer = codec(z.number().int(), z.number().int(), identity)
// A bigint past 2^53 arrives as its decimal text (see `keepLongIntegers`) and stays so: a double
// would round it. Within 2^53 it is a number, as before.
const INT64_MIN = -(2n ** 63n)
const INT64_MAX = 2n ** 63n - 1n
function int64(value: unknown): number | string | typeof INVALID {
  if (typeof value === 'number') return Number.isSafeInteger(value) ? value : INVALID
  if (typeof value !== 'string' || !/^-?\d{1,20}$/.test(value)) return INVALID
  const exact = BigInt(value)
  if (exact < INT64_MIN || exact > INT64_MAX) return INVALID
  const n = Number(exact)
  return Number.isSafeInteger(n) ? n : exact.toString()
}
const int64Plain = z.union([z.number().int(), z.string().regex(/^-?\d+$/)])
const bigint = codec(
  int64Plain.transform((v, ctx): number | string => {
    const value = int64(v)
    if (value === INVALID) {
      ctx.addIssue({ code: 'custom', message: 'expected a 64-bit integer' })
      return z.NEVER
    }
    return value
  }),
  int64Plain,
  int64,
)

/**
 * Debezium's JSON with the bigint columns' values past 2^53 quoted, so JSON.parse keeps every
 * digit (it would round the number). `"name":` outside a string is only ever a key, so a text
 * search is exact; values within 2^53 are left as numbers.
 */
export function keepLongIntegers(json: string): string {
  if (!json.includes('"size_bytes"')) return json
  return json.replace(LONG_BIGINT, (match, name: string, digits: string) =>
    Number.isSafeInteger(Number(digits)) ? match : `"${name}":"${digits}"`,
  )
}
const LONG_BIGINT = /"(size_bytes)"\s*:\s*(-?\d{16,})/g
const boolean = codec(z.boolean(), z.boolean(), identity)

/** A nullable source column: null when absent (the column may have been dropped). */
function nullable<T extends z.ZodType>(inner: T) {
  const schema = inner
    .nullable()
    .optional()
    .transform((v) => (v === undefined ? null : v))
  const fast = fastCodecs.get(inner)
  if (fast !== undefined) {
    const convert = fast.convert
    codec(schema, fast.plain.nullable().optional(), (v) =>
      v === undefined || v === null ? null : convert(v),
    )
  }
  return schema
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
    key_hash: keyHash,
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
export const controlTables: ReadonlySet<string> = new Set<ControlTable>([
  'organizations',
  'api_keys',
])
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

// ---- Fast decoding -----------------------------------------------------------------------------
//
// zod runs a per-field transform at about a microsecond per column, most of the cost of decoding.
// So a row is decoded in two steps: a compiled zod schema of the same shape without transforms
// validates it (z.compile, assert-only), then a loop over the columns applies each codec's
// conversion. A row either passes both, with exactly the output of its table's schema above, or
// that schema parses it and words the error.

type RowDecoder = (input: unknown) => z.ZodSafeParseResult<Record<string, unknown>>

function rowDecoder(schema: z.ZodObject): RowDecoder {
  const columns = Object.entries(schema.shape as Record<string, z.ZodType>).map(
    ([name, column]) => ({ name, fast: fastCodecs.get(column) }),
  )
  if (columns.some((c) => c.fast === undefined)) return (input) => schema.safeParse(input)
  const validator = z.compile(
    z.object(Object.fromEntries(columns.map((c) => [c.name, c.fast!.plain]))),
  )
  const names = columns.map((c) => c.name)
  const converts = columns.map((c) => c.fast!.convert)
  return (input) => {
    if (validator.validate(input)) {
      const source = input as Record<string, unknown>
      const row: Record<string, unknown> = {}
      let i = 0
      for (; i < names.length; i++) {
        const name = names[i]!
        const value = converts[i]!(source[name])
        if (value === INVALID) break
        row[name] = value
      }
      if (i === names.length) return { success: true, data: row }
    }
    return schema.safeParse(input)
  }
}

const rowDecoders = new Map<SourceTable, RowDecoder>()

/** Same answer as `rowSchemas[table].safeParse(input)`. */
export function decodeRow<T extends SourceTable>(
  table: T,
  input: unknown,
): z.ZodSafeParseResult<SourceRow<T>> {
  let decoder = rowDecoders.get(table)
  if (decoder === undefined) {
    decoder = rowDecoder(rowSchemas[table])
    rowDecoders.set(table, decoder)
  }
  return decoder(input) as z.ZodSafeParseResult<SourceRow<T>>
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
  // `["<last commit lsn>","<lsn>"]`: the one position an incremental snapshot's read carries
  // (its `lsn` is null), see decode.ts `incrementalReadLsn`.
  sequence: z.string().nullable().optional(),
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

// The envelope's fast check: the same schema with before/after checked for being plain objects
// rather than copied key by key (z.record copies, and `after` is then parsed again anyway).
// Anything it does not pass goes to `envelope` (see decode.ts).
const plainRow = z.custom<Record<string, unknown>>(
  (value) =>
    typeof value === 'object' &&
    value !== null &&
    Object.getPrototypeOf(value) === Object.prototype &&
    Object.getOwnPropertySymbols(value).length === 0,
)

const envelopeValidator = z.compile(
  z.object({
    op: envelope.shape.op,
    before: plainRow.nullable().optional(),
    after: plainRow.nullable().optional(),
    source: sourceBlock,
    ts_ms: envelope.shape.ts_ms,
  }),
)

/**
 * Whether `envelope` accepts `payload` in the common case, checked without building its output:
 * when true, `payload` itself reads as the envelope (its op, before, after, source.table, lsn and
 * ts_ms are what envelope would output). False means: ask `envelope`.
 */
export function isPlainEnvelope(
  payload: unknown,
): payload is Omit<Envelope, 'source'> & { source: Omit<Envelope['source'], 'snapshot'> } {
  return envelopeValidator.validate(payload)
}
