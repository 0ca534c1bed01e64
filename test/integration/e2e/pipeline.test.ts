// End to end, from SQL to HTTP: rows written to PostgreSQL travel through Debezium, Kafka, the
// projector process and the SQLite files, and every check is an HTTP request to the api process.
// One pipeline serves the whole file; the tests run in order and build on each other's rows.
import { randomUUID } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type {
  DocumentMetadata,
  Enrollment,
  Expirable,
  GroupEnrollment,
  Provider,
  ProviderGroup,
  SensitiveProvider,
} from '../../../schema/resources.ts'
import {
  ApiClient,
  DelayStats,
  Pipeline,
  TOPIC_PREFIX,
  listTopics,
  topicEnd,
  type ErrorBody,
} from '../../support/e2e.ts'
import {
  ALL_SCOPES,
  CREATED_AT,
  deleteRow,
  insertApiKey,
  insertDocument,
  insertEnrollment,
  insertEnrollmentLineOfBusiness,
  insertEnrollmentRequirement,
  insertGroupEnrollment,
  insertGroupEnrollmentLineOfBusiness,
  insertGroupIdentifier,
  insertGroupMembership,
  insertLocationParticipation,
  insertOrganization,
  insertPayerPortalLogin,
  insertProvider,
  insertProviderGroup,
  insertProviderIdentifier,
  insertServiceLocation,
  isoDate,
  updateRow,
  type ApiKeyRow,
  type DocumentRow,
  type EnrollmentRow,
  type GroupEnrollmentRow,
  type GroupRow,
  type IdentifierRow,
  type LineOfBusinessRow,
  type OrganizationRow,
  type ParticipationRow,
  type ProviderRow,
  type RequirementRow,
  type ServiceLocationRow,
} from '../../support/e2e-sql.ts'

type Key = ApiKeyRow & { raw: string }

/** Values that must never leave PostgreSQL: not into a response, not into the replica's files. */
const SECRETS = {
  ssn: '987-65-4321',
  notes: 'NOTE-never-exposed-6f1c',
  ssnAfter: '111-22-3333',
  notesAfter: 'NOTE-never-exposed-after-9d2e',
  storageKey: 's3://e2e-private/never-exposed-1.pdf',
  storageKeyAfter: 's3://e2e-private/never-exposed-2.pdf',
}

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
/** Any visibility stamp: ISO 8601 UTC with milliseconds (spec/resources.md). */
const STAMP: unknown = expect.stringMatching(ISO_MS)

/** The Provider fields of api-v1.md, in its order, without the computed and nested ones. */
const PROVIDER_COLUMNS = [
  'firstName',
  'middleName',
  'lastName',
  'suffix',
  'type',
  'caqhId',
  'startDate',
  'termedDate',
  'taxonomyCode',
  'specialty',
  'specialtyTaxonomyCode',
  'secondarySpecialty',
  'secondarySpecialtyTaxonomyCode',
  ...[1, 2, 3, 4, 5].flatMap((n) => [
    `additionalSpecialty${n}`,
    `additionalSpecialty${n}TaxonomyCode`,
  ]),
  'billingAddress',
  'billingAddressLine2',
  'billingCity',
  'billingState',
  'billingZip',
  'personalAddress',
  'personalAddressLine2',
  'personalCity',
  'personalCounty',
  'personalState',
  'personalZip',
  'personalEmail',
  'personalFax',
  'personalPhone',
  'medicaidParticipation',
  'medicareParticipation',
] as const
const PROVIDER_ARRAYS = ['otherEmails', 'languages', 'medicaidStates', 'medicareStates'] as const
const SENSITIVE_COLUMNS = [
  'birthCity',
  'birthCountry',
  'dateOfBirth',
  'ethnicity',
  'ethnicityDetail',
  'gender',
] as const

/** camelCase API field -> snake_case source column: `billingAddressLine2` -> `billing_address_line_2`. */
function sourceColumn(field: string): string {
  return field
    .replace(/([A-Z])/g, '_$1')
    .replace(/(\d+)/g, '_$1')
    .toLowerCase()
}

function identifierEntry(row: IdentifierRow): Provider['providerIds'][number] {
  return {
    id: row.id,
    type: row.type,
    value: row.value,
    issuedOn: row.issued_on,
    expiresOn: row.expires_on,
    metadata: JSON.parse(row.metadata) as Provider['providerIds'][number]['metadata'],
  }
}

function membershipEntry(group: GroupRow): Provider['groupMemberships'][number] {
  return { providerGroupId: group.id, name: group.name, npi: group.npi, tin: group.tin }
}

function byTypeThenId(a: IdentifierRow, b: IdentifierRow): number {
  return a.type === b.type ? (a.id < b.id ? -1 : 1) : a.type < b.type ? -1 : 1
}

/** The response spec/resources.md defines for a provider row, without `updatedAt`. */
function expectedProvider(
  row: ProviderRow,
  options: { sensitive: boolean; groups: GroupRow[]; identifiers: IdentifierRow[] },
): Record<string, unknown> {
  const value = (field: string): unknown => row[sourceColumn(field)] ?? null
  const name = [row.first_name, row.middle_name, row.last_name].filter(Boolean).join(' ')
  const expected: Record<string, unknown> = {
    id: row.id,
    name: typeof row.suffix === 'string' ? `${name}, ${row.suffix}` : name,
    npi: row.npi,
    isActive: row.is_active ?? true,
    telehealthServices: row.telehealth_services ?? false,
    groupMemberships: options.groups.map(membershipEntry),
    providerIds: [...options.identifiers].sort(byTypeThenId).map(identifierEntry),
    createdAt: CREATED_AT,
    updatedAt: STAMP,
  }
  for (const field of PROVIDER_COLUMNS) expected[field] = value(field)
  for (const field of PROVIDER_ARRAYS) expected[field] = row[sourceColumn(field)] ?? []
  if (options.sensitive) for (const field of SENSITIVE_COLUMNS) expected[field] = value(field)
  return expected
}

/**
 * Every byte under a directory: the replica's files, WAL and journals included. A file renamed
 * away between the listing and the read is skipped: only freshness.json's temporary copy is
 * (it holds an instant, written twice a second).
 */
function allBytes(dir: string): string {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => {
      try {
        return readFileSync(join(entry.parentPath, entry.name)).toString('latin1')
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return ''
        throw error
      }
    })
    .join('\n')
}

// The whole suite twice: organizations in files of their own (the default), and every
// organization in one shared file (ORGANIZATION_FILES=1), where each key must still see exactly
// its organization's documents.
endToEnd('end to end: SQL in PostgreSQL to HTTP through the api', {})
endToEnd('end to end, every organization in one shared file (ORGANIZATION_FILES=1)', {
  ORGANIZATION_FILES: '1',
})

function endToEnd(title: string, projectorEnv: Record<string, string>): void {
  describe(title, () => {
    let pipeline: Pipeline
    const delays = new DelayStats()

    // Organization A: written before the connector starts (snapshot reads) and after (changes).
    let orgA: OrganizationRow
    let keyA: Key
    let keyBase: Key
    let keyRevoked: Key
    let a: ApiClient
    let base: ApiClient
    let p1: ProviderRow
    let p2: ProviderRow
    let p3: ProviderRow
    let i1: IdentifierRow
    let i2: IdentifierRow
    let g1: GroupRow
    let l1: ServiceLocationRow
    let l2: ServiceLocationRow
    let gi1: IdentifierRow
    let e1: EnrollmentRow
    let r1: RequirementRow
    let r2: RequirementRow
    let lob1: LineOfBusinessRow
    let part1: ParticipationRow
    let ge1: GroupEnrollmentRow
    let glob1: LineOfBusinessRow
    let d1: DocumentRow
    let d2: DocumentRow
    // Organization B: its own key and provider.
    let keyB: Key
    let pB: ProviderRow

    beforeAll(async () => {
      pipeline = await Pipeline.start({
        projectorEnv,
        beforeConnector: async (sql) => {
          orgA = await insertOrganization(sql, { name: 'Acme E2E' })
          keyA = await insertApiKey(sql, orgA.id, { name: 'all scopes' })
          keyBase = await insertApiKey(sql, orgA.id, {
            name: 'no sensitive scope',
            scopes: ALL_SCOPES.filter((s) => s !== 'providers:read:sensitive'),
          })
          keyRevoked = await insertApiKey(sql, orgA.id, { name: 'to be revoked' })
          p1 = await insertProvider(sql, orgA.id, {
            first_name: 'Ada',
            middle_name: 'B',
            last_name: 'Lovelace',
            suffix: 'Jr.',
            npi: '1234567893',
            telehealth_services: true,
            type: 'MD',
            caqh_id: '12345678',
            start_date: '2020-02-29',
            taxonomy_code: '207Q00000X',
            specialty: 'Family Medicine',
            additional_specialty_3: 'Geriatrics',
            additional_specialty_3_taxonomy_code: '207QG0300X',
            billing_address: '1 Main St',
            billing_address_line_2: 'Suite 2',
            billing_city: 'Oakland',
            billing_state: 'CA',
            billing_zip: '94607',
            personal_email: 'ada@example.com',
            personal_fax: '555-0199',
            other_emails: ['ada@work.example', 'a.lovelace@example.org'],
            languages: ['English', 'Spanish'],
            medicaid_states: ['CA', 'NV'],
            birth_city: 'London',
            date_of_birth: '1815-12-10',
            gender: 'female',
            ssn: SECRETS.ssn,
            internal_notes: SECRETS.notes,
          })
        },
      })
      a = pipeline.client(keyA.raw)
      base = pipeline.client(keyBase.raw)
    })

    afterAll(async () => {
      console.log(delays.line())
      await pipeline?.stop()
    })

    const providerOf = (client: ApiClient, id: string) =>
      client.detail<SensitiveProvider>(`/providers/${id}`)
    const stampOf = async (client: ApiClient, path: string): Promise<string | undefined> =>
      (await client.detail<{ updatedAt: string }>(path))?.updatedAt

    it('serves snapshot reads and streamed inserts with the fields of resources.md', async () => {
      const sql = pipeline.sql
      g1 = await insertProviderGroup(sql, orgA.id, {
        name: 'Bay Clinic',
        legal_name: 'Bay Clinic LLC',
        npi: '1999999992',
        tin: '12-3456789',
        taxonomy_code: '261QP2300X',
      })
      // Inserted non-primary first: primary sorts first whatever the order of arrival.
      l2 = await insertServiceLocation(sql, orgA.id, g1.id, { name: 'Annex', city: 'Berkeley' })
      l1 = await insertServiceLocation(sql, orgA.id, g1.id, {
        name: 'Main St Clinic',
        address: '1 Main St',
        city: 'Oakland',
        state: 'CA',
        zip: '94607',
        phone: '555-0100',
        is_primary: true,
      })
      gi1 = await insertGroupIdentifier(sql, orgA.id, g1.id, { expires_on: isoDate(100) })
      i1 = await insertProviderIdentifier(sql, orgA.id, p1.id, {
        type: 'state_license',
        value: 'CA-A12345',
        issued_on: '2022-07-01',
        expires_on: isoDate(30),
        metadata: JSON.stringify({ state: 'CA', status: 'active', nested: { n: 1.5 } }),
      })
      i2 = await insertProviderIdentifier(sql, orgA.id, p1.id, { type: 'dea', value: 'DEA-1' })
      await insertGroupMembership(sql, orgA.id, p1.id, g1.id)
      p2 = await insertProvider(sql, orgA.id, { first_name: 'Grace', last_name: 'Hopper' })
      p3 = await insertProvider(sql, orgA.id, { first_name: 'Edsger', last_name: 'Dijkstra' })
      e1 = await insertEnrollment(sql, orgA.id, p1.id, {
        provider_group_id: g1.id,
        payer: 'Aetna',
        state: 'CA',
        submitted_on: '2025-01-02',
      })
      r2 = await insertEnrollmentRequirement(sql, orgA.id, e1.id, {
        position: 2,
        name: 'Malpractice certificate',
        is_complete: true,
        completed_at: '2025-02-03T04:05:06.789Z',
      })
      r1 = await insertEnrollmentRequirement(sql, orgA.id, e1.id, { position: 1 })
      lob1 = await insertEnrollmentLineOfBusiness(sql, orgA.id, e1.id)
      part1 = await insertLocationParticipation(sql, orgA.id, e1.id, l1.id, {
        is_active: true,
        activated_on: '2025-02-01',
      })
      ge1 = await insertGroupEnrollment(sql, orgA.id, g1.id, { payer_group_id: 'BSC-77' })
      glob1 = await insertGroupEnrollmentLineOfBusiness(sql, orgA.id, ge1.id, {
        line_of_business: 'medicare_advantage',
        status: 'active',
        effective_date: '2025-04-01',
      })
      d1 = await insertDocument(sql, orgA.id, {
        provider_id: p1.id,
        expires_on: isoDate(60),
        storage_key: SECRETS.storageKey,
      })
      d2 = await insertDocument(sql, orgA.id, {
        provider_group_id: g1.id,
        type: 'w9',
        file_name: 'w9.pdf',
        size_bytes: 2048,
      })
      const orgB = await insertOrganization(sql, { name: 'Other Org' })
      keyB = await insertApiKey(sql, orgB.id)
      pB = await insertProvider(sql, orgB.id, { first_name: 'Other', last_name: 'Person' })

      // Everything has arrived once the last row of each kind is served in full.
      await pipeline.eventually(
        'the inserted rows to be served',
        async () => {
          const [provider, enrollment, groupEnrollment, documents, group] = await Promise.all([
            providerOf(a, p1.id),
            a.detail<Enrollment>(`/enrollments/${e1.id}`),
            a.detail<GroupEnrollment>(`/group-enrollments/${ge1.id}`),
            a.list<DocumentMetadata>('/documents'),
            a.detail<ProviderGroup>(`/provider-groups/${g1.id}`),
          ])
          const complete =
            provider?.providerIds.length === 2 &&
            provider.groupMemberships.length === 1 &&
            enrollment?.requirements.length === 2 &&
            enrollment.linesOfBusiness.length === 1 &&
            enrollment.locations.length === 1 &&
            enrollment.locations[0]?.name !== null &&
            groupEnrollment?.linesOfBusiness.length === 1 &&
            groupEnrollment.group !== null &&
            documents.length === 2 &&
            group?.serviceLocations.length === 2 &&
            group.groupIds.length === 1 &&
            (await providerOf(a, p3.id)) !== undefined &&
            (await pipeline.client(keyB.raw).detail(`/providers/${pB.id}`)) !== undefined
          return complete ? true : undefined
        },
        { timeoutMs: 120_000 },
      )

      const identifiers = [i1, i2]
      expect(await providerOf(a, p1.id)).toEqual(
        expectedProvider(p1, { sensitive: true, groups: [g1], identifiers }),
      )
      // Without providers:read:sensitive the six keys are omitted, not null.
      expect(await providerOf(base, p1.id)).toEqual(
        expectedProvider(p1, { sensitive: false, groups: [g1], identifiers }),
      )
      expect(await providerOf(a, p2.id)).toEqual(
        expectedProvider(p2, { sensitive: true, groups: [], identifiers: [] }),
      )

      expect(await a.detail<ProviderGroup>(`/provider-groups/${g1.id}`)).toEqual({
        id: g1.id,
        name: 'Bay Clinic',
        legalName: 'Bay Clinic LLC',
        npi: '1999999992',
        tin: '12-3456789',
        taxonomyCode: '261QP2300X',
        serviceLocations: [l1, l2].map((l) => ({
          id: l.id,
          name: l.name,
          address: l.address,
          addressLine2: l.address_line_2,
          city: l.city,
          state: l.state,
          zip: l.zip,
          phone: l.phone,
          isPrimary: l.is_primary,
        })),
        groupIds: [identifierEntry(gi1)],
        createdAt: CREATED_AT,
        updatedAt: STAMP,
      })

      expect(await a.detail<Enrollment>(`/enrollments/${e1.id}`)).toEqual({
        id: e1.id,
        providerId: p1.id,
        provider: { id: p1.id, name: 'Ada B Lovelace, Jr.', npi: '1234567893' },
        providerGroupId: g1.id,
        payer: 'Aetna',
        state: 'CA',
        status: 'in_progress',
        payerProviderId: null,
        submittedOn: '2025-01-02',
        approvedOn: null,
        effectiveDate: null,
        // By position, whatever the order of insertion.
        requirements: [r1, r2].map((r) => ({
          id: r.id,
          name: r.name,
          isComplete: r.is_complete,
          completedAt: r.completed_at,
        })),
        linesOfBusiness: [
          { id: lob1.id, lineOfBusiness: 'commercial', status: 'pending', effectiveDate: null },
        ],
        locations: [
          {
            id: part1.id,
            serviceLocationId: l1.id,
            name: 'Main St Clinic',
            city: 'Oakland',
            state: 'CA',
            isActive: true,
            activatedOn: '2025-02-01',
          },
        ],
        createdAt: CREATED_AT,
        updatedAt: STAMP,
      })

      expect(await a.detail<GroupEnrollment>(`/group-enrollments/${ge1.id}`)).toEqual({
        id: ge1.id,
        providerGroupId: g1.id,
        group: { id: g1.id, name: 'Bay Clinic', npi: '1999999992', tin: '12-3456789' },
        payer: 'Blue Shield of California',
        state: null,
        status: 'submitted',
        payerGroupId: 'BSC-77',
        submittedOn: null,
        approvedOn: null,
        effectiveDate: null,
        linesOfBusiness: [
          {
            id: glob1.id,
            lineOfBusiness: 'medicare_advantage',
            status: 'active',
            effectiveDate: '2025-04-01',
          },
        ],
        createdAt: CREATED_AT,
        updatedAt: STAMP,
      })

      const documents = await a.list<DocumentMetadata>(`/documents?provider_id=${p1.id}`)
      expect(documents).toEqual([
        {
          id: d1.id,
          providerId: p1.id,
          providerGroupId: null,
          type: 'license',
          fileName: 'license.pdf',
          contentType: 'application/pdf',
          sizeBytes: 123_456,
          expiresOn: d1.expires_on,
          uploadedAt: d1.uploaded_at,
          createdAt: CREATED_AT,
          updatedAt: STAMP,
        },
      ])

      // Lists hold the same documents as details, and only this organization's.
      const providers = await a.list<Provider>('/providers')
      expect(providers.map((p) => p.id).sort()).toEqual([p1.id, p2.id, p3.id].sort())
    })

    it('a visible change to a provider moves its updatedAt', async () => {
      const before = await stampOf(a, `/providers/${p1.id}`)
      expect(before, 'the provider is served before the change').toBeDefined()
      const ms = await pipeline.timeToVisible(
        'the new specialty',
        () => updateRow(pipeline.sql, 'providers', p1.id, { specialty: 'Internal Medicine' }),
        async () => (await providerOf(a, p1.id))?.specialty === 'Internal Medicine',
      )
      delays.add('provider-update', ms)
      const after = await providerOf(a, p1.id)
      expect(after!.updatedAt > before!).toBe(true)
      // updated_since is inclusive: the new stamp finds it again.
      const since = await a.list<Provider>(
        `/providers?updated_since=${encodeURIComponent(after!.updatedAt)}`,
      )
      expect(since.map((p) => p.id)).toContain(p1.id)
    })

    it('updatedAt moves exactly when the response changes', async () => {
      const sql = pipeline.sql
      const brokers = pipeline.kafka.brokers
      const providersTopic = `${TOPIC_PREFIX}.public.providers`

      // A no-op UPDATE (the values it already has): PostgreSQL still writes a row version and
      // Debezium still emits an update event, but the response is the same, stamp included.
      const providerBefore = (await providerOf(a, p1.id))!
      const baseBefore = (await providerOf(base, p1.id))!
      const eventsBefore = await topicEnd(brokers, providersTopic)
      await updateRow(sql, 'providers', p1.id, {
        last_name: providerBefore.lastName,
        specialty: providerBefore.specialty,
      })
      // It shows no effect, so wait for a visible change to another provider, in a later
      // transaction on the same topic (one partition, applied in order): once that is visible, the
      // no-op has been applied too.
      await updateRow(sql, 'providers', p2.id, { specialty: 'Pediatrics' })
      await pipeline.eventually('the later change to another provider', async () =>
        (await providerOf(a, p2.id))?.specialty === 'Pediatrics' ? true : undefined,
      )
      expect(await topicEnd(brokers, providersTopic), 'the no-op was an event of its own').toBe(
        eventsBefore + 2,
      )
      expect(await providerOf(a, p1.id)).toEqual(providerBefore)
      expect(await providerOf(base, p1.id)).toEqual(baseBefore)

      // provider_groups.legal_name is shown on the group, not in the memberships of its providers
      // nor in its group enrollments: the group moves, they do not.
      const groupBefore = (await a.detail<ProviderGroup>(`/provider-groups/${g1.id}`))!
      const memberBefore = (await providerOf(a, p1.id))!
      const memberBaseBefore = (await providerOf(base, p1.id))!
      const contractBefore = (await a.detail<GroupEnrollment>(`/group-enrollments/${ge1.id}`))!
      expect(memberBefore.groupMemberships.map((m) => m.providerGroupId)).toEqual([g1.id])
      g1 = { ...g1, legal_name: 'Bay Clinic Holdings LLC' }
      delays.add(
        'group-legal-name',
        await pipeline.timeToVisible(
          'the new legal name on the group',
          () => updateRow(sql, 'provider_groups', g1.id, { legal_name: g1.legal_name }),
          async () =>
            (await a.detail<ProviderGroup>(`/provider-groups/${g1.id}`))?.legalName ===
            g1.legal_name,
        ),
      )
      const group = (await a.detail<ProviderGroup>(`/provider-groups/${g1.id}`))!
      expect(group).toEqual({ ...groupBefore, legalName: g1.legal_name, updatedAt: STAMP })
      expect(group.updatedAt > groupBefore.updatedAt).toBe(true)
      // The documents a change touches are rebuilt in the same write transaction as the changed
      // row's own (projector/documents/refresher.ts): the group visible means its members and
      // contracts have been rebuilt too, with the same content, so with the same stamps.
      expect(await providerOf(a, p1.id)).toEqual(memberBefore)
      expect(await providerOf(base, p1.id)).toEqual(memberBaseBefore)
      expect(await a.detail<GroupEnrollment>(`/group-enrollments/${ge1.id}`)).toEqual(
        contractBefore,
      )
    })

    it('a change to a never-exposed column moves nothing and shows nowhere', async () => {
      const sql = pipeline.sql
      const providerBefore = await providerOf(a, p1.id)
      const baseBefore = await providerOf(base, p1.id)
      const documentBefore = (await a.list<DocumentMetadata>('/documents')).find(
        (d) => d.id === d1.id,
      )

      await updateRow(sql, 'providers', p1.id, {
        ssn: SECRETS.ssnAfter,
        internal_notes: SECRETS.notesAfter,
      })
      await updateRow(sql, 'documents', d1.id, { storage_key: SECRETS.storageKeyAfter })
      // A change shows no effect, so wait for a later one on the same topics (one partition each,
      // applied in order): once it is visible, the hidden ones have been applied too.
      await updateRow(sql, 'providers', p2.id, { middle_name: 'M' })
      await updateRow(sql, 'documents', d2.id, { file_name: 'w9-2025.pdf' })
      await pipeline.eventually('the later changes on the same topics', async () => {
        const [provider, documents] = await Promise.all([
          providerOf(a, p2.id),
          a.list<DocumentMetadata>('/documents'),
        ])
        return provider?.middleName === 'M' && documents.some((d) => d.fileName === 'w9-2025.pdf')
          ? true
          : undefined
      })

      expect(await providerOf(a, p1.id)).toEqual(providerBefore)
      expect(await providerOf(base, p1.id)).toEqual(baseBefore)
      expect((await a.list<DocumentMetadata>('/documents')).find((d) => d.id === d1.id)).toEqual(
        documentBefore,
      )
      // No response shows them, at the widest scope; no file of the replica holds them.
      const responses = await Promise.all(
        [
          `/providers/${p1.id}`,
          '/providers',
          '/documents',
          '/expirables?within_days=730',
          '/enrollments',
          '/provider-groups',
          '/group-enrollments',
        ].map(async (path) => (await a.get(path)).text),
      )
      const bytes = allBytes(pipeline.dataDir)
      for (const secret of Object.values(SECRETS)) {
        for (const text of responses) expect(text).not.toContain(secret)
        expect(bytes.includes(secret), `the replica's files hold ${secret}`).toBe(false)
      }
    })

    it('adding and deleting an identifier or a membership moves the provider', async () => {
      const sql = pipeline.sql
      let stamp = (await providerOf(a, p1.id))!.updatedAt
      const i3 = { id: randomUUID(), type: 'board_certification', value: 'ABIM-42' }
      delays.add(
        'identifier-insert',
        await pipeline.timeToVisible(
          'the new identifier',
          () => insertProviderIdentifier(sql, orgA.id, p1.id, i3),
          async () =>
            (await providerOf(a, p1.id))?.providerIds.some((x) => x.id === i3.id) === true,
        ),
      )
      let provider = (await providerOf(a, p1.id))!
      expect(provider.providerIds.map((x) => x.type)).toEqual([
        'board_certification',
        'dea',
        'state_license',
      ])
      expect(provider.updatedAt > stamp).toBe(true)
      stamp = provider.updatedAt

      await deleteRow(sql, 'provider_identifiers', i3.id)
      provider = await pipeline.eventually('the identifier to go', async () => {
        const p = await providerOf(a, p1.id)
        return p?.providerIds.length === 2 ? p : undefined
      })
      expect(provider.providerIds.map((x) => x.id).sort()).toEqual([i1.id, i2.id].sort())
      expect(provider.updatedAt > stamp).toBe(true)

      stamp = (await providerOf(a, p2.id))!.updatedAt
      const m2 = await insertGroupMembership(sql, orgA.id, p2.id, g1.id)
      provider = await pipeline.eventually('the membership', async () => {
        const p = await providerOf(a, p2.id)
        return p?.groupMemberships.length === 1 ? p : undefined
      })
      expect(provider.groupMemberships).toEqual([membershipEntry(g1)])
      expect(provider.updatedAt > stamp).toBe(true)
      stamp = provider.updatedAt

      await deleteRow(sql, 'group_memberships', m2.id)
      provider = await pipeline.eventually('the membership to go', async () => {
        const p = await providerOf(a, p2.id)
        return p?.groupMemberships.length === 0 ? p : undefined
      })
      expect(provider.updatedAt > stamp).toBe(true)
    })

    it('renaming a group renames it in its members and its group enrollments', async () => {
      const memberBefore = (await providerOf(a, p1.id))!
      const contractBefore = (await a.detail<GroupEnrollment>(`/group-enrollments/${ge1.id}`))!
      g1 = { ...g1, name: 'Bay Clinic West' }
      delays.add(
        'group-rename',
        await pipeline.timeToVisible(
          'the new group name in the member and the contract',
          () => updateRow(pipeline.sql, 'provider_groups', g1.id, { name: g1.name }),
          async () => {
            const [member, contract] = await Promise.all([
              providerOf(a, p1.id),
              a.detail<GroupEnrollment>(`/group-enrollments/${ge1.id}`),
            ])
            return (
              member?.groupMemberships[0]?.name === g1.name && contract?.group?.name === g1.name
            )
          },
        ),
      )
      const member = (await providerOf(a, p1.id))!
      expect(member.groupMemberships).toEqual([membershipEntry(g1)])
      expect(member.updatedAt > memberBefore.updatedAt).toBe(true)
      const contract = (await a.detail<GroupEnrollment>(`/group-enrollments/${ge1.id}`))!
      expect(contract.group).toEqual({ id: g1.id, name: g1.name, npi: g1.npi, tin: g1.tin })
      expect(contract.updatedAt > contractBefore.updatedAt).toBe(true)
      expect((await a.detail<ProviderGroup>(`/provider-groups/${g1.id}`))?.name).toBe(g1.name)
    })

    it("renaming a provider renames it in the provider's enrollments", async () => {
      const before = (await a.detail<Enrollment>(`/enrollments/${e1.id}`))!
      delays.add(
        'provider-rename',
        await pipeline.timeToVisible(
          'the new name in the enrollment',
          () => updateRow(pipeline.sql, 'providers', p1.id, { last_name: 'King' }),
          async () =>
            (await a.detail<Enrollment>(`/enrollments/${e1.id}`))?.provider?.name ===
            'Ada B King, Jr.',
        ),
      )
      const after = (await a.detail<Enrollment>(`/enrollments/${e1.id}`))!
      expect(after.provider).toEqual({ id: p1.id, name: 'Ada B King, Jr.', npi: p1.npi })
      expect(after.updatedAt > before.updatedAt).toBe(true)
      expect((await providerOf(a, p1.id))?.name).toBe('Ada B King, Jr.')
    })

    it("expirables follow an identifier's expires_on", async () => {
      const within45 = await a.list<Expirable>('/expirables?within_days=45')
      expect(within45).toEqual([
        {
          id: `provider_identifier:${i1.id}`,
          sourceType: 'provider_identifier',
          sourceId: i1.id,
          providerId: p1.id,
          providerGroupId: null,
          type: 'state_license',
          description: 'CA-A12345',
          expiresOn: isoDate(30),
          daysUntilExpiration: 30,
          updatedAt: STAMP,
        },
      ])
      // Sorted by expiration date: the licence (30 days), the document (60), the CLIA (100).
      const within365 = await a.list<Expirable>('/expirables')
      expect(within365.map((x) => x.id)).toEqual([
        `provider_identifier:${i1.id}`,
        `document:${d1.id}`,
        `group_identifier:${gi1.id}`,
      ])

      const renewed = isoDate(400)
      delays.add(
        'identifier-expiry',
        await pipeline.timeToVisible(
          'the renewed licence to leave the 45-day window',
          () => updateRow(pipeline.sql, 'provider_identifiers', i1.id, { expires_on: renewed }),
          async () => (await a.list<Expirable>('/expirables?within_days=45')).length === 0,
        ),
      )
      const within730 = await a.list<Expirable>('/expirables?within_days=730')
      expect(within730.at(-1)).toMatchObject({
        id: `provider_identifier:${i1.id}`,
        expiresOn: renewed,
        daysUntilExpiration: 400,
      })
      const provider = await providerOf(a, p1.id)
      expect(provider?.providerIds.find((x) => x.id === i1.id)?.expiresOn).toBe(renewed)
    })

    it('payer portal logins are never subscribed, stored or served', async () => {
      const login = await insertPayerPortalLogin(pipeline.sql, orgA.id)
      // Something after it, to know the stream has moved past the login's commit.
      await updateRow(pipeline.sql, 'providers', p3.id, { specialty: 'Computing' })
      await pipeline.eventually('the later change', async () =>
        (await providerOf(a, p3.id))?.specialty === 'Computing' ? true : undefined,
      )
      const topics = await listTopics(pipeline.kafka.brokers)
      expect(topics.filter((t) => t.includes('payer_portal_logins'))).toEqual([])
      const bytes = allBytes(pipeline.dataDir)
      const responses = await Promise.all(
        ['/providers', '/documents', '/enrollments', '/provider-groups', '/group-enrollments'].map(
          async (path) => (await a.get(path)).text,
        ),
      )
      for (const secret of [login.id, login.username, login.password_cipher]) {
        expect(bytes.includes(secret)).toBe(false)
        for (const text of responses) expect(text).not.toContain(secret)
      }
    })

    it('deleted rows disappear from lists and their details answer 404', async () => {
      const sql = pipeline.sql
      // Children first, as the product's foreign keys require.
      for (const [table, id] of [
        ['enrollment_requirements', r1.id],
        ['enrollment_requirements', r2.id],
        ['enrollment_lines_of_business', lob1.id],
        ['enrollment_location_participations', part1.id],
        ['enrollments', e1.id],
        ['group_enrollment_lines_of_business', glob1.id],
        ['group_enrollments', ge1.id],
        ['documents', d2.id],
      ] as const) {
        await deleteRow(sql, table, id)
      }
      delays.add(
        'provider-delete',
        await pipeline.timeToVisible(
          'the deleted provider to answer 404',
          () => deleteRow(sql, 'providers', p3.id),
          async () => (await a.get(`/providers/${p3.id}`)).status === 404,
        ),
      )
      await pipeline.eventually('every deleted row to be gone', async () => {
        const [enrollment, contract, documents] = await Promise.all([
          a.get(`/enrollments/${e1.id}`),
          a.get(`/group-enrollments/${ge1.id}`),
          a.list<DocumentMetadata>('/documents'),
        ])
        return enrollment.status === 404 && contract.status === 404 && documents.length === 1
          ? true
          : undefined
      })
      const missing = await a.get<ErrorBody>(`/enrollments/${e1.id}`)
      expect(missing.body.error.code).toBe('not_found')
      expect((await a.list<Enrollment>('/enrollments')).map((e) => e.id)).not.toContain(e1.id)
      expect(await a.list<GroupEnrollment>('/group-enrollments')).toEqual([])
      expect((await a.list<DocumentMetadata>('/documents')).map((d) => d.id)).toEqual([d1.id])
      expect((await a.list<Provider>('/providers')).map((p) => p.id).sort()).toEqual(
        [p1.id, p2.id].sort(),
      )
    })

    it("another organization's data is unreachable with this organization's key", async () => {
      const b = pipeline.client(keyB.raw)
      expect((await b.detail<Provider>(`/providers/${pB.id}`))?.name).toBe('Other Person')
      const foreign = await a.get<ErrorBody>(`/providers/${pB.id}`)
      expect(foreign.status).toBe(404)
      expect(foreign.body.error.code).toBe('not_found')
      expect((await b.get(`/providers/${p1.id}`)).status).toBe(404)
      expect((await a.list<Provider>('/providers')).map((p) => p.id)).not.toContain(pB.id)
      expect((await b.list<Provider>('/providers')).map((p) => p.id)).toEqual([pB.id])
    })

    it('a revoked key gets 401 invalid_key on the next request once the revocation arrives', async () => {
      const revoked = pipeline.client(keyRevoked.raw)
      expect((await revoked.get('/providers')).status).toBe(200)
      delays.add(
        'key-revoke',
        await pipeline.timeToVisible(
          'the revocation',
          () =>
            pipeline.sql.query('update api_keys set revoked_at = now() where id = $1', [
              keyRevoked.id,
            ]),
          async () => (await revoked.get('/providers')).status === 401,
        ),
      )
      const refused = await revoked.get<ErrorBody>(`/providers/${p1.id}`)
      expect(refused.status).toBe(401)
      expect(refused.body.error.code).toBe('invalid_key')
      // The other keys of the organization are untouched.
      expect((await a.get('/providers')).status).toBe(200)
    })
  })
}
