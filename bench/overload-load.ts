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
// The connections and the schedule are bench/raw-http.ts's (why not autocannon: there). A request
// due while every connection is still waiting is not sent, and counted as unsent.
// (test/integration/bench/overload-load.test.ts checks the counts against a server's.)
import { RawConnection, requestBytes, schedule } from './raw-http.ts'

const [url, key, rate, connectionCount, seconds] = process.argv.slice(2) as [
  string,
  string,
  string,
  string,
  string,
]
const target = new URL(url)
const request = requestBytes(target, `${target.pathname}${target.search}`, {
  Authorization: `Bearer ${key}`,
})

const servedMs: number[] = []
let shed = 0
let wrong = 0
let errors = 0
let unsent = 0

const idle: RawConnection[] = []
const connections = Array.from(
  { length: Number(connectionCount) },
  () =>
    new RawConnection(
      target,
      {
        ready: (connection) => idle.push(connection),
        response: (connection, { status, head, body }) => {
          if (status < 300) servedMs.push(performance.now() - connection.startedAt)
          else if (
            status === 503 &&
            /\r\nretry-after: *\d+\r?(\n|$)/.test(head) &&
            body?.includes('"api_temporarily_unavailable"') === true
          )
            shed++
          else wrong++
        },
        error: () => errors++,
      },
      { keepBodies: true },
    ),
)
while (idle.length < connections.length) await new Promise((resolve) => setTimeout(resolve, 10))

const elapsed = await schedule(Number(rate), Number(seconds), (count) => {
  for (let n = 0; n < count; n++) {
    const connection = idle.pop()
    if (connection === undefined) {
      unsent++
    } else {
      connection.startedAt = performance.now()
      connection.send(request)
    }
  }
})
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
