// Load shedding (api/overload.ts) over real HTTP: an api whose event loop is held busy, one that
// reads a flood of requests in one turn of its loop, and one whose requests wait on a stalled
// Redis (a real redis-server, its clients paused), refuse what
// they cannot serve at once with 503 api_temporarily_unavailable and Retry-After, and serve
// again once the pressure is gone. Each case is run against the same api with that check off
// too, so that the refusal is shown to come from the check and not from something else.
import { Redis } from 'ioredis'
import { connect, type Socket } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startRedis, type StartedRedis } from '../../harness/redis.ts'
import { ReplicaFixture } from './fixtures.ts'
import { type RunningApi, startApi } from './server.ts'

/** Holds this process's event loop busy `busyMs` of every `everyMs`, until the returned stop. */
function holdEventLoop(busyMs: number, everyMs: number): () => void {
  const timer = setInterval(() => {
    const until = performance.now() + busyMs
    while (performance.now() < until) {
      // busy: what a CPU-bound backlog of requests does to the loop
    }
  }, everyMs)
  return () => clearInterval(timer)
}

/**
 * Polls until a request is served, for at most 3 s: right after start-up, and right after the
 * pressure ends, the last sample of the loop's delay may still be over the threshold.
 */
async function served(api: RunningApi, key: string): Promise<number> {
  const until = Date.now() + 3000
  for (;;) {
    const { status } = await api.get('/providers', key)
    if (status === 200 || Date.now() > until) return status
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/** Polls until a request is refused with 503, for at most 3 s; the last response otherwise. */
async function refused(api: RunningApi, key?: string): Promise<Response> {
  const until = Date.now() + 3000
  for (;;) {
    const response = await api.get('/providers', key)
    if (response.status === 503 || Date.now() > until) return response
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

interface RawResponse {
  status: number
  retryAfter: string | undefined
  body: string
}

/** The one response a `Connection: close` request gets, read until the api closes the socket. */
function readWhole(socket: Socket): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    let raw = ''
    socket.setEncoding('utf8')
    socket.on('data', (chunk: string) => (raw += chunk))
    socket.once('error', reject)
    socket.once('close', () => {
      const headEnd = raw.indexOf('\r\n\r\n')
      const head = raw.slice(0, headEnd)
      resolve({
        status: Number(head.slice(9, 12)),
        retryAfter: /\r\nretry-after: *(\S+)/i.exec(head)?.[1],
        body: raw.slice(headEnd + 4),
      })
    })
  })
}

async function shedCount(api: RunningApi, reason: string): Promise<number> {
  const metrics = await (await fetch(`${api.adminUrl}/metrics`)).text()
  const match = new RegExp(`^api_shed_total\\{reason="${reason}"\\} (\\d+)$`, 'm').exec(metrics)
  return Number(match?.[1] ?? NaN)
}

async function expectShed(response: Response): Promise<void> {
  expect(response.status).toBe(503)
  expect(response.headers.get('retry-after')).toBe('1')
  expect(await response.json()).toEqual({
    error: {
      code: 'api_temporarily_unavailable',
      message: 'the server is over capacity; retry after the time in Retry-After',
    },
  })
}

describe('load shedding', () => {
  let replica: ReplicaFixture
  let key: string

  beforeAll(() => {
    replica = ReplicaFixture.create()
    const org = replica.organization()
    org.provider()
    key = replica.key(org.id).raw
    replica.publish()
  })
  afterAll(() => replica?.destroy())

  describe('on event-loop delay', () => {
    const sampling = { API_SHED_SAMPLE_INTERVAL_MS: '50', API_SHED_MAX_IN_FLIGHT: '0' }

    it('refuses while the loop is late, serves again once it is not', async () => {
      const api = await startApi(replica.dataDir, {
        env: { ...sampling, API_SHED_EVENT_LOOP_DELAY_MS: '20' },
      })
      try {
        expect(await served(api, key)).toBe(200)
        const release = holdEventLoop(80, 90)
        try {
          // A sample interval or two for the delay to be seen. Each sample is the mean delay of
          // its interval, and one taken between two holds can fall under the threshold: a refusal
          // is polled for, as `served` polls for a 200.
          await new Promise((resolve) => setTimeout(resolve, 300))
          await expectShed(await refused(api, key))
          // Refused before the key is read: even a request without one.
          await expectShed(await refused(api))
        } finally {
          release()
        }
        expect(await shedCount(api, 'event_loop_delay')).toBeGreaterThanOrEqual(2)
        expect(await served(api, key)).toBe(200)
        // The operations server is never shed: it answered the metrics above under pressure too.
      } finally {
        await api.close()
      }
    })

    it('serves through the same delay with the check off', async () => {
      const api = await startApi(replica.dataDir, {
        env: { ...sampling, API_SHED_EVENT_LOOP_DELAY_MS: '0' },
      })
      const release = holdEventLoop(80, 90)
      try {
        await new Promise((resolve) => setTimeout(resolve, 300))
        expect((await api.get('/providers', key)).status).toBe(200)
        expect(await shedCount(api, 'event_loop_delay')).toBe(0)
      } finally {
        release()
        await api.close()
      }
    })
  })

  describe('on queue delay', () => {
    const onlyQueueDelay = {
      API_SHED_EVENT_LOOP_DELAY_MS: '0',
      API_SHED_MAX_IN_FLIGHT: '0',
      // 300 requests of one key in a moment: no 429 in the way.
      RATE_LIMIT_PER_KEY: '1000000',
      RATE_LIMIT_PER_ORGANIZATION: '1000000',
    }

    /**
     * `count` requests that all wait in their sockets until the api's next turn: every connection
     * is opened first, then every request written while the loop is held, so the api reads them
     * all in one turn. Each answer's status, Retry-After and body, in the order written.
     */
    async function oneTurnOf(api: RunningApi, count: number): Promise<RawResponse[]> {
      const { hostname, port } = new URL(api.url)
      const sockets = await Promise.all(
        Array.from(
          { length: count },
          () =>
            new Promise<Socket>((resolve, reject) => {
              const socket = connect(Number(port), hostname, () => resolve(socket))
              socket.once('error', reject)
            }),
        ),
      )
      const answers = sockets.map(readWhole)
      // A connection is open on this side before the api has accepted it: let it accept them all.
      await new Promise((resolve) => setTimeout(resolve, 200))
      for (const socket of sockets) {
        socket.write(
          `GET /api/v1/providers HTTP/1.1\r\nHost: ${hostname}\r\n` +
            `Authorization: Bearer ${key}\r\nConnection: close\r\n\r\n`,
        )
      }
      const until = performance.now() + 50
      while (performance.now() < until) {
        // the requests reach the api's sockets meanwhile
      }
      return Promise.all(answers)
    }

    it('refuses the requests read after the limit in a flood, serves the first, then more', async () => {
      const api = await startApi(replica.dataDir, {
        env: { ...onlyQueueDelay, API_SHED_QUEUE_DELAY_MS: '5' },
      })
      try {
        expect(await served(api, key)).toBe(200)
        const answers = await oneTurnOf(api, 300)
        const statuses = answers.map((a) => a.status)
        const servedCount = statuses.filter((s) => s === 200).length
        const refusedCount = statuses.filter((s) => s === 503).length
        expect(servedCount + refusedCount).toBe(300)
        // The first requests of the turn are served; refusals begin once 5 ms have gone by.
        expect(servedCount).toBeGreaterThan(0)
        expect(refusedCount).toBeGreaterThan(0)
        for (const refused of answers.filter((a) => a.status === 503)) {
          expect(refused.retryAfter).toBe('1')
          expect(JSON.parse(refused.body)).toEqual({
            error: {
              code: 'api_temporarily_unavailable',
              message: 'the server is over capacity; retry after the time in Retry-After',
            },
          })
        }
        expect(await shedCount(api, 'queue_delay')).toBe(refusedCount)
        expect((await api.get('/providers', key)).status).toBe(200)
      } finally {
        await api.close()
      }
    })

    it('serves the same flood, every request, with the check off', async () => {
      const api = await startApi(replica.dataDir, {
        env: { ...onlyQueueDelay, API_SHED_QUEUE_DELAY_MS: '0' },
      })
      try {
        const answers = await oneTurnOf(api, 300)
        expect(answers.every((a) => a.status === 200)).toBe(true)
        expect(await shedCount(api, 'queue_delay')).toBe(0)
      } finally {
        await api.close()
      }
    })
  })

  describe('on requests in flight', () => {
    let redis: StartedRedis
    let pauser: Redis
    beforeAll(async () => {
      redis = await startRedis()
      pauser = new Redis(redis.url)
    })
    afterAll(async () => {
      pauser?.disconnect()
      await redis?.stop()
    })

    /** Two requests held on a paused Redis (the rate limits count there), then a third. */
    async function thirdWhileTwoWait(
      api: RunningApi,
    ): Promise<{ third: Response; thirdMs: number; held: Response[] }> {
      // Every Redis command waits while its clients are paused; the api's rate-limit count gives
      // up after 500 ms and lets the request through (api/app.ts), so the first two are served.
      await pauser.call('CLIENT', 'PAUSE', '2000', 'ALL')
      const held = [api.get('/providers', key), api.get('/providers', key)]
      await new Promise((resolve) => setTimeout(resolve, 150))
      const started = performance.now()
      const third = await api.get('/providers', key)
      const thirdMs = performance.now() - started
      const answered = await Promise.all(held)
      return { third, thirdMs, held: answered }
    }

    it('refuses past API_SHED_MAX_IN_FLIGHT at once, serves those in flight, then more', async () => {
      const api = await startApi(replica.dataDir, {
        env: {
          REDIS_URL: redis.url,
          API_SHED_MAX_IN_FLIGHT: '2',
          API_SHED_EVENT_LOOP_DELAY_MS: '0',
        },
      })
      try {
        expect((await api.get('/providers', key)).status).toBe(200)
        const { third, thirdMs, held } = await thirdWhileTwoWait(api)
        await expectShed(third)
        // Refused without waiting on Redis.
        expect(thirdMs).toBeLessThan(400)
        expect(held.map((r) => r.status)).toEqual([200, 200])
        expect(await shedCount(api, 'in_flight')).toBe(1)
        // The count went back down as the two were answered.
        await new Promise((resolve) => setTimeout(resolve, 2000))
        expect((await api.get('/providers', key)).status).toBe(200)
      } finally {
        await api.close()
      }
    })

    it('with no limit, the third waits like the others', async () => {
      const api = await startApi(replica.dataDir, {
        env: {
          REDIS_URL: redis.url,
          API_SHED_MAX_IN_FLIGHT: '0',
          API_SHED_EVENT_LOOP_DELAY_MS: '0',
        },
      })
      try {
        await new Promise((resolve) => setTimeout(resolve, 2000)) // the previous pause is over
        const { third, thirdMs, held } = await thirdWhileTwoWait(api)
        expect(third.status).toBe(200)
        expect(thirdMs).toBeGreaterThan(300)
        expect(held.map((r) => r.status)).toEqual([200, 200])
      } finally {
        await api.close()
      }
    })
  })
})
