// src/organization-files.ts: which shared file holds an organization.
import { randomUUID } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import {
  fileKeyOf,
  isSharedFileName,
  sharedFileName,
  sharedFileOf,
} from '../../src/organization-files.ts'

describe('sharedFileOf', () => {
  it('names one of the files, the same one every time, for any process', () => {
    const id = '0a000000-0000-4000-8000-00000000000a'
    expect(sharedFileOf(id, 100)).toBe(sharedFileOf(id, 100))
    // Fixed by the hash, not by the process: a generation's files must stay where they are.
    expect(sharedFileOf(id, 100)).toBe('shared-0069.db')
    expect(isSharedFileName(sharedFileOf(id, 100))).toBe(true)
    expect(sharedFileName(7)).toBe('shared-0007.db')
    expect(isSharedFileName(`${id}.db`)).toBe(false)
  })

  it('spreads organizations evenly over the files', () => {
    const counts = new Map<string, number>()
    for (let i = 0; i < 30_000; i++) {
      const file = sharedFileOf(randomUUID(), 100)
      counts.set(file, (counts.get(file) ?? 0) + 1)
    }
    expect(counts.size).toBe(100)
    // 300 a file on average: a fair hash stays well within a third of it.
    expect(Math.min(...counts.values())).toBeGreaterThan(200)
    expect(Math.max(...counts.values())).toBeLessThan(400)
  })

  it('keys an organization by its own id when files are not shared', () => {
    const id = randomUUID()
    expect(fileKeyOf(id, 0)).toBe(id)
    expect(fileKeyOf(id, 3)).toBe(sharedFileOf(id, 3))
  })
})
