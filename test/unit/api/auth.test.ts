import { describe, expect, it } from 'vitest'
import {
  authenticate,
  bearerKey,
  checkOrganization,
  hashKey,
  parseScopes,
  requireScope,
  type KeyRecord,
  type Principal,
} from '../../../api/auth.ts'
import { ApiError } from '../../../api/errors.ts'

const now = Date.parse('2026-06-01T00:00:00.000Z')
const record: KeyRecord = {
  id: 'key-1',
  organizationId: 'org-1',
  organizationFile: null,
  scopes: '["providers:read"]',
  expiresAt: null,
  revokedAt: null,
  apiEnabled: 1,
  billingStatus: 'active',
}

function code(value: unknown): string | undefined {
  return value instanceof ApiError ? value.code : undefined
}

describe('bearerKey', () => {
  it('reads the key of a Bearer header', () => {
    expect(bearerKey('Bearer abc_DEF-123')).toBe('abc_DEF-123')
    expect(bearerKey('bearer abc')).toBe('abc')
  })
  it('is 401 invalid_key when missing or malformed', () => {
    for (const header of [undefined, '', 'abc', 'Basic abc', 'Bearer', 'Bearer a b', 'Bearer é']) {
      expect(code(bearerKey(header))).toBe('invalid_key')
    }
    expect(code(bearerKey(`Bearer ${'a'.repeat(600)}`))).toBe('invalid_key')
  })
})

describe('authenticate', () => {
  it('hashes keys as lowercase hex SHA-256', () => {
    expect(hashKey('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad')
  })
  it('is 401 for unknown, revoked and expired keys', () => {
    expect(code(authenticate(undefined, now))).toBe('invalid_key')
    expect(code(authenticate({ ...record, revokedAt: '2026-05-01T00:00:00.000Z' }, now))).toBe(
      'invalid_key',
    )
    expect(code(authenticate({ ...record, expiresAt: '2026-06-01T00:00:00.000Z' }, now))).toBe(
      'invalid_key',
    )
    expect(code(authenticate({ ...record, expiresAt: 'not a date' }, now))).toBe('invalid_key')
  })
  it('accepts a key expiring later', () => {
    const principal = authenticate({ ...record, expiresAt: '2026-06-01T00:00:01.000Z' }, now)
    expect(principal).toMatchObject({ keyId: 'key-1', organizationId: 'org-1' })
  })
  it('is 503 while the organization row has not arrived', () => {
    expect(code(authenticate({ ...record, apiEnabled: null, billingStatus: null }, now))).toBe(
      'api_temporarily_unavailable',
    )
  })
})

describe('organization state and scopes', () => {
  const principal = (over: Partial<Principal>): Principal => ({
    ...(authenticate(record, now) as Principal),
    ...over,
  })
  it('puts billing (402) before the API switch (403)', () => {
    expect(
      code(checkOrganization(principal({ billingStatus: 'past_due', apiEnabled: false }))),
    ).toBe('payment_past_due')
    expect(code(checkOrganization(principal({ billingStatus: 'inactive' })))).toBe(
      'subscription_inactive',
    )
    expect(code(checkOrganization(principal({ apiEnabled: false })))).toBe('api_disabled')
    expect(checkOrganization(principal({}))).toBeUndefined()
  })
  it('names the missing scope', () => {
    const refused = requireScope(principal({}), 'groups:read')
    expect(refused?.code).toBe('insufficient_scope')
    expect(refused?.message).toContain('groups:read')
    expect(requireScope(principal({}), 'providers:read')).toBeUndefined()
  })
  it('grants only known scopes from a well-formed array', () => {
    expect([...parseScopes('["providers:read","admin:all"]')]).toEqual(['providers:read'])
    expect(parseScopes('not json').size).toBe(0)
    expect(parseScopes('{"providers:read":true}').size).toBe(0)
  })
})
