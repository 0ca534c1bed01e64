// src/organization-files.ts: which shared file holds an organization.
import { randomUUID } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { firstFileName, generation, parseFileName } from '../../src/layout.ts'
import {
  autoOrganizationFiles,
  fileKeyOf,
  isSharedFileName,
  parseSharedFileName,
  sharedFileName,
  sharedFileOf,
  sharedFileVersionName,
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

describe('the versions of a file, by its key', () => {
  const id = '0a000000-0000-4000-8000-00000000000a'

  it('names a rebuilt shared file after its key, and finds the key in either name', () => {
    expect(sharedFileVersionName('shared-0042.db', 'r20261129')).toBe('shared-0042.r20261129.db')
    expect(parseSharedFileName('shared-0042.r20261129.db')).toEqual({
      fileKey: 'shared-0042.db',
      version: 'r20261129',
    })
    expect(parseSharedFileName('shared-0042.db')).toEqual({
      fileKey: 'shared-0042.db',
      version: undefined,
    })
    expect(isSharedFileName('shared-0042.r1.db')).toBe(true)
    expect(parseSharedFileName(`${id}.db`)).toBeUndefined()
    // A version of a version, or a bad version, is no name.
    expect(() => sharedFileVersionName('shared-0042.r1.db', 'r2')).toThrow()
    expect(() => sharedFileVersionName('shared-0042.db', 'a.b')).toThrow()
  })

  it('resolves a key and the file control.db names for it to a path in the folder, and nothing else', () => {
    const g = generation('/data', 'g1')
    expect(parseFileName(`${id}.r1.db`)).toEqual({ fileKey: id, version: 'r1' })
    expect(parseFileName('shared-0001.r1.db')).toEqual({ fileKey: 'shared-0001.db', version: 'r1' })
    expect(parseFileName('control.db')).toBeUndefined()
    expect(firstFileName(id)).toBe(`${id}.db`)
    expect(firstFileName('shared-0001.db')).toBe('shared-0001.db')
    expect(g.filePath('shared-0001.db')).toBe('/data/generations/g1/orgs/shared-0001.db')
    expect(g.filePath('shared-0001.db', 'shared-0001.r1.db')).toBe(
      '/data/generations/g1/orgs/shared-0001.r1.db',
    )
    expect(g.filePath(id, `${id}.r1.db`)).toBe(`/data/generations/g1/orgs/${id}.r1.db`)
    // Another key's file, or a path, is refused.
    expect(() => g.filePath('shared-0001.db', 'shared-0002.r1.db')).toThrow()
    expect(() => g.filePath('shared-0001.db', '../x.db')).toThrow()
    expect(() => g.filePath(id, 'shared-0001.db')).toThrow()
  })
})

describe('autoOrganizationFiles', () => {
  it('gives up to 100 organizations a file each, and more about 30 to a shared file', () => {
    expect(autoOrganizationFiles(0)).toBe(0)
    expect(autoOrganizationFiles(7)).toBe(0)
    expect(autoOrganizationFiles(100)).toBe(0)
    expect(autoOrganizationFiles(101)).toBe(4)
    expect(autoOrganizationFiles(3_000)).toBe(100)
    expect(autoOrganizationFiles(30_000)).toBe(1_000)
    // Never more files than their names allow.
    expect(autoOrganizationFiles(10_000_000)).toBe(10_000)
  })
})
