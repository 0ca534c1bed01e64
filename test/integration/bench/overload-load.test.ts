// bench:api's overload client (bench/overload-load.ts) against a real HTTP server that answers in
// a known mix: what it counts as served, shed and wrong must be what the server sent, or the
// overload figures mean nothing.
import { spawn } from 'node:child_process'
import { createServer, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { repoRoot } from '../../harness/paths.ts'

const KEY = 'ck_test_overload_client'
const refusalBody = JSON.stringify({
  error: { code: 'api_temporarily_unavailable', message: 'over capacity' },
})

describe('bench/overload-load.ts', () => {
  let server: Server
  let url = ''
  const sent = { ok: 0, shed: 0, wrong: 0 }

  beforeAll(async () => {
    let n = 0
    // The api always sends Content-Length (the client reads nothing else): so does this server.
    const answer = (response: ServerResponse, status: number, body: string, headers = {}) =>
      response
        .writeHead(status, { ...headers, 'content-length': Buffer.byteLength(body) })
        .end(body)
    server = createServer((request, response) => {
      n++
      if (request.headers.authorization !== `Bearer ${KEY}`) {
        sent.wrong++
        answer(response, 401, '{}')
      } else if (n % 3 === 0) {
        sent.shed++
        answer(response, 503, refusalBody, { 'retry-after': '1' })
      } else if (n % 5 === 0) {
        // a 503 without Retry-After is not a refusal the contract allows
        sent.wrong++
        answer(response, 503, refusalBody)
      } else {
        sent.ok++
        answer(response, 200, JSON.stringify({ data: { id: 'x'.repeat(3000) } }))
      }
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v1/providers/p1`
  })
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())))

  it('counts each response as the server sent it, at about the rate asked', async () => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', 'bench/overload-load.ts', url, KEY, '300', '4', '2'],
      { cwd: repoRoot, stdio: ['ignore', 'pipe', 'inherit'] },
    )
    let out = ''
    child.stdout.on('data', (d: Buffer) => (out += d.toString()))
    expect(await new Promise((resolve) => child.on('exit', resolve))).toBe(0)
    const result = JSON.parse(out) as {
      served: number
      shed: number
      wrong: number
      errors: number
      unsent: number
      servedP99Ms: number
    }
    expect(result.errors).toBe(0)
    // The requests still in flight when the run ended (at most one per connection) were sent
    // by the server but not counted by the client.
    const counted = result.served + result.shed + result.wrong
    const answered = sent.ok + sent.shed + sent.wrong
    expect(answered - counted).toBeGreaterThanOrEqual(0)
    expect(answered - counted).toBeLessThanOrEqual(4)
    expect(result.served).toBeLessThanOrEqual(sent.ok)
    expect(result.served).toBeGreaterThanOrEqual(sent.ok - 4)
    expect(result.shed).toBeLessThanOrEqual(sent.shed)
    expect(result.shed).toBeGreaterThanOrEqual(sent.shed - 4)
    expect(result.wrong).toBeLessThanOrEqual(sent.wrong)
    expect(result.wrong).toBeGreaterThanOrEqual(sent.wrong - 4)
    // 300 a second for 2 s: a server this fast answers them all, none left unsent.
    expect(counted + result.unsent).toBeGreaterThan(500)
    expect(counted + result.unsent).toBeLessThan(700)
    expect(result.unsent).toBeLessThan(30)
    expect(result.servedP99Ms).toBeGreaterThan(0)
  })
})
