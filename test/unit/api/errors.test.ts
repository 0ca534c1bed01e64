import { describe, expect, it } from 'vitest'
import { ApiError, errorBody, errorStatus, temporarilyUnavailable } from '../../../api/errors.ts'

describe('errors', () => {
  it('maps every code of spec/api-v1.md section 7 to its status', () => {
    expect(errorStatus).toEqual({
      invalid_request: 400,
      invalid_key: 401,
      payment_past_due: 402,
      subscription_inactive: 402,
      insufficient_scope: 403,
      api_disabled: 403,
      not_found: 404,
      method_not_allowed: 405,
      rate_limited: 429,
      internal_error: 500,
      api_unavailable: 503,
      api_temporarily_unavailable: 503,
    })
  })

  it('is a value with a code, a status and headers', () => {
    const error = new ApiError('not_found', 'no such resource')
    expect(error.status).toBe(404)
    expect(JSON.parse(errorBody(error.code, error.message))).toEqual({
      error: { code: 'not_found', message: 'no such resource' },
    })
    expect(temporarilyUnavailable('later').headers['retry-after']).toMatch(/^\d+$/)
  })
})
