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
