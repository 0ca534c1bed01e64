// Rate limits: per key and per organization, headers on every authenticated response, 429 with
// Retry-After; with REDIS_URL, several api processes count together (a real redis-server).
import { createServer, type Server, type Socket } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type OrganizationFixture, ReplicaFixture } from './fixtures.ts'
import { startRedis, type StartedRedis } from '../../harness/redis.ts'
import { type RunningApi, startApi } from './server.ts'

async function errorCode(response: Response): Promise<string> {
  return ((await response.json()) as { error: { code: string } }).error.code
}

describe('rate limits', () => {
  let replica: ReplicaFixture
  let org: OrganizationFixture

  beforeAll(() => {
    replica = ReplicaFixture.create()
    org = replica.organization()
    org.provider()
    replica.publish()
  })
  afterAll(() => replica?.destroy())

  describe('in memory', () => {
    let api: RunningApi
    beforeAll(async () => {
      api = await startApi(replica.dataDir, {
        env: { RATE_LIMIT_PER_KEY: '3', RATE_LIMIT_PER_ORGANIZATION: '5' },
      })
    })
    afterAll(async () => api?.close())

    it('limits each key, then the organization, with headers and Retry-After', async () => {
      const first = replica.key(org.id)
      const second = replica.key(org.id)
      for (let i = 0; i < 3; i++) {
        const response = await api.get('/providers', first.raw)
        expect(response.status).toBe(200)
        expect(response.headers.get('ratelimit-policy')).toBe(
          '"key";q=3;w=60, "organization";q=5;w=60',
        )
        expect(response.headers.get('ratelimit')).toMatch(
          new RegExp(`^"key";r=${2 - i};t=\\d+, "organization";r=${4 - i};t=\\d+$`),
        )
        expect(response.headers.get('ratelimit-limit')).toBe('3')
        expect(response.headers.get('ratelimit-remaining')).toBe(String(2 - i))
      }
      const limited = await api.get('/providers', first.raw)
      expect(limited.status).toBe(429)
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0)
      expect(limited.headers.get('ratelimit-remaining')).toBe('0')
      expect(await errorCode(limited)).toBe('rate_limited')

      // The refused request did not count against the organization: 2 left for the other key.
      for (let i = 0; i < 2; i++) expect((await api.get('/providers', second.raw)).status).toBe(200)
      const orgLimited = await api.get('/providers', second.raw)
      expect(orgLimited.status).toBe(429)
      expect(orgLimited.headers.get('ratelimit-limit')).toBe('5')
      expect(orgLimited.headers.get('retry-after')).toMatch(/^\d+$/)
      const body = (await orgLimited.json()) as { error: { message: string } }
      expect(body.error.message).toMatch(/organization/)

      const other = replica.organization()
      other.provider()
      expect((await api.get('/providers', replica.key(other.id).raw)).status).toBe(200)

      const metrics = await (await fetch(`${api.adminUrl}/metrics`)).text()
      expect(metrics).toMatch(/api_rate_limited_total\{policy="key"\} 1/)
      expect(metrics).toMatch(/api_rate_limited_total\{policy="organization"\} 1/)
    })

    it('does not count requests refused before authentication', async () => {
      const key = replica.key(replica.organization().id)
      for (let i = 0; i < 10; i++) expect((await api.get('/providers', 'unknown')).status).toBe(401)
      const response = await api.get('/providers', key.raw)
      expect(response.headers.get('ratelimit-remaining')).toBe('2')
    })
  })

  describe('shared through Redis', () => {
    let redis: StartedRedis
    let one: RunningApi
    let two: RunningApi
    beforeAll(async () => {
      redis = await startRedis()
      const env = {
        REDIS_URL: redis.url,
        RATE_LIMIT_PER_KEY: '4',
        RATE_LIMIT_PER_ORGANIZATION: '100',
      }
      one = await startApi(replica.dataDir, { env })
      two = await startApi(replica.dataDir, { env })
    })
    afterAll(async () => {
      await one?.close()
      await two?.close()
      await redis?.stop()
    })

    it('two api instances share one limit', async () => {
      const key = replica.key(org.id)
      const remaining: (string | null)[] = []
      for (const api of [one, two, one, two]) {
        const response = await api.get('/providers', key.raw)
        expect(response.status).toBe(200)
        remaining.push(response.headers.get('ratelimit-remaining'))
      }
      expect(remaining).toEqual(['3', '2', '1', '0'])
      for (const api of [one, two]) {
        const limited = await api.get('/providers', key.raw)
        expect(limited.status).toBe(429)
        expect(limited.headers.get('retry-after')).toMatch(/^\d+$/)
        expect(await errorCode(limited)).toBe('rate_limited')
      }
    })

    it('a limited key is served again once its window ends, Retry-After being the time left', async () => {
      const windowMs = 4_000
      const api = await startApi(replica.dataDir, {
        env: {
          REDIS_URL: redis.url,
          RATE_LIMIT_PER_KEY: '2',
          RATE_LIMIT_PER_ORGANIZATION: '100',
          RATE_LIMIT_WINDOW_SECONDS: String(windowMs / 1000),
        },
      })
      try {
        const key = replica.key(org.id)
        // The window opens with the first request counted: between these two instants.
        const opened = { earliest: Date.now(), latest: 0 }
        expect((await api.get('/providers', key.raw)).status).toBe(200)
        opened.latest = Date.now()
        expect((await api.get('/providers', key.raw)).status).toBe(200)
        const asked = Date.now()
        const limited = await api.get('/providers', key.raw)
        const answered = Date.now()
        expect(limited.status).toBe(429)
        // The time left, rounded up to whole seconds, as measured around the request.
        const retryAfter = Number(limited.headers.get('retry-after'))
        const least = Math.ceil((opened.earliest + windowMs - answered) / 1000)
        const most = Math.ceil((opened.latest + windowMs - asked) / 1000)
        expect(retryAfter).toBeGreaterThanOrEqual(Math.max(1, least))
        expect(retryAfter).toBeLessThanOrEqual(most)
        expect(Number(limited.headers.get('ratelimit-reset'))).toBe(retryAfter)

        // Still inside the window: refused, and told no later a time.
        const again = await api.get('/providers', key.raw)
        expect(again.status).toBe(429)
        expect(Number(again.headers.get('retry-after'))).toBeLessThanOrEqual(retryAfter)

        // A client that waits Retry-After seconds from the 429, as told: a fresh window, served.
        const waitUntil = answered + retryAfter * 1000
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, waitUntil - Date.now())))
        const served = await api.get('/providers', key.raw)
        expect(served.status).toBe(200)
        expect(served.headers.get('ratelimit-remaining')).toBe('1')
        expect(served.headers.get('retry-after')).toBeNull()
      } finally {
        await api.close()
      }
    })
  })

  describe('Redis unavailable: requests pass unlimited, without waiting', () => {
    // Answered well before a client or proxy would give up; a stalled request fails the test.
    const quickly = () => ({ signal: AbortSignal.timeout(3000) })
    /** Over the key's limit of 1 or 2, still served, without limit headers, and at once. */
    async function expectPassesUnlimited(api: RunningApi, rawKey: string): Promise<void> {
      for (let i = 0; i < 3; i++) {
        const response = await api.get('/providers', rawKey, quickly())
        expect(response.status).toBe(200)
        expect(response.headers.get('ratelimit-limit')).toBeNull()
      }
    }

    it('when Redis accepts connections and never answers', async () => {
      const sockets: Socket[] = []
      const silent: Server = createServer((socket) => sockets.push(socket))
      await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
      const { port } = silent.address() as { port: number }
      const api = await startApi(replica.dataDir, {
        env: { REDIS_URL: `redis://127.0.0.1:${port}`, RATE_LIMIT_PER_KEY: '1' },
      })
      try {
        await expectPassesUnlimited(api, replica.key(org.id).raw)
      } finally {
        await api.close()
        for (const socket of sockets) socket.destroy()
        await new Promise((resolve) => silent.close(resolve))
      }
    })

    it('when Redis stops while the api is running', async () => {
      const redis = await startRedis()
      const api = await startApi(replica.dataDir, {
        env: { REDIS_URL: redis.url, RATE_LIMIT_PER_KEY: '2' },
      })
      try {
        const key = replica.key(org.id)
        const counted = await api.get('/providers', key.raw, quickly())
        expect(counted.headers.get('ratelimit-remaining')).toBe('1')
        await redis.stop()
        await expectPassesUnlimited(api, key.raw)
      } finally {
        await api.close()
        await redis.stop()
      }
    })
  })
})
