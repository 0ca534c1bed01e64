// A load at a steady rate, in a process of its own (so that its CPU is not the server's):
// `tsx bench/paced-load.ts <plan.json>` sends the plan's paths round robin from `start`, each of
// `connections` keep-alive connections one request at a time, spaced 1 / (rate / connections)
// seconds apart, and prints one line of JSON in the shape bench/distinct-load.ts prints.
//
// Why not autocannon's -R: its rate is a budget per second and per connection. Each connection
// sends back to back until it has sent its share of the second, then waits for the next second.
// At half the saturation rate that is saturation for half of each second, and the latency it
// measured was the queue of those bursts, not the latency of a server at half its load (the
// p99 "at half saturation" of a bare route was 12-13 ms on this machine, its p50 3 ms). Paced like
// bench/client-mix.ts, which bench:tenants uses for the same figure. Latency is from a request's
// send to its last byte; a connection behind its schedule sends at once, without a burst to
// catch up.
import { readFileSync } from 'node:fs'
import http from 'node:http'
import type { DistinctPlan } from './distinct-load.ts'

/** A connection's pacing: resolves when its next request may go (at once without a rate). */
export function pacer(
  rate: number | undefined,
  connections: number,
  connection: number,
): () => Promise<void> {
  if (rate === undefined) return () => Promise.resolve()
  const interval = (1000 * connections) / rate
  // The connections' schedules are staggered across one interval, so that they do not send together.
  let next = performance.now() + (interval * connection) / connections
  return async () => {
    const now = performance.now()
    if (next < now - interval) next = now
    const wait = next - now
    next += interval
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait))
  }
}

/** The `p`th percentile of ascending `sorted` (nearest rank); 0 when empty. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number
}

/** The run's figures, in the fields of autocannon's --json that bench/http-load.ts reads. */
export interface PacedResult {
  requests: { average: number; total: number }
  latency: { p50: number; p99: number; max: number }
  throughput: { total: number }
  errors: number
  non2xx: number
  /** The index of the path the next run should start at. */
  next: number
}

export async function runPaced(plan: DistinctPlan & { rate: number }): Promise<PacedResult> {
  const origin = new URL(plan.origin)
  const agent = new http.Agent({ keepAlive: true, maxSockets: plan.connections })
  const latencies: number[] = []
  let next = plan.start
  let errors = 0
  let non2xx = 0
  let bytes = 0
  let stop = false

  /** One request; its latency in ms, and whether it was a 2xx. */
  const get = (path: string): Promise<boolean> =>
    new Promise((resolve) => {
      const request = http.get(
        { agent, host: origin.hostname, port: origin.port, path, headers: plan.headers },
        (response) => {
          response.on('data', (chunk: Buffer) => (bytes += chunk.length))
          response.on('end', () => {
            const status = response.statusCode ?? 0
            resolve(status >= 200 && status <= 299)
          })
          response.on('error', () => {
            errors++
            resolve(true)
          })
        },
      )
      request.on('error', () => {
        errors++
        resolve(true)
      })
    })

  const connection = async (n: number) => {
    const pace = pacer(plan.rate, plan.connections, n)
    while (!stop) {
      await pace()
      if (stop) break
      const path = plan.paths[next % plan.paths.length] as string
      next++
      const sent = performance.now()
      if (!(await get(path))) non2xx++
      latencies.push(performance.now() - sent)
    }
  }

  const started = performance.now()
  const running = Array.from({ length: plan.connections }, (_, n) => connection(n))
  await new Promise((resolve) => setTimeout(resolve, plan.seconds * 1000))
  stop = true
  await Promise.all(running)
  const seconds = (performance.now() - started) / 1000
  agent.destroy()
  const sorted = latencies.sort((a, b) => a - b)
  const ms = (value: number) => Math.round(value * 100) / 100
  return {
    requests: { average: sorted.length / seconds, total: sorted.length },
    latency: {
      p50: ms(percentile(sorted, 50)),
      p99: ms(percentile(sorted, 99)),
      max: ms(sorted.at(-1) ?? 0),
    },
    throughput: { total: bytes },
    errors,
    non2xx,
    next: next % plan.paths.length,
  }
}

if (process.argv[1]?.endsWith('paced-load.ts') === true && process.argv[2] !== undefined) {
  const plan = JSON.parse(readFileSync(process.argv[2], 'utf8')) as DistinctPlan
  if (plan.rate === undefined) throw new Error('a paced load needs a rate')
  process.stdout.write(`${JSON.stringify(await runPaced({ ...plan, rate: plan.rate }))}\n`)
}
