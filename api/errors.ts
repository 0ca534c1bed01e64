// Errors are values: a stable code, a message safe to show a customer, and (rarely) headers.
// The HTTP status of each code is decided here and nowhere else.

export const errorStatus = {
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
} as const

export type ErrorCode = keyof typeof errorStatus

export const errorCodes = Object.keys(errorStatus) as ErrorCode[]

export class ApiError extends Error {
  override name = 'ApiError'
  readonly code: ErrorCode
  readonly headers: Readonly<Record<string, string>>

  constructor(code: ErrorCode, message: string, headers: Record<string, string> = {}) {
    super(message)
    this.code = code
    this.headers = headers
  }

  get status(): number {
    return errorStatus[this.code]
  }
}

export function isApiError(value: unknown): value is ApiError {
  return value instanceof ApiError
}

/** The error envelope as JSON text. */
export function errorBody(code: ErrorCode, message: string): string {
  return JSON.stringify({ error: { code, message } })
}

export const invalidRequest = (message: string) => new ApiError('invalid_request', message)
export const methodNotAllowed = () =>
  new ApiError('method_not_allowed', 'only GET is supported', { allow: 'GET' })
export const notFound = (message = 'no such resource') => new ApiError('not_found', message)
export const internalError = () =>
  new ApiError('internal_error', 'the server failed to answer this request')

/** Seconds a client should wait before retrying a replica that is not ready yet. */
export const RETRY_AFTER_NOT_READY_SECONDS = 5

export const temporarilyUnavailable = (message: string) =>
  new ApiError('api_temporarily_unavailable', message, {
    'retry-after': String(RETRY_AFTER_NOT_READY_SECONDS),
  })
export const unavailable = (message: string) => new ApiError('api_unavailable', message)
