// Progress of a long command (rebuild, --from-file, verify): a bar on a terminal, structured log
// lines elsewhere, never both. The bar goes to stderr so that stdout stays pino's JSON lines.
import cliProgress from 'cli-progress'
import type { Logger } from 'pino'

export type ProgressUnit = 'events' | 'rows' | 'bytes'

export interface Progress {
  /** Counts `n` more units done. */
  add(n: number): void
  /** The total, once known (e.g. from Kafka's end offsets); before that there is no ETA. */
  setTotal(total: number): void
  /** Draws or logs the final state once (idempotent); nothing if nothing was done. */
  done(): void
}

export interface ProgressOptions {
  /** What is progressing, e.g. 'rebuild' or 'from-file': the `task` field of log lines. */
  label: string
  unit: ProgressUnit
  total?: number
  /** The bar's stream; a bar is drawn only when it is a TTY. */
  stream?: NodeJS.WritableStream & { isTTY?: boolean }
  /** Where the log lines go when the stream is not a TTY. */
  logger: Logger
  /** Between two log lines when the stream is not a TTY. */
  intervalMs?: number
  /** Milliseconds since some origin (tests). */
  now?: () => number
}

export interface ProgressRate {
  /** Units per second since the start. */
  ratePerSecond: number
  /** Seconds left at that rate; undefined while the total is unknown or nothing is done yet. */
  etaSeconds: number | undefined
}

/** Average rate since the start, and the time left at that rate. */
export function progressRate(
  done: number,
  total: number | undefined,
  elapsedMs: number,
): ProgressRate {
  const ratePerSecond = elapsedMs > 0 ? (done * 1000) / elapsedMs : 0
  if (total === undefined) return { ratePerSecond, etaSeconds: undefined }
  if (done >= total) return { ratePerSecond, etaSeconds: 0 }
  if (ratePerSecond === 0) return { ratePerSecond, etaSeconds: undefined }
  return { ratePerSecond, etaSeconds: Math.ceil((total - done) / ratePerSecond) }
}

export function createProgress(options: ProgressOptions): Progress {
  const stream = options.stream ?? process.stderr
  const now = options.now ?? (() => performance.now())
  const { label, unit, logger } = options
  const started = now()
  let done = 0
  let total = options.total
  let finished = false

  const fields = () => {
    const { ratePerSecond, etaSeconds } = progressRate(done, total, now() - started)
    return {
      task: label,
      unit,
      done,
      ...(total === undefined ? {} : { total }),
      ratePerSecond: Math.round(ratePerSecond),
      ...(etaSeconds === undefined ? {} : { etaSeconds }),
    }
  }

  if (stream.isTTY === true) {
    // Created at the first unit done: nothing is drawn when nothing happens.
    let bar: cliProgress.SingleBar | undefined
    const redraw = () => {
      if (bar === undefined) {
        bar = new cliProgress.SingleBar(
          {
            stream,
            format: (barOptions, params) => barLine(fields(), params.progress, barOptions),
            hideCursor: true,
            fps: 5,
          },
          cliProgress.Presets.shades_classic,
        )
        bar.start(total ?? 0, done)
      }
      bar.setTotal(total ?? 0)
      bar.update(done)
    }
    return {
      add(n) {
        if (finished || n <= 0) return
        done += n
        redraw()
      },
      setTotal(n) {
        total = n
        if (bar !== undefined) redraw()
      },
      done() {
        if (finished) return
        finished = true
        bar?.stop()
      },
    }
  }

  let lastLogged = 0
  const timer = setInterval(() => {
    // Quiet while nothing moves (e.g. a rebuild waiting for its document build).
    if (done === lastLogged) return
    lastLogged = done
    logger.info(fields(), 'progress')
  }, options.intervalMs ?? 5_000)
  timer.unref()
  return {
    add(n) {
      if (!finished && n > 0) done += n
    },
    setTotal(n) {
      total = n
    },
    done() {
      if (finished) return
      finished = true
      clearInterval(timer)
      if (done === 0) return
      logger.info({ ...fields(), seconds: Math.round(now() - started) / 1000 }, 'progress finished')
    },
  }
}

/** `rebuild [=====-----] 1200/5000 events | 350/s | ETA 11s`; no bar nor ETA without a total. */
function barLine(
  f: {
    task: string
    unit: ProgressUnit
    done: number
    total?: number
    ratePerSecond: number
    etaSeconds?: number
  },
  fraction: number,
  barOptions: cliProgress.Options,
): string {
  const amount = (n: number) => (f.unit === 'bytes' ? `${(n / 1e6).toFixed(1)}` : String(n))
  const unit = f.unit === 'bytes' ? 'MB' : f.unit
  const counted =
    f.total === undefined
      ? `${amount(f.done)} ${unit}`
      : `${amount(f.done)}/${amount(f.total)} ${unit}`
  const bar = f.total === undefined ? '' : `${cliProgress.Format.BarFormat(fraction, barOptions)} `
  const eta = f.etaSeconds === undefined ? '' : ` | ETA ${formatSeconds(f.etaSeconds)}`
  return `${f.task} ${bar}${counted} | ${amount(f.ratePerSecond)} ${unit}/s${eta}`
}

function formatSeconds(seconds: number): string {
  if (seconds < 60) return `${seconds}s`
  const minutes = Math.floor(seconds / 60)
  if (minutes < 60) return `${minutes}m${String(seconds % 60).padStart(2, '0')}s`
  return `${Math.floor(minutes / 60)}h${String(minutes % 60).padStart(2, '0')}m`
}
