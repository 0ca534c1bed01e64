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

declare module 'fastify' {
  interface FastifyRequest {
    /** The ids the rate limits of the request being checked count against (registerRateLimits). */
    rateLimitIds: Limits | null
  }
}

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
  const [first] = states
  if (first === undefined) return {}
  // Built with plain loops and string concatenation: this runs on every authenticated request,
  // and intermediate arrays and closures were a tenth of what a cached page allocates.
  let tightest = first
  let policies = ''
  let current = ''
  let retryAfter: number | undefined
  for (const s of states) {
    if (s !== first && tighter(s, tightest)) tightest = s
    const separator = s === first ? '' : ', '
    policies += `${separator}"${s.policy}";q=${s.limit};w=${s.windowSeconds}`
    current += `${separator}"${s.policy}";r=${s.remaining};t=${s.resetSeconds}`
    if (s.exceeded) retryAfter = Math.max(retryAfter ?? s.resetSeconds, s.resetSeconds)
  }
  const headers: Record<string, string> = {
    'ratelimit-policy': policies,
    ratelimit: current,
    'ratelimit-limit': String(tightest.limit),
    'ratelimit-remaining': String(tightest.remaining),
    'ratelimit-reset': String(tightest.resetSeconds),
  }
  if (retryAfter !== undefined) headers['retry-after'] = String(retryAfter)
  return headers
}

/**
 * Whether `b` is the tighter policy than `a`: the one exceeded, else the one with fewer requests
 * left, else the one that resets later (on a tie, `a` stays).
 */
function tighter(b: LimitState, a: LimitState): boolean {
  if (a.exceeded !== b.exceeded) return b.exceeded
  if (a.remaining !== b.remaining) return b.remaining < a.remaining
  return b.resetSeconds > a.resetSeconds
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
  // The limiters' key generators read the ids of the request being checked, from a field
  // decorated on every request (a WeakMap entry per request cost the collector more).
  app.decorateRequest('rateLimitIds', null)
  const limitsOf = (request: FastifyRequest) => request.rateLimitIds as Limits
  const timeWindow = options.windowSeconds * 1000
  const perKey = app.createRateLimit({
    max: options.perKey,
    timeWindow,
    keyGenerator: (request) => storeKey(keyNames, 'key:', limitsOf(request).keyId),
  })
  const perOrganization = app.createRateLimit({
    max: options.perOrganization,
    timeWindow,
    keyGenerator: (request) =>
      storeKey(organizationNames, 'organization:', limitsOf(request).organizationId),
  })

  const state = (
    result: Awaited<ReturnType<Check>>,
    policy: LimitState['policy'],
  ): LimitState | undefined => {
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
    request.rateLimitIds = limits
    try {
      const key = state(await perKey(request, INCREMENT), 'key')
      // A key already over its own limit does not eat into its organization's budget.
      const organization = state(
        await perOrganization(request, key?.exceeded === true ? READ_ONLY : INCREMENT),
        'organization',
      )
      const states: LimitState[] = []
      if (key !== undefined) states.push(key)
      if (organization !== undefined) states.push(organization)
      const exceeded =
        key?.exceeded === true ? key : organization?.exceeded === true ? organization : undefined
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
      request.rateLimitIds = null
    }
  }
}

const INCREMENT = { increment: true } as const
const READ_ONLY = { increment: false } as const

/** Store keys by id, made once: a new string per request is garbage the next scavenge copies. */
const keyNames = new Map<string, string>()
const organizationNames = new Map<string, string>()
const STORE_KEYS_MAX = 10_000

function storeKey(names: Map<string, string>, prefix: string, id: string): string {
  let name = names.get(id)
  if (name === undefined) {
    if (names.size >= STORE_KEYS_MAX) names.clear()
    name = prefix + id
    names.set(id, name)
  }
  return name
}
