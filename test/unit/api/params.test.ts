import { describe, expect, it } from 'vitest'
import { ApiError } from '../../../api/errors.ts'
import {
  cursorBinding,
  type ListName,
  type ListQuery,
  parseListQuery,
  parseNoParams,
  parseTimestamp,
  splitQuery,
} from '../../../api/params.ts'

function ok(list: ListName, query: string): ListQuery {
  const result = parseListQuery(list, query)
  if (result instanceof ApiError) throw new Error(`unexpected error: ${result.message}`)
  return result
}

function refused(list: ListName, query: string): string {
  const result = parseListQuery(list, query)
  if (!(result instanceof ApiError)) throw new Error(`accepted: ${query}`)
  expect(result.code).toBe('invalid_request')
  return result.message
}

describe('splitQuery', () => {
  it('decodes names and values, + as space', () => {
    const params = splitQuery('a=1%202&b=x+y&c')
    expect(params).toEqual(
      new Map([
        ['a', '1 2'],
        ['b', 'x y'],
        ['c', ''],
      ]),
    )
  })
  it('refuses repeated parameters and bad encoding', () => {
    expect((splitQuery('limit=1&limit=2') as ApiError).message).toMatch(/"limit".*more than once/)
    expect((splitQuery('payer=%E0%A4%A') as ApiError).message).toBe(
      'query parameter "payer" is not valid percent-encoding',
    )
    expect((splitQuery('pay%ZZer=x') as ApiError).message).toBe(
      'a query parameter name is not valid percent-encoding',
    )
  })
})

describe('parseListQuery', () => {
  it('has the defaults of the spec', () => {
    expect(ok('providers', '')).toEqual({ limit: 50, cursor: undefined, filters: {} })
    expect(ok('expirables', '').filters.withinDays).toBe(365)
  })

  it('takes limit from 1 to 200', () => {
    expect(ok('providers', 'limit=1').limit).toBe(1)
    expect(ok('providers', 'limit=200').limit).toBe(200)
    for (const bad of ['0', '201', '-1', '1.5', 'abc', '', ' 5', '1e2', '99999999']) {
      expect(refused('providers', `limit=${encodeURIComponent(bad)}`)).toMatch(
        /^limit must be an integer from 1 to 200/,
      )
    }
  })

  it('takes within_days from 0 to 730 on expirables only', () => {
    expect(ok('expirables', 'within_days=0').filters.withinDays).toBe(0)
    expect(ok('expirables', 'within_days=730').filters.withinDays).toBe(730)
    expect(refused('expirables', 'within_days=731')).toMatch(/within_days.*0 to 730/)
    expect(refused('expirables', 'within_days=-1')).toMatch(/within_days/)
    expect(refused('providers', 'within_days=5')).toMatch(/unknown query parameter "within_days"/)
    expect(refused('expirables', 'updated_since=2026-01-01T00:00:00Z')).toMatch(/updated_since/)
  })

  it('refuses unknown parameters, naming them and the allowed ones', () => {
    expect(refused('providers', 'updated_snce=2026-01-01T00:00:00Z')).toBe(
      'unknown query parameter "updated_snce"; allowed parameters: limit, cursor, updated_since, active',
    )
    expect(refused('provider-groups', 'active=true')).toMatch(/"active"/)
    expect(refused('documents', 'status=approved')).toMatch(/"status"/)
    expect(refused('enrollments', 'group_id=x')).toMatch(/"group_id"/)
    expect(refused('group-enrollments', 'provider_id=x')).toMatch(/"provider_id"/)
  })

  it('takes active as true or false', () => {
    expect(ok('providers', 'active=true').filters.active).toBe(true)
    expect(ok('providers', 'active=false').filters.active).toBe(false)
    for (const bad of ['TRUE', '1', 'yes', '']) {
      expect(refused('providers', `active=${bad}`)).toBe('active must be one of: true, false')
    }
  })

  it('takes the six statuses and names them when refusing', () => {
    for (const status of [
      'not_started',
      'in_progress',
      'submitted',
      'approved',
      'denied',
      'withdrawn',
    ]) {
      expect(ok('enrollments', `status=${status}`).filters.status).toBe(status)
      expect(ok('group-enrollments', `status=${status}`).filters.status).toBe(status)
    }
    expect(refused('enrollments', 'status=Approved')).toBe(
      'status must be one of: not_started, in_progress, submitted, approved, denied, withdrawn',
    )
  })

  it('lower-cases payer and refuses it empty', () => {
    expect(ok('enrollments', 'payer=Blue%20CROSS').filters.payerKey).toBe('blue cross')
    expect(refused('enrollments', 'payer=')).toBe('payer must not be empty')
    expect(refused('enrollments', `payer=${'x'.repeat(201)}`)).toMatch(/at most 200/)
  })

  it('takes provider_id and group_id where the spec lists them', () => {
    expect(ok('enrollments', 'provider_id=p').filters.providerId).toBe('p')
    expect(ok('documents', 'provider_id=p&group_id=g').filters).toEqual({
      providerId: 'p',
      groupId: 'g',
    })
    expect(ok('group-enrollments', 'group_id=g').filters.groupId).toBe('g')
    expect(refused('documents', 'group_id=')).toBe('group_id must not be empty')
  })

  it('refuses an empty cursor', () => {
    expect(refused('providers', 'cursor=')).toMatch(/^cursor must not be empty/)
    expect(ok('providers', 'cursor=abc.def').cursor).toBe('abc.def')
  })

  it('refuses a malformed updated_since, naming the rule', () => {
    for (const bad of [
      '2026-01-01',
      '2026-01-01T00:00:00',
      '2026-13-01T00:00:00Z',
      '2026-02-30T00:00:00Z',
      '2026-01-01T24:00:00Z',
      'yesterday',
      '',
    ]) {
      expect(refused('providers', `updated_since=${encodeURIComponent(bad)}`)).toMatch(
        /^updated_since must be an ISO 8601 date-time with a time zone/,
      )
    }
  })
})

describe('parseTimestamp', () => {
  it('normalizes to the stored stamp format in UTC', () => {
    expect(parseTimestamp('2026-01-01T10:00:00Z')).toBe('2026-01-01T10:00:00.000Z')
    expect(parseTimestamp('2026-01-01T10:00:00.5Z')).toBe('2026-01-01T10:00:00.500Z')
    expect(parseTimestamp('2026-01-01T10:00:00.123+02:00')).toBe('2026-01-01T08:00:00.123Z')
    expect(parseTimestamp('2026-01-01T00:30:00-01:00')).toBe('2026-01-01T01:30:00.000Z')
    // An unencoded + arrives as a space.
    expect(parseTimestamp('2026-01-01T10:00:00 02:00')).toBe('2026-01-01T08:00:00.000Z')
    expect(parseTimestamp('2028-02-29T00:00:00Z')).toBe('2028-02-29T00:00:00.000Z')
  })

  it('rounds finer fractions up, so >= selects the same rows', () => {
    expect(parseTimestamp('2026-01-01T10:00:00.123000Z')).toBe('2026-01-01T10:00:00.123Z')
    expect(parseTimestamp('2026-01-01T10:00:00.123001Z')).toBe('2026-01-01T10:00:00.124Z')
    expect(parseTimestamp('2026-01-01T23:59:59.9999Z')).toBe('2026-01-02T00:00:00.000Z')
  })

  it('clamps instants outside years 0000..9999', () => {
    expect(parseTimestamp('0000-01-01T00:00:00+01:00')).toBe('0000-01-01T00:00:00.000Z')
    expect(parseTimestamp('9999-12-31T23:59:59-01:00')).toBe('9999-12-31T23:59:59.999Z')
    expect(parseTimestamp('0050-06-01T00:00:00Z')).toBe('0050-06-01T00:00:00.000Z')
  })
})

describe('parseNoParams', () => {
  it('refuses any parameter', () => {
    expect(parseNoParams('')).toBeUndefined()
    expect(parseNoParams('x=1')?.message).toBe(
      'unknown query parameter "x"; this endpoint takes no query parameters',
    )
  })
})

describe('cursorBinding', () => {
  it('is canonical and covers the organization, the list, the view and every filter', () => {
    expect(cursorBinding('o', 'enrollments', 'base', { status: 'approved', payerKey: 'a' })).toBe(
      cursorBinding('o', 'enrollments', 'base', { payerKey: 'a', status: 'approved' }),
    )
    const bindings = new Set([
      cursorBinding('o', 'enrollments', 'base', {}),
      cursorBinding('o', 'group-enrollments', 'base', {}),
      cursorBinding('o', 'enrollments', 'sensitive', {}),
      cursorBinding('o', 'enrollments', 'base', { status: 'approved' }),
      cursorBinding('o', 'enrollments', 'base', { updatedSince: '2026-01-01T00:00:00.000Z' }),
      cursorBinding('other-organization', 'enrollments', 'base', {}),
    ])
    expect(bindings.size).toBe(6)
  })
})
