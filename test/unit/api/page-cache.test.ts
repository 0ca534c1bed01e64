// The list-page cache on its own: a byte budget shared by every file, least recently used first,
// every page of a file dropped when the file's version moves, nothing kept at 0 bytes.
import { describe, expect, it } from 'vitest'
import { PageCache } from '../../../api/page-cache.ts'
import { listPageKey } from '../../../api/routes/shared.ts'
import { cursorBinding } from '../../../api/params.ts'

/** A body of `size` bytes whose first byte tells it apart. */
const body = (size: number, mark = 1) => Buffer.alloc(size, mark)
/** What an entry of a one-letter key and a body of `size` bytes costs the budget. */
const cost = (size: number) => size + 2

describe('PageCache', () => {
  it('gives back what was stored for the same version and key, and nothing for another key', () => {
    const cache = new PageCache(1000)
    const pages = cache.forFile()
    const stored = body(100)
    pages.set(1, 'a', stored)
    expect(pages.get(1, 'a')).toBe(stored)
    expect(pages.get(1, 'b')).toBeUndefined()
    expect(cache.bytes).toBe(cost(100))
  })

  it('drops every page of a file when its version moves, and only that file', () => {
    const cache = new PageCache(1000)
    const [one, two] = [cache.forFile(), cache.forFile()]
    one.set(1, 'a', body(100))
    one.set(1, 'b', body(100))
    two.set(1, 'a', body(100))
    expect(one.get(2, 'a')).toBeUndefined()
    expect(one.size).toBe(0)
    // Back to the old version: the pages are gone for good, not hidden.
    expect(one.get(1, 'b')).toBeUndefined()
    expect(two.get(1, 'a')).toBeDefined()
    expect(cache.bytes).toBe(cost(100))
  })

  it('stores a page read at a new version only after dropping the old ones', () => {
    const cache = new PageCache(1000)
    const pages = cache.forFile()
    pages.set(1, 'a', body(100, 1))
    pages.set(2, 'b', body(100, 2))
    expect(pages.get(2, 'a')).toBeUndefined()
    expect(pages.get(2, 'b')?.[0]).toBe(2)
    expect(cache.entries).toBe(1)
  })

  it('evicts the least recently used entries, across files, until the budget holds', () => {
    const cache = new PageCache(cost(100) * 3)
    const [one, two] = [cache.forFile(), cache.forFile()]
    one.set(1, 'a', body(100))
    two.set(1, 'b', body(100))
    one.set(1, 'c', body(100))
    // A hit makes `a` the most recently used: `b` is now the oldest.
    expect(one.get(1, 'a')).toBeDefined()
    one.set(1, 'd', body(100))
    expect(two.get(1, 'b')).toBeUndefined()
    expect(two.size).toBe(0)
    expect(one.get(1, 'a')).toBeDefined()
    expect(one.get(1, 'c')).toBeDefined()
    expect(one.get(1, 'd')).toBeDefined()
    expect(cache.bytes).toBe(cost(100) * 3)

    // One larger entry evicts as many as it needs.
    two.set(1, 'e', body(250))
    expect(cache.entries).toBe(1)
    expect(cache.bytes).toBe(cost(250))
    expect(one.size).toBe(0)
  })

  it('replaces an entry stored again under the same key, counting it once', () => {
    const cache = new PageCache(1000)
    const pages = cache.forFile()
    pages.set(1, 'a', body(100, 1))
    pages.set(1, 'a', body(50, 2))
    expect(pages.get(1, 'a')?.[0]).toBe(2)
    expect(cache.entries).toBe(1)
    expect(cache.bytes).toBe(cost(50))
  })

  it('never stores an entry larger than the whole budget, and keeps the others', () => {
    const cache = new PageCache(cost(100))
    const pages = cache.forFile()
    pages.set(1, 'a', body(100))
    pages.set(1, 'b', body(101))
    expect(pages.get(1, 'b')).toBeUndefined()
    expect(pages.get(1, 'a')).toBeDefined()
  })

  it('gives its bytes back when a file is closed', () => {
    const cache = new PageCache(1000)
    const [one, two] = [cache.forFile(), cache.forFile()]
    one.set(1, 'a', body(100))
    two.set(1, 'a', body(100))
    one.clear()
    expect(one.get(1, 'a')).toBeUndefined()
    expect(cache.bytes).toBe(cost(100))
    expect(cache.entries).toBe(1)
  })

  it('says a page is worth keeping on its second read at one version, not its first', () => {
    const pages = new PageCache(1000).forFile()
    expect(pages.askedAgain(1, 'a')).toBe(false)
    expect(pages.askedAgain(1, 'b')).toBe(false)
    expect(pages.askedAgain(1, 'a')).toBe(true)
    // Answered once: a third read without a `set` starts over.
    expect(pages.askedAgain(1, 'a')).toBe(false)
    // A new version forgets the reads of the old one: the file changed, so may every page.
    expect(pages.askedAgain(2, 'b')).toBe(false)
    expect(pages.askedAgain(2, 'b')).toBe(true)
    pages.askedAgain(2, 'c')
    pages.clear()
    expect(pages.askedAgain(2, 'c')).toBe(false)
  })

  it('remembers a bounded number of pages read once, forgetting the oldest', () => {
    const pages = new PageCache(1000).forFile()
    for (let i = 0; i <= 1024; i++) expect(pages.askedAgain(1, `k${i}`)).toBe(false)
    expect(pages.askedAgain(1, 'k0')).toBe(false)
    expect(pages.askedAgain(1, 'k1024')).toBe(true)
  })

  it("remembers where each list ends for one version of its file, an empty list's too", () => {
    const cache = new PageCache(1000)
    const [one, two] = [cache.forFile(), cache.forFile()]
    one.setLastPosition(1, 'providers', ['2026-01-01T00:00:00.000Z', 'p9'])
    one.setLastPosition(1, 'providers?active=false', null)
    expect(one.lastPosition(1, 'providers')).toEqual(['2026-01-01T00:00:00.000Z', 'p9'])
    expect(one.lastPosition(1, 'providers?active=false')).toBeNull()
    expect(one.lastPosition(1, 'enrollments')).toBeUndefined()
    // Another file's lists are its own.
    expect(two.lastPosition(1, 'providers')).toBeUndefined()
    // A commit to the file may move any list's end: every one is forgotten, for good.
    expect(one.lastPosition(2, 'providers')).toBeUndefined()
    expect(one.lastPosition(1, 'providers')).toBeUndefined()
    // Nothing remembered with the cache off, nor after the file is closed.
    const off = new PageCache(0).forFile()
    off.setLastPosition(1, 'providers', null)
    expect(off.lastPosition(1, 'providers')).toBeUndefined()
    two.setLastPosition(1, 'providers', null)
    two.clear()
    expect(two.lastPosition(1, 'providers')).toBeUndefined()
    // They cost the byte budget nothing.
    expect(cache.bytes).toBe(0)
  })

  it('keeps nothing at 0 bytes', () => {
    const cache = new PageCache(0)
    const pages = cache.forFile()
    expect(cache.enabled).toBe(false)
    expect(pages.enabled).toBe(false)
    pages.set(1, 'a', body(1))
    pages.set(1, '', Buffer.alloc(0))
    pages.askedAgain(1, 'a')
    expect(pages.askedAgain(1, 'a')).toBe(false)
    expect(pages.get(1, 'a')).toBeUndefined()
    expect(pages.get(1, '')).toBeUndefined()
    expect(cache.bytes).toBe(0)
    expect(cache.entries).toBe(0)
  })
})

describe('listPageKey', () => {
  const org = '0a000000-0000-4000-8000-00000000000a'
  const key = (
    overrides: Partial<{
      org: string
      view: string
      active: boolean
      since: string
      after: string[]
      limit: number
    }> = {},
  ) => {
    const filters = {
      ...(overrides.active === undefined ? {} : { active: overrides.active }),
      ...(overrides.since === undefined ? {} : { updatedSince: overrides.since }),
    }
    return listPageKey(
      cursorBinding(overrides.org ?? org, 'providers', overrides.view ?? 'base', filters),
      overrides.after,
      overrides.limit ?? 50,
    )
  }

  it('tells apart everything a page depends on', () => {
    const keys = [
      key(),
      key({ org: '0b000000-0000-4000-8000-00000000000b' }),
      key({ view: 'sensitive' }),
      key({ active: true }),
      key({ active: false }),
      key({ since: '2026-01-01T00:00:00.000Z' }),
      key({ after: ['2026-01-01T00:00:00.000Z', 'id'] }),
      key({ after: ['2026-01-01T00:00:00.000Z', 'id2'] }),
      key({ limit: 51 }),
    ]
    expect(new Set(keys).size).toBe(keys.length)
  })

  it('is the same for the same request', () => {
    expect(key({ active: true, limit: 10 })).toBe(key({ active: true, limit: 10 }))
  })
})
