// Two fixed-window limits on every authenticated request, counted by @fastify/rate-limit's
// stores (in memory, or Redis when REDIS_URL is set so that several api processes share them):
// one per key, one per organization. Every authenticated response reports both, as the IETF
// httpapi draft's `RateLimit-Policy` and `RateLimit`, and the tighter one in the older
// `RateLimit-Limit`/`-Remaining`/`-Reset` headers; a 429 also carries `Retry-After`.
import rateLimit from '@fastify/rate-limit'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Redis } from 'ioredis'
import type { Logger } from '../src/log.ts'
import { ApiError } from './errors.ts'

export interface LimitState {
  readonly policy: 'key' | 'organization'
  readonly limit: number
  readonly remaining: number
  /** Seconds until the window resets. */
  readonly resetSeconds: number
  readonly windowSeconds: number
  readonly exceeded: boolean
}

/** The response headers of a set of limit states (pure). */
export function rateLimitHeaders(states: readonly LimitState[]): Record<string, string> {
  if (states.length === 0) return {}
  // The tighter policy: the one exceeded, else the one with fewer requests left, else the one
  // that resets later.
  const rank = (s: LimitState) => [s.exceeded ? 0 : 1, s.remaining, -s.resetSeconds]
  const tightest = states.reduce((a, b) => {
    const [x, y] = [rank(a), rank(b)]
    const i = x.findIndex((v, k) => v !== y[k])
    return i !== -1 && (y[i] as number) < (x[i] as number) ? b : a
  })
  const headers: Record<string, string> = {
    'ratelimit-policy': states
      .map((s) => `"${s.policy}";q=${s.limit};w=${s.windowSeconds}`)
      .join(', '),
    ratelimit: states.map((s) => `"${s.policy}";r=${s.remaining};t=${s.resetSeconds}`).join(', '),
    'ratelimit-limit': String(tightest.limit),
    'ratelimit-remaining': String(tightest.remaining),
    'ratelimit-reset': String(tightest.resetSeconds),
  }
  const exceeded = states.filter((s) => s.exceeded)
  if (exceeded.length > 0) {
    headers['retry-after'] = String(Math.max(...exceeded.map((s) => s.resetSeconds)))
  }
  return headers
}

export interface RateLimitOptions {
  perKey: number
  perOrganization: number
  windowSeconds: number
  redis: Redis | undefined
  log: Logger
  onLimited: (policy: LimitState['policy']) => void
}

export interface Limits {
  keyId: string
  organizationId: string
}

export type RateLimiter = (request: FastifyRequest, limits: Limits) => Promise<LimitState[]>

type Check = ReturnType<FastifyInstance['createRateLimit']>

/**
 * Registers the plugin (without any route-level limit of its own) and returns the check a
 * request runs after authentication: the limit states to report, or a 429 ApiError carrying
 * the headers when a limit is exceeded. A store failure (Redis down) lets the request through,
 * logged, without headers: limits protect the service, they are not worth an outage.
 */
export async function registerRateLimits(
  app: FastifyInstance,
  options: RateLimitOptions,
): Promise<RateLimiter> {
  await app.register(rateLimit, {
    global: false,
    ...(options.redis === undefined
      ? { cache: 100_000 }
      : { redis: options.redis, nameSpace: 'credentialing-api-rate-' }),
  })
  // The limiters' key generators read the ids of the request being checked.
  const pending = new WeakMap<FastifyRequest, Limits>()
  const limitsOf = (request: FastifyRequest) => pending.get(request) as Limits
  const timeWindow = options.windowSeconds * 1000
  const perKey = app.createRateLimit({
    max: options.perKey,
    timeWindow,
    keyGenerator: (request) => `key:${limitsOf(request).keyId}`,
  })
  const perOrganization = app.createRateLimit({
    max: options.perOrganization,
    timeWindow,
    keyGenerator: (request) => `organization:${limitsOf(request).organizationId}`,
  })

  const state = async (
    check: Check,
    policy: LimitState['policy'],
    request: FastifyRequest,
    increment: boolean,
  ): Promise<LimitState | undefined> => {
    const result = await check(request, { increment })
    if (result.isAllowed) return undefined
    return {
      policy,
      limit: result.max,
      remaining: result.remaining,
      resetSeconds: result.ttlInSeconds > 0 ? result.ttlInSeconds : options.windowSeconds,
      windowSeconds: options.windowSeconds,
      exceeded: result.isExceeded,
    }
  }

  let lastStoreError = 0
  return async (request, limits) => {
    pending.set(request, limits)
    try {
      const key = await state(perKey, 'key', request, true)
      // A key already over its own limit does not eat into its organization's budget.
      const organization = await state(
        perOrganization,
        'organization',
        request,
        key?.exceeded !== true,
      )
      const states = [key, organization].filter((s): s is LimitState => s !== undefined)
      const exceeded = states.find((s) => s.exceeded)
      if (exceeded !== undefined) {
        options.onLimited(exceeded.policy)
        throw new ApiError(
          'rate_limited',
          exceeded.policy === 'key'
            ? `rate limit of ${exceeded.limit} requests per ${options.windowSeconds} s for this API key exceeded`
            : `rate limit of ${exceeded.limit} requests per ${options.windowSeconds} s for this organization exceeded`,
          rateLimitHeaders(states),
        )
      }
      return states
    } catch (error) {
      if (error instanceof ApiError) throw error
      const now = Date.now()
      if (now - lastStoreError > 10_000) {
        lastStoreError = now
        options.log.error({ err: error }, 'rate-limit store failed; requests pass unlimited')
      }
      return []
    } finally {
      pending.delete(request)
    }
  }
}
