// The api: `buildApi(deps)` wires the public server (every /api/v1 route) and the operations
// server (health, readiness, metrics) over one replica of the data directory. Nothing here reads
// process.env or installs signal handlers: api/main.ts does.
//
// A protected request runs, in this order (spec/resources.md): replica ready (503), key (401),
// rate limits (429), organization billing (402) and switch (403 api_disabled), scope
// (403 insufficient_scope), then the route: parameters (400), id (404), page. A list page may come
// from the page cache of the key's organization file (page-cache.ts), only after all of these.
import Fastify, {
  LogController,
  type ConnectionError,
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyServerOptions,
} from 'fastify'
import { Redis } from 'ioredis'
import { createServer, STATUS_CODES } from 'node:http'
import type { Socket } from 'node:net'
import type { Scope } from '../schema/resources.ts'
import type { ApiConfig } from '../src/config.ts'
import type { Logger } from '../src/log.ts'
import { buildAdmin } from './admin.ts'
import { ResponseBuffers } from './buffers.ts'
import { authenticate, bearerKey, checkOrganization, requireScope, type Principal } from './auth.ts'
import {
  ApiError,
  errorBody,
  internalError,
  invalidRequest,
  methodNotAllowed,
  notFound,
} from './errors.ts'
import { createMetrics, type ApiMetrics } from './metrics.ts'
import { buildOpenApiDocument } from './openapi.ts'
import { queueDelayGate, registerShedding } from './overload.ts'
import { PageCache } from './page-cache.ts'
import { parseNoParams, rawQueryOf } from './params.ts'
import { freshnessHeaders } from './freshness-headers.ts'
import { rateLimitHeaders, registerRateLimits } from './rate-limit.ts'
import { RequestLogger } from './request-log.ts'
import { Replica, type ServedGeneration } from './replica.ts'
import { documentRoutes } from './routes/documents.ts'
import { enrollmentRoutes } from './routes/enrollments.ts'
import { expirableRoutes } from './routes/expirables.ts'
import { providerGroupRoutes } from './routes/provider-groups.ts'
import { providerRoutes } from './routes/providers.ts'
import { JSON_TYPE, sendJson, type Clock, type RouteContext } from './routes/shared.ts'

declare module 'fastify' {
  interface FastifyRequest {
    /** The generation this request reads, held until the response is done. */
    served: ServedGeneration | null
    principal: Principal | null
  }
  interface FastifyContextConfig {
    /** Set on every protected route: the scope it requires. */
    scope?: Scope
  }
}

export const API_PREFIX = '/api/v1'

export interface ApiDeps {
  config: ApiConfig
  logger: Logger
  clock?: Clock
  /** How often the CURRENT generation pointer is re-read, at most (default 500 ms). */
  generationCheckMs?: number
}

export interface Api {
  readonly app: FastifyInstance
  readonly admin: FastifyInstance
  readonly replica: Replica
  readonly metrics: ApiMetrics
  /** Starts both servers; resolves to their base addresses. */
  listen(): Promise<{ url: string; adminUrl: string }>
  /** Stops accepting, finishes in-flight requests, then closes files and connections. */
  close(): Promise<void>
}

function sendError(reply: FastifyReply, error: ApiError): FastifyReply {
  return reply
    .code(error.status)
    .headers(error.headers)
    .type(JSON_TYPE)
    .send(errorBody(error.code, error.message))
}

export async function buildApi(deps: ApiDeps): Promise<Api> {
  const { config, logger } = deps
  const clock = deps.clock ?? { now: () => Date.now() }
  const pages = new PageCache(config.pageCacheBytes)
  const replica = new Replica({
    dataDir: config.dataDir,
    openFilesMax: config.openFilesMax,
    log: logger,
    checkIntervalMs: deps.generationCheckMs ?? 500,
    pages,
  })
  const metrics = createMetrics({
    openFiles: () => replica.openFiles,
    pageCacheBytes: () => pages.bytes,
    stalenessMs: () => replica.stalenessMs(clock.now()),
  })
  const redis = config.redisUrl === undefined ? undefined : connectRedis(config.redisUrl, logger)
  if (redis !== undefined && !(await ready(redis, REDIS_TIMEOUTS.connectMs))) {
    logger.warn('redis not reachable at start; requests pass unlimited until it is')
  }

  const app = publicServer(config, logger, metrics)
  // First of the onRequest hooks: a request refused for overload costs nothing else.
  await registerShedding(app, config.shedding, metrics)
  const limit = await registerRateLimits(app, {
    ...config.rateLimit,
    redis,
    log: logger,
    onLimited: (policy) => metrics.rateLimited(policy),
  })
  checkEachRequest(app, { replica, limit, clock, clockSkewed: () => metrics.clockSkewed() })
  logEachResponse(app, metrics, logger)
  await registerRoutes(app, {
    cursorSecret: config.cursorSecret,
    clock,
    buffers: new ResponseBuffers(),
    cachePages: pages.enabled,
    metrics,
  })

  const admin = buildAdmin({
    logger,
    metrics,
    replica,
    maxStalenessMs: config.maxStalenessMs,
    now: () => clock.now(),
  })

  return {
    app,
    admin,
    replica,
    metrics,
    async listen() {
      const url = await app.listen({ host: config.host, port: config.port })
      const adminUrl = await admin.listen({ host: config.admin.host, port: config.admin.port })
      return { url, adminUrl }
    },
    async close() {
      await app.close()
      await admin.close()
      replica.close()
      await redis?.quit().catch(() => redis.disconnect())
    },
  }
}

/**
 * The public server: Fastify with the queue-delay gate in front, no body parsing, and every
 * failure (the framework's, an unknown path, a method other than GET) answered as an ApiError.
 */
function publicServer(config: ApiConfig, logger: Logger, metrics: ApiMetrics): FastifyInstance {
  // Typed as Fastify's logger interface so the instance is a plain FastifyInstance.
  const baseLogger: FastifyBaseLogger = logger
  const app = Fastify({
    loggerInstance: baseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    // request.log is made when a request first logs (request-log.ts).
    childLoggerFactory: (_parent, bindings, options) =>
      new RequestLogger(logger, bindings, options),
    // HEAD is not served: 405 like every method but GET.
    exposeHeadRoutes: false,
    // Requests that arrive while closing are still answered; close-with-grace bounds the wait.
    return503OnClosing: false,
    routerOptions: { maxParamLength: 1000 },
    // A URL that cannot be decoded, for instance.
    frameworkErrors: (_error, request, reply) => {
      const refused =
        request.method === 'GET'
          ? invalidRequest('the request line could not be read')
          : methodNotAllowed()
      void sendError(reply, refused)
    },
    clientErrorHandler: (error, socket) => answerClientError(error, socket, logger),
    // Fastify's own HTTP server, with the queue-delay check in front of its handler
    // (overload.ts): the refusals of a flood never reach the router.
    serverFactory: (handler, options: FastifyServerOptions) => {
      const server = createServer(queueDelayGate(config.shedding, metrics, handler))
      server.keepAliveTimeout = options.keepAliveTimeout ?? server.keepAliveTimeout
      server.requestTimeout = options.requestTimeout ?? server.requestTimeout
      server.setTimeout(options.connectionTimeout ?? 0)
      return server
    },
  })
  app.decorateRequest('served', null)
  app.decorateRequest('principal', null)

  // GET requests carry no body: whatever is sent is read and ignored, never parsed.
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', (_request, payload, done) => {
    payload.resume()
    payload.on('end', () => done(null, undefined))
    payload.on('error', (err) => done(err, undefined))
  })

  app.setErrorHandler((error: FastifyError | ApiError, request, reply) => {
    if (error instanceof ApiError) return sendError(reply, error)
    // A method with a body (QUERY) fails body checks before routing: it is still only a 405.
    if (request.method !== 'GET') return sendError(reply, methodNotAllowed())
    if (typeof error.statusCode === 'number' && error.statusCode < 500) {
      request.log.info({ code: error.code }, 'request refused by the framework')
      return sendError(reply, invalidRequest('the request could not be read'))
    }
    request.log.error({ err: error, keyId: request.principal?.keyId }, 'request failed')
    return sendError(reply, internalError())
  })

  app.setNotFoundHandler((request, reply) => {
    if (request.method !== 'GET') return sendError(reply, methodNotAllowed())
    return sendError(reply, notFound('no such path'))
  })

  // CONNECT never reaches the router: Node hands the socket over. Answer it like any other method.
  app.server.on('connect', (_request: unknown, socket: Socket) => {
    socket.end(rawErrorResponse(methodNotAllowed()))
  })
  return app
}

/**
 * The checks of a protected route, in the order of spec/resources.md (the header comment above):
 * the replica, the key, the freshness headers, the rate limits, the organization, the scope.
 */
function checkEachRequest(
  app: FastifyInstance,
  deps: {
    replica: Replica
    limit: Awaited<ReturnType<typeof registerRateLimits>>
    clock: Clock
    clockSkewed: () => void
  },
): void {
  const { replica, limit, clock, clockSkewed } = deps
  app.addHook('onRequest', async (request, reply) => {
    const scope = request.routeOptions.config.scope
    if (scope === undefined) return
    if (request.method !== 'GET') throw methodNotAllowed()
    const served = replica.acquire()
    request.served = served
    reply.raw.once('close', () => replica.release(served))
    const rawKey = bearerKey(request.headers.authorization)
    const lookup = served.lookupRaw(rawKey instanceof ApiError ? undefined : rawKey)
    const { notReady, key } = lookup
    if (notReady !== undefined) throw notReady
    if (rawKey instanceof ApiError) throw rawKey
    const now = clock.now()
    const principal = authenticate(key, now)
    if (principal instanceof ApiError) throw principal
    request.principal = principal
    // Read after the key's lookup chose the file, before the body is read from it: the instant
    // stated is one the body is complete through (docs/freshness.md).
    reply.headers(freshnessHeaders(served.freshnessFor(lookup, now, clockSkewed)))
    const states = await limit(request, principal)
    reply.headers(rateLimitHeaders(states))
    const refused = checkOrganization(principal) ?? requireScope(principal, scope)
    if (refused !== undefined) throw refused
  })
}

/** Every response counted by route and status, and logged at info with the key's id. */
function logEachResponse(app: FastifyInstance, metrics: ApiMetrics, logger: Logger): void {
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? 'unmatched'
    metrics.observeRequest(route, reply.statusCode, reply.elapsedTime / 1000)
    if (!logger.isLevelEnabled('info')) return done()
    request.log.info(
      {
        method: request.method,
        url: request.url,
        route,
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime * 100) / 100,
        // The key's id, never the key.
        keyId: request.principal?.keyId,
        organizationId: request.principal?.organizationId,
      },
      'request',
    )
    done()
  })
}

/** The /api/v1 routes, and the OpenAPI document among them. */
async function registerRoutes(app: FastifyInstance, ctx: RouteContext): Promise<void> {
  // A buffer, so that its ETag is computed once (etag.ts).
  const openApiDocument = Buffer.from(JSON.stringify(buildOpenApiDocument()))
  await app.register(
    (v1, _options, done) => {
      v1.get('/openapi.json', (request, reply) => {
        const invalid = parseNoParams(rawQueryOf(request.url))
        if (invalid !== undefined) throw invalid
        return sendJson(reply, openApiDocument, true)
      })
      providerRoutes(v1, ctx)
      providerGroupRoutes(v1, ctx)
      enrollmentRoutes(v1, ctx)
      documentRoutes(v1, ctx)
      expirableRoutes(v1, ctx)
      done()
    },
    { prefix: API_PREFIX },
  )
}

/**
 * Rate-limit counts are worth a millisecond, never a stall: commands fail at once while Redis is
 * unreachable (no offline queue, no retry on reconnect) and after `commandMs` when it hangs, and
 * the limiter lets the request through (rate-limit.ts).
 */
const REDIS_TIMEOUTS = { connectMs: 1000, commandMs: 500 } as const

function connectRedis(url: string, logger: Logger): Redis {
  const redis = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: REDIS_TIMEOUTS.connectMs,
    commandTimeout: REDIS_TIMEOUTS.commandMs,
  })
  redis.on('error', (err) => logger.warn({ err }, 'redis connection error'))
  return redis
}

/**
 * Whether the client is ready within `timeoutMs`. Without an offline queue, commands sent before
 * the first connection fail: waiting for it at start keeps the first requests counted.
 */
function ready(redis: Redis, timeoutMs: number): Promise<boolean> {
  if (redis.status === 'ready') return Promise.resolve(true)
  return new Promise((resolve) => {
    const done = (isReady: boolean) => {
      clearTimeout(timer)
      redis.off('ready', onReady)
      resolve(isReady)
    }
    const onReady = () => done(true)
    const timer = setTimeout(() => done(false), timeoutMs)
    redis.once('ready', onReady)
  })
}

/**
 * Requests Node's HTTP parser refuses never reach Fastify, so they are answered here, on the
 * socket: a method the parser does not know (`FOO / HTTP/1.1`, HPE_INVALID_METHOD) is a 405 like
 * every other method but GET, anything else unreadable a 400. Only the parser's code is logged:
 * the raw packet can hold a key.
 */
function answerClientError(error: ConnectionError, socket: Socket, logger: Logger): void {
  // A reset connection has no one left to answer.
  if (error.code === 'ECONNRESET' || socket.destroyed) return
  logger.debug({ code: error.code }, 'request refused by the HTTP parser')
  // As in Node's own handler: once a response has started on this connection, more bytes would
  // corrupt it for the client, so the connection is only closed.
  if (!socket.writable || responseStarted(socket)) {
    socket.destroy()
    return
  }
  const refused =
    error.code === 'HPE_INVALID_METHOD'
      ? methodNotAllowed()
      : invalidRequest(clientErrorMessages[error.code] ?? 'the request could not be read')
  // What follows on the connection cannot be parsed: close it once the answer is flushed.
  socket.end(rawErrorResponse(refused), () => socket.destroy())
}

const clientErrorMessages: Partial<Record<string, string>> = {
  HPE_HEADER_OVERFLOW: 'the request headers are too large',
  ERR_HTTP_REQUEST_TIMEOUT: 'the request was not received in time',
}

function responseStarted(socket: Socket): boolean {
  // Node's http server keeps the response in progress on the socket (the field its own
  // clientError handling checks).
  const response = (socket as Socket & { _httpMessage?: { headersSent?: boolean } | null })
    ._httpMessage
  return response?.headersSent === true
}

/** An error response as raw HTTP/1.1, for sockets no Fastify reply exists for. */
function rawErrorResponse(error: ApiError): string {
  const body = errorBody(error.code, error.message)
  const headers: Record<string, string> = {
    ...error.headers,
    'content-type': JSON_TYPE,
    'content-length': String(Buffer.byteLength(body)),
    connection: 'close',
  }
  const lines = Object.entries(headers).map(([name, value]) => `${headerCase(name)}: ${value}`)
  return (
    `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status] ?? ''}\r\n` +
    `${lines.join('\r\n')}\r\n\r\n${body}`
  )
}

/** `retry-after` as `Retry-After`: header names are case-insensitive, this is only customary. */
function headerCase(name: string): string {
  return name.replace(
    /(^|-)([a-z])/g,
    (_, dash: string, letter: string) => dash + letter.toUpperCase(),
  )
}
