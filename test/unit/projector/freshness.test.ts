// The freshness tracker and what a response states from its record (docs/freshness.md): an
// instant is claimed only once every change partition is applied up to the ends fetched after
// the beat settled; a swapped file is held; skew never makes a lag negative or smaller.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import {
  FreshnessTracker,
  heartbeatCommitMs,
  MAX_TOUCHED_ORGANIZATIONS,
} from '../../../projector/sources/freshness.ts'
import { freshnessHeaders } from '../../../api/freshness-headers.ts'
import {
  freshnessOf,
  freshnessPath,
  readFreshness,
  writeFreshness,
  type FreshnessRecord,
} from '../../../src/freshness.ts'

const A = 'p.public.providers\u00000'
const B = 'p.public.documents\u00000'

function ends(a: bigint, b: bigint) {
  return new Map([
    [A, { low: 0n, high: a }],
    [B, { low: 0n, high: b }],
  ])
}

/** Each partition's position: A's, then B's. */
function at(a: bigint, b: bigint): Map<string, bigint> {
  return new Map([
    [A, a],
    [B, b],
  ])
}

/** A tracker with one beat read and settled, its ends at `high` in both partitions. */
function settledBeat(commitMs: number, high: bigint): FreshnessTracker {
  const t = new FreshnessTracker({ settleMs: 0 })
  t.heartbeat(commitMs, commitMs)
  t.endsDue(commitMs)
  t.setEnds(ends(high, high))
  return t
}

describe('FreshnessTracker', () => {
  it('claims nothing before a beat, then a beat only once every partition reaches its ends', () => {
    const t = new FreshnessTracker({ settleMs: 100 })
    expect(t.record(0).completeThroughMs).toBeNull()
    t.heartbeat(1_000, 1_050)
    // Not yet settled: no ends fetched, nothing proved.
    expect(t.endsDue(1_100)).toEqual({ due: false, msUntil: 50 })
    expect(t.advance(() => 10n)).toBe(false)
    expect(t.endsDue(1_150).due).toBe(true)
    t.setEnds(ends(5n, 7n))
    const visible = new Map([
      [A, 5n],
      [B, 6n],
    ])
    expect(t.advance((k) => visible.get(k))).toBe(false)
    expect(t.completeThroughMs).toBeNull()
    visible.set(B, 7n)
    expect(t.advance((k) => visible.get(k))).toBe(true)
    expect(t.completeThroughMs).toBe(1_000)
  })

  it('a partition never applied counts from its first offset: empty is complete, else not', () => {
    const t = new FreshnessTracker({ settleMs: 0 })
    t.heartbeat(1_000, 1_000)
    t.endsDue(1_000)
    t.setEnds(new Map([[A, { low: 3n, high: 3n }]]))
    expect(t.advance(() => undefined)).toBe(true)
    t.heartbeat(2_000, 2_000)
    t.endsDue(2_000)
    t.setEnds(new Map([[A, { low: 3n, high: 4n }]]))
    expect(t.advance(() => undefined)).toBe(false)
    expect(t.completeThroughMs).toBe(1_000)
  })

  it('a beat read while an older one settles waits on its own, and does not delay the older', () => {
    const t = new FreshnessTracker({ settleMs: 100 })
    t.heartbeat(1_000, 1_000)
    t.heartbeat(1_050, 1_050)
    // The first beat's settling is not restarted by the second.
    expect(t.endsDue(1_099)).toEqual({ due: false, msUntil: 1 })
    expect(t.endsDue(1_100).due).toBe(true)
    t.setEnds(ends(1n, 1n))
    expect(t.endsDue(1_120)).toEqual({ due: false, msUntil: 30 })
    expect(t.advance(() => 1n)).toBe(true)
    expect(t.completeThroughMs).toBe(1_000)
    expect(t.endsDue(1_150).due).toBe(true)
    t.setEnds(ends(2n, 1n))
    expect(t.advance((k) => (k === A ? 2n : 1n))).toBe(true)
    expect(t.completeThroughMs).toBe(1_050)
  })

  it('beats read together settle once; beats settled by a fetch share its ends, the newest kept', () => {
    const t = new FreshnessTracker({ settleMs: 100 })
    t.heartbeat(1_000, 1_000)
    t.heartbeat(1_500, 1_000)
    t.heartbeat(2_000, 1_040)
    // The fetch is late (the timer fired after both had settled): one fetch covers both.
    expect(t.endsDue(1_200).due).toBe(true)
    expect(t.endsDue(1_200).due).toBe(false)
    t.setEnds(ends(3n, 3n))
    expect(t.endsDue(1_201)).toEqual({ due: false, msUntil: undefined })
    expect(t.advance(() => 3n)).toBe(true)
    expect(t.completeThroughMs).toBe(2_000)
  })

  it('proves the newest beat whose ends are reached, with every beat before it', () => {
    const t = new FreshnessTracker({ settleMs: 0 })
    for (const [commit, a] of [
      [1_000, 5n],
      [1_500, 8n],
      [2_000, 12n],
    ] as const) {
      t.heartbeat(commit, commit)
      expect(t.endsDue(commit).due).toBe(true)
      t.setEnds(ends(a, 1n))
    }
    // The projector is past the second beat's ends, not yet the third's.
    expect(t.advance((k) => (k === A ? 9n : 1n))).toBe(true)
    expect(t.completeThroughMs).toBe(1_500)
    expect(t.advance((k) => (k === A ? 11n : 1n))).toBe(false)
    expect(t.advance((k) => (k === A ? 12n : 1n))).toBe(true)
    expect(t.completeThroughMs).toBe(2_000)
  })

  it('a failed fetch of the ends is asked again', () => {
    const t = new FreshnessTracker({ settleMs: 0 })
    t.heartbeat(1_000, 1_000)
    expect(t.endsDue(1_000).due).toBe(true)
    expect(t.endsDue(1_000).due).toBe(false)
    t.setEnds(undefined)
    expect(t.endsDue(1_001).due).toBe(true)
  })

  it('never goes back, and ignores beats at or before the instant', () => {
    const t = new FreshnessTracker({
      settleMs: 0,
      previous: { completeThroughMs: 5_000, publishedAtMs: 0, clockBehindMs: 0, behindFiles: [] },
    })
    t.heartbeat(4_000, 4_100)
    expect(t.endsDue(5_000).due).toBe(false)
    expect(t.completeThroughMs).toBe(5_000)
  })

  it('holds swapped files until a beat is proved on the positions after the swap', () => {
    const t = new FreshnessTracker({ settleMs: 0 })
    t.heartbeat(1_000, 1_000)
    t.endsDue(1_000)
    t.setEnds(ends(10n, 10n))
    t.hold(['x.r1.db'])
    expect(t.record(0).behindFiles).toEqual(['x.r1.db'])
    // The seek moved A back to 4: the candidate waits for the replay.
    const visible = new Map([
      [A, 4n],
      [B, 10n],
    ])
    expect(t.advance((k) => visible.get(k))).toBe(false)
    expect(t.record(0).behindFiles).toEqual(['x.r1.db'])
    visible.set(A, 10n)
    expect(t.advance((k) => visible.get(k))).toBe(true)
    expect(t.record(0)).toMatchObject({ completeThroughMs: 1_000, behindFiles: [] })
  })

  it('claims a beat for the organizations a routed group leaves alone, until its commit proves it', () => {
    const t = settledBeat(1_000, 10n)
    const visible = at(4n, 10n)
    const reach = at(12n, 10n)
    // The group reaches past A's end: all but its organizations are complete through the beat.
    expect(t.claimUntouched((k) => reach.get(k), new Set(['org-b', 'org-a']))).toBe(true)
    expect(t.record(0)).toMatchObject({
      completeThroughMs: null,
      untouchedThroughMs: 1_000,
      touchedOrganizations: ['org-a', 'org-b'],
    })
    // The same claim again changes nothing to publish.
    expect(t.claimUntouched((k) => reach.get(k), new Set(['org-a', 'org-b']))).toBe(false)
    // The group committed: the beat is proved for everyone, the claim subsumed.
    visible.set(A, 12n)
    expect(t.advance((k) => visible.get(k))).toBe(true)
    expect(t.record(0)).toEqual({
      completeThroughMs: 1_000,
      publishedAtMs: 0,
      clockBehindMs: 0,
      behindFiles: [],
    })
  })

  it('claims nothing for a group short of the ends, with a control event, or past the bound', () => {
    const t = settledBeat(1_000, 10n)
    const short = at(9n, 10n)
    expect(t.claimUntouched((k) => short.get(k), new Set(['org-a']))).toBe(false)
    const reached = at(10n, 10n)
    expect(t.claimUntouched((k) => reached.get(k), undefined)).toBe(false)
    const many = new Set(Array.from({ length: MAX_TOUCHED_ORGANIZATIONS + 1 }, (_, i) => `o${i}`))
    expect(t.claimUntouched((k) => reached.get(k), many)).toBe(false)
    expect(t.record(0).untouchedThroughMs).toBeUndefined()
    // A claim, then a group that reaches nothing newer: withdrawn (the instant covers as much).
    expect(t.claimUntouched((k) => reached.get(k), new Set(['org-a']))).toBe(true)
    expect(t.claimUntouched((k) => short.get(k), new Set(['org-a']))).toBe(true)
    expect(t.record(0).untouchedThroughMs).toBeUndefined()
    // A rebuild's swap moves positions back: no claim made before stands.
    expect(t.claimUntouched((k) => reached.get(k), new Set(['org-a']))).toBe(true)
    t.hold(['x.r1.db'])
    expect(t.record(0).touchedOrganizations).toBeUndefined()
  })

  it('measures a clock seen behind PostgreSQL from beats that arrive before their commit', () => {
    const t = new FreshnessTracker({ settleMs: 0 })
    expect(t.heartbeat(1_000, 1_030)).toBe(30)
    expect(t.clockBehindMs).toBe(0)
    expect(t.heartbeat(2_000, 1_980)).toBe(-20)
    expect(t.clockBehindMs).toBe(20)
  })
})

describe('what a response states', () => {
  const record: FreshnessRecord = {
    completeThroughMs: Date.UTC(2026, 10, 25, 12, 0, 0, 0),
    publishedAtMs: 0,
    clockBehindMs: 0,
    behindFiles: ['x.r1.db'],
  }

  it('the instant and the lag, or unknown, said as such', () => {
    const now = record.completeThroughMs! + 1_234
    expect(freshnessHeaders(freshnessOf(record, undefined, now))).toEqual({
      'replica-complete-through': '2026-11-25T12:00:00.000Z',
      'replica-lag-ms': '1234',
    })
    expect(freshnessHeaders(freshnessOf(undefined, undefined, now))).toEqual({
      'replica-complete-through': 'unknown',
      'replica-lag-ms': 'unknown',
    })
    expect(
      freshnessOf({ ...record, completeThroughMs: null }, undefined, now).lagMs,
    ).toBeUndefined()
    expect(
      freshnessOf(record, { organizationId: 'x', file: 'x.r1.db' }, now).completeThroughMs,
    ).toBeUndefined()
    expect(
      freshnessOf(record, { organizationId: 'y', file: 'y.r1.db' }, now).completeThroughMs,
    ).toBe(record.completeThroughMs)
  })

  it('an organization the group in hand leaves alone: the later instant; one it changes: the proved', () => {
    const through = record.completeThroughMs!
    const claimed = { ...record, untouchedThroughMs: through + 800, touchedOrganizations: ['busy'] }
    const now = through + 1_000
    const quiet = freshnessOf(claimed, { organizationId: 'quiet', file: null }, now)
    expect(quiet).toEqual({ completeThroughMs: through + 800, lagMs: 200 })
    const busy = freshnessOf(claimed, { organizationId: 'busy', file: null }, now)
    expect(busy).toEqual({ completeThroughMs: through, lagMs: 1_000 })
    // The generation's own (readiness), and a swapped file: neither takes the claim.
    expect(freshnessOf(claimed, undefined, now).completeThroughMs).toBe(through)
    const swapped = freshnessOf(claimed, { organizationId: 'x', file: 'x.r1.db' }, now)
    expect(swapped.completeThroughMs).toBeUndefined()
    // Before any proof, the claim alone: the untouched are known, the touched not.
    const first = { ...claimed, completeThroughMs: null }
    const quietFirst = freshnessOf(first, { organizationId: 'quiet', file: null }, now)
    expect(quietFirst.completeThroughMs).toBe(through + 800)
    expect(freshnessOf(first, { organizationId: 'busy', file: null }, now).lagMs).toBeUndefined()
  })

  it('a clock behind PostgreSQL: the lag is clamped to 0 and counted, or corrected when known', () => {
    let skewed = 0
    const before = record.completeThroughMs! - 500
    expect(freshnessOf(record, undefined, before, () => skewed++).lagMs).toBe(0)
    expect(skewed).toBe(1)
    expect(freshnessOf({ ...record, clockBehindMs: 700 }, undefined, before).lagMs).toBe(200)
  })
})

describe('freshness.json', () => {
  const dir = mkdtempSync(join(tmpdir(), 'freshness-'))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it('round-trips; missing or damaged claims nothing', () => {
    expect(readFreshness(dir)).toBeUndefined()
    const record = { completeThroughMs: 1, publishedAtMs: 2, clockBehindMs: 0, behindFiles: [] }
    writeFreshness(dir, record)
    expect(readFreshness(dir)).toEqual(record)
    writeFileSync(freshnessPath(dir), '{"completeThroughMs":')
    expect(readFreshness(dir)).toBeUndefined()
  })
})

describe('heartbeatCommitMs', () => {
  const event = { before: null, after: { id: 'r' }, source: { ts_ms: 1234 }, op: 'u' }
  it('reads source.ts_ms from both envelopes, and nothing from anything else', () => {
    expect(heartbeatCommitMs(Buffer.from(JSON.stringify(event)))).toBe(1234)
    expect(heartbeatCommitMs(Buffer.from(JSON.stringify({ schema: {}, payload: event })))).toBe(
      1234,
    )
    expect(heartbeatCommitMs(null)).toBeUndefined()
    expect(heartbeatCommitMs(Buffer.from('nope'))).toBeUndefined()
    expect(heartbeatCommitMs(Buffer.from('{"source":{}}'))).toBeUndefined()
  })
})
