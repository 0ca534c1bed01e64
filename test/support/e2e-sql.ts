// SQL against the product database for end-to-end tests: one helper per source table, each an
// INSERT with parameters (never values spliced into the text) that returns the row it wrote, so a
// test can state the response it expects from the same values. Defaults fill the NOT NULL
// columns; `overrides` sets any other column of the table.
import { createHash, randomBytes, randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'

/** What the helpers need of a database: the harness's StartedPostgres, a pg Pool or Client. */
export interface Sql {
  query(text: string, params?: unknown[]): Promise<{ rowCount: number | null }>
}

/** The source tables (schema/source.sql); identifiers are checked against this list. */
export type SourceTable =
  | 'organizations'
  | 'api_keys'
  | 'providers'
  | 'provider_identifiers'
  | 'provider_groups'
  | 'group_memberships'
  | 'service_locations'
  | 'group_identifiers'
  | 'enrollments'
  | 'enrollment_requirements'
  | 'enrollment_lines_of_business'
  | 'enrollment_location_participations'
  | 'group_enrollments'
  | 'group_enrollment_lines_of_business'
  | 'documents'
  | 'payer_portal_logins'

/** A column value as pg sends it: arrays become text[], strings are cast by PostgreSQL. */
type Value = string | number | boolean | null | string[]
type Row = Record<string, Value>

const COLUMN = /^[a-z][a-z0-9_]*$/

function column(name: string): string {
  // Column names come from test code, not data, but a typo must fail here, not become SQL.
  if (!COLUMN.test(name)) throw new Error(`not a column name: ${JSON.stringify(name)}`)
  return `"${name}"`
}

/** INSERT one row; every value is a parameter. */
export async function insertRow<R extends Row>(sql: Sql, table: SourceTable, row: R): Promise<R> {
  const names = Object.keys(row)
  const text = `insert into ${table} (${names.map(column).join(', ')}) values (${names
    .map((_, i) => `$${i + 1}`)
    .join(', ')})`
  await sql.query(
    text,
    names.map((n) => row[n]),
  )
  return row
}

/** UPDATE one row by primary key; fails when no row matched (a test must not update nothing). */
export async function updateRow(
  sql: Sql,
  table: SourceTable,
  id: string,
  set: Record<string, Value>,
): Promise<void> {
  const names = Object.keys(set)
  const assignments = names.map((n, i) => `${column(n)} = $${i + 2}`).join(', ')
  const result = await sql.query(`update ${table} set ${assignments} where id = $1`, [
    id,
    ...names.map((n) => set[n]),
  ])
  if (result.rowCount !== 1) throw new Error(`update ${table} ${id}: ${result.rowCount} rows`)
}

/** DELETE one row by primary key; fails when no row matched. */
export async function deleteRow(sql: Sql, table: SourceTable, id: string): Promise<void> {
  const result = await sql.query(`delete from ${table} where id = $1`, [id])
  if (result.rowCount !== 1) throw new Error(`delete ${table} ${id}: ${result.rowCount} rows`)
}

/** A fixed instant, so `createdAt` can be asserted exactly (timestamptz, UTC, milliseconds). */
export const CREATED_AT = '2025-03-04T05:06:07.123Z'

/** `YYYY-MM-DD` of today (UTC) plus `days`: for expiration dates relative to the run. */
export function isoDate(days = 0): string {
  return new Date(Date.now() + days * 86_400_000).toISOString().slice(0, 10)
}

// ---- Organizations and keys ------------------------------------------------------------------

export interface OrganizationRow extends Row {
  id: string
  name: string
  api_enabled: boolean
  billing_status: string
}

export function insertOrganization(
  sql: Sql,
  overrides: Partial<OrganizationRow> = {},
): Promise<OrganizationRow> {
  return insertRow(sql, 'organizations', {
    id: randomUUID(),
    name: 'E2E Health',
    api_enabled: true,
    billing_status: 'active',
    created_at: CREATED_AT,
    ...overrides,
  })
}

export type Scope =
  | 'providers:read'
  | 'providers:read:sensitive'
  | 'groups:read'
  | 'enrollments:read'
  | 'documents:read'

export const ALL_SCOPES: Scope[] = [
  'providers:read',
  'providers:read:sensitive',
  'groups:read',
  'enrollments:read',
  'documents:read',
]

export interface ApiKeyRow extends Row {
  id: string
  organization_id: string
  name: string
  key_hash: string
  scopes: string[]
}

/** The lowercase hex SHA-256 of a raw key: what api_keys.key_hash holds. */
export function keyHash(raw: string): string {
  return createHash('sha256').update(raw).digest('hex')
}

/**
 * Inserts a key as the product console creates one: a random raw key, of which only the hash is
 * stored. Returns the raw key too, which is what a client sends.
 */
export async function insertApiKey(
  sql: Sql,
  organizationId: string,
  overrides: Partial<Omit<ApiKeyRow, 'key_hash'>> = {},
): Promise<ApiKeyRow & { raw: string }> {
  const raw = `e2e_${randomBytes(24).toString('base64url')}`
  const row = await insertRow(sql, 'api_keys', {
    id: randomUUID(),
    organization_id: organizationId,
    name: 'E2E key',
    key_hash: keyHash(raw),
    scopes: ALL_SCOPES,
    ...overrides,
  })
  return { ...row, raw }
}

// ---- Providers -------------------------------------------------------------------------------

export interface ProviderRow extends Row {
  id: string
  organization_id: string
  npi: string
}

export function insertProvider(
  sql: Sql,
  organizationId: string,
  overrides: Record<string, Value> = {},
): Promise<ProviderRow> {
  return insertRow(sql, 'providers', {
    id: randomUUID(),
    organization_id: organizationId,
    npi: '1234567893',
    created_at: CREATED_AT,
    ...overrides,
  })
}

export interface IdentifierRow extends Row {
  id: string
  organization_id: string
  type: string
  value: string
  issued_on: string | null
  expires_on: string | null
  /** jsonb, sent as JSON text. */
  metadata: string
}

export function insertProviderIdentifier(
  sql: Sql,
  organizationId: string,
  providerId: string,
  overrides: Partial<IdentifierRow> = {},
): Promise<IdentifierRow & { provider_id: string }> {
  return insertRow(sql, 'provider_identifiers', {
    id: randomUUID(),
    organization_id: organizationId,
    provider_id: providerId,
    type: 'state_license',
    value: `LIC-${randomBytes(3).toString('hex')}`,
    issued_on: null,
    expires_on: null,
    metadata: '{}',
    created_at: CREATED_AT,
    ...overrides,
  })
}

// ---- Groups ----------------------------------------------------------------------------------

export interface GroupRow extends Row {
  id: string
  organization_id: string
  name: string
  legal_name: string | null
  npi: string | null
  tin: string | null
  taxonomy_code: string | null
}

export function insertProviderGroup(
  sql: Sql,
  organizationId: string,
  overrides: Partial<GroupRow> = {},
): Promise<GroupRow> {
  return insertRow(sql, 'provider_groups', {
    id: randomUUID(),
    organization_id: organizationId,
    name: 'E2E Group',
    legal_name: null,
    npi: null,
    tin: null,
    taxonomy_code: null,
    created_at: CREATED_AT,
    ...overrides,
  })
}

export function insertGroupMembership(
  sql: Sql,
  organizationId: string,
  providerId: string,
  groupId: string,
): Promise<Row & { id: string }> {
  return insertRow(sql, 'group_memberships', {
    id: randomUUID(),
    organization_id: organizationId,
    provider_id: providerId,
    provider_group_id: groupId,
  })
}

export interface ServiceLocationRow extends Row {
  id: string
  name: string
  address: string | null
  address_line_2: string | null
  city: string | null
  state: string | null
  zip: string | null
  phone: string | null
  is_primary: boolean
}

export function insertServiceLocation(
  sql: Sql,
  organizationId: string,
  groupId: string,
  overrides: Partial<ServiceLocationRow> = {},
): Promise<ServiceLocationRow> {
  return insertRow(sql, 'service_locations', {
    id: randomUUID(),
    organization_id: organizationId,
    provider_group_id: groupId,
    name: 'E2E Clinic',
    address: null,
    address_line_2: null,
    city: null,
    state: null,
    zip: null,
    phone: null,
    is_primary: false,
    ...overrides,
  })
}

export function insertGroupIdentifier(
  sql: Sql,
  organizationId: string,
  groupId: string,
  overrides: Partial<IdentifierRow> = {},
): Promise<IdentifierRow & { provider_group_id: string }> {
  return insertRow(sql, 'group_identifiers', {
    id: randomUUID(),
    organization_id: organizationId,
    provider_group_id: groupId,
    type: 'clia',
    value: `CLIA-${randomBytes(3).toString('hex')}`,
    issued_on: null,
    expires_on: null,
    metadata: '{}',
    ...overrides,
  })
}

// ---- Enrollments -----------------------------------------------------------------------------

export interface EnrollmentRow extends Row {
  id: string
  provider_id: string
  provider_group_id: string | null
  payer: string
  state: string | null
  status: string
  payer_provider_id: string | null
  submitted_on: string | null
  approved_on: string | null
  effective_date: string | null
}

export function insertEnrollment(
  sql: Sql,
  organizationId: string,
  providerId: string,
  overrides: Partial<EnrollmentRow> = {},
): Promise<EnrollmentRow> {
  return insertRow(sql, 'enrollments', {
    id: randomUUID(),
    organization_id: organizationId,
    provider_id: providerId,
    provider_group_id: null,
    payer: 'Aetna',
    state: null,
    status: 'in_progress',
    payer_provider_id: null,
    submitted_on: null,
    approved_on: null,
    effective_date: null,
    created_at: CREATED_AT,
    ...overrides,
  })
}

export interface RequirementRow extends Row {
  id: string
  position: number
  name: string
  is_complete: boolean
  completed_at: string | null
}

export function insertEnrollmentRequirement(
  sql: Sql,
  organizationId: string,
  enrollmentId: string,
  overrides: Partial<RequirementRow> = {},
): Promise<RequirementRow> {
  return insertRow(sql, 'enrollment_requirements', {
    id: randomUUID(),
    organization_id: organizationId,
    enrollment_id: enrollmentId,
    position: 1,
    name: 'Signed application',
    is_complete: false,
    completed_at: null,
    ...overrides,
  })
}

export interface LineOfBusinessRow extends Row {
  id: string
  line_of_business: string
  status: string
  effective_date: string | null
}

export function insertEnrollmentLineOfBusiness(
  sql: Sql,
  organizationId: string,
  enrollmentId: string,
  overrides: Partial<LineOfBusinessRow> = {},
): Promise<LineOfBusinessRow> {
  return insertRow(sql, 'enrollment_lines_of_business', {
    id: randomUUID(),
    organization_id: organizationId,
    enrollment_id: enrollmentId,
    line_of_business: 'commercial',
    status: 'pending',
    effective_date: null,
    ...overrides,
  })
}

export interface ParticipationRow extends Row {
  id: string
  service_location_id: string
  is_active: boolean
  activated_on: string | null
}

export function insertLocationParticipation(
  sql: Sql,
  organizationId: string,
  enrollmentId: string,
  serviceLocationId: string,
  overrides: Partial<ParticipationRow> = {},
): Promise<ParticipationRow> {
  return insertRow(sql, 'enrollment_location_participations', {
    id: randomUUID(),
    organization_id: organizationId,
    enrollment_id: enrollmentId,
    service_location_id: serviceLocationId,
    is_active: false,
    activated_on: null,
    ...overrides,
  })
}

export interface GroupEnrollmentRow extends Row {
  id: string
  provider_group_id: string
  payer: string
  state: string | null
  status: string
  payer_group_id: string | null
  submitted_on: string | null
  approved_on: string | null
  effective_date: string | null
}

export function insertGroupEnrollment(
  sql: Sql,
  organizationId: string,
  groupId: string,
  overrides: Partial<GroupEnrollmentRow> = {},
): Promise<GroupEnrollmentRow> {
  return insertRow(sql, 'group_enrollments', {
    id: randomUUID(),
    organization_id: organizationId,
    provider_group_id: groupId,
    payer: 'Blue Shield of California',
    state: null,
    status: 'submitted',
    payer_group_id: null,
    submitted_on: null,
    approved_on: null,
    effective_date: null,
    created_at: CREATED_AT,
    ...overrides,
  })
}

export function insertGroupEnrollmentLineOfBusiness(
  sql: Sql,
  organizationId: string,
  groupEnrollmentId: string,
  overrides: Partial<LineOfBusinessRow> = {},
): Promise<LineOfBusinessRow> {
  return insertRow(sql, 'group_enrollment_lines_of_business', {
    id: randomUUID(),
    organization_id: organizationId,
    group_enrollment_id: groupEnrollmentId,
    line_of_business: 'commercial',
    status: 'pending',
    effective_date: null,
    ...overrides,
  })
}

// ---- Documents and what is never exposed -----------------------------------------------------

export interface DocumentRow extends Row {
  id: string
  provider_id: string | null
  provider_group_id: string | null
  type: string
  file_name: string
  content_type: string
  size_bytes: number
  expires_on: string | null
  uploaded_at: string
  storage_key: string
}

export function insertDocument(
  sql: Sql,
  organizationId: string,
  overrides: Partial<DocumentRow> = {},
): Promise<DocumentRow> {
  return insertRow(sql, 'documents', {
    id: randomUUID(),
    organization_id: organizationId,
    provider_id: null,
    provider_group_id: null,
    type: 'license',
    file_name: 'license.pdf',
    content_type: 'application/pdf',
    size_bytes: 123_456,
    expires_on: null,
    uploaded_at: '2025-03-05T08:09:10.456Z',
    storage_key: `s3://e2e-bucket/${randomUUID()}`,
    created_at: CREATED_AT,
    ...overrides,
  })
}

/** A row of the table the replica must never subscribe to, store or serve. */
export function insertPayerPortalLogin(
  sql: Sql,
  organizationId: string,
  overrides: Record<string, Value> = {},
): Promise<Row & { id: string; username: string; password_cipher: string }> {
  return insertRow(sql, 'payer_portal_logins', {
    id: randomUUID(),
    organization_id: organizationId,
    payer: 'Aetna',
    username: `portal-user-${randomBytes(4).toString('hex')}`,
    password_cipher: `cipher-${randomBytes(8).toString('hex')}`,
    ...overrides,
  })
}

// ---- A stream of changes ---------------------------------------------------------------------

/** What the API must show for a bulk run's providers: name and number of identifiers, by id. */
export type BulkExpectation = Map<string, { name: string; identifiers: number }>

export interface BulkOptions {
  /** first_name of every provider of the run: tells its providers apart from the others. */
  tag: string
  count: number
  /**
   * Iterations per second at most (default: as fast as PostgreSQL takes them). A fault test
   * paces the run so that it is still writing when the fault strikes, whatever the machine.
   */
  perSecond?: number
  /** Called after each iteration with how many are done (to act mid-stream). */
  onProgress?: (done: number) => void
}

/**
 * Writes a stream of single-statement transactions, as a busy product does: per iteration a
 * provider and its licence; every 10th iteration renames an earlier provider, every 20th deletes
 * an earlier licence, every 50th deletes an earlier provider (licence first: foreign keys).
 * Returns what the replica must end up with.
 */
export async function writeBulk(
  sql: Sql,
  organizationId: string,
  options: BulkOptions,
): Promise<BulkExpectation> {
  const providers: { id: string; name: string; licence: string | null }[] = []
  const expected: BulkExpectation = new Map()
  const started = performance.now()
  for (let k = 0; k < options.count; k++) {
    if (options.perSecond !== undefined) {
      const due = started + (k * 1000) / options.perSecond - performance.now()
      if (due > 0) await sleep(due)
    }
    const id = randomUUID()
    const lastName = `#${k}`
    await insertProvider(sql, organizationId, { id, first_name: options.tag, last_name: lastName })
    const licence = await insertProviderIdentifier(sql, organizationId, id, { value: `L-${k}` })
    providers.push({ id, name: `${options.tag} ${lastName}`, licence: licence.id })
    expected.set(id, { name: `${options.tag} ${lastName}`, identifiers: 1 })
    const renamed = providers[k - 5]
    if (k % 10 === 9 && renamed !== undefined && expected.has(renamed.id)) {
      await updateRow(sql, 'providers', renamed.id, { last_name: `#${k - 5} renamed` })
      renamed.name = `${options.tag} #${k - 5} renamed`
      expected.set(renamed.id, { ...expected.get(renamed.id)!, name: renamed.name })
    }
    const unlicensed = providers[k - 10]
    if (k % 20 === 19 && unlicensed?.licence != null && expected.has(unlicensed.id)) {
      await deleteRow(sql, 'provider_identifiers', unlicensed.licence)
      unlicensed.licence = null
      expected.set(unlicensed.id, { ...expected.get(unlicensed.id)!, identifiers: 0 })
    }
    const deleted = providers[k - 25]
    if (k % 50 === 49 && deleted !== undefined && expected.has(deleted.id)) {
      if (deleted.licence !== null) await deleteRow(sql, 'provider_identifiers', deleted.licence)
      await deleteRow(sql, 'providers', deleted.id)
      expected.delete(deleted.id)
    }
    options.onProgress?.(k + 1)
  }
  return expected
}

/** Providers spread over many organizations, as a platform of many small customers has them. */
export interface SpreadProvider {
  id: string
  organizationId: string
}

/**
 * `count` organizations (no API key: nothing reads them through HTTP) with `providersEach`
 * providers each, in one statement per table: hundreds of rows without hundreds of round trips.
 */
export async function insertSmallOrganizations(
  sql: Sql,
  count: number,
  providersEach: number,
): Promise<SpreadProvider[]> {
  const organizations = Array.from({ length: count }, () => randomUUID())
  await sql.query(
    `insert into organizations (id, name, api_enabled, billing_status, created_at)
     select id, 'Small ' || n, true, 'active', $2 from unnest($1::uuid[]) with ordinality as t(id, n)`,
    [organizations, CREATED_AT],
  )
  // Round by round, so that providers next to each other belong to different organizations.
  const providers = Array.from({ length: providersEach }).flatMap(() =>
    organizations.map((organizationId) => ({ id: randomUUID(), organizationId })),
  )
  await sql.query(
    `insert into providers (id, organization_id, npi, first_name, last_name, created_at)
     select id, org, '1234567893', 'Small', 'Seeded', $3
     from unnest($1::uuid[], $2::uuid[]) as t(id, org)`,
    [providers.map((p) => p.id), providers.map((p) => p.organizationId), CREATED_AT],
  )
  return providers
}

/**
 * Renames the providers in turn, `count` single-row transactions paced at `perSecond`, so that
 * consecutive changes belong to different organizations and every batch the projector takes
 * touches many files. Resolves to each renamed provider's last name.
 */
export async function renameAcross(
  sql: Sql,
  providers: readonly SpreadProvider[],
  options: { count: number; perSecond: number; tag: string },
): Promise<Map<string, string>> {
  const names = new Map<string, string>()
  const started = performance.now()
  for (let k = 0; k < options.count; k++) {
    const due = started + (k * 1000) / options.perSecond - performance.now()
    if (due > 0) await sleep(due)
    const provider = providers[k % providers.length]!
    const lastName = `${options.tag} #${k}`
    await updateRow(sql, 'providers', provider.id, { last_name: lastName })
    names.set(provider.id, lastName)
  }
  return names
}
