// Feeds the freshness tracker (freshness.ts) what it needs to prove an instant: the change
// topics' ends when a candidate is due for them, and, after every files' commit, how far the
// committed files reach. Publishes whenever the tracker's record changes.
import type { Logger } from 'pino'
import type { FreshnessTracker, PartitionEnds } from './freshness.ts'

/** A failed fetch of the change topics' ends is tried again after this. */
const RETRY_MS = 1_000

export interface FreshnessPumpOptions {
  tracker: FreshnessTracker
  publish(): void
  /** The change topics' ends now. */
  ends(): Promise<Map<string, PartitionEnds>>
  /** Where a partition's committed files reach (positions.ts `visibleAt`). */
  visibleAt: (key: string) => bigint | undefined
  /** Until the catch-up, committed mirror rows are not yet what the api serves: nothing is proved. */
  caughtUp(): boolean
  logger: Logger
}

export class FreshnessPump {
  #timer: NodeJS.Timeout | undefined
  #stopped = false

  constructor(readonly options: FreshnessPumpOptions) {}

  /** Fetches the ends a candidate is due for, or waits until it is. */
  pump(): void {
    if (this.#stopped) return
    clearTimeout(this.#timer)
    const { tracker, logger } = this.options
    const { due, msUntil } = tracker.endsDue(Date.now())
    if (due) {
      this.options.ends().then(
        (ends) => {
          tracker.setEnds(ends)
          this.advance()
          this.pump()
        },
        (error: unknown) => {
          tracker.setEnds(undefined)
          logger.debug({ err: error }, 'could not fetch the change topics ends for freshness')
          this.#wake(RETRY_MS)
        },
      )
    } else if (msUntil !== undefined) {
      this.#wake(msUntil)
    }
  }

  /** Proves what the committed files allow, and publishes it if it moved. */
  advance(): void {
    if (!this.options.caughtUp()) return
    if (this.options.tracker.advance(this.options.visibleAt)) this.options.publish()
  }

  /**
   * The group in hand is routed (freshness.ts `claimUntouched`); publishes if the claim moved.
   * Its caller claims only once caught up, as nothing is proved before.
   */
  claimUntouched(
    reach: (key: string) => bigint | undefined,
    touched: ReadonlySet<string> | undefined,
  ): void {
    if (this.options.tracker.claimUntouched(reach, touched)) this.options.publish()
  }

  stop(): void {
    this.#stopped = true
    clearTimeout(this.#timer)
  }

  #wake(ms: number): void {
    this.#timer = setTimeout(() => this.pump(), ms)
    this.#timer.unref()
  }
}
