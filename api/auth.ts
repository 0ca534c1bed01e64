// Who is calling: the bearer key, looked up by its SHA-256 in control.db (the lookup of a known
// key is kept until control.db next changes, replica.ts, so a revocation takes effect on the next
// request; an expiry is checked here on every request), then the organization's state and
// the key's scopes, in the order spec/resources.md fixes. Pure functions over the key record.
import { createHash } from 'node:crypto'
import { scopes as allScopes, type Scope } from '../schema/resources.ts'
import { ApiError, temporarilyUnavailable } from './errors.ts'

/** An API key joined to its organization's state, as control.db holds them. */
export interface KeyRecord {
  id: string
  organizationId: string
  /** control.db's organization_files entry: null for the default `<organizationId>.db`. */
  organizationFile: string | null
  scopes: string
  expiresAt: string | null
  revokedAt: string | null
  /** null when the organization row has not reached the replica yet. */
  apiEnabled: number | null
  billingStatus: string | null
}

export interface Principal {
  readonly keyId: string
  readonly organizationId: string
  /** The organization's file when a per-organization rebuild replaced the default one. */
  readonly organizationFile: string | null
  readonly scopes: ReadonlySet<Scope>
  readonly apiEnabled: boolean
  readonly billingStatus: string
}

const MAX_KEY_LENGTH = 512
/** RFC 6750 b64token. */
const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i

const invalidKey = (message: string) => new ApiError('invalid_key', message)

/** The raw key of an Authorization header, or an ApiError (401) when missing or malformed. */
export function bearerKey(header: string | undefined): string | ApiError {
  if (header === undefined || header === '') {
    return invalidKey('missing API key: send the header Authorization: Bearer <key>')
  }
  const match = header.length <= MAX_KEY_LENGTH + 16 ? BEARER.exec(header) : null
  if (match === null || (match[1] as string).length > MAX_KEY_LENGTH) {
    return invalidKey('malformed Authorization header: expected Bearer <key>')
  }
  return match[1] as string
}

/** Lowercase hex SHA-256 of the raw key, as api_keys.key_hash stores it. */
export function hashKey(rawKey: string): string {
  return createHash('sha256').update(rawKey).digest('hex')
}

const parsedScopes = new Map<string, ReadonlySet<Scope>>()

/** The known scopes of a stored JSON array (unknown or malformed entries grant nothing). */
export function parseScopes(stored: string): ReadonlySet<Scope> {
  let set = parsedScopes.get(stored)
  if (set === undefined) {
    let values: unknown
    try {
      values = JSON.parse(stored)
    } catch {
      values = []
    }
    set = new Set(
      (Array.isArray(values) ? values : []).filter((s): s is Scope =>
        (allScopes as readonly unknown[]).includes(s),
      ),
    )
    if (parsedScopes.size > 1000) parsedScopes.clear()
    parsedScopes.set(stored, set)
  }
  return set
}

/** The principal of a key record found (or not) for the presented key, at instant `nowMs`. */
export function authenticate(record: KeyRecord | undefined, nowMs: number): Principal | ApiError {
  if (record === undefined) return invalidKey('unknown API key')
  if (record.revokedAt !== null) return invalidKey('this API key has been revoked')
  if (record.expiresAt !== null) {
    const expiresAt = Date.parse(record.expiresAt)
    if (!(expiresAt > nowMs)) return invalidKey('this API key has expired')
  }
  if (record.apiEnabled === null || record.billingStatus === null) {
    // The key arrived before its organization: the replica is still filling in.
    return temporarilyUnavailable(
      'the replica is still loading this organization; try again shortly',
    )
  }
  return {
    keyId: record.id,
    organizationId: record.organizationId,
    organizationFile: record.organizationFile,
    scopes: parseScopes(record.scopes),
    apiEnabled: record.apiEnabled !== 0,
    billingStatus: record.billingStatus,
  }
}

/** 402 for a billing suspension, then 403 api_disabled. */
export function checkOrganization(principal: Principal): ApiError | undefined {
  if (principal.billingStatus === 'past_due') {
    return new ApiError('payment_past_due', 'API access is suspended: a payment is past due')
  }
  if (principal.billingStatus === 'inactive') {
    return new ApiError(
      'subscription_inactive',
      'API access is suspended: the subscription is inactive',
    )
  }
  if (!principal.apiEnabled) {
    return new ApiError('api_disabled', 'API access is disabled for this organization')
  }
  return undefined
}

export function requireScope(principal: Principal, scope: Scope): ApiError | undefined {
  if (principal.scopes.has(scope)) return undefined
  return new ApiError('insufficient_scope', `this API key lacks the scope ${scope}`)
}

export function canSeeSensitive(principal: Principal): boolean {
  return principal.scopes.has('providers:read:sensitive')
}
