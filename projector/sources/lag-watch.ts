// The consumer's lag, measured from committed offsets (what a restart would resume from): the
// lag metric, and the one moment the replica first catches up with its source.
import type { Logger } from 'pino'

export interface LagWatchOptions {
  /** Records not committed per partition, now; undefined while not connected. */
  measure(): Promise<{ topic: string; partition: number; lag: number }[] | undefined>
  onLag(topic: string, partition: number, lag: number): void
  /** Once, the first time the lag is zero everywhere; the next check waits for it. */
  onCaughtUp(): Promise<void>
  /** Right after `onCaughtUp`, once `caughtUp` is true. */
  afterCaughtUp(): void
  intervalMs: number
  logger: Logger
}

export class LagWatch {
  #caughtUp = false
  #checking = false
  #again = false
  #stopped = false
  #timer: NodeJS.Timeout | undefined

  constructor(readonly options: LagWatchOptions) {}

  get caughtUp(): boolean {
    return this.#caughtUp
  }

  /**
   * Measures the lag now, then every `intervalMs`. One check at a time: asked for during one, the
   * next starts as soon as it ends.
   */
  checkNow(): void {
    if (this.#stopped) return
    if (this.#checking) {
      this.#again = true
      return
    }
    clearTimeout(this.#timer)
    this.#checking = true
    this.#check()
      .catch((error: unknown) =>
        this.options.logger.warn({ err: error }, 'could not measure consumer lag'),
      )
      .finally(() => {
        this.#checking = false
        if (this.#stopped) return
        if (this.#again) {
          this.#again = false
          this.checkNow()
        } else {
          this.#timer = setTimeout(() => this.checkNow(), this.options.intervalMs)
        }
      })
  }

  stop(): void {
    this.#stopped = true
    clearTimeout(this.#timer)
  }

  async #check(): Promise<void> {
    const lags = await this.options.measure()
    if (lags === undefined) return
    let total = 0
    for (const { topic, partition, lag } of lags) {
      total += lag
      this.options.onLag(topic, partition, lag)
    }
    if (total === 0 && !this.#caughtUp) {
      await this.options.onCaughtUp()
      this.#caughtUp = true
      this.options.afterCaughtUp()
    }
  }
}
