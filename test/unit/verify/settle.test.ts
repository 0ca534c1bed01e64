// Lag told from drift document by document: the stamp says when served content last changed.
import { describe, expect, it } from 'vitest'
import type { ResourceDifferences } from '../../../projector/documents/index.ts'
import { classify, settleAgain } from '../../../projector/verify/settle.ts'

const SNAPSHOT = '2026-11-25T10:00:00.000Z'
const before = '2026-11-25T09:59:00.000Z'
const after = '2026-11-25T10:00:00.500Z'

const diff = (overrides: Partial<ResourceDifferences> = {}): ResourceDifferences => ({
  resource: 'providers',
  equal: 5,
  differing: [],
  missing: [],
  extra: [],
  ...overrides,
})

describe('classify', () => {
  it('a difference whose content last changed before the snapshot is drift; after it, changing', () => {
    const c = classify(
      diff({
        differing: [
          { id: 'tampered', stamp: before },
          { id: 'written', stamp: after },
        ],
        extra: [
          { id: 'made-up', stamp: before },
          { id: 'created', stamp: after },
        ],
      }),
      SNAPSHOT,
      true,
    )
    expect(c).toMatchObject({
      differing: ['tampered'],
      extra: ['made-up'],
      changing: [
        { id: 'written', kind: 'differing', stamp: after },
        { id: 'created', kind: 'extra', stamp: after },
      ],
    })
  })

  it('a missing document is drift when the file applied nothing after the snapshot, else changing', () => {
    expect(classify(diff({ missing: ['gone'] }), SNAPSHOT, false)).toMatchObject({
      missing: ['gone'],
      changing: [],
    })
    expect(classify(diff({ missing: ['gone'] }), SNAPSHOT, true)).toMatchObject({
      missing: [],
      changing: [{ id: 'gone', kind: 'missing' }],
    })
  })
})

describe('settleAgain', () => {
  it('re-judges only the documents still changing; the others keep their first verdict', () => {
    const first = classify(
      diff({
        differing: [
          { id: 'tampered', stamp: before },
          { id: 'settles', stamp: after },
          { id: 'drifts', stamp: after },
          { id: 'keeps', stamp: after },
        ],
      }),
      SNAPSHOT,
      true,
    )
    const later = classify(
      diff({
        equal: 3,
        differing: [
          { id: 'drifts', stamp: before },
          { id: 'keeps', stamp: '2026-11-25T10:00:09.000Z' },
          // Written after the first pass settled it equal: not re-judged.
          { id: 'other', stamp: '2026-11-25T10:00:09.000Z' },
        ],
      }),
      '2026-11-25T10:00:08.000Z',
      true,
    )
    expect(settleAgain(first, later)).toEqual({
      resource: 'providers',
      equal: 6,
      differing: ['drifts', 'tampered'],
      missing: [],
      extra: [],
      changing: [{ id: 'keeps', kind: 'differing', stamp: '2026-11-25T10:00:09.000Z' }],
    })
  })

  it('a changing document whose stamp did not move since settles, even close to the snapshot', () => {
    const near = '2026-11-25T10:00:07.500Z'
    const first = classify(diff({ differing: [{ id: 'p', stamp: near }] }), SNAPSHOT, true)
    // The next snapshot is less than the clock margin after its stamp: changing by stamp alone.
    const later = classify(
      diff({ differing: [{ id: 'p', stamp: near }] }),
      '2026-11-25T10:00:07.000Z',
      true,
    )
    expect(later.changing).toHaveLength(1)
    expect(settleAgain(first, later)).toMatchObject({ differing: ['p'], changing: [] })
    const written = classify(
      diff({ differing: [{ id: 'p', stamp: '2026-11-25T10:00:07.900Z' }] }),
      '2026-11-25T10:00:07.000Z',
      true,
    )
    expect(settleAgain(first, written)).toMatchObject({ differing: [], changing: [{ id: 'p' }] })
  })
})
