import { describe, expect, it } from 'vitest'
import { databaseFileOf, organizationIdsOption } from '../../src/layout.ts'

const acme = '0b8e5b8e-3c1a-4f57-9a43-2f1c6a8f0d11'
const globex = '7d2f4c59-5b0e-4a8e-8f7d-0e4c1b9a6a22'

describe('organizationIdsOption', () => {
  it('takes repeated and comma-separated ids, lower-cased and without repeats', () => {
    expect(organizationIdsOption([`${acme.toUpperCase()}, ${globex}`, acme])).toEqual({
      organizations: [acme, globex],
    })
  })

  it('names the first value that is not an organization id', () => {
    expect(organizationIdsOption([acme, 'acme,globex'])).toEqual({
      error: '--org: not an organization id: "acme"',
    })
  })

  it('refuses an option that names no organization', () => {
    expect(organizationIdsOption([' , '])).toEqual({ error: '--org: no organization id given' })
  })
})

describe('databaseFileOf', () => {
  it('names the database a WAL, its index or a rollback journal belongs to, and a database itself', () => {
    for (const suffix of ['', '-wal', '-shm', '-journal']) {
      expect(databaseFileOf(`${acme}.2.db${suffix}`)).toBe(`${acme}.2.db`)
    }
    expect(databaseFileOf('notes-journal.txt')).toBe('notes-journal.txt')
  })
})
