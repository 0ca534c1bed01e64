/**
 * A lane, or the lanes' routing thread (route-thread.ts), stopped applying: the projector must
 * stop, committing nothing past what all applied.
 */
export class LaneFailure extends Error {
  override name = 'LaneFailure'
  constructor(
    readonly lane: number | 'routes',
    message: string,
    /** The error's code in the thread (SQLITE_FULL, ENOSPC...), when it had one. */
    readonly code?: string,
  ) {
    super(lane === 'routes' ? `routing index: ${message}` : `lane ${lane}: ${message}`)
  }
}

/** What a thread answers when a request failed (thread-channel.ts). */
export interface FailedAnswer {
  seq: number
  ok: false
  message: string
  code?: string | undefined
}

/** A failed request's answer: the error's message and code, never its stack. */
export function failedAnswer(seq: number, error: unknown): FailedAnswer {
  const message = error instanceof Error ? error.message : String(error)
  return { seq, ok: false, message, code: errorCode(error) }
}

/** SQLite's or Node's code of an error (a full disk: SQLITE_FULL, ENOSPC), to send across threads. */
export function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === 'string' ? code : undefined
}
