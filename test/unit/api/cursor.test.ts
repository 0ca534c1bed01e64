import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { decodeCursor, encodeCursor } from '../../../api/cursor.ts'

const secret = 'test-secret-of-some-length'
const binding = '["providers","base",[]]'

describe('cursor', () => {
  it('round-trips a position under the same binding', () => {
    fc.assert(
      fc.property(fc.array(fc.string(), { minLength: 1, maxLength: 4 }), (position) => {
        const cursor = encodeCursor(secret, binding, position)
        expect(cursor).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/)
        expect(decodeCursor(secret, binding, cursor, position.length)).toEqual(position)
      }),
    )
  })

  it('refuses a cursor issued for another endpoint, view or filter set', () => {
    const cursor = encodeCursor(secret, binding, ['2026-01-01T00:00:00.000Z', 'a'])
    expect(decodeCursor(secret, '["documents","base",[]]', cursor, 2)).toBeUndefined()
    expect(decodeCursor(secret, '["providers","sensitive",[]]', cursor, 2)).toBeUndefined()
    expect(
      decodeCursor(secret, '["providers","base",[["active",true]]]', cursor, 2),
    ).toBeUndefined()
  })

  it('refuses a cursor signed with another secret', () => {
    const cursor = encodeCursor('another-secret-entirely', binding, ['x', 'y'])
    expect(decodeCursor(secret, binding, cursor, 2)).toBeUndefined()
  })

  it('refuses any single-character alteration', () => {
    const cursor = encodeCursor(secret, binding, ['2026-01-01T00:00:00.000Z', 'abc'])
    for (let i = 0; i < cursor.length; i++) {
      const replacement = cursor[i] === 'A' ? 'B' : 'A'
      const altered = cursor.slice(0, i) + replacement + cursor.slice(i + 1)
      expect(decodeCursor(secret, binding, altered, 2)).toBeUndefined()
    }
  })

  it('refuses garbage without throwing', () => {
    fc.assert(
      fc.property(fc.string(), (garbage) => {
        expect(decodeCursor(secret, binding, garbage, 2)).toBeUndefined()
      }),
    )
    for (const garbage of ['', '.', 'a.b', 'a..b', '%%%', 'x'.repeat(5000)]) {
      expect(decodeCursor(secret, binding, garbage, 2)).toBeUndefined()
    }
  })

  it('refuses a well-signed payload of the wrong shape', () => {
    for (const position of [['only-one'], ['a', 'b', 'c']]) {
      const cursor = encodeCursor(secret, binding, position)
      expect(decodeCursor(secret, binding, cursor, 2)).toBeUndefined()
    }
  })
})
