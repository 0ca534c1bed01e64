// The overload run of bench:api, in a process of its own (so that the load's CPU is not the api's):
// `tsx bench/overload-load.ts <url> <key> <rate> <connections> <seconds>` offers `rate`
// requests/s over `connections` connections and prints one line of JSON:
//   served      2xx responses, and their p50/p99 in ms (a refused request's latency is not a
//               served one's: the target is the p99 of what the api chose to serve)
//   shed        503 api_temporarily_unavailable responses with a Retry-After of whole seconds
//   wrong       any other non-2xx response, or a 503 without Retry-After
//   errors      connection errors, timeouts included
// autocannon is used as a library here because its command line reports one histogram for all
// responses and no header: it cannot tell a served request's latency from a refused one's, nor
// check Retry-After.
import autocannon from 'autocannon'

const [url, key, rate, connections, seconds] = process.argv.slice(2) as [
  string,
  string,
  string,
  string,
  string,
]

const servedMs: number[] = []
let shed = 0
let wrong = 0
const result = await new Promise<autocannon.Result>((resolve, reject) => {
  const instance = autocannon(
    {
      url,
      connections: Number(connections),
      duration: Number(seconds),
      overallRate: Number(rate),
      headers: { authorization: `Bearer ${key}` },
      requests: [
        {
          method: 'GET',
          onResponse: (status, body, _context, headers) => {
            if (status < 300) return
            const retryAfter = (headers as Record<string, string | undefined>)['retry-after']
            const refusal =
              status === 503 &&
              retryAfter !== undefined &&
              /^\d+$/.test(retryAfter) &&
              body.includes('"api_temporarily_unavailable"')
            if (refusal) shed++
            else wrong++
          },
        },
      ],
    },
    (err: Error | null | undefined, done) => (err ? reject(err) : resolve(done)),
  )
  instance.on('response', (_client: unknown, status: number, _bytes: number, ms: number) => {
    if (status < 300) servedMs.push(ms)
  })
})

servedMs.sort((a, b) => a - b)
const quantile = (q: number) =>
  servedMs.length === 0
    ? 0
    : (servedMs[Math.min(servedMs.length - 1, Math.floor(q * servedMs.length))] as number)
process.stdout.write(
  `${JSON.stringify({
    offeredRps: Number(rate),
    servedRps: Math.round(servedMs.length / result.duration),
    served: servedMs.length,
    servedP50Ms: Math.round(quantile(0.5) * 10) / 10,
    servedP99Ms: Math.round(quantile(0.99) * 10) / 10,
    shed,
    wrong,
    errors: result.errors,
  })}\n`,
)
