// Whether an organization file applied a change made after verify's snapshot: then its
// differences may be that change, and it is checked again rather than reported as drift.
import Database from 'better-sqlite3'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { appliedPast, type TopicEnds } from '../../../projector/verify/lag.ts'

const dir = mkdtempSync(join(tmpdir(), 'verify-lag-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

function fileWith(name: string, offsets: Array<[string, number, number]>): string {
  const path = join(dir, name)
  const db = new Database(path)
  db.exec('CREATE TABLE applied_offsets (topic TEXT, partition INTEGER, offset INTEGER)')
  for (const row of offsets) db.prepare('INSERT INTO applied_offsets VALUES (?, ?, ?)').run(...row)
  db.close()
  return path
}

const ends: TopicEnds = new Map([
  ['product.public.providers\u00000', 10n],
  ['product.public.documents\u00000', 3n],
])

describe('appliedPast', () => {
  it('is false while every offset applied is before the ends at the snapshot', () => {
    expect(appliedPast(fileWith('a.db', [['product.public.providers', 0, 9]]), ends)).toBe(false)
    expect(appliedPast(fileWith('empty.db', []), ends)).toBe(false)
  })

  it('is true once one record at or past an end was applied, or one of a partition unknown then', () => {
    expect(appliedPast(fileWith('b.db', [['product.public.documents', 0, 3]]), ends)).toBe(true)
    expect(appliedPast(fileWith('c.db', [['product.public.providers', 1, 0]]), ends)).toBe(true)
  })
})
