// What applying a batch came to, whichever applier applied it (apply.ts, lanes.ts).
import type { BadEventReason, SourceRecord } from '../decode/decode.ts'
import type { RefreshStats } from '../documents/index.ts'

export interface DeadLetter {
  record: SourceRecord
  reason: BadEventReason
  message: string
}

export interface BatchOutcome {
  deadLetters: DeadLetter[]
  /** Events by table and outcome, for metrics. */
  events: Map<string, Record<string, number>>
  documents: RefreshStats
  /** Latest `source.ts_ms` among applied changes: the source commit time now visible. */
  latestCommittedAtMs: number | undefined
  skipped: number
  /**
   * Whether every batch applied so far is committed. False while an initial load holds its
   * transactions open across batches (`loadCommitEvents`): a source commits its own position only
   * once a batch says true, or after `commit()`.
   */
  committed: boolean
}

/**
 * Told once a batch is routed, before it is applied: the organizations whose responses it changes,
 * or undefined when it may change any organization's (a control event: an organization's own row
 * or its keys). The Kafka source claims freshness for every other organization from there
 * (sources/freshness.ts `claimUntouched`).
 */
export type OnRouted = (touched: ReadonlySet<string> | undefined) => void

/** Events by table and outcome, as a lane counts them (lane-protocol.ts `LaneOutcome.events`). */
export type EventTally = Record<string, Record<string, number>>

/** Counts `n` events of `table` with outcome `what`. */
export function countEvents(tally: EventTally, table: string, what: string, n = 1): void {
  const byOutcome = (tally[table] ??= {})
  byOutcome[what] = (byOutcome[what] ?? 0) + n
}

/** Adds `from` into `into`. */
export function addTally(into: EventTally, from: EventTally): void {
  for (const [table, byOutcome] of Object.entries(from)) {
    for (const [what, n] of Object.entries(byOutcome)) countEvents(into, table, what, n)
  }
}

/** Takes what `tally` holds (emptied), for the outcome or commit that reports it. */
export function takeTally(tally: EventTally): EventTally {
  const taken = { ...tally }
  for (const table of Object.keys(tally)) delete tally[table]
  return taken
}

/** The commit barrier's count of an initial load's held events (apply.ts `loadCommitEvents`). */
export interface LoadRound {
  loadCommitEvents?: number | undefined
  loadEventsPerHeldFile?: number | undefined
}

/** Whether an initial load's round is over: commit what it holds (`loadCommitEvents`). Pure. */
export function loadRoundOver(
  uncommittedEvents: number,
  heldFiles: number,
  options: LoadRound,
): boolean {
  const perFile = options.loadEventsPerHeldFile ?? 0
  return uncommittedEvents >= Math.max(options.loadCommitEvents ?? 0, heldFiles * perFile)
}
