// Load shedding. Under more load than it can serve, a Node server does not refuse work: requests
// wait in the sockets and the event loop, and every one of them, served in the end, is late.
// The api refuses instead, cheaply, before any key lookup or file read: 503
// `api_temporarily_unavailable` with Retry-After, so that the requests it does serve stay fast
// and clients back off. Two signals, either one enough:
//
// - event-loop delay (@fastify/under-pressure): how late a timer fires is how long a request
//   that has just arrived waits for the loop. The plugin averages it over each sample interval;
//   while the last interval's mean is over the threshold, every request is refused.
// - requests in flight: requests begun and not yet answered. The handlers are synchronous, so
//   this stays near 1 while the loop keeps up; it grows when requests wait on something else
//   (a stalled Redis behind the shared rate limits, slow readers of large pages), which the
//   loop's delay does not show.
//
// The operations server (health, readiness, metrics) is a separate Fastify instance and is never
// shed: an orchestrator must still see the process alive and ready while it sheds.
import underPressure from '@fastify/under-pressure'
import type { FastifyInstance } from 'fastify'
import type { ApiConfig } from '../src/config.ts'
import { ApiError } from './errors.ts'
import type { ApiMetrics } from './metrics.ts'

export type ShedReason = 'event_loop_delay' | 'in_flight'

/** The refusal of a shed request (its status and body are mapped with every other error's). */
export function overloaded(retryAfterSeconds: number): ApiError {
  return new ApiError(
    'api_temporarily_unavailable',
    'the server is over capacity; retry after the time in Retry-After',
    { 'retry-after': String(retryAfterSeconds) },
  )
}

/**
 * Registers both checks on `app` as its first onRequest hooks, so that a refused request costs
 * nothing else. With both limits at 0 nothing is registered.
 */
export async function registerShedding(
  app: FastifyInstance,
  config: ApiConfig['shedding'],
  metrics: Pick<ApiMetrics, 'shed'>,
): Promise<void> {
  const refusal = overloaded(config.retryAfterSeconds)
  if (config.maxEventLoopDelayMs > 0) {
    // Start-up (modules compiled, files opened) holds the loop far longer than any request: the
    // samples taken until two intervals after the server listens would refuse its first
    // requests, so until then the delay is not acted on.
    let armedAt = Number.POSITIVE_INFINITY
    app.addHook('onListen', (done) => {
      armedAt = performance.now() + 2 * config.sampleIntervalMs
      done()
    })
    await app.register(underPressure, {
      maxEventLoopDelay: config.maxEventLoopDelayMs,
      sampleInterval: config.sampleIntervalMs,
      // Rejecting hands the refusal to the app's error handler, which maps every ApiError;
      // returning nothing lets the request through.
      pressureHandler: () => {
        if (performance.now() < armedAt) return undefined
        metrics.shed('event_loop_delay')
        return Promise.reject(refusal)
      },
    })
  }
  if (config.maxInFlight > 0) {
    let inFlight = 0
    const done = () => {
      inFlight--
    }
    app.addHook('onRequest', (_request, reply, next) => {
      if (inFlight >= config.maxInFlight) {
        metrics.shed('in_flight')
        next(refusal)
        return
      }
      inFlight++
      // 'close' comes once the response is written or the connection is gone, whichever first.
      reply.raw.once('close', done)
      next()
    })
  }
}
