// bench:api's paced load (bench/paced-load.ts) against a real HTTP server: the rate it keeps, the
// bytes and statuses it counts, and latencies that include a wait for a free connection, or its
// p99 "at half saturation" would not mean what bench:api prints.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { runPaced } from '../../../bench/paced-load.ts'

const BODY = 'x'.repeat(200_000)

describe('bench/paced-load.ts', () => {
  let server: Server
  let origin = ''
  let delayMs = 0
  const seen: string[] = []

  beforeAll(async () => {
    let n = 0
    server = createServer((request, response) => {
      n++
      seen.push(`${request.url ?? ''} ${request.headers.authorization ?? ''}`)
      const status = n % 4 === 0 ? 503 : 200
      // A head, then the body in two writes: the client must read a response across chunks.
      const answer = () => {
        response.writeHead(status, { 'content-length': BODY.length })
        response.write(BODY.slice(0, 1000))
        setImmediate(() => response.end(BODY.slice(1000)))
      }
      if (delayMs > 0) setTimeout(answer, delayMs)
      else answer()
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())))

  it('keeps the rate, sends the plan’s paths in turn with its headers, and counts what came back', async () => {
    seen.length = 0
    const result = await runPaced({
      origin,
      paths: ['/a', '/b', '/c'],
      start: 1,
      headers: { authorization: 'Bearer k' },
      connections: 4,
      seconds: 2,
      rate: 200,
    })
    expect(result.errors).toBe(0)
    expect(result.behind).toBe(0)
    expect(result.requests.average).toBeGreaterThan(180)
    expect(result.requests.average).toBeLessThan(220)
    // The warm-up's second is answered too, and not measured.
    expect(result.requests.sent).toBeGreaterThan(result.requests.total + 150)
    // Round robin from the second path: each path asked as often as the others, give or take one.
    expect(new Set(seen.map((line) => line.split(' ').slice(1).join(' ')))).toEqual(
      new Set(['Bearer k']),
    )
    const counts = ['/a', '/b', '/c'].map(
      (path) => seen.filter((l) => l.startsWith(`${path} `)).length,
    )
    expect(Math.max(...counts) - Math.min(...counts)).toBeLessThanOrEqual(1)
    expect(counts[1]).toBeGreaterThanOrEqual(counts[0] as number)
    // Each measured response whole: its body and a head of some tens of bytes.
    const perRequest = result.throughput.total / result.requests.total
    expect(perRequest).toBeGreaterThan(BODY.length)
    expect(perRequest).toBeLessThan(BODY.length + 300)
    const share = result.non2xx / result.requests.total
    expect(share).toBeGreaterThan(0.2)
    expect(share).toBeLessThan(0.3)
  })

  it('times a request from when it was due, so a server slower than the rate shows as a queue', async () => {
    delayMs = 40
    try {
      // One connection answering in 40 ms cannot serve 50 requests/s: the requests wait for it.
      const result = await runPaced({
        origin,
        paths: ['/slow'],
        start: 0,
        headers: {},
        connections: 1,
        seconds: 2,
        rate: 50,
      })
      expect(result.behind).toBeGreaterThan(0)
      expect(result.latency.p50).toBeGreaterThan(100)
      expect(result.latency.p99).toBeGreaterThan(result.latency.p50)
    } finally {
      delayMs = 0
    }
  })
})
