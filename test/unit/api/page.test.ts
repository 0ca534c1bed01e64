import { describe, expect, it } from 'vitest'
import {
  addDays,
  comparePositions,
  daysBetween,
  detailBody,
  expirableBody,
  listBody,
  utcDate,
} from '../../../api/page.ts'

describe('page assembly', () => {
  it('joins stored bodies into the list envelope', () => {
    expect(JSON.parse(listBody('{"id":"a"},{"id":"b"}', 'c.d').toString())).toEqual({
      data: [{ id: 'a' }, { id: 'b' }],
      nextCursor: 'c.d',
    })
    expect(listBody('', null).toString()).toBe('{"data":[],"nextCursor":null}')
    // SQLite hands a page's joined bodies over as bytes (collections.ts): copied, not re-encoded.
    const bytes = Buffer.from('{"name":"Zoë"},{"name":"Łukasz"}')
    expect(JSON.parse(listBody(bytes, null).toString())).toEqual({
      data: [{ name: 'Zoë' }, { name: 'Łukasz' }],
      nextCursor: null,
    })
  })

  it('wraps one stored body in the detail envelope', () => {
    expect(detailBody('{"id":"a"}').toString()).toBe('{"data":{"id":"a"}}')
  })

  it('completes a stored expirable body with the day count and stamp', () => {
    const stored = JSON.stringify({ id: 'document:x', expiresOn: '2026-02-01' }).slice(0, -1)
    expect(JSON.parse(expirableBody(stored, 31, '2026-01-01T00:00:00.000Z'))).toEqual({
      id: 'document:x',
      expiresOn: '2026-02-01',
      daysUntilExpiration: 31,
      updatedAt: '2026-01-01T00:00:00.000Z',
    })
  })

  it('counts UTC calendar days', () => {
    expect(utcDate(Date.parse('2026-03-01T23:59:59.999Z'))).toBe('2026-03-01')
    expect(addDays('2026-02-27', 2)).toBe('2026-03-01')
    expect(addDays('2028-02-28', 1)).toBe('2028-02-29')
    expect(addDays('2026-01-01', 0)).toBe('2026-01-01')
    expect(daysBetween('2026-01-01', '2026-12-31')).toBe(364)
    expect(daysBetween('2026-01-10', '2026-01-01')).toBe(-9)
    // Across a daylight-saving change nothing moves: UTC has none.
    expect(daysBetween('2026-03-01', '2026-04-01')).toBe(31)
  })

  it('orders positions as tuples', () => {
    expect(comparePositions(['a', 'b'], ['a', 'c'])).toBeLessThan(0)
    expect(comparePositions(['b', ''], ['a', 'z'])).toBeGreaterThan(0)
    expect(comparePositions(['a', 'b'], ['a', 'b'])).toBe(0)
  })
})

describe('non-ASCII bodies', () => {
  it('are encoded as UTF-8 without losing a byte', () => {
    const body = '{"name":"Zoë Ångström 漢字 🎉"}'
    expect(JSON.parse(listBody(`${body},${body}`, null).toString('utf8'))).toEqual({
      data: [JSON.parse(body), JSON.parse(body)],
      nextCursor: null,
    })
    expect(detailBody(body).toString('utf8')).toBe(`{"data":${body}}`)
  })
})
