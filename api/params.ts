// Query parameters: parsed from the raw query string, strictly. Unknown and repeated parameters
// are refused (a misspelled `updated_since` must not silently return the whole list), and every
// message names the parameter and its rule. Pure functions: no I/O, no clock.
import { enrollmentStatuses, type EnrollmentStatus } from '../schema/resources.ts'
import { MAX_CURSOR_LENGTH } from './cursor.ts'
import { ApiError, invalidRequest } from './errors.ts'

export const LIMIT = { min: 1, max: 200, default: 50 } as const
export const WITHIN_DAYS = { min: 0, max: 730, default: 365 } as const
/** Longest filter value accepted (ids are uuids, payer names are short). */
export const MAX_FILTER_LENGTH = 200

export type ListName =
  'providers' | 'provider-groups' | 'enrollments' | 'group-enrollments' | 'documents' | 'expirables'

export interface Filters {
  /** Normalized to the stored stamp format (UTC, milliseconds), rounded up to the millisecond. */
  updatedSince?: string
  active?: boolean
  status?: EnrollmentStatus
  /** The payer name lower-cased, as stored in `payer_key`. */
  payerKey?: string
  providerId?: string
  groupId?: string
  withinDays?: number
}

export interface ListQuery {
  limit: number
  cursor: string | undefined
  filters: Filters
}

export type ParamName =
  | 'limit'
  | 'cursor'
  | 'updated_since'
  | 'active'
  | 'status'
  | 'payer'
  | 'provider_id'
  | 'group_id'
  | 'within_days'

/** Which query parameters each list takes (spec/api-v1.md section 4). */
export const listParams: Record<ListName, readonly ParamName[]> = {
  providers: ['limit', 'cursor', 'updated_since', 'active'],
  'provider-groups': ['limit', 'cursor', 'updated_since'],
  enrollments: ['limit', 'cursor', 'updated_since', 'status', 'payer', 'provider_id'],
  'group-enrollments': ['limit', 'cursor', 'updated_since', 'status', 'payer', 'group_id'],
  documents: ['limit', 'cursor', 'updated_since', 'provider_id', 'group_id'],
  expirables: ['limit', 'cursor', 'within_days'],
}

/**
 * Splits a raw query string (without `?`) into decoded name/value pairs. Refuses repeated names
 * and malformed percent-encoding.
 */
export function splitQuery(raw: string): Map<string, string> | ApiError {
  const params = new Map<string, string>()
  if (raw === '') return params
  for (const part of raw.split('&')) {
    if (part === '') continue
    const eq = part.indexOf('=')
    const rawName = eq === -1 ? part : part.slice(0, eq)
    const rawValue = eq === -1 ? '' : part.slice(eq + 1)
    const name = decodeComponent(rawName)
    if (name === undefined) {
      return invalidRequest('a query parameter name is not valid percent-encoding')
    }
    const value = decodeComponent(rawValue)
    if (value === undefined) {
      return invalidRequest(`query parameter ${quote(name)} is not valid percent-encoding`)
    }
    if (params.has(name)) {
      return invalidRequest(`query parameter ${quote(name)} is given more than once`)
    }
    params.set(name, value)
  }
  return params
}

/** A query string component decoded (`+` is a space), or undefined when malformed. */
function decodeComponent(raw: string): string | undefined {
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' '))
  } catch {
    return undefined
  }
}

/** The query string of a URL (`/a?b=c` gives `b=c`). */
export function rawQueryOf(url: string): string {
  const q = url.indexOf('?')
  return q === -1 ? '' : url.slice(q + 1)
}

function quote(name: string): string {
  return JSON.stringify(name.length > 64 ? `${name.slice(0, 64)}…` : name)
}

function unknownParameter(name: string, allowed: readonly string[]): ApiError {
  const rule =
    allowed.length === 0
      ? 'this endpoint takes no query parameters'
      : `allowed parameters: ${allowed.join(', ')}`
  return invalidRequest(`unknown query parameter ${quote(name)}; ${rule}`)
}

/** For endpoints that take no query parameter (detail requests, the OpenAPI document). */
export function parseNoParams(rawQuery: string): ApiError | undefined {
  const params = splitQuery(rawQuery)
  if (params instanceof ApiError) return params
  for (const name of params.keys()) return unknownParameter(name, [])
  return undefined
}

function integerIn(name: string, value: string, min: number, max: number): number | ApiError {
  const n = /^\d{1,6}$/.test(value) ? Number(value) : NaN
  if (!(n >= min && n <= max)) {
    return invalidRequest(`${name} must be an integer from ${min} to ${max}`)
  }
  return n
}

function nonEmpty(name: string, value: string): string | ApiError {
  if (value === '') return invalidRequest(`${name} must not be empty`)
  if (value.length > MAX_FILTER_LENGTH) {
    return invalidRequest(`${name} must be at most ${MAX_FILTER_LENGTH} characters`)
  }
  return value
}

const DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+ -])(\d{2}):(\d{2}))$/
const MIN_STAMP = '0000-01-01T00:00:00.000Z'
const MAX_STAMP = '9999-12-31T23:59:59.999Z'

/**
 * An ISO 8601 / RFC 3339 date-time with a time zone, as the stored stamp format (UTC,
 * milliseconds). Finer fractions round up: `updatedAt >= value` then holds for exactly the same
 * rows. A space before the offset is read as `+` (an unencoded `+` in a query string is a space).
 */
export function parseTimestamp(value: string): string | undefined {
  const m = DATE_TIME.exec(value)
  if (m === null) return undefined
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ]
  const fraction = m[7] ?? ''
  const offsetSign = m[9] === '-' ? -1 : 1
  const offsetHours = Number(m[10] ?? 0)
  const offsetMinutes = Number(m[11] ?? 0)
  if (hour > 23 || minute > 59 || second > 59 || offsetHours > 23 || offsetMinutes > 59) {
    return undefined
  }
  const millis = Number(fraction.slice(0, 3).padEnd(3, '0'))
  const roundUp = /[1-9]/.test(fraction.slice(3)) ? 1 : 0
  const date = new Date(0)
  date.setUTCFullYear(year, month - 1, day)
  if (date.getUTCFullYear() !== year || date.getUTCMonth() !== month - 1) return undefined
  if (date.getUTCDate() !== day) return undefined
  date.setUTCHours(hour, minute, second, millis + roundUp)
  const utc = date.getTime() - offsetSign * (offsetHours * 60 + offsetMinutes) * 60_000
  const iso = new Date(utc).toISOString()
  // Outside years 0000..9999 the ISO form gains a sign and would not compare as text.
  if (iso.startsWith('-')) return MIN_STAMP
  if (iso.startsWith('+')) return MAX_STAMP
  return iso
}

/** Parses and validates the query of a list endpoint. */
export function parseListQuery(list: ListName, rawQuery: string): ListQuery | ApiError {
  const params = splitQuery(rawQuery)
  if (params instanceof ApiError) return params
  const allowed = listParams[list]
  const query: ListQuery = { limit: LIMIT.default, cursor: undefined, filters: {} }
  const { filters } = query
  if (list === 'expirables') filters.withinDays = WITHIN_DAYS.default
  for (const [name, value] of params) {
    if (!(allowed as readonly string[]).includes(name)) return unknownParameter(name, allowed)
    const error = applyParam(query, name as ParamName, value)
    if (error !== undefined) return error
  }
  return query
}

function applyParam(query: ListQuery, name: ParamName, value: string): ApiError | undefined {
  const { filters } = query
  switch (name) {
    case 'limit': {
      const n = integerIn(name, value, LIMIT.min, LIMIT.max)
      if (n instanceof ApiError) return n
      query.limit = n
      return undefined
    }
    case 'within_days': {
      const n = integerIn(name, value, WITHIN_DAYS.min, WITHIN_DAYS.max)
      if (n instanceof ApiError) return n
      filters.withinDays = n
      return undefined
    }
    case 'cursor':
      if (value === '') {
        return invalidRequest('cursor must not be empty; omit it for the first page')
      }
      if (value.length > MAX_CURSOR_LENGTH) {
        return invalidRequest('cursor is not a cursor this list issued')
      }
      query.cursor = value
      return undefined
    case 'updated_since': {
      const stamp = parseTimestamp(value)
      if (stamp === undefined) {
        return invalidRequest(
          'updated_since must be an ISO 8601 date-time with a time zone, for example 2026-01-31T09:30:00Z',
        )
      }
      filters.updatedSince = stamp
      return undefined
    }
    case 'active':
      if (value !== 'true' && value !== 'false') {
        return invalidRequest('active must be one of: true, false')
      }
      filters.active = value === 'true'
      return undefined
    case 'status':
      if (!(enrollmentStatuses as readonly string[]).includes(value)) {
        return invalidRequest(`status must be one of: ${enrollmentStatuses.join(', ')}`)
      }
      filters.status = value as EnrollmentStatus
      return undefined
    case 'payer': {
      const payer = nonEmpty(name, value)
      if (payer instanceof ApiError) return payer
      filters.payerKey = payer.toLowerCase()
      return undefined
    }
    case 'provider_id': {
      const id = nonEmpty(name, value)
      if (id instanceof ApiError) return id
      filters.providerId = id
      return undefined
    }
    case 'group_id': {
      const id = nonEmpty(name, value)
      if (id instanceof ApiError) return id
      filters.groupId = id
      return undefined
    }
  }
}

/**
 * What a cursor is bound to: the organization, the list, the view of it (providers: with or
 * without the sensitive fields, ordered by different stamps) and every filter. Canonical: equal
 * inputs, equal strings.
 */
export function cursorBinding(
  organizationId: string,
  list: ListName,
  view: string,
  filters: Filters,
): string {
  const entries = Object.entries(filters)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  return JSON.stringify([organizationId, list, view, entries])
}
