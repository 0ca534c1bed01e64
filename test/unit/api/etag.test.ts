import { describe, expect, it } from 'vitest'
import { etagOf, listPageTag, noneMatch } from '../../../api/etag.ts'

describe('listPageTag', () => {
  const versions = 'p1 2026-01-01T00:00:00.000Z h1,p2 2026-01-01T00:00:01.000Z h2'

  it('is the same for the same rows in the same state, view and cursor', () => {
    expect(listPageTag('body', versions, 'c1')).toBe(listPageTag('body', versions, 'c1'))
    expect(listPageTag('body', versions, 'c1')).toMatch(/^"[A-Za-z0-9_-]+"$/)
  })

  it('changes with any row, the order of the rows, the view or the cursor', () => {
    const tag = listPageTag('body', versions, 'c1')
    const others = [
      listPageTag('body', versions.replace('h2', 'h3'), 'c1'),
      listPageTag('body', versions.replace('00:01', '00:02'), 'c1'),
      listPageTag('body', versions.split(',').reverse().join(','), 'c1'),
      listPageTag('sensitive_body', versions, 'c1'),
      listPageTag('body', versions, 'c2'),
      listPageTag('body', versions, null),
      listPageTag('body', '', null),
    ]
    expect(new Set([tag, ...others]).size).toBe(others.length + 1)
  })

  it('is answered by If-None-Match like any other tag', () => {
    const tag = listPageTag('body', versions, null)
    expect(noneMatch(`W/${tag}`, tag)).toBe(true)
    expect(noneMatch(etagOf('{}', false), tag)).toBe(false)
  })
})
