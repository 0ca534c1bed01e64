// Test data for the api, written the way the projector writes it: a generation of the data
// directory (src/layout.ts), control.db and organization files opened with openForWriting (so the
// real migrations make the tables), rows inserted into the control tables and the doc_* tables.
// Document bodies are built to the zod schemas of schema/resources.ts.
import { createHash, randomBytes, randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Scope } from '../../../schema/resources.ts'
import type {
  DocumentMetadata,
  Enrollment,
  Expirable,
  GroupEnrollment,
  ProviderGroup,
  SensitiveProvider,
} from '../../../schema/resources.ts'
import { type Generation, prepareGeneration, publishGeneration } from '../../../src/layout.ts'
import { openForWriting, type SqliteDatabase } from '../../../src/sqlite.ts'

/** A stamp `seconds` after 2026-01-01T00:00:00.000Z, in the stored format. */
export function stamp(seconds: number): string {
  return new Date(Date.UTC(2026, 0, 1) + seconds * 1000).toISOString()
}

export const allScopes: Scope[] = [
  'providers:read',
  'providers:read:sensitive',
  'groups:read',
  'enrollments:read',
  'documents:read',
]
export const baseScopes: Scope[] = allScopes.filter((s) => s !== 'providers:read:sensitive')

export function newDataDir(): string {
  return mkdtempSync(join(tmpdir(), 'api-test-'))
}

export class ReplicaFixture {
  readonly dataDir: string
  readonly generation: Generation
  readonly control: SqliteDatabase
  readonly #organizations: OrganizationFixture[] = []

  private constructor(dataDir: string, name: string) {
    this.dataDir = dataDir
    this.generation = prepareGeneration(dataDir, name)
    this.control = openForWriting(this.generation.controlPath, 'control')
  }

  /** A generation `name` in `dataDir` (a new temporary directory by default), not yet published. */
  static create(options: { dataDir?: string; name?: string } = {}): ReplicaFixture {
    return new ReplicaFixture(options.dataDir ?? newDataDir(), options.name ?? 'g1')
  }

  /** Publishes this generation as CURRENT, optionally marking it caught up first. */
  publish(options: { caughtUp?: boolean } = {}): this {
    if (options.caughtUp ?? true) this.setState('caught_up_at', stamp(0))
    publishGeneration(this.dataDir, this.generation.name)
    return this
  }

  setState(
    key: 'caught_up_at' | 'maintenance' | 'organization_files',
    value: string | undefined,
  ): void {
    if (value === undefined) {
      this.control.prepare('DELETE FROM replica_state WHERE key = ?').run(key)
    } else {
      this.control
        .prepare('INSERT OR REPLACE INTO replica_state (key, value) VALUES (?, ?)')
        .run(key, value)
    }
  }

  organization(
    options: { id?: string; apiEnabled?: boolean; billingStatus?: string; file?: boolean } = {},
  ): OrganizationFixture {
    const id = options.id ?? randomUUID()
    this.control
      .prepare(
        `INSERT OR REPLACE INTO organizations
           (id, name, api_enabled, billing_status, created_at, updated_at, source_lsn, from_snapshot)
         VALUES (?, ?, ?, ?, ?, ?, 0, 1)`,
      )
      .run(
        id,
        `Organization ${id.slice(0, 8)}`,
        options.apiEnabled === false ? 0 : 1,
        options.billingStatus ?? 'active',
        stamp(0),
        stamp(0),
      )
    const org = new OrganizationFixture(this, id, options.file ?? true)
    this.#organizations.push(org)
    return org
  }

  setOrganization(id: string, state: { apiEnabled?: boolean; billingStatus?: string }): void {
    if (state.apiEnabled !== undefined) {
      this.control
        .prepare('UPDATE organizations SET api_enabled = ? WHERE id = ?')
        .run(state.apiEnabled ? 1 : 0, id)
    }
    if (state.billingStatus !== undefined) {
      this.control
        .prepare('UPDATE organizations SET billing_status = ? WHERE id = ?')
        .run(state.billingStatus, id)
    }
  }

  /** Creates an API key; returns its id and the raw key (stored only as its SHA-256). */
  key(
    organizationId: string,
    options: {
      scopes?: readonly string[]
      expiresAt?: string
      revokedAt?: string
      raw?: string
    } = {},
  ): { id: string; raw: string } {
    const id = randomUUID()
    const raw = options.raw ?? `ck_${randomBytes(24).toString('base64url')}`
    this.control
      .prepare(
        `INSERT INTO api_keys (id, organization_id, name, key_hash, scopes, created_at, expires_at,
                               revoked_at, source_lsn, from_snapshot)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, 1)`,
      )
      .run(
        id,
        organizationId,
        'test key',
        createHash('sha256').update(raw).digest('hex'),
        JSON.stringify(options.scopes ?? baseScopes),
        stamp(0),
        options.expiresAt ?? null,
        options.revokedAt ?? null,
      )
    return { id, raw }
  }

  revokeKey(id: string, at = stamp(1)): void {
    this.control.prepare('UPDATE api_keys SET revoked_at = ? WHERE id = ?').run(at, id)
  }

  close(): void {
    for (const org of this.#organizations) org.close()
    this.control.close()
  }

  /** Closes the files and deletes the whole data directory. */
  destroy(): void {
    this.close()
    rmSync(this.dataDir, { recursive: true, force: true })
  }
}

export class OrganizationFixture {
  readonly id: string
  readonly #replica: ReplicaFixture
  #db: SqliteDatabase | undefined

  constructor(replica: ReplicaFixture, id: string, withFile: boolean) {
    this.#replica = replica
    this.id = id
    if (withFile) this.#db = openForWriting(replica.generation.organizationPath(id), 'organization')
  }

  get db(): SqliteDatabase {
    if (this.#db === undefined) throw new Error('this organization has no file')
    return this.#db
  }

  get path(): string {
    return this.#replica.generation.organizationPath(this.id)
  }

  /** Writes a provider document in both variants; returns the two served objects. */
  provider(
    overrides: Partial<SensitiveProvider> = {},
    stamps: { updatedAt?: string; sensitiveUpdatedAt?: string } = {},
  ): { base: Record<string, unknown>; sensitive: SensitiveProvider } {
    const updatedAt = stamps.updatedAt ?? overrides.updatedAt ?? stamp(1)
    const sensitiveUpdatedAt = stamps.sensitiveUpdatedAt ?? updatedAt
    const sensitive = providerDocument({ ...overrides, updatedAt: sensitiveUpdatedAt })
    const base = withoutSensitive({ ...sensitive, updatedAt })
    this.db
      .prepare(
        `INSERT OR REPLACE INTO doc_providers (id, updated_at, hash, body, sensitive_updated_at,
           sensitive_hash, sensitive_body, is_active) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        sensitive.id,
        updatedAt,
        hash(base),
        JSON.stringify(base),
        sensitiveUpdatedAt,
        hash(sensitive),
        JSON.stringify(sensitive),
        sensitive.isActive ? 1 : 0,
      )
    return { base, sensitive }
  }

  providerGroup(overrides: Partial<ProviderGroup> = {}): ProviderGroup {
    const doc = providerGroupDocument(overrides)
    this.#put('doc_provider_groups', doc, {})
    return doc
  }

  enrollment(overrides: Partial<Enrollment> = {}): Enrollment {
    const doc = enrollmentDocument(overrides)
    this.#put('doc_enrollments', doc, {
      provider_id: doc.providerId,
      status: doc.status,
      payer_key: doc.payer.toLowerCase(),
    })
    return doc
  }

  groupEnrollment(overrides: Partial<GroupEnrollment> = {}): GroupEnrollment {
    const doc = groupEnrollmentDocument(overrides)
    this.#put('doc_group_enrollments', doc, {
      provider_group_id: doc.providerGroupId,
      status: doc.status,
      payer_key: doc.payer.toLowerCase(),
    })
    return doc
  }

  document(overrides: Partial<DocumentMetadata> = {}): DocumentMetadata {
    const doc = documentDocument(overrides)
    this.#put('doc_documents', doc, {
      provider_id: doc.providerId,
      provider_group_id: doc.providerGroupId,
    })
    return doc
  }

  /** Writes an expirable the way the projector does: body without its last two keys and brace. */
  expirable(
    overrides: Partial<Expirable> & { expiresOn: string },
  ): Omit<Expirable, 'daysUntilExpiration'> {
    const sourceType = overrides.sourceType ?? 'provider_identifier'
    const sourceId = overrides.sourceId ?? randomUUID()
    const doc = {
      id: `${sourceType}:${sourceId}`,
      sourceType,
      sourceId,
      providerId: overrides.providerId === undefined ? randomUUID() : overrides.providerId,
      providerGroupId: overrides.providerGroupId ?? null,
      type: overrides.type ?? 'state_license',
      description: overrides.description ?? 'LIC-12345',
      expiresOn: overrides.expiresOn,
    }
    const updatedAt = overrides.updatedAt ?? stamp(1)
    const json = JSON.stringify(doc)
    this.db
      .prepare(
        `INSERT OR REPLACE INTO doc_expirables (id, source_type, source_id, expires_on, updated_at,
           hash, body) VALUES (?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(doc.id, sourceType, sourceId, doc.expiresOn, updatedAt, hash(doc), json.slice(0, -1))
    return { ...doc, updatedAt }
  }

  #put(table: string, doc: { id: string; updatedAt: string }, extra: Record<string, unknown>) {
    const columns = ['id', 'updated_at', 'hash', 'body', ...Object.keys(extra)]
    this.db
      .prepare(
        `INSERT OR REPLACE INTO ${table} (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`,
      )
      .run(doc.id, doc.updatedAt, hash(doc), JSON.stringify(doc), ...Object.values(extra))
  }

  close(): void {
    this.#db?.close()
    this.#db = undefined
  }
}

function hash(value: unknown): string {
  return createHash('sha256').update(JSON.stringify(value)).digest('hex')
}

const SENSITIVE = [
  'birthCity',
  'birthCountry',
  'dateOfBirth',
  'ethnicity',
  'ethnicityDetail',
  'gender',
] as const

function withoutSensitive(doc: SensitiveProvider): Record<string, unknown> {
  const copy: Record<string, unknown> = { ...doc }
  for (const key of SENSITIVE) delete copy[key]
  return copy
}

export function providerDocument(o: Partial<SensitiveProvider> = {}): SensitiveProvider {
  const firstName = o.firstName === undefined ? 'Ada' : o.firstName
  const lastName = o.lastName === undefined ? 'Lovelace' : o.lastName
  return {
    id: o.id ?? randomUUID(),
    name: o.name ?? [firstName, lastName].filter((s) => s !== null).join(' '),
    npi: o.npi ?? '1234567893',
    firstName,
    middleName: o.middleName ?? null,
    lastName,
    suffix: o.suffix ?? null,
    isActive: o.isActive ?? true,
    telehealthServices: o.telehealthServices ?? false,
    type: o.type ?? 'MD',
    caqhId: o.caqhId ?? '12345678',
    startDate: o.startDate ?? '2020-01-15',
    termedDate: o.termedDate ?? null,
    taxonomyCode: o.taxonomyCode ?? '207Q00000X',
    specialty: o.specialty ?? 'Family Medicine',
    specialtyTaxonomyCode: o.specialtyTaxonomyCode ?? '207Q00000X',
    secondarySpecialty: o.secondarySpecialty ?? null,
    secondarySpecialtyTaxonomyCode: o.secondarySpecialtyTaxonomyCode ?? null,
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
    billingAddress: o.billingAddress ?? '100 Main Street',
    billingAddressLine2: o.billingAddressLine2 ?? 'Suite 200',
    billingCity: o.billingCity ?? 'Springfield',
    billingState: o.billingState ?? 'IL',
    billingZip: o.billingZip ?? '62701',
    personalAddress: o.personalAddress ?? '5 Elm Court',
    personalAddressLine2: null,
    personalCity: 'Springfield',
    personalCounty: 'Sangamon',
    personalState: 'IL',
    personalZip: '62704',
    personalEmail: o.personalEmail ?? 'ada@example.com',
    personalFax: null,
    personalPhone: '+1-217-555-0100',
    otherEmails: o.otherEmails ?? ['ada.work@example.com'],
    languages: o.languages ?? ['English', 'Spanish'],
    medicaidParticipation: 'participating',
    medicareParticipation: 'participating',
    medicaidStates: ['IL'],
    medicareStates: ['IL', 'MO'],
    birthCity: o.birthCity ?? 'London',
    birthCountry: o.birthCountry ?? 'GB',
    dateOfBirth: o.dateOfBirth ?? '1980-12-10',
    ethnicity: o.ethnicity ?? 'not_disclosed',
    ethnicityDetail: o.ethnicityDetail ?? null,
    gender: o.gender ?? 'female',
    groupMemberships: o.groupMemberships ?? [
      {
        providerGroupId: randomUUID(),
        name: 'Springfield Family Practice',
        npi: '1999999984',
        tin: '123456789',
      },
    ],
    providerIds: o.providerIds ?? [
      {
        id: randomUUID(),
        type: 'dea',
        value: 'AL1234563',
        issuedOn: '2021-03-01',
        expiresOn: '2027-03-01',
        metadata: { schedules: ['2', '3'] },
      },
      {
        id: randomUUID(),
        type: 'state_license',
        value: 'IL-036-123456',
        issuedOn: '2019-06-30',
        expiresOn: '2026-06-30',
        metadata: { state: 'IL', board: 'IDFPR' },
      },
    ],
    createdAt: o.createdAt ?? stamp(0),
    updatedAt: o.updatedAt ?? stamp(1),
  }
}

export function providerGroupDocument(o: Partial<ProviderGroup> = {}): ProviderGroup {
  return {
    id: o.id ?? randomUUID(),
    name: o.name ?? 'Springfield Family Practice',
    legalName: o.legalName ?? 'Springfield Family Practice LLC',
    npi: o.npi ?? '1999999984',
    tin: o.tin ?? '123456789',
    taxonomyCode: o.taxonomyCode ?? '261QP2300X',
    serviceLocations: o.serviceLocations ?? [
      {
        id: randomUUID(),
        name: 'Main Clinic',
        address: '100 Main Street',
        addressLine2: null,
        city: 'Springfield',
        state: 'IL',
        zip: '62701',
        phone: '+1-217-555-0199',
        isPrimary: true,
      },
    ],
    groupIds: o.groupIds ?? [],
    createdAt: o.createdAt ?? stamp(0),
    updatedAt: o.updatedAt ?? stamp(1),
  }
}

export function enrollmentDocument(o: Partial<Enrollment> = {}): Enrollment {
  const providerId = o.providerId ?? randomUUID()
  return {
    id: o.id ?? randomUUID(),
    providerId,
    provider:
      o.provider === undefined
        ? { id: providerId, name: 'Ada Lovelace', npi: '1234567893' }
        : o.provider,
    providerGroupId: o.providerGroupId ?? null,
    payer: o.payer ?? 'Blue Cross Blue Shield',
    state: o.state ?? 'IL',
    status: o.status ?? 'in_progress',
    payerProviderId: o.payerProviderId ?? null,
    submittedOn: o.submittedOn ?? '2026-01-05',
    approvedOn: o.approvedOn ?? null,
    effectiveDate: o.effectiveDate ?? null,
    requirements: o.requirements ?? [
      { id: randomUUID(), name: 'W-9', isComplete: true, completedAt: stamp(0) },
    ],
    linesOfBusiness: o.linesOfBusiness ?? [
      { id: randomUUID(), lineOfBusiness: 'commercial', status: 'pending', effectiveDate: null },
    ],
    locations: o.locations ?? [],
    createdAt: o.createdAt ?? stamp(0),
    updatedAt: o.updatedAt ?? stamp(1),
  }
}

export function groupEnrollmentDocument(o: Partial<GroupEnrollment> = {}): GroupEnrollment {
  const providerGroupId = o.providerGroupId ?? randomUUID()
  return {
    id: o.id ?? randomUUID(),
    providerGroupId,
    group:
      o.group === undefined
        ? { id: providerGroupId, name: 'Springfield Family Practice', npi: null, tin: null }
        : o.group,
    payer: o.payer ?? 'Aetna',
    state: o.state ?? 'IL',
    status: o.status ?? 'submitted',
    payerGroupId: o.payerGroupId ?? null,
    submittedOn: o.submittedOn ?? '2026-01-05',
    approvedOn: o.approvedOn ?? null,
    effectiveDate: o.effectiveDate ?? null,
    linesOfBusiness: o.linesOfBusiness ?? [],
    createdAt: o.createdAt ?? stamp(0),
    updatedAt: o.updatedAt ?? stamp(1),
  }
}

export function documentDocument(o: Partial<DocumentMetadata> = {}): DocumentMetadata {
  return {
    id: o.id ?? randomUUID(),
    providerId: o.providerId === undefined ? randomUUID() : o.providerId,
    providerGroupId: o.providerGroupId ?? null,
    type: o.type ?? 'malpractice_insurance',
    fileName: o.fileName ?? 'coi-2026.pdf',
    contentType: o.contentType ?? 'application/pdf',
    sizeBytes: o.sizeBytes ?? 123_456,
    expiresOn: o.expiresOn ?? null,
    uploadedAt: o.uploadedAt ?? stamp(0),
    createdAt: o.createdAt ?? stamp(0),
    updatedAt: o.updatedAt ?? stamp(1),
  }
}
