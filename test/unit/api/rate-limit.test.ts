import { describe, expect, it } from 'vitest'
import { type LimitState, rateLimitHeaders } from '../../../api/rate-limit.ts'

const key: LimitState = {
  policy: 'key',
  limit: 120,
  remaining: 100,
  resetSeconds: 30,
  windowSeconds: 60,
  exceeded: false,
}
const organization: LimitState = { ...key, policy: 'organization', limit: 600, remaining: 40 }

describe('rateLimitHeaders', () => {
  it('reports both policies in the IETF draft headers and the tighter in the older ones', () => {
    expect(rateLimitHeaders([key, organization])).toEqual({
      'ratelimit-policy': '"key";q=120;w=60, "organization";q=600;w=60',
      ratelimit: '"key";r=100;t=30, "organization";r=40;t=30',
      'ratelimit-limit': '600',
      'ratelimit-remaining': '40',
      'ratelimit-reset': '30',
    })
  })
  it('adds Retry-After when a limit is exceeded', () => {
    const headers = rateLimitHeaders([{ ...key, remaining: 0, exceeded: true, resetSeconds: 12 }])
    expect(headers['retry-after']).toBe('12')
    expect(headers['ratelimit-remaining']).toBe('0')
  })
  it('sends nothing without states', () => {
    expect(rateLimitHeaders([])).toEqual({})
  })
})

describe('the tighter policy', () => {
  it('is the exceeded one, even when another has as few requests left', () => {
    const headers = rateLimitHeaders([
      { ...key, remaining: 0 },
      { ...organization, remaining: 0, exceeded: true, resetSeconds: 5 },
    ])
    expect(headers['ratelimit-limit']).toBe('600')
    expect(headers['retry-after']).toBe('5')
  })
})
