// A page joined from the bodies the api knows: only ever the bodies at the stamps the page's own
// statement read, the same versions (ETag) and next position as the page read from the file, and
// the memory on the page cache's budget.
import { describe, expect, it } from 'vitest'
import { DocumentBodies } from '../../../api/document-bodies.ts'
import { PageCache } from '../../../api/page-cache.ts'

const at = (second: number) => `2026-01-01T00:00:0${second}.000Z`
const version = (id: string, second: number, hash = `h${id}${second}`) =>
  `${id} ${at(second)} ${hash}`
const row = (id: string, second: number) => `${id} ${at(second)}`

/** What a page read from the file hands `learn`: versions, the joined bodies, their lengths. */
function readFromFile(rows: [id: string, second: number][]) {
  const bodies = rows.map(([id, second]) => `{"id":"${id}","updatedAt":"${at(second)}"}`)
  return {
    versions: rows.map(([id, second]) => version(id, second)).join(','),
    joined: Buffer.from(bodies.join(',')),
    lengths: bodies.map((b) => Buffer.byteLength(b)).join(','),
    bodies,
  }
}

const texts = (bodies: readonly Buffer[]) => bodies.map((b) => b.toString())

describe('DocumentBodies', () => {
  it('joins a page only once every one of its rows is known at its stamp', () => {
    const known = new DocumentBodies(new PageCache(1 << 20))
    const stamps = [row('a', 1), row('b', 1), row('c', 2)].join(',')
    expect(known.page(stamps, 3)).toBeUndefined()

    const read = readFromFile([
      ['a', 1],
      ['b', 1],
    ])
    known.learn(read.versions, read.joined, read.lengths)
    // `c` is not known yet: the page is read from the file.
    expect(known.page(stamps, 3)).toBeUndefined()
    const withC = readFromFile([['c', 2]])
    known.learn(withC.versions, withC.joined, withC.lengths)

    const page = known.page(stamps, 3)!
    expect(texts(page.bodies)).toEqual([...read.bodies, ...withC.bodies])
    expect(page.versions).toBe(`${read.versions},${withC.versions}`)
    expect(page.next).toBeUndefined()
  })

  it('never joins a body kept at another stamp of its document', () => {
    const known = new DocumentBodies(new PageCache(1 << 20))
    const read = readFromFile([['a', 1]])
    known.learn(read.versions, read.joined, read.lengths)
    expect(known.page(row('a', 2), 50)).toBeUndefined()
    // A stamp that only begins like the kept one is another stamp too.
    expect(known.page(`a ${at(1).slice(0, -1)}`, 50)).toBeUndefined()

    // The body at the new stamp replaces the old one.
    const changed = readFromFile([['a', 2]])
    known.learn(changed.versions, changed.joined, changed.lengths)
    expect(known.size).toBe(1)
    expect(texts(known.page(row('a', 2), 50)!.bodies)).toEqual(changed.bodies)
    expect(known.page(row('a', 1), 50)).toBeUndefined()
  })

  it('stops at the limit, giving the position of its last row and only its rows’ versions', () => {
    const known = new DocumentBodies(new PageCache(1 << 20))
    const read = readFromFile([
      ['a', 1],
      ['b', 2],
      ['c', 3],
    ])
    known.learn(read.versions, read.joined, read.lengths)
    const page = known.page([row('a', 1), row('b', 2), row('c', 3)].join(','), 2)!
    expect(texts(page.bodies)).toEqual(read.bodies.slice(0, 2))
    expect(page.versions).toBe(`${version('a', 1)},${version('b', 2)}`)
    expect(page.next).toEqual([at(2), 'b'])
    // More rows past the page (the statement reads a power of two): the same page, and a row past
    // it that is not known does not matter.
    const more = known.page([row('a', 1), row('b', 2), row('c', 3), row('d', 4)].join(','), 2)
    expect(more).toEqual(page)
    expect(
      known.page([row('a', 1), row('b', 2), row('c', 3), row('d', 4)].join(','), 3)!.next,
    ).toEqual([at(3), 'c'])
  })

  it('keeps its bodies on the page cache’s budget, least recently used first', () => {
    // What one body costs the budget: the same for each of these (one-letter ids).
    const probe = new PageCache(1 << 20)
    const first = readFromFile([['a', 1]])
    new DocumentBodies(probe).learn(first.versions, first.joined, first.lengths)
    const entry = probe.bytes
    expect(entry).toBeGreaterThan(first.joined.length)
    const cache = new PageCache(entry * 2)
    const known = new DocumentBodies(cache)
    for (const id of ['a', 'b']) {
      const read = readFromFile([[id, 1]])
      known.learn(read.versions, read.joined, read.lengths)
    }
    expect(cache.bytes).toBe(entry * 2)
    // A page joined from `a` makes it the most recently used: `b` goes first.
    expect(known.page(row('a', 1), 50)).toBeDefined()
    const c = readFromFile([['c', 1]])
    known.learn(c.versions, c.joined, c.lengths)
    expect(known.page(row('b', 1), 50)).toBeUndefined()
    expect(known.page(row('a', 1), 50)).toBeDefined()
    expect(known.size).toBe(2)

    known.clear()
    expect(known.size).toBe(0)
    expect(cache.bytes).toBe(0)
  })

  it('keeps nothing when the page cache is off', () => {
    const cache = new PageCache(0)
    const known = new DocumentBodies(cache)
    const read = readFromFile([['a', 1]])
    known.learn(read.versions, read.joined, read.lengths)
    expect(known.enabled).toBe(false)
    expect(known.size).toBe(0)
    expect(cache.bytes).toBe(0)
  })
})
