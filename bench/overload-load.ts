// The overload run of bench:api, in a process of its own (so that the load's CPU is not the api's):
// `tsx bench/overload-load.ts <url> <key> <rate> <connections> <seconds>` offers `rate`
// requests/s over `connections` keep-alive connections and prints one line of JSON:
//   served      2xx responses, and their p50/p99 in ms, from the request written to the last byte
//               of its response read (a refused request's latency is not a served one's: the
//               target is the p99 of what the api chose to serve)
//   shed        503 api_temporarily_unavailable responses with a Retry-After of whole seconds
//   wrong       any other response, or a 503 without Retry-After
//   errors      connection errors
//   unsent      requests the rate asked for while every connection was still waiting
//
// Why not autocannon, as the other runs: on two cores shared with a saturated api, autocannon's
// own event loop was the queue it measured. With 512 connections it spent about 40 µs of CPU on
// each response, its turns grew to tens of milliseconds, and a response that had arrived waited
// for them: served p50 26 ms measured by autocannon against 10.5 ms by the api's own clock, for the
// same requests. Its rate is also a budget per connection per second, spent in a burst at the
// start of each second. Here each response costs a few string searches, and requests are sent
// evenly: every millisecond, the requests due are written on idle connections. A response must
// carry Content-Length, as the api's all do; one without stops the run, saying so.
// (test/integration/bench/overload-load.test.ts checks the counts against a server's.)
import { connect, type Socket } from 'node:net'

const [url, key, rate, connectionCount, seconds] = process.argv.slice(2) as [
  string,
  string,
  string,
  string,
  string,
]
const target = new URL(url)
const request = Buffer.from(
  `GET ${target.pathname}${target.search} HTTP/1.1\r\nHost: ${target.host}\r\n` +
    `Authorization: Bearer ${key}\r\n\r\n`,
)

const servedMs: number[] = []
let shed = 0
let wrong = 0
let errors = 0
let unsent = 0

/** One keep-alive connection, one request at a time. */
class Connection {
  readonly #socket: Socket
  #received = ''
  #sentAt = 0

  constructor(onIdle: (connection: Connection) => void) {
    this.#socket = connect(Number(target.port), target.hostname, () => onIdle(this))
    this.#socket.setNoDelay(true)
    this.#socket.setEncoding('latin1')
    this.#socket.on('data', (chunk: string) => {
      this.#received += chunk
      if (this.#complete()) onIdle(this)
    })
    this.#socket.on('error', () => {
      errors++
    })
  }

  send(): void {
    this.#sentAt = performance.now()
    this.#socket.write(request)
  }

  close(): void {
    this.#socket.destroy()
  }

  /** Whether a whole response has arrived; if so, it is counted and the connection is idle. */
  #complete(): boolean {
    const headEnd = this.#received.indexOf('\r\n\r\n')
    if (headEnd < 0) return false
    const head = this.#received.slice(0, headEnd).toLowerCase()
    const length = /\r\ncontent-length: *(\d+)/.exec(head)
    if (length === null) throw new Error('a response without Content-Length')
    const end = headEnd + 4 + Number(length[1])
    if (this.#received.length < end) return false
    const status = Number(head.slice(9, 12))
    const body = this.#received.slice(headEnd + 4, end)
    this.#received = this.#received.slice(end)
    if (status < 300) servedMs.push(performance.now() - this.#sentAt)
    else if (
      status === 503 &&
      /\r\nretry-after: *\d+\r?(\n|$)/.test(head) &&
      body.includes('"api_temporarily_unavailable"')
    )
      shed++
    else wrong++
    return true
  }
}

const idle: Connection[] = []
const connections = Array.from(
  { length: Number(connectionCount) },
  () => new Connection((connection) => idle.push(connection)),
)
while (idle.length < connections.length) await new Promise((resolve) => setTimeout(resolve, 10))

const perMs = Number(rate) / 1000
const started = performance.now()
const until = started + Number(seconds) * 1000
let issued = 0
await new Promise<void>((resolve) => {
  const tick = setInterval(() => {
    const now = performance.now()
    if (now >= until) {
      clearInterval(tick)
      resolve()
      return
    }
    // Requests are due at the rate since the start; those of a late timer go out at once.
    const due = Math.floor(perMs * (now - started))
    for (; issued < due; issued++) {
      const connection = idle.pop()
      if (connection === undefined) unsent++
      else connection.send()
    }
  }, 1)
})
const elapsed = (performance.now() - started) / 1000
for (const connection of connections) connection.close()

servedMs.sort((a, b) => a - b)
const quantile = (q: number) =>
  servedMs.length === 0
    ? 0
    : (servedMs[Math.min(servedMs.length - 1, Math.floor(q * servedMs.length))] as number)
process.stdout.write(
  `${JSON.stringify({
    offeredRps: Number(rate),
    servedRps: Math.round(servedMs.length / elapsed),
    served: servedMs.length,
    servedP50Ms: Math.round(quantile(0.5) * 10) / 10,
    servedP99Ms: Math.round(quantile(0.99) * 10) / 10,
    shed,
    wrong,
    errors,
    unsent,
  })}\n`,
)
