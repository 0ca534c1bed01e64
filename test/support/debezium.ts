// Builders of Debezium change events for tests, in the JsonConverter shape (with or without the
// {schema, payload} wrapper). Real captured events live in test/fixtures/debezium/.
import type { SourceRecord } from '../../projector/decode/decode.ts'

export type Op = 'c' | 'u' | 'd' | 'r' | 't'

export interface EventOptions {
  table: string
  op: Op
  before?: Record<string, unknown> | null
  after?: Record<string, unknown> | null
  lsn?: number
  snapshot?: string
  tsMs?: number
  wrapped?: boolean
}

export function debeziumValue(o: EventOptions): Record<string, unknown> {
  const payload = {
    before: o.before ?? null,
    after: o.after ?? null,
    source: {
      version: '3.1.2.Final',
      connector: 'postgresql',
      name: 'product',
      ts_ms: o.tsMs ?? 1_763_719_200_000,
      snapshot: o.snapshot ?? (o.op === 'r' ? 'true' : 'false'),
      db: 'product',
      sequence: '["1","2"]',
      schema: 'public',
      table: o.table,
      txId: 1000,
      lsn: o.lsn ?? 1,
      xmin: null,
    },
    op: o.op,
    ts_ms: (o.tsMs ?? 1_763_719_200_000) + 5,
    transaction: null,
  }
  // The schema block's content is irrelevant to the decoder; its presence marks the wrapper.
  return o.wrapped === false
    ? payload
    : { schema: { type: 'struct', name: `product.public.${o.table}.Envelope` }, payload }
}

let nextOffset = 0

export function record(
  o: EventOptions & { partition?: number; offset?: number; topic?: string },
): SourceRecord {
  const id = (o.after?.id ?? o.before?.id ?? null) as string | null
  return {
    topic: o.topic ?? `product.public.${o.table}`,
    partition: o.partition ?? 0,
    offset: String(o.offset ?? nextOffset++),
    key: id === null ? null : { schema: { type: 'struct' }, payload: { id } },
    value: debeziumValue(o),
  }
}

export const ORG_A = '0a000000-0000-4000-8000-00000000000a'
export const ORG_B = '0b000000-0000-4000-8000-00000000000b'

export function uuid(n: number): string {
  return `00000000-0000-4000-8000-${n.toString(16).padStart(12, '0')}`
}

const TS = '2026-11-21T10:00:00.123456Z'

export function providerRow(
  id: string,
  organizationId: string,
  overrides: Record<string, unknown> = {},
) {
  return {
    id,
    organization_id: organizationId,
    first_name: 'Ada',
    middle_name: null,
    last_name: 'Lovelace',
    suffix: null,
    npi: '1234567893',
    is_active: true,
    telehealth_services: false,
    type: 'MD',
    caqh_id: null,
    start_date: 20_000,
    termed_date: null,
    other_emails: [],
    languages: ['en'],
    medicaid_states: [],
    medicare_states: [],
    birth_city: 'London',
    gender: 'female',
    ssn: '123-45-6789',
    internal_notes: 'do not show',
    created_at: TS,
    updated_at: TS,
    ...overrides,
  }
}

export function identifierRow(
  id: string,
  providerId: string,
  organizationId: string,
  overrides: Record<string, unknown> = {},
) {
  return {
    id,
    organization_id: organizationId,
    provider_id: providerId,
    type: 'state_license',
    value: 'CA-123',
    issued_on: 19_000,
    expires_on: 21_000,
    metadata: '{"state":"CA","status":"active"}',
    created_at: TS,
    updated_at: TS,
    ...overrides,
  }
}

export function groupRow(
  id: string,
  organizationId: string,
  overrides: Record<string, unknown> = {},
) {
  return {
    id,
    organization_id: organizationId,
    name: 'Bay Clinic',
    legal_name: 'Bay Clinic LLC',
    npi: '1999999992',
    tin: '12-3456789',
    taxonomy_code: null,
    created_at: TS,
    updated_at: TS,
    ...overrides,
  }
}

export function membershipRow(
  id: string,
  providerId: string,
  groupId: string,
  organizationId: string,
) {
  return {
    id,
    organization_id: organizationId,
    provider_id: providerId,
    provider_group_id: groupId,
    created_at: TS,
    updated_at: TS,
  }
}

export function organizationRow(id: string, overrides: Record<string, unknown> = {}) {
  return {
    id,
    name: 'Org',
    api_enabled: true,
    billing_status: 'active',
    created_at: TS,
    updated_at: TS,
    ...overrides,
  }
}
