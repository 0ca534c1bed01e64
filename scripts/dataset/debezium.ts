// The source tables (schema/source.sql) and how Debezium's PostgreSQL connector, through Kafka
// Connect's JsonConverter, writes their change events: with schemas enabled (Debezium's default,
// `{"schema":...,"payload":...}`) or without (`schemas.enable=false`: the payload alone). Schemas
// are built and serialized once per table; each event only serializes its payload and splices it in.

export type ColumnType =
  'uuid' | 'text' | 'boolean' | 'integer' | 'bigint' | 'date' | 'timestamptz' | 'jsonb' | 'text[]'

export interface Column {
  readonly name: string
  readonly type: ColumnType
  readonly notNull: boolean
  /** The default Debezium puts in the field schema (parsed from the column default), if any. */
  readonly schemaDefault?: string | boolean
}

/** Debezium renders `now()` defaults of timestamptz columns as the epoch, in the column's precision. */
export const EPOCH_ZONED = '1970-01-01T00:00:00.000000Z'

/** Column spec: `name type` with `!` for not null and `=value` for a default Debezium parses. */
function columns(...specs: string[]): Column[] {
  return specs.map((spec) => {
    const [name, rawType, ...rest] = spec.split(' ')
    const notNull = rawType!.endsWith('!')
    const type = rawType!.replace('!', '') as ColumnType
    const def = rest.join(' ')
    const column: Column = { name: name!, type, notNull }
    if (def === '') return column
    const schemaDefault =
      def === '=now'
        ? EPOCH_ZONED
        : def === '=true'
          ? true
          : def === '=false'
            ? false
            : def.slice(1)
    return { ...column, schemaDefault }
  })
}

const timestamps = ['created_at timestamptz! =now', 'updated_at timestamptz! =now']

export const TABLES = {
  organizations: columns(
    'id uuid!',
    'name text!',
    'api_enabled boolean! =true',
    'billing_status text! =active',
    ...timestamps,
  ),
  api_keys: columns(
    'id uuid!',
    'organization_id uuid!',
    'name text!',
    'key_hash text!',
    'scopes text[]!',
    'created_at timestamptz! =now',
    'expires_at timestamptz',
    'revoked_at timestamptz',
  ),
  providers: columns(
    'id uuid!',
    'organization_id uuid!',
    'first_name text',
    'middle_name text',
    'last_name text',
    'suffix text',
    'npi text!',
    'is_active boolean! =true',
    'telehealth_services boolean! =false',
    'type text',
    'caqh_id text',
    'start_date date',
    'termed_date date',
    'taxonomy_code text',
    'specialty text',
    'specialty_taxonomy_code text',
    'secondary_specialty text',
    'secondary_specialty_taxonomy_code text',
    'additional_specialty_1 text',
    'additional_specialty_1_taxonomy_code text',
    'additional_specialty_2 text',
    'additional_specialty_2_taxonomy_code text',
    'additional_specialty_3 text',
    'additional_specialty_3_taxonomy_code text',
    'additional_specialty_4 text',
    'additional_specialty_4_taxonomy_code text',
    'additional_specialty_5 text',
    'additional_specialty_5_taxonomy_code text',
    'billing_address text',
    'billing_address_line_2 text',
    'billing_city text',
    'billing_state text',
    'billing_zip text',
    'personal_address text',
    'personal_address_line_2 text',
    'personal_city text',
    'personal_county text',
    'personal_state text',
    'personal_zip text',
    'personal_email text',
    'personal_fax text',
    'personal_phone text',
    'other_emails text[]!',
    'languages text[]!',
    'medicaid_participation text',
    'medicare_participation text',
    'medicaid_states text[]!',
    'medicare_states text[]!',
    'birth_city text',
    'birth_country text',
    'date_of_birth date',
    'ethnicity text',
    'ethnicity_detail text',
    'gender text',
    'ssn text',
    'internal_notes text',
    ...timestamps,
  ),
  provider_identifiers: columns(
    'id uuid!',
    'organization_id uuid!',
    'provider_id uuid!',
    'type text!',
    'value text!',
    'issued_on date',
    'expires_on date',
    'metadata jsonb! ={}',
    ...timestamps,
  ),
  provider_groups: columns(
    'id uuid!',
    'organization_id uuid!',
    'name text!',
    'legal_name text',
    'npi text',
    'tin text',
    'taxonomy_code text',
    ...timestamps,
  ),
  group_memberships: columns(
    'id uuid!',
    'organization_id uuid!',
    'provider_id uuid!',
    'provider_group_id uuid!',
    ...timestamps,
  ),
  service_locations: columns(
    'id uuid!',
    'organization_id uuid!',
    'provider_group_id uuid!',
    'name text!',
    'address text',
    'address_line_2 text',
    'city text',
    'state text',
    'zip text',
    'phone text',
    'is_primary boolean! =false',
    ...timestamps,
  ),
  group_identifiers: columns(
    'id uuid!',
    'organization_id uuid!',
    'provider_group_id uuid!',
    'type text!',
    'value text!',
    'issued_on date',
    'expires_on date',
    'metadata jsonb! ={}',
    ...timestamps,
  ),
  enrollments: columns(
    'id uuid!',
    'organization_id uuid!',
    'provider_id uuid!',
    'provider_group_id uuid',
    'payer text!',
    'state text',
    'status text!',
    'payer_provider_id text',
    'submitted_on date',
    'approved_on date',
    'effective_date date',
    ...timestamps,
  ),
  enrollment_requirements: columns(
    'id uuid!',
    'organization_id uuid!',
    'enrollment_id uuid!',
    'position integer!',
    'name text!',
    'is_complete boolean! =false',
    'completed_at timestamptz',
    ...timestamps,
  ),
  enrollment_lines_of_business: columns(
    'id uuid!',
    'organization_id uuid!',
    'enrollment_id uuid!',
    'line_of_business text!',
    'status text!',
    'effective_date date',
    ...timestamps,
  ),
  enrollment_location_participations: columns(
    'id uuid!',
    'organization_id uuid!',
    'enrollment_id uuid!',
    'service_location_id uuid!',
    'is_active boolean! =false',
    'activated_on date',
    ...timestamps,
  ),
  group_enrollments: columns(
    'id uuid!',
    'organization_id uuid!',
    'provider_group_id uuid!',
    'payer text!',
    'state text',
    'status text!',
    'payer_group_id text',
    'submitted_on date',
    'approved_on date',
    'effective_date date',
    ...timestamps,
  ),
  group_enrollment_lines_of_business: columns(
    'id uuid!',
    'organization_id uuid!',
    'group_enrollment_id uuid!',
    'line_of_business text!',
    'status text!',
    'effective_date date',
    ...timestamps,
  ),
  documents: columns(
    'id uuid!',
    'organization_id uuid!',
    'provider_id uuid',
    'provider_group_id uuid',
    'type text!',
    'file_name text!',
    'content_type text!',
    'size_bytes bigint!',
    'expires_on date',
    'uploaded_at timestamptz!',
    'storage_key text!',
    ...timestamps,
  ),
  payer_portal_logins: columns(
    'id uuid!',
    'organization_id uuid!',
    'payer text!',
    'username text!',
    'password_cipher text!',
    ...timestamps,
  ),
} as const satisfies Record<string, Column[]>

export type TableName = keyof typeof TABLES
export const TABLE_NAMES = Object.keys(TABLES) as TableName[]

/** Row values as the generator holds them: dates as epoch days, timestamps as ISO strings. */
export type Value = string | number | boolean | null | readonly string[]
export type Row = Record<string, Value>

export const CONNECTOR_VERSION = '3.1.2.Final'
export const DATABASE = 'product'

// JsonConverter writes a field schema's keys in this order: type, [items|fields], optional,
// name, version, parameters, default, then `field` when it sits in a struct.
function fieldSchema(column: Column): Record<string, unknown> {
  const optional = !column.notNull
  const named = (name: string) => ({ name, version: 1 })
  let base: Record<string, unknown>
  switch (column.type) {
    case 'uuid':
      base = { type: 'string', optional, ...named('io.debezium.data.Uuid') }
      break
    case 'text':
      base = { type: 'string', optional }
      break
    case 'boolean':
      base = { type: 'boolean', optional }
      break
    case 'integer':
      base = { type: 'int32', optional }
      break
    case 'bigint':
      base = { type: 'int64', optional }
      break
    case 'date':
      base = { type: 'int32', optional, ...named('io.debezium.time.Date') }
      break
    case 'timestamptz':
      base = { type: 'string', optional, ...named('io.debezium.time.ZonedTimestamp') }
      break
    case 'jsonb':
      base = { type: 'string', optional, ...named('io.debezium.data.Json') }
      break
    case 'text[]':
      base = { type: 'array', items: { type: 'string', optional: true }, optional }
      break
  }
  if (column.schemaDefault !== undefined) base.default = column.schemaDefault
  base.field = column.name
  return base
}

function valueStruct(prefix: string, table: TableName, field: 'before' | 'after') {
  return {
    type: 'struct',
    fields: TABLES[table].map(fieldSchema),
    optional: true,
    name: `${prefix}.public.${table}.Value`,
    field,
  }
}

const SOURCE_SCHEMA = {
  type: 'struct',
  fields: [
    { type: 'string', optional: false, field: 'version' },
    { type: 'string', optional: false, field: 'connector' },
    { type: 'string', optional: false, field: 'name' },
    { type: 'int64', optional: false, field: 'ts_ms' },
    {
      type: 'string',
      optional: true,
      name: 'io.debezium.data.Enum',
      version: 1,
      parameters: {
        allowed:
          'true,first,first_in_data_collection,last_in_data_collection,last,false,incremental',
      },
      default: 'false',
      field: 'snapshot',
    },
    { type: 'string', optional: false, field: 'db' },
    { type: 'string', optional: true, field: 'sequence' },
    { type: 'int64', optional: true, field: 'ts_us' },
    { type: 'int64', optional: true, field: 'ts_ns' },
    { type: 'string', optional: false, field: 'schema' },
    { type: 'string', optional: false, field: 'table' },
    { type: 'int64', optional: true, field: 'txId' },
    { type: 'int64', optional: true, field: 'lsn' },
    { type: 'int64', optional: true, field: 'xmin' },
  ],
  optional: false,
  name: 'io.debezium.connector.postgresql.Source',
  version: 1,
  field: 'source',
}

const TRANSACTION_SCHEMA = {
  type: 'struct',
  fields: [
    { type: 'string', optional: false, field: 'id' },
    { type: 'int64', optional: false, field: 'total_order' },
    { type: 'int64', optional: false, field: 'data_collection_order' },
  ],
  optional: true,
  name: 'event.block',
  version: 1,
  field: 'transaction',
}

export function valueSchema(prefix: string, table: TableName): Record<string, unknown> {
  return {
    type: 'struct',
    fields: [
      valueStruct(prefix, table, 'before'),
      valueStruct(prefix, table, 'after'),
      SOURCE_SCHEMA,
      TRANSACTION_SCHEMA,
      { type: 'string', optional: false, field: 'op' },
      { type: 'int64', optional: true, field: 'ts_ms' },
      { type: 'int64', optional: true, field: 'ts_us' },
      { type: 'int64', optional: true, field: 'ts_ns' },
    ],
    optional: false,
    name: `${prefix}.public.${table}.Envelope`,
    version: 2,
  }
}

export function keySchema(prefix: string, table: TableName): Record<string, unknown> {
  return {
    type: 'struct',
    fields: [
      { type: 'string', optional: false, name: 'io.debezium.data.Uuid', version: 1, field: 'id' },
    ],
    optional: false,
    name: `${prefix}.public.${table}.Key`,
  }
}

/** Everything constant about one table's records, serialized once. */
export interface TableCodec {
  readonly table: TableName
  readonly topic: string
  /** `{"topic":...,"partition":0,"offset":"` */
  readonly linePrefix: string
  /** `,"key":{"schema":<key schema>,"payload":{"id":"`, or `,"key":{"id":"` without schemas */
  readonly keyPrefix: string
  /** What closes the key after its id: `"}}`, or `"}` without schemas. */
  readonly keySuffix: string
  /** `,"value":{"schema":<envelope schema>,"payload":`, or `,"value":` without schemas */
  readonly valuePrefix: string
  /** What closes the value after its payload, and the line: `}}`, or `}` without schemas. */
  readonly valueSuffix: string
  readonly serializeRow: (row: Row) => string
  /** The before-image of a delete under REPLICA IDENTITY DEFAULT. */
  readonly deleteBefore: (id: string) => string
  /** `source(tsUs, sourceMiddle(...), sourceTail(...))` */
  readonly source: ReturnType<typeof sourceBuilder>
}

// eslint-disable-next-line no-control-regex -- control characters are what JSON must escape
const SAFE_TEXT = /^[^"\\\u0000-\u001f\ud800-\udfff]*$/

/** A string's JSON escaping, without the quotes; most values need none. */
function escaped(value: string): string {
  return SAFE_TEXT.test(value) ? value : JSON.stringify(value).slice(1, -1)
}

/**
 * The row serializer of a table, generated from its column list: one straight-line expression,
 * three times faster than JSON.stringify on these rows in profiles. Adjacent constant text is
 * merged (a quote closing one value opens the next key), so the string has few pieces to copy
 * when it is written out. Values must already be in their Debezium form (rowShapeError checks
 * builders in tests); the output equals JSON.stringify(row) for such rows.
 */
function compileSerializer(table: TableName): (row: Row) => string {
  const terms: string[] = []
  let literal = '{'
  TABLES[table].forEach((column, i) => {
    literal += (i === 0 ? '' : ',') + JSON.stringify(column.name) + ':'
    const value = `r[${JSON.stringify(column.name)}]`
    const quoted = column.type === 'uuid' || column.type === 'timestamptz' || column.type === 'text'
    if (column.notNull && quoted) {
      // uuids and timestamps hold nothing to escape
      terms.push(
        JSON.stringify(literal + '"'),
        column.type === 'text' ? `escaped(${value})` : value,
      )
      literal = '"'
      return
    }
    const encoded = quoted
      ? `'"' + ${column.type === 'text' ? `escaped(${value})` : value} + '"'`
      : {
          boolean: `(${value} ? 'true' : 'false')`,
          integer: value, // numbers join the string being built
          bigint: value,
          date: value,
          jsonb: `JSON.stringify(${value})`,
          'text[]': `JSON.stringify(${value})`,
        }[column.type as 'boolean']
    terms.push(
      JSON.stringify(literal),
      column.notNull ? encoded : `(${value} === null ? 'null' : ${encoded})`,
    )
    literal = ''
  })
  terms.push(JSON.stringify(literal + '}'))
  // eslint-disable-next-line @typescript-eslint/no-implied-eval -- built from the static column list above
  const build = new Function('escaped', `return (r) => ${terms.join(' + ')}`) as (
    e: typeof escaped,
  ) => (row: Row) => string
  return build(escaped)
}

/**
 * The JsonConverter's `schemas.enable`: `true` wraps keys and values as `{schema, payload}`
 * (Debezium's default, ~5 KB an event here), `false` writes the payload alone (~1.3 KB).
 */
export type Encoding = { schemas: boolean }

export function tableCodec(
  prefix: string,
  table: TableName,
  encoding: Encoding = { schemas: true },
): TableCodec {
  const topic = `${prefix}.public.${table}`
  const cols = TABLES[table]
  // pgoutput sends the replica identity (the primary key) and nulls for the other columns;
  // Debezium fills non-optional columns with their schema default or the type's fallback.
  const restOfDelete = cols
    .slice(1)
    .map((c) => {
      const value = c.notNull ? (c.schemaDefault ?? fallbackFor(c.type)) : null
      return ',' + JSON.stringify(c.name) + ':' + JSON.stringify(value)
    })
    .join('')
  return {
    table,
    topic,
    linePrefix: `{"topic":${JSON.stringify(topic)},"partition":0,"offset":"`,
    ...(encoding.schemas
      ? {
          keyPrefix: `,"key":{"schema":${JSON.stringify(keySchema(prefix, table))},"payload":{"id":"`,
          keySuffix: '"}}',
          valuePrefix: `,"value":{"schema":${JSON.stringify(valueSchema(prefix, table))},"payload":`,
          valueSuffix: '}}',
        }
      : {
          keyPrefix: ',"key":{"id":"',
          keySuffix: '"}',
          valuePrefix: ',"value":',
          valueSuffix: '}',
        }),
    serializeRow: compileSerializer(table),
    deleteBefore: (id) => `{"id":"${id}"${restOfDelete}}`,
    source: sourceBuilder(prefix),
  }
}

function fallbackFor(type: ColumnType): Value {
  switch (type) {
    case 'boolean':
      return false
    case 'integer':
    case 'bigint':
    case 'date':
      return 0
    case 'timestamptz':
      return '1970-01-01T00:00:00Z' // the type's fallback, unlike the schema default: no fraction
    case 'text[]':
      return []
    case 'jsonb':
      return '{}'
    default:
      return ''
  }
}

const isDay = (v: Value) => Number.isInteger(v) && Math.abs(v as number) < 3_000_000
const ZONED = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

function valueError(column: Column, value: Value | undefined): string | null {
  if (value === undefined) return 'missing'
  if (value === null) return column.notNull ? 'null in a NOT NULL column' : null
  const ok = {
    uuid: () => typeof value === 'string' && UUID.test(value),
    text: () => typeof value === 'string',
    boolean: () => typeof value === 'boolean',
    integer: () => Number.isInteger(value),
    bigint: () => Number.isInteger(value),
    date: () => isDay(value),
    timestamptz: () => typeof value === 'string' && ZONED.test(value),
    jsonb: () => typeof value === 'string' && typeof JSON.parse(value) === 'object',
    'text[]': () => Array.isArray(value) && value.every((v) => typeof v === 'string'),
  }[column.type]()
  return ok ? null : `not a Debezium ${column.type}: ${JSON.stringify(value)}`
}

/**
 * Why a row is not what `serializeRow` expects (every column, in table order, in its Debezium
 * encoding), or null when it is. For tests: the generator itself trusts its builders.
 */
export function rowShapeError(table: TableName, row: Row): string | null {
  const names = TABLES[table].map((c) => c.name)
  const keys = Object.keys(row)
  if (keys.join() !== names.join()) return `${table}: columns ${keys.join()} != ${names.join()}`
  for (const column of TABLES[table]) {
    const error = valueError(column, row[column.name])
    if (error !== null) return `${table}.${column.name}: ${error}`
  }
  return null
}

/** `source.sequence`, `["<first>","<lsn>"]` or `[null,"<lsn>"]`, as the JSON string it travels as. */
export function sequenceJson(first: number | null, lsn: number): string {
  return first === null ? `"[null,\\"${lsn}\\"]"` : `"[\\"${first}\\",\\"${lsn}\\"]"`
}

/**
 * Epoch microseconds as decimal text, the `_ms` text being its prefix. Numbers this large are
 * slow to print; events come in time order, so the whole seconds are printed once and reused.
 */
class MicrosText {
  private second = -1
  private secondText = ''
  us = ''
  ms = ''

  set(epochUs: number): this {
    const second = Math.floor(epochUs / 1_000_000)
    if (second !== this.second) {
      this.second = second
      this.secondText = String(second)
    }
    const micros = String(1_000_000 + (epochUs - second * 1_000_000)).slice(1)
    this.us = this.secondText + micros
    this.ms = this.secondText + micros.slice(0, 3)
    return this
  }
}

/** The part of a `source` block between `ts_ms` and `ts_us`: snapshot marker and sequence. */
export function sourceMiddle(snapshot: string, sequence: string): string {
  return `,"snapshot":"${snapshot}","db":"${DATABASE}","sequence":${sequence},"ts_us":`
}

/** The part of a `source` block after `ts_ns`'s microseconds. */
export function sourceTail(table: TableName, txId: number, lsn: number): string {
  return `000,"schema":"public","table":"${table}","txId":${txId},"lsn":${lsn},"xmin":null}`
}

/**
 * Builds `source` blocks: head, times, and the middle and tail parts above (constant through a
 * snapshot, so callers can keep them). ts_ns is written as text: it does not fit in a double.
 */
function sourceBuilder(prefix: string) {
  const head = `{"version":"${CONNECTOR_VERSION}","connector":"postgresql","name":${JSON.stringify(prefix)},"ts_ms":`
  const time = new MicrosText()
  return (tsUs: number, middle: string, tail: string): string => {
    const { us, ms } = time.set(tsUs)
    return head + ms + middle + us + ',"ts_ns":' + us + tail
  }
}

export type Op = 'r' | 'c' | 'u' | 'd'

const processed = new MicrosText()
const NANOS = Array.from({ length: 1000 }, (_, n) => String(n).padStart(3, '0'))
const OP_TEXT: Record<Op, string> = {
  r: ',"transaction":null,"op":"r","ts_ms":',
  c: ',"transaction":null,"op":"c","ts_ms":',
  u: ',"transaction":null,"op":"u","ts_ms":',
  d: ',"transaction":null,"op":"d","ts_ms":',
}

/** The envelope payload: before, after, source, transaction, op and the connector's clock. */
export function envelope(
  op: Op,
  before: string,
  after: string,
  source: string,
  processedUs: number,
  nanos: number,
): string {
  const { us, ms } = processed.set(processedUs)
  return (
    '{"before":' +
    before +
    ',"after":' +
    after +
    ',"source":' +
    source +
    OP_TEXT[op] +
    ms +
    ',"ts_us":' +
    us +
    ',"ts_ns":' +
    us +
    NANOS[nanos % 1000]! +
    '}'
  )
}

const PAD2 = Array.from({ length: 60 }, (_, n) => String(n).padStart(2, '0'))
const DAY_STRINGS = new Map<number, string>()
const US_PER_DAY = 86_400_000_000

/** 'YYYY-MM-DD' of an epoch day; a dataset spans a few thousand days, so they are cached. */
function dayString(day: number): string {
  let text = DAY_STRINGS.get(day)
  if (text === undefined) {
    text = new Date(day * 86_400_000).toISOString().slice(0, 10)
    DAY_STRINGS.set(day, text)
  }
  return text
}

/**
 * Debezium's ZonedTimestamp for timestamptz: UTC with all six fractional digits. Hand-rolled:
 * Date#toISOString was the generator's hottest call.
 */
export function zonedTimestamp(epochUs: number): string {
  const day = Math.floor(epochUs / US_PER_DAY)
  let rest = epochUs - day * US_PER_DAY
  const hours = Math.floor(rest / 3_600_000_000)
  rest -= hours * 3_600_000_000
  const minutes = Math.floor(rest / 60_000_000)
  rest -= minutes * 60_000_000
  const seconds = Math.floor(rest / 1_000_000)
  const micros = rest - seconds * 1_000_000
  return (
    dayString(day) +
    'T' +
    PAD2[hours]! +
    ':' +
    PAD2[minutes]! +
    ':' +
    PAD2[seconds]! +
    '.' +
    String(1_000_000 + micros).slice(1) +
    'Z'
  )
}

const jsonbKeyOrder = (a: string, b: string) => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0)

/**
 * jsonb as PostgreSQL prints it: keys by length then bytes, `", "` and `": "` separators.
 * Callers mostly pass keys already in that order, which skips the sort.
 */
export function jsonbText(
  object: Readonly<Record<string, string | number | boolean | null>>,
): string {
  let keys = Object.keys(object)
  if (keys.length === 0) return '{}'
  for (let i = 1; i < keys.length; i++) {
    if (jsonbKeyOrder(keys[i - 1]!, keys[i]!) > 0) {
      keys = keys.sort(jsonbKeyOrder)
      break
    }
  }
  let out = '{"'
  for (let i = 0; i < keys.length; i++) {
    const value = object[keys[i]!] ?? null
    const text = typeof value === 'string' ? '"' + escaped(value) + '"' : JSON.stringify(value)
    out += (i === 0 ? '' : ', "') + escaped(keys[i]!) + '": ' + text
  }
  return out + '}'
}

/** Debezium's io.debezium.time.Date: days since the epoch. */
export function epochDay(date: Date): number {
  return Math.floor(date.getTime() / 86_400_000)
}

export function isoDate(day: number): string {
  return new Date(day * 86_400_000).toISOString().slice(0, 10)
}
