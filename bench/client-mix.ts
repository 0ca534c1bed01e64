// A realistic mix of api clients, as a load generator in a process of its own (so that its CPU is
// not the bench's): `tsx bench/client-mix.ts <plan.json>` prints one line of JSON (MixResult).
//
// Each simulated client holds one organization's key and its own watermark. A request slot goes
// to a random idle client, which does one of:
//   poll    the spec's client loop (section 4): note the time, walk
//           `/providers?updated_since=<watermark>&limit=50` page by page until `nextCursor` is
//           null, then take the noted time minus the overlap as its next watermark. The loop is
//           compressed (seconds, not minutes) so that there are samples: most pages are small.
//   page    a first-page walk: `/providers?limit=50`
//   detail  `/providers/{id}` of one of its organization's providers
// `connections` requests are in flight at most (keep-alive); with `rate`, each connection's
// requests are spaced evenly, to that many requests a second in all, else as fast as the server
// answers (saturation). Latency is from a request's send to its last byte.
import { readFileSync } from 'node:fs'
import http from 'node:http'
import { percentile } from './wait.ts'

export interface MixOrganization {
  /** Raw API keys with providers:read. */
  keys: string[]
  /** Some of its providers, for detail reads. */
  providerIds: string[]
}

export interface MixPlan {
  /** http://host:port/api/v1 */
  baseUrl: string
  organizations: MixOrganization[]
  /** Clients in all: client n belongs to organization n mod organizations, holding one of its keys. */
  clients: number
  connections: number
  /** Measured seconds; a warm-up of `warmupSeconds` comes first, not counted. */
  seconds: number
  warmupSeconds: number
  /** Requests a second in all; absent: saturation. */
  rate?: number
  /** Shares of poll, page and detail (they need not sum to 1). */
  mix: { poll: number; page: number; detail: number }
  /** The watermark's overlap (spec: a minute or two; compressed). */
  overlapMs: number
}

export type MixKind = 'poll' | 'page' | 'detail'

export interface MixResult {
  requests: number
  rps: number
  p50Ms: number
  p99Ms: number
  maxMs: number
  errors: number
  non2xx: number
  firstFailure: string | null
  bytesPerRequest: number
  byKind: Record<MixKind, { requests: number; p99Ms: number }>
  /** Providers a poll page carried, on average. */
  rowsPerPoll: number
}

interface ClientState {
  key: string
  providerIds: string[]
  watermark: string
  busy: boolean
}

// A kind with no request: 0, not NaN (which JSON would write as null).
const round = (ms: number) => (Number.isNaN(ms) ? 0 : Math.round(ms * 100) / 100)

export async function runMix(plan: MixPlan): Promise<MixResult> {
  const url = new URL(plan.baseUrl)
  const agent = new http.Agent({ keepAlive: true, maxSockets: plan.connections })
  const organizations = plan.organizations
  const clients: ClientState[] = Array.from({ length: plan.clients }, (_, n) => {
    const org = organizations[n % organizations.length]!
    return {
      key: org.keys[Math.floor(n / organizations.length) % org.keys.length]!,
      providerIds: org.providerIds,
      watermark: new Date(Date.now() - plan.overlapMs).toISOString(),
      busy: false,
    }
  })
  const total = plan.mix.poll + plan.mix.page + plan.mix.detail
  let measuring = false
  const samples: Record<MixKind, number[]> = { poll: [], page: [], detail: [] }
  let errors = 0
  let non2xx = 0
  let firstFailure: string | null = null
  let bytes = 0
  let pollPages = 0
  let pollRows = 0

  const get = (path: string, key: string): Promise<{ status: number; body: string }> =>
    new Promise((resolve, reject) => {
      const request = http.get(
        {
          agent,
          host: url.hostname,
          port: url.port,
          path: `${url.pathname}${path}`,
          headers: { authorization: `Bearer ${key}` },
        },
        (response) => {
          const chunks: Buffer[] = []
          response.on('data', (c: Buffer) => chunks.push(c))
          response.on('end', () =>
            resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString() }),
          )
          response.on('error', reject)
        },
      )
      request.on('error', reject)
    })

  /** One request, timed and counted; null when it failed. */
  const timed = async (kind: MixKind, path: string, key: string): Promise<string | null> => {
    const started = performance.now()
    try {
      const { status, body } = await get(path, key)
      if (measuring) {
        samples[kind].push(performance.now() - started)
        bytes += body.length
      }
      if (status < 200 || status > 299) {
        if (measuring) non2xx++
        firstFailure ??= `${status} ${path}: ${body.slice(0, 200)}`
        return null
      }
      return body
    } catch (error) {
      if (measuring) errors++
      firstFailure ??= `${path}: ${(error as Error).message}`
      return null
    }
  }

  /** Paces a connection: resolves when its next request may go (immediately at saturation). */
  const pacer = (connection: number) => {
    if (plan.rate === undefined) return () => Promise.resolve()
    const interval = (1000 * plan.connections) / plan.rate
    let next = performance.now() + (interval * connection) / plan.connections
    return async () => {
      const now = performance.now()
      // Behind schedule: go now, without a burst to catch up.
      if (next < now - interval) next = now
      const wait = next - now
      next += interval
      if (wait > 0) await new Promise((r) => setTimeout(r, wait))
    }
  }

  /** A random client not in a request; a busy one after a few draws (fewer clients than slots). */
  const idleClient = (): ClientState => {
    for (let draw = 0; ; draw++) {
      const client = clients[Math.floor(Math.random() * clients.length)]!
      if (!client.busy || draw > 20) return client
    }
  }

  let stop = false
  const connection = async (n: number) => {
    const pace = pacer(n)
    while (!stop) {
      await pace()
      if (stop) break
      const client = idleClient()
      client.busy = true
      const draw = Math.random() * total
      try {
        if (draw < plan.mix.poll) {
          const runStarted = Date.now()
          let cursor: string | null = null
          let ok = true
          do {
            const query = new URLSearchParams({ limit: '50', updated_since: client.watermark })
            if (cursor !== null) query.set('cursor', cursor)
            const body = await timed('poll', `/providers?${query.toString()}`, client.key)
            if (body === null) {
              ok = false
              break
            }
            const page = JSON.parse(body) as { data: unknown[]; nextCursor: string | null }
            if (measuring) {
              pollPages++
              pollRows += page.data.length
            }
            cursor = page.nextCursor
            // Each further page is a request of its own: it waits for its slot too.
            if (cursor !== null) await pace()
          } while (cursor !== null && !stop)
          if (ok) client.watermark = new Date(runStarted - plan.overlapMs).toISOString()
        } else if (draw < plan.mix.poll + plan.mix.page || client.providerIds.length === 0) {
          await timed('page', '/providers?limit=50', client.key)
        } else {
          const id = client.providerIds[Math.floor(Math.random() * client.providerIds.length)]!
          await timed('detail', `/providers/${id}`, client.key)
        }
      } finally {
        client.busy = false
      }
    }
  }

  const running = Array.from({ length: plan.connections }, (_, n) => connection(n))
  await new Promise((r) => setTimeout(r, plan.warmupSeconds * 1000))
  measuring = true
  const started = performance.now()
  await new Promise((r) => setTimeout(r, plan.seconds * 1000))
  measuring = false
  const seconds = (performance.now() - started) / 1000
  stop = true
  await Promise.all(running)
  agent.destroy()

  const all = [...samples.poll, ...samples.page, ...samples.detail].sort((a, b) => a - b)
  const byKind = Object.fromEntries(
    (['poll', 'page', 'detail'] as const).map((kind) => {
      const sorted = [...samples[kind]].sort((a, b) => a - b)
      return [kind, { requests: sorted.length, p99Ms: round(percentile(sorted, 99)) }]
    }),
  ) as MixResult['byKind']
  return {
    requests: all.length,
    rps: Math.round(all.length / seconds),
    p50Ms: round(percentile(all, 50)),
    p99Ms: round(percentile(all, 99)),
    maxMs: round(all.at(-1) ?? 0),
    errors,
    non2xx,
    firstFailure,
    bytesPerRequest: all.length === 0 ? 0 : Math.round(bytes / all.length),
    byKind,
    rowsPerPoll: pollPages === 0 ? 0 : Math.round((pollRows / pollPages) * 100) / 100,
  }
}

if (process.argv[1]?.endsWith('client-mix.ts') === true && process.argv[2] !== undefined) {
  const plan = JSON.parse(readFileSync(process.argv[2], 'utf8')) as MixPlan
  process.stdout.write(`${JSON.stringify(await runMix(plan))}\n`)
}
