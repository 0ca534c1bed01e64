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

/** SQLite's or Node's code of an error (a full disk: SQLITE_FULL, ENOSPC), to send across threads. */
export function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === 'string' ? code : undefined
}
