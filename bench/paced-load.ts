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
// Why not Node's http client or undici: on two cores the load shares the machine with the server.
// They cost 0.26 and 0.17-0.19 ms of CPU a request of a 130 KB page, and neither kept 5,000
// requests/s with a timer per connection; their own queue made a bare route's p99 10-12 ms. This
// client writes a request's bytes to a socket and counts the response's by its Content-Length:
// 0.07 ms a request, as autocannon, and the same route's p99 1.7-2.0 ms.
//
// The run's first second is a warm-up at the same rate, not measured.
// One schedule for the whole load: every millisecond, the requests due by then become ready, and
// each goes out on an idle connection. A request is timed from the moment it was found due, so
// the wait for a free connection (the server's slowness) counts and the timer's granularity does
// not. HTTP/1.1 responses with a Content-Length only (both servers of bench:api send one).
import { readFileSync } from 'node:fs'
import net from 'node:net'
import type { DistinctPlan } from './distinct-load.ts'

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

/** The `p`th percentile of ascending `sorted` (nearest rank); 0 when empty. */
function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number
}

const HEAD_END = Buffer.from('\r\n\r\n')
const WARM_UP_MS = 1000

/** One keep-alive connection and the response it is reading. */
interface Connection {
  socket: net.Socket
  /** The response's head so far, until its end is seen. */
  head: Buffer | undefined
  /** Body bytes still to come (-1: reading the head). */
  remaining: number
  status: number
  /** When the request in flight was found due (performance.now()). */
  dueAt: number
}

export async function runPaced(plan: DistinctPlan & { rate: number }): Promise<PacedResult> {
  const origin = new URL(plan.origin)
  const port = Number(origin.port)
  const headerLines = Object.entries(plan.headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('')
  const requestOf = (path: string) =>
    Buffer.from(`GET ${path} HTTP/1.1\r\nHost: ${origin.host}\r\n${headerLines}\r\n`, 'latin1')
  const latencies: number[] = []
  const idle: Connection[] = []
  /** When each ready request was found due, oldest first. */
  const ready: number[] = []
  let next = plan.start
  let measured = false
  let errors = 0
  let non2xx = 0
  let bytes = 0
  let answered = 0

  const send = () => {
    while (ready.length > 0 && idle.length > 0) {
      const connection = idle.pop() as Connection
      connection.dueAt = ready.shift() as number
      connection.socket.write(requestOf(plan.paths[next % plan.paths.length] as string))
      next++
    }
  }

  const finish = (connection: Connection) => {
    answered++
    if (measured) {
      latencies.push(performance.now() - connection.dueAt)
      if (connection.status < 200 || connection.status > 299) non2xx++
    }
    connection.remaining = -1
    idle.push(connection)
    send()
  }

  const read = (connection: Connection, chunk: Buffer) => {
    if (measured) bytes += chunk.length
    if (connection.remaining >= 0) {
      connection.remaining -= chunk.length
    } else {
      const head = connection.head === undefined ? chunk : Buffer.concat([connection.head, chunk])
      const end = head.indexOf(HEAD_END)
      if (end < 0) {
        connection.head = head
        return
      }
      connection.head = undefined
      const text = head.subarray(0, end).toString('latin1')
      connection.status = Number(text.slice(9, 12))
      const length = /\r\ncontent-length: *(\d+)/i.exec(text)?.[1]
      if (length === undefined && connection.status !== 304 && connection.status !== 204) {
        throw new Error(`a response without Content-Length: ${text.split('\r\n')[0] ?? ''}`)
      }
      connection.remaining = Number(length ?? 0) - (head.length - end - HEAD_END.length)
    }
    if (connection.remaining === 0) finish(connection)
  }

  const connect = (): Promise<Connection> =>
    new Promise((resolve, reject) => {
      const socket = net.connect(port, origin.hostname)
      socket.setNoDelay(true)
      const connection: Connection = { socket, head: undefined, remaining: -1, status: 0, dueAt: 0 }
      socket.on('data', (chunk: Buffer) => read(connection, chunk))
      socket.once('connect', () => resolve(connection))
      socket.on('error', (error) => {
        errors++
        reject(error)
      })
    })

  const connections = await Promise.all(Array.from({ length: plan.connections }, connect))
  idle.push(...connections)
  const started = performance.now()
  let due = 0
  const schedule = setInterval(() => {
    const now = performance.now()
    const dueNow = Math.floor(((now - started) * plan.rate) / 1000)
    for (; due < dueNow; due++) ready.push(now)
    send()
  }, 1)
  // A second at the rate first, not measured: the client's own code is cold in a new process.
  await new Promise((resolve) => setTimeout(resolve, WARM_UP_MS))
  measured = true
  const measuredFrom = performance.now()
  await new Promise((resolve) => setTimeout(resolve, plan.seconds * 1000))
  clearInterval(schedule)
  measured = false
  const seconds = (performance.now() - measuredFrom) / 1000
  const behind = ready.length
  for (const connection of connections) connection.socket.destroy()
  const sorted = latencies.sort((a, b) => a - b)
  const ms = (value: number) => Math.round(value * 100) / 100
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
