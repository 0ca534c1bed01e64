// Load shedding. Under more load than it can serve, a Node server does not refuse work: requests
// wait in the sockets and the event loop, and every one of them, served in the end, is late.
// The api refuses instead, cheaply, before any key lookup or file read: 503
// `api_temporarily_unavailable` with Retry-After, so that the requests it does serve stay fast
// and clients back off. Three signals, any one enough:
//
// - event-loop delay (@fastify/under-pressure): how late a timer fires is how long a request
//   that has just arrived waits for the loop. The plugin averages it over each sample interval;
//   while the last interval's mean is over the threshold, every request is refused.
// - queue delay: how long a request can have waited in this process before it was read. A Node
//   server reads every connection that is ready in one turn of its event loop and runs each
//   request to its end before reading the next, so under a flood the last request of a turn
//   waits for all the others, and the requests that arrive meanwhile wait in their sockets for
//   the whole turn, while a sampled mean of the loop's delay stays low (timers fire late only
//   once a turn). A request is refused when the time it can have waited (LoopTurn) is over the
//   limit. The refusals are made in front of Fastify, as cheaply as Node allows, so that a turn
//   of them ends soon and the next one serves again.
// - requests in flight: requests begun and not yet answered. The handlers are synchronous, so
//   this stays near 1 while the loop keeps up; it grows when requests wait on something else
//   (a stalled Redis behind the shared rate limits, slow readers of large pages), which the
//   loop's delay does not show.
//
// The operations server (health, readiness, metrics) is a separate Fastify instance and is never
// shed: an orchestrator must still see the process alive and ready while it sheds.
import underPressure from '@fastify/under-pressure'
import type { FastifyInstance } from 'fastify'
import type { RequestListener } from 'node:http'
import type { ApiConfig } from '../src/config.ts'
import { ApiError, errorBody } from './errors.ts'
import type { ApiMetrics } from './metrics.ts'
import { JSON_TYPE } from './routes/shared.ts'

/** The refusal of a shed request (its status and body are mapped with every other error's). */
export function overloaded(retryAfterSeconds: number): ApiError {
  return new ApiError(
    'api_temporarily_unavailable',
    'the server is over capacity; retry after the time in Retry-After',
    { 'retry-after': String(retryAfterSeconds) },
  )
}

/** Turns this close together are back to back: the loop went from one to the next at once. */
const BACK_TO_BACK_MS = 1

/**
 * The turns of the event loop requests are read in, and how long a request can have waited before
 * it was read. A turn starts with its first request and ends when setImmediate runs, once the
 * loop has handled every connection it found ready. A request read in a turn was not ready when
 * the loop looked before the turn before it (it would have been read then), so when the two
 * turns run back to back it has waited at most since that turn began: its own turn's requests
 * before it, and the turn before, which it may have waited through in its socket. After an idle
 * loop, or after a turn that served nothing (its requests refused, so as not to refuse forever),
 * only its own turn counts.
 */
export class LoopTurn {
  readonly #clock: () => number
  #startedAt: number | undefined
  #origin = 0
  #served = false
  #previous = { startedAt: 0, endedAt: Number.NEGATIVE_INFINITY, served: false }
  readonly #end = () => {
    this.#previous = {
      startedAt: this.#startedAt ?? 0,
      endedAt: this.#clock(),
      served: this.#served,
    }
    this.#startedAt = undefined
    this.#served = false
  }

  constructor(clock: () => number = () => performance.now()) {
    this.#clock = clock
  }

  /** How long the request being read can have waited to be read (ms). */
  waited(): number {
    const now = this.#clock()
    if (this.#startedAt === undefined) {
      const previous = this.#previous
      const backToBack = previous.served && now - previous.endedAt < BACK_TO_BACK_MS
      this.#origin = backToBack ? previous.startedAt : now
      this.#startedAt = now
      setImmediate(this.#end)
    }
    return now - this.#origin
  }

  /** The request just read is served, not refused. */
  serve(): void {
    this.#served = true
  }
}

/**
 * The queue-delay check, in front of Fastify: `handler` (Fastify's) is called for the requests
 * that pass, the others are answered here. Under a flood most requests are refused, so a refusal
 * must cost as little as it can: here it costs Node's parse and a fixed response, not Fastify's
 * routing, hooks and error handler as well. Counted as the others are: `api_shed_total`, and
 * `api_http_requests_total` with the route `unrouted`. With the limit at 0, `handler` itself.
 */
export function queueDelayGate(
  config: ApiConfig['shedding'],
  metrics: Pick<ApiMetrics, 'shed' | 'observeRequest'>,
  handler: RequestListener,
): RequestListener {
  if (config.maxQueueDelayMs <= 0) return handler
  const turn = new LoopTurn()
  const refusal = overloaded(config.retryAfterSeconds)
  const body = errorBody(refusal.code, refusal.message)
  const headers = {
    ...refusal.headers,
    'content-type': JSON_TYPE,
    'content-length': String(Buffer.byteLength(body)),
  }
  return (request, response) => {
    if (turn.waited() <= config.maxQueueDelayMs) {
      turn.serve()
      handler(request, response)
      return
    }
    metrics.shed('queue_delay')
    metrics.observeRequest('unrouted', refusal.status, 0)
    // A GET has no body; whatever was sent is read and dropped, so the connection stays usable.
    request.resume()
    response.writeHead(refusal.status, headers).end(body)
  }
}

/**
 * Registers the other checks on `app` as its first onRequest hooks, so that a refused request
 * costs nothing else. With both limits at 0 nothing is registered.
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
