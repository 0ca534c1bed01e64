// A load of distinct pages, in a process of its own (so that the load's CPU is not the api's):
// `tsx bench/distinct-load.ts <plan.json>` sends each request to the next path of the plan's list,
// round robin across all connections from `start`, and prints one line of JSON: autocannon's
// figures in the shape its command line's --json has, and `next`, the index to start the
// following run at. The paths are many more than the page cache holds and each run resumes where
// the last one stopped, so a path comes back only after every other one: none is still cached.
// autocannon is used as a library because its command line sends one URL only.
import { readFileSync } from 'node:fs'
import autocannon from 'autocannon'

export interface DistinctPlan {
  /** http://host:port: the paths are absolute (/api/v1/...). */
  origin: string
  paths: string[]
  /** Index of the first path sent. */
  start: number
  headers: Record<string, string>
  connections: number
  seconds: number
  /**
   * Requests a second over all connections, paced evenly: run by bench/paced-load.ts, not here
   * (this load asks as fast as the server answers).
   */
  rate?: number
}

const plan = JSON.parse(readFileSync(process.argv[2] as string, 'utf8')) as DistinctPlan
let next = plan.start
const result = await new Promise<autocannon.Result>((resolve, reject) => {
  autocannon(
    {
      url: plan.origin,
      connections: plan.connections,
      duration: plan.seconds,
      headers: plan.headers,
      requests: [
        {
          method: 'GET',
          setupRequest: (request) => {
            const path = plan.paths[next % plan.paths.length] as string
            next++
            return { ...request, path }
          },
        },
      ],
    },
    (err: Error | null | undefined, done) => (err ? reject(err) : resolve(done)),
  )
})
process.stdout.write(
  `${JSON.stringify({
    requests: result.requests,
    latency: result.latency,
    throughput: result.throughput,
    errors: result.errors,
    non2xx: result.non2xx,
    next: next % plan.paths.length,
  })}\n`,
)
