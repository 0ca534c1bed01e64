// A full disk under DATA_DIR is a condition to wait out, not a crash: the projector stops
// applying (committing no offset past what its files hold), says so, and applies again from the
// committed offsets once space returns (projector.ts). These are its pure parts and its probe.
import { statfsSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'

/** SQLite's SQLITE_FULL (better-sqlite3's `code`, kept across a lane's thread) or Node's ENOSPC. */
export function isDiskFull(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false
  const code = (error as { code?: unknown }).code
  return code === 'SQLITE_FULL' || code === 'ENOSPC'
}

/** Bytes an unprivileged process may still write on the filesystem holding `path`. */
export function freeBytes(path: string): number {
  const stats = statfsSync(path)
  return stats.bavail * stats.bsize
}

/**
 * Space enough to try again: some grew back since the failure. Less than this, and a retry would
 * reopen every file, rejoin the consumer group and fail at its first commit.
 */
export function spaceReturned(freeAtFailure: number, freeNow: number): boolean {
  return freeNow >= freeAtFailure + RESUME_MARGIN_BYTES
}

export const RESUME_MARGIN_BYTES = 8 * 1024 * 1024

/**
 * Resolves once space has returned under `path` (checked every `intervalMs`), or once
 * `retryAfterMs` has passed whatever the probe says (space may be enough though it did not
 * grow: what filled the disk was the projector's own transaction, rolled back); false if
 * `signal` aborts first.
 */
export async function waitForSpace(
  path: string,
  freeAtFailure: number,
  options: { signal: AbortSignal; intervalMs?: number; retryAfterMs?: number },
): Promise<boolean> {
  const until = Date.now() + (options.retryAfterMs ?? 300_000)
  while (!options.signal.aborted) {
    if (Date.now() >= until || spaceReturned(freeAtFailure, freeBytes(path))) return true
    await sleep(options.intervalMs ?? 2_000, undefined, { signal: options.signal }).catch(
      () => undefined,
    )
  }
  return false
}
