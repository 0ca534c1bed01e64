// A load at a steady rate, in a process of its own (so that its CPU is not the server's):
// `tsx bench/paced-load.ts <plan.json>` sends the plan's paths round robin from `start` at
// `rate` requests a second, spread evenly over the run, over `connections` keep-alive
// connections, and prints one line of JSON in the shape bench/distinct-load.ts prints.
//
// Why not autocannon's -R: its rate is a budget per connection and second. Each connection sends
// back to back until it has sent its share of the second, then waits for the next one. At half
// the saturation rate that is saturation for half of each second, and the p99 it measured was
// the queue of those bursts. A bare route at 1,360 requests/s, in the same run: p99 11-12 ms and
// p50 3 ms by -R, 0.8-1.1 ms and 0.3 ms paced evenly.
//
// The connections and the schedule are bench/raw-http.ts's (why not Node's http client, undici or
// autocannon: there). A request is timed from the moment it was found due, so the wait for a free
// connection (the server's slowness) counts and the timer's granularity does not. The run's first
// second is a warm-up at the same rate, not measured.
import { readFileSync } from 'node:fs'
import type { DistinctPlan } from './distinct-load.ts'
import { RawConnection, requestBytes, schedule } from './raw-http.ts'
import { percentile } from './wait.ts'

const WARM_UP_MS = 1000

/** The run's figures, in the fields of autocannon's --json that bench/http-load.ts reads. */
export interface PacedResult {
  /** `sent`: every request answered, the warm-up's included (the CPU of the run is theirs). */
  requests: { average: number; total: number; sent: number }
  latency: { p50: number; p99: number; max: number }
  throughput: { total: number }
  errors: number
  non2xx: number
  /** Requests still waiting for a connection when the run ended: the rate was not kept. */
  behind: number
  /** The index of the path the next run should start at. */
  next: number
}

export async function runPaced(plan: DistinctPlan & { rate: number }): Promise<PacedResult> {
  const origin = new URL(plan.origin)
  const latencies: number[] = []
  const idle: RawConnection[] = []
  /** When each request waiting for a connection was found due, oldest first. */
  const ready: number[] = []
  let next = plan.start
  let measured = false
  let answered = 0
  let errors = 0
  let non2xx = 0
  let bytes = 0

  const send = () => {
    while (ready.length > 0 && idle.length > 0) {
      const connection = idle.pop() as RawConnection
      connection.startedAt = ready.shift() as number
      const path = plan.paths[next % plan.paths.length] as string
      connection.send(requestBytes(origin, path, plan.headers))
      next++
    }
  }
  const connections = Array.from(
    { length: plan.connections },
    () =>
      new RawConnection(
        origin,
        {
          ready: (connection) => {
            idle.push(connection)
            send()
          },
          response: (connection, { status }, size) => {
            answered++
            if (!measured) return
            latencies.push(performance.now() - connection.startedAt)
            bytes += size
            if (status < 200 || status > 299) non2xx++
          },
          error: () => errors++,
        },
        { keepBodies: false },
      ),
  )
  while (idle.length < connections.length) await new Promise((resolve) => setTimeout(resolve, 10))

  const run = schedule(plan.rate, WARM_UP_MS / 1000 + plan.seconds, (count, now) => {
    for (let n = 0; n < count; n++) ready.push(now)
    send()
  })
  await new Promise((resolve) => setTimeout(resolve, WARM_UP_MS))
  measured = true
  const measuredFrom = performance.now()
  await run
  measured = false
  const seconds = (performance.now() - measuredFrom) / 1000
  const behind = ready.length
  for (const connection of connections) connection.close()
  const sorted = latencies.sort((a, b) => a - b)
  // No response measured: 0, not NaN (which JSON would write as null).
  const ms = (value: number) => (Number.isNaN(value) ? 0 : Math.round(value * 100) / 100)
  return {
    requests: { average: sorted.length / seconds, total: sorted.length, sent: answered },
    latency: {
      p50: ms(percentile(sorted, 50)),
      p99: ms(percentile(sorted, 99)),
      max: ms(sorted.at(-1) ?? 0),
    },
    throughput: { total: bytes },
    errors,
    non2xx,
    behind,
    next: next % plan.paths.length,
  }
}

if (process.argv[1]?.endsWith('paced-load.ts') === true && process.argv[2] !== undefined) {
  const plan = JSON.parse(readFileSync(process.argv[2], 'utf8')) as DistinctPlan
  if (plan.rate === undefined) throw new Error('a paced load needs a rate')
  const result = await runPaced({ ...plan, rate: plan.rate })
  if (result.behind > 0) {
    process.stderr.write(
      `paced-load: ${result.behind} requests were still waiting for a connection at the end: ` +
        `the server did not keep up with ${plan.rate} requests/s\n`,
    )
  }
  process.stdout.write(`${JSON.stringify(result)}\n`)
}
