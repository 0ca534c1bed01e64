// Up to which PostgreSQL commit instant the replica is complete (docs/freshness.md has the why).
//
// Debezium's heartbeat upserts a row of `replica_heartbeat` every heartbeat.interval.ms; the row is
// in the publication, so each beat is a transaction of its own, decoded in commit order with every
// product transaction, and its change event carries its commit time (`source.ts_ms`). Everything
// committed before the beat was handed to Kafka Connect's producer before it. But the beat arrives
// on its own topic, and the producer does not keep order across partitions: a product change sent
// just before the beat may be appended just after it. So a beat is only a candidate: SETTLE_MS
// after it was read, the end offsets of every change topic are fetched (the changes sent before the
// beat are appended by then), and the instant becomes the beat's once every partition is applied,
// files committed, up to those ends. A beat belongs to no organization; the ends cover every topic,
// so it advances every organization's instant at once. Before that, as soon as the group that
// reaches the ends is routed, the beat is claimed for every organization the group does not change
// (`claimUntouched`): only the organizations in flight wait for the group to be applied.
//
// Pure bookkeeping: the Kafka source (sources/kafka.ts) tells it what was read and applied, and
// asks it what to fetch; nothing here does I/O.
import type { FreshnessRecord } from '../../src/freshness.ts'

/** A partition's offsets: the first and the next to be written. */
export interface PartitionEnds {
  low: bigint
  high: bigint
}

/** Where each partition stands: the next offset applied and committed in the files, if known. */
export type VisiblePosition = (partitionKey: string) => bigint | undefined

interface Candidate {
  commitMs: number
  readAtMs: number
  /** Every change partition's end, fetched at least settleMs after the beat was read. */
  ends?: Map<string, PartitionEnds>
  fetching?: boolean
}

export interface FreshnessTrackerOptions {
  /** How long after a beat is read its partitions' ends are fetched. */
  settleMs: number
  /** Heartbeat delays remembered for the clock check. */
  skewWindow?: number
  /** What the last run published: its instant stays until a newer one is proved. */
  previous?: FreshnessRecord | undefined
}

/** Beats waiting to be proved: at 4 a second, half a minute of projector lag. */
const MAX_CANDIDATES = 128

/**
 * The most organizations a claim for the untouched ones names (freshness.json is read by the api
 * every 20 ms): a group that changes more claims nothing beyond the proved instant.
 */
export const MAX_TOUCHED_ORGANIZATIONS = 1_000

/** Every organization but `touched` is complete through `throughMs` (`claimUntouched`). */
interface UntouchedClaim {
  throughMs: number
  touched: string[]
}

export class FreshnessTracker {
  readonly #settleMs: number
  readonly #skewWindow: number
  /**
   * Oldest first, one a beat (at most MAX_CANDIDATES). Every beat is kept with its own ends: under
   * load the projector reaches the ends of an older beat while newer ones wait, and proving the
   * newest it has reached keeps the stated lag near the projector's own. (Keeping only the newest
   * beat, replaced by every later one, proved an instant only as often as the projector caught up
   * with the newest ends: the first bench run at 450/s stated 10.5 s for a lag of about 3.)
   */
  #candidates: Candidate[] = []
  #completeThroughMs: number | null
  #untouched: UntouchedClaim | undefined
  #behindFiles: Set<string>
  /** Arrival minus commit time of recent beats, by the local clock (negative: clock behind). */
  #delays: number[] = []
  #heartbeats = 0

  constructor(options: FreshnessTrackerOptions) {
    this.#settleMs = options.settleMs
    this.#skewWindow = options.skewWindow ?? 60
    this.#completeThroughMs = options.previous?.completeThroughMs ?? null
    this.#behindFiles = new Set(options.previous?.behindFiles ?? [])
  }

  get completeThroughMs(): number | null {
    return this.#completeThroughMs
  }

  get heartbeats(): number {
    return this.#heartbeats
  }

  /**
   * How far the local clock has been seen behind PostgreSQL's: a beat cannot arrive before it was
   * committed, so a negative delay is the clock's error (at least). 0 when none was seen.
   */
  get clockBehindMs(): number {
    let least = 0
    for (const d of this.#delays) least = Math.min(least, d)
    return least < 0 ? -least : 0
  }

  /** A beat committed at `commitMs` was read at `nowMs`. Returns its delay by the local clock. */
  heartbeat(commitMs: number, nowMs: number): number {
    this.#heartbeats++
    const delay = nowMs - commitMs
    this.#delays.push(delay)
    if (this.#delays.length > this.#skewWindow) this.#delays.shift()
    if (this.#completeThroughMs !== null && commitMs <= this.#completeThroughMs) return delay
    const last = this.#candidates.at(-1)
    if (last !== undefined && commitMs <= last.commitMs) return delay
    if (last?.readAtMs === nowMs && last.ends === undefined && last.fetching !== true) {
      // Read together (one delivery): one settling, the newer beat proving more.
      last.commitMs = commitMs
      return delay
    }
    // Every beat settles from its own reading. (A newer beat used to take the place of one still
    // settling and restart the wait: with beats as frequent as the settle, few were ever fetched.)
    if (this.#candidates.length >= MAX_CANDIDATES) this.#candidates.shift()
    this.#candidates.push({ commitMs, readAtMs: nowMs })
    return delay
  }

  /**
   * Whether ends are due now for the oldest candidate still without them (then marked as being
   * fetched, with every other candidate settled by now); `msUntil` is how long until one is, when
   * one waits.
   */
  endsDue(nowMs: number): { due: boolean; msUntil: number | undefined } {
    const waiting = this.#candidates.find((c) => c.ends === undefined)
    if (waiting === undefined || waiting.fetching === true)
      return { due: false, msUntil: undefined }
    const msUntil = waiting.readAtMs + this.#settleMs - nowMs
    if (msUntil > 0) return { due: false, msUntil }
    for (const c of this.#candidates) {
      if (c.ends === undefined && c.readAtMs + this.#settleMs <= nowMs) c.fetching = true
    }
    return { due: true, msUntil: 0 }
  }

  /**
   * The ends fetched for the candidates `endsDue` handed out (undefined: the fetch failed). They
   * share one fetch, so only the newest is kept: with the same ends, the older prove less.
   */
  setEnds(ends: Map<string, PartitionEnds> | undefined): void {
    const fetched = this.#candidates.filter((c) => c.fetching === true && c.ends === undefined)
    if (fetched.length === 0) return
    if (ends === undefined) {
      for (const c of fetched) c.fetching = false
      return
    }
    const newest = fetched.at(-1)!
    newest.ends = ends
    // The others of that fetch are those still without ends.
    this.#candidates = this.#candidates.filter((c) => c.ends !== undefined || c.fetching !== true)
  }

  /**
   * Proves what the visible positions allow: the newest candidate whose every partition is applied
   * up to its ends becomes the instant, and files held behind it are released. True when the
   * published record changed.
   */
  advance(visible: VisiblePosition): boolean {
    // The newest candidate reached: it and all before it go.
    const proved = this.#newestReached(visible)
    if (proved < 0) return false
    const candidate = this.#candidates[proved]!
    this.#candidates.splice(0, proved + 1)
    if (this.#completeThroughMs === null || candidate.commitMs > this.#completeThroughMs) {
      this.#completeThroughMs = candidate.commitMs
    }
    // The group claimed for is applied: its claim is the instant now.
    if (this.#untouched !== undefined && this.#untouched.throughMs <= this.#completeThroughMs) {
      this.#untouched = undefined
    }
    this.#behindFiles.clear()
    return true
  }

  /**
   * The group in hand is routed, and no other is being applied: `reach` is where each partition
   * will stand once it is (its records' next offset, else the committed position), `touched` the
   * organizations it changes (undefined: any may change, as with a control event). Every other
   * organization is complete already through the newest candidate `reach` reaches: each change
   * up to that beat's ends is in a committed file or in the group, and none of the group's is
   * theirs. A busy organization's backlog then no longer holds a quiet one's instant back by the
   * time the group takes to apply. The claim stays true once made (the files it covers do not go
   * back, but for a rebuild's swap: `hold`); the next group's replaces it, and the proof of the
   * instant at the group's commit subsumes it. True when the published record changed.
   */
  claimUntouched(reach: VisiblePosition, touched: ReadonlySet<string> | undefined): boolean {
    const before = this.#untouched
    this.#untouched = undefined
    const reached =
      touched === undefined || touched.size > MAX_TOUCHED_ORGANIZATIONS
        ? -1
        : this.#newestReached(reach)
    const throughMs = reached < 0 ? undefined : this.#candidates[reached]!.commitMs
    if (
      throughMs !== undefined &&
      touched !== undefined &&
      (this.#completeThroughMs === null || throughMs > this.#completeThroughMs)
    ) {
      this.#untouched = { throughMs, touched: [...touched].sort() }
    }
    return !sameClaim(before, this.#untouched)
  }

  /** The newest candidate with ends whose every partition `position` reaches; -1: none. */
  #newestReached(position: VisiblePosition): number {
    for (let i = this.#candidates.length - 1; i >= 0; i--) {
      const ends = this.#candidates[i]!.ends
      if (ends === undefined) continue
      let reached = true
      for (const [key, end] of ends) {
        if ((position(key) ?? end.low) < end.high) {
          reached = false
          break
        }
      }
      if (reached) return i
    }
    return -1
  }

  /**
   * Files swapped in behind the published instant (a per-organization rebuild): their instant is
   * unknown until a candidate is proved with the positions from now on, which the caller has
   * already moved back to where those files end.
   */
  hold(files: readonly string[]): void {
    for (const file of files) this.#behindFiles.add(file)
    // The positions go back to where the swapped files end: no claim made before stands on them.
    this.#untouched = undefined
    // A candidate proved from here on must be proved on the positions after the swap: those
    // already proved are gone, and the ones waiting are checked against the moved positions.
  }

  record(nowMs: number): FreshnessRecord {
    return {
      completeThroughMs: this.#completeThroughMs,
      publishedAtMs: nowMs,
      clockBehindMs: this.clockBehindMs,
      behindFiles: [...this.#behindFiles].sort(),
      ...(this.#untouched === undefined
        ? {}
        : {
            untouchedThroughMs: this.#untouched.throughMs,
            touchedOrganizations: this.#untouched.touched,
          }),
    }
  }
}

function sameClaim(a: UntouchedClaim | undefined, b: UntouchedClaim | undefined): boolean {
  if (a === undefined || b === undefined) return a === b
  return (
    a.throughMs === b.throughMs &&
    a.touched.length === b.touched.length &&
    a.touched.every((id, i) => id === b.touched[i])
  )
}

/**
 * The commit time (`source.ts_ms`) of a heartbeat row's change event, in either of the
 * JsonConverter's envelopes; undefined when the value is not one (a tombstone, or unreadable).
 */
export function heartbeatCommitMs(value: Buffer | null | undefined): number | undefined {
  if (value === null || value === undefined || value.length === 0) return undefined
  let parsed: unknown
  try {
    parsed = JSON.parse(value.toString('utf8'))
  } catch {
    return undefined
  }
  const event = (
    typeof parsed === 'object' && parsed !== null && 'payload' in parsed && 'schema' in parsed
      ? (parsed as { payload: unknown }).payload
      : parsed
  ) as { source?: { ts_ms?: unknown } } | null
  const ts = event?.source?.ts_ms
  return typeof ts === 'number' && Number.isFinite(ts) ? ts : undefined
}
