// Conditional requests (api/etag.ts) and the freshness headers and readiness (docs/freshness.md),
// over real HTTP against the api built in-process, on files written the way the projector writes
// them. The pipeline's side (heartbeats, the instant proved, a rebuild's swap) is
// test/integration/e2e/freshness.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { writeFreshness, type FreshnessRecord } from '../../../src/freshness.ts'
import { type OrganizationFixture, ReplicaFixture, stamp } from './fixtures.ts'
import { type RunningApi, startApi } from './server.ts'

describe('conditional requests and freshness headers', () => {
  let replica: ReplicaFixture
  let api: RunningApi
  let org: OrganizationFixture
  let key: string
  let now = Date.parse('2026-06-01T12:00:00.000Z')
  const providers: string[] = []

  const record = (r: Partial<FreshnessRecord>): void =>
    writeFreshness(replica.generation.dir, {
      completeThroughMs: null,
      publishedAtMs: now,
      clockBehindMs: 0,
      behindFiles: [],
      ...r,
    })
  /** The api re-reads the record at most every 20 ms of its clock: move the clock past it. */
  const tick = (ms = 25) => (now += ms)

  beforeAll(async () => {
    replica = ReplicaFixture.create()
    org = replica.organization()
    for (let i = 0; i < 3; i++) {
      providers.push(org.provider({ lastName: `P${i}` }, { updatedAt: stamp(10 + i) }).sensitive.id)
    }
    key = replica.key(org.id).raw
    replica.publish()
    api = await startApi(replica.dataDir, {
      clock: { now: () => now },
      env: { RATE_LIMIT_PER_KEY: '1000', MAX_STALENESS_MS: '5000' },
    })
  })
  afterAll(async () => {
    await api?.close()
    replica?.destroy()
  })

  it('every 200 has an ETag; If-None-Match with it gets 304 without a body, headers kept', async () => {
    for (const path of ['/providers', `/providers/${providers[0]}`, '/openapi.json']) {
      const first = await api.get(path, key)
      expect(first.status).toBe(200)
      const tag = first.headers.get('etag')
      expect(tag).toMatch(/^"[A-Za-z0-9_-]+"$/)
      const body = await first.text()
      const again = await api.get(path, key, { headers: { 'if-none-match': tag! } })
      expect(again.status).toBe(304)
      expect(await again.text()).toBe('')
      expect(again.headers.get('etag')).toBe(tag)
      if (path !== '/openapi.json') {
        expect(again.headers.get('ratelimit-remaining')).not.toBeNull()
        expect(again.headers.get('replica-complete-through')).not.toBeNull()
      }
      // A list of tags, weak comparison, and `*`, as RFC 9110 has them; another tag is a 200.
      for (const header of [`"x", W/${tag!}`, '*']) {
        expect((await api.get(path, key, { headers: { 'if-none-match': header } })).status).toBe(
          304,
        )
      }
      const other = await api.get(path, key, { headers: { 'if-none-match': '"nope"' } })
      expect(other.status).toBe(200)
      expect(await other.text()).toBe(body)
    }
  })

  it('the ETag changes exactly when the body does', async () => {
    const detail = `/providers/${providers[0]}`
    const tags = async () => ({
      list: (await api.get('/providers', key)).headers.get('etag'),
      detail: (await api.get(detail, key)).headers.get('etag'),
      other: (await api.get(`/providers/${providers[1]}`, key)).headers.get('etag'),
    })
    const before = await tags()
    // A commit to the file that changes another provider: the file's version moves, the bodies of
    // the two details asked for do not, and neither do their tags.
    org.provider({ id: providers[2]!, lastName: 'P2 again' }, { updatedAt: stamp(12) })
    const middle = await tags()
    expect(middle.detail).toBe(before.detail)
    expect(middle.other).toBe(before.other)
    org.provider({ id: providers[0]!, lastName: 'Renamed' }, { updatedAt: stamp(20) })
    const after = await tags()
    expect(after.detail).not.toBe(middle.detail)
    expect(after.list).not.toBe(middle.list)
    expect(after.other).toBe(middle.other)
  })

  it("a list page's ETag is the same from the page cache or from SQLite, and per view", async () => {
    // A list's tag is made of its rows' stored hashes (api/etag.ts): two api processes behind one
    // load balancer, one without a page cache, must tag the same page alike, or a poller moving
    // between them would be sent the page again.
    const uncached = await startApi(replica.dataDir, {
      clock: { now: () => now },
      env: { RATE_LIMIT_PER_KEY: '1000', PAGE_CACHE_MB: '0' },
    })
    const sensitiveKey = replica.key(org.id, {
      scopes: ['providers:read', 'providers:read:sensitive'],
    }).raw
    try {
      const first = await api.get('/providers?limit=2', key)
      const page = (await first.json()) as { nextCursor: string }
      for (const path of [
        '/providers',
        '/providers?limit=2',
        `/providers?limit=2&cursor=${page.nextCursor}`,
      ]) {
        const cached = await api.get(path, key)
        const read = await uncached.get(path, key)
        expect(await read.text()).toBe(await cached.text())
        expect(read.headers.get('etag')).toBe(cached.headers.get('etag'))
      }
      const sensitive = await api.get('/providers', sensitiveKey)
      expect(sensitive.status).toBe(200)
      expect(sensitive.headers.get('etag')).not.toBe(
        (await api.get('/providers', key)).headers.get('etag'),
      )
    } finally {
      await uncached.close()
    }
  })

  it('a 304 counts against the rate limit', async () => {
    const limited = await startApi(replica.dataDir, { env: { RATE_LIMIT_PER_KEY: '2' } })
    try {
      const first = await limited.get('/providers', key)
      const tag = first.headers.get('etag')!
      const second = await limited.get('/providers', key, { headers: { 'if-none-match': tag } })
      expect(second.status).toBe(304)
      expect(second.headers.get('ratelimit-remaining')).toBe('0')
      const third = await limited.get('/providers', key, { headers: { 'if-none-match': tag } })
      expect(third.status).toBe(429)
    } finally {
      await limited.close()
    }
  })

  it('freshness is unknown without a record or a heartbeat, and said so', async () => {
    tick()
    let response = await api.get('/providers', key)
    expect(response.headers.get('replica-complete-through')).toBe('unknown')
    expect(response.headers.get('replica-lag-ms')).toBe('unknown')
    record({ completeThroughMs: null })
    tick()
    response = await api.get('/providers', key)
    expect(response.headers.get('replica-complete-through')).toBe('unknown')
    // Readiness does not fail on an unknown instant (the projector warns about it).
    expect((await fetch(`${api.adminUrl}/readyz`)).status).toBe(200)
  })

  it('states the instant and the lag; a clock behind the instant reads 0 and is counted', async () => {
    record({ completeThroughMs: now - 1_500 })
    tick()
    let response = await api.get(`/providers/${providers[1]}`, key)
    expect(response.headers.get('replica-complete-through')).toBe(
      new Date(now - 25 - 1_500).toISOString(),
    )
    expect(response.headers.get('replica-lag-ms')).toBe('1525')
    record({ completeThroughMs: now + 1_000 })
    tick()
    response = await api.get(`/providers/${providers[1]}`, key)
    expect(response.headers.get('replica-lag-ms')).toBe('0')
    const metrics = await (await fetch(`${api.adminUrl}/metrics`)).text()
    expect(metrics).toMatch(/^replica_api_clock_skew_anomalies_total [1-9]/m)
    // Errors of the organization carry it too (the instant is the organization's, not the body's).
    response = await api.get('/providers/00000000-0000-4000-8000-000000000000', key)
    expect(response.status).toBe(404)
    expect(response.headers.get('replica-lag-ms')).toBe('0')
  })

  it('a file swapped in behind the instant is unknown until the projector releases it', async () => {
    const file = `${org.id}.r1.db`
    replica.control
      .prepare('INSERT OR REPLACE INTO organization_files (organization_id, file) VALUES (?, ?)')
      .run(org.id, file)
    try {
      record({ completeThroughMs: now - 100, behindFiles: [file] })
      // No tick: the lookup that found the new file makes the api read the record again. (The
      // swapped file does not exist in this fixture: only the header is looked at.)
      const response = await api.get('/providers', key)
      expect(response.headers.get('replica-complete-through')).toBe('unknown')
    } finally {
      replica.control
        .prepare('DELETE FROM organization_files WHERE organization_id = ?')
        .run(org.id)
    }
  })

  it('/readyz fails once the instant is older than MAX_STALENESS_MS, and recovers', async () => {
    record({ completeThroughMs: now - 1_000 })
    tick()
    let ready = await fetch(`${api.adminUrl}/readyz`)
    expect(ready.status).toBe(200)
    tick(6_000)
    ready = await fetch(`${api.adminUrl}/readyz`)
    expect(ready.status).toBe(503)
    expect(await ready.json()).toMatchObject({ status: 'stale', maxStalenessMs: 5000 })
    record({ completeThroughMs: now - 100 })
    tick()
    ready = await fetch(`${api.adminUrl}/readyz`)
    expect(ready.status).toBe(200)
    expect(await ready.json()).toMatchObject({ status: 'ready', stalenessMs: 125 })
  })
})
