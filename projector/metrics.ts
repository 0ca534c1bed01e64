// What platform teams alert on, in Prometheus format.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'
import type { BatchOutcome, EventTally } from './lanes/apply.ts'
import type { RefreshStats } from './documents/index.ts'

export interface ProjectorMetrics {
  readonly registry: Registry
  recordBatch(outcome: BatchOutcome, seconds: number, now: number): void
  /** Documents written outside a batch: the one-time build at the end of an initial load. */
  recordDocuments(stats: RefreshStats): void
  /** Events applied outside a batch: an initial load's spools, at a commit (lanes/lane-core.ts). */
  recordEvents(events: EventTally): void
  setLag(topic: string, partition: number, lag: number): void
  setCaughtUp(caughtUp: boolean): void
  /** Whether applying has stopped because the disk under DATA_DIR is full (disk-space.ts). */
  setDiskFull(full: boolean): void
  /** A heartbeat read `delayMs` after its commit, by the local clock (negative: clock skew). */
  recordHeartbeat(delayMs: number): void
  /** Where the staleness gauge reads the instant from (docs/freshness.md). */
  watchFreshness(read: () => { completeThroughMs: number | null; clockBehindMs: number }): void
}

export function createProjectorMetrics(): ProjectorMetrics {
  const registry = new Registry()
  collectDefaultMetrics({ register: registry, prefix: 'replica_projector_' })
  const applied = appliedMetrics(registry)
  const freshness = freshnessMetrics(registry)
  const state = stateMetrics(registry)
  return {
    registry,
    recordBatch(outcome, seconds, now) {
      applied.recordBatch(outcome, seconds)
      if (outcome.latestCommittedAtMs !== undefined) {
        freshness.observeVisible(now - outcome.latestCommittedAtMs)
      }
    },
    recordDocuments: applied.recordDocuments,
    recordEvents: applied.recordEvents,
    ...state,
    recordHeartbeat: freshness.observeCommitDelay,
    watchFreshness: freshness.watch,
  }
}

/** What was applied: events by table and outcome, documents by result, batches by time. */
function appliedMetrics(registry: Registry) {
  const events = new Counter({
    name: 'replica_projector_events_total',
    help: 'Change events by source table and outcome (applied, older, absent, tombstone, duplicate, dead_lettered).',
    labelNames: ['table', 'outcome'],
    registers: [registry],
  })
  const skipped = new Counter({
    name: 'replica_projector_records_skipped_total',
    help: 'Records that are not changes: heartbeats, never-stored tables, tombstones of other topics.',
    registers: [registry],
  })
  const documents = new Counter({
    name: 'replica_projector_documents_total',
    help: 'Documents recomputed by result: rewritten (response changed), unchanged, removed.',
    labelNames: ['result'],
    registers: [registry],
  })
  const batchSeconds = new Histogram({
    name: 'replica_projector_batch_apply_seconds',
    help: 'Time to decode and apply one batch, files committed.',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  })

  function recordEvents(tally: EventTally): void {
    for (const [table, byOutcome] of Object.entries(tally)) {
      for (const [what, n] of Object.entries(byOutcome)) events.inc({ table, outcome: what }, n)
    }
  }

  function recordDocuments(stats: RefreshStats): void {
    documents.inc({ result: 'rewritten' }, stats.rewritten)
    documents.inc({ result: 'unchanged' }, stats.unchanged)
    documents.inc({ result: 'removed' }, stats.removed)
  }

  return {
    recordEvents,
    recordDocuments,
    recordBatch(outcome: BatchOutcome, seconds: number): void {
      batchSeconds.observe(seconds)
      skipped.inc(outcome.skipped)
      recordEvents(Object.fromEntries(outcome.events))
      recordDocuments(outcome.documents)
    },
  }
}

/** How far behind PostgreSQL the replica is: commit to applied, and the staleness gauge. */
function freshnessMetrics(registry: Registry) {
  const visibleDelay = new Histogram({
    name: 'replica_projector_source_to_visible_seconds',
    help: 'From the source commit (source.ts_ms) of the newest change in a batch to the batch being visible.',
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900],
    registers: [registry],
  })
  const commitToApplied = new Histogram({
    name: 'replica_projector_commit_to_applied_seconds',
    help: 'From a PostgreSQL commit (source.ts_ms) to its change applied with its files committed: the newest change of each batch, and each heartbeat as read. Clock skew is clamped to 0 and counted.',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [registry],
  })
  const clockAnomalies = new Counter({
    name: 'replica_projector_clock_skew_anomalies_total',
    help: 'Changes that arrived before their PostgreSQL commit time by the local clock: the clocks disagree (the figure was clamped to 0).',
    registers: [registry],
  })
  let freshness: (() => { completeThroughMs: number | null; clockBehindMs: number }) | undefined
  new Gauge({
    name: 'replica_projector_staleness_seconds',
    help: 'Now minus the PostgreSQL commit instant through which every organization is complete (the Replica-Complete-Through header), corrected for a clock seen behind PostgreSQL; NaN while unknown.',
    registers: [registry],
    collect() {
      const f = freshness?.()
      this.set(
        f === undefined || f.completeThroughMs === null
          ? Number.NaN
          : Math.max(0, Date.now() - f.completeThroughMs + f.clockBehindMs) / 1000,
      )
    },
  })

  function observeCommitDelay(ms: number): void {
    if (ms < 0) clockAnomalies.inc()
    commitToApplied.observe(Math.max(0, ms) / 1000)
  }

  return {
    observeCommitDelay,
    /** A batch visible `ms` after the commit of its newest change. */
    observeVisible(ms: number): void {
      visibleDelay.observe(Math.max(0, ms / 1000))
      observeCommitDelay(ms)
    },
    watch: (read: () => { completeThroughMs: number | null; clockBehindMs: number }): void => {
      freshness = read
    },
  }
}

/** Where the projector stands: its lag, caught up or not, stopped on a full disk. */
function stateMetrics(registry: Registry) {
  const lag = new Gauge({
    name: 'replica_projector_consumer_lag',
    help: 'Records not yet applied, by topic and partition.',
    labelNames: ['topic', 'partition'],
    registers: [registry],
  })
  const caughtUp = new Gauge({
    name: 'replica_projector_caught_up',
    help: '1 once the replica has caught up with its source.',
    registers: [registry],
  })
  const diskFull = new Gauge({
    name: 'replica_projector_disk_full',
    help: '1 while applying is stopped because the disk under DATA_DIR is full; it resumes when space returns.',
    registers: [registry],
  })
  const diskFullStops = new Counter({
    name: 'replica_projector_disk_full_total',
    help: 'Times applying stopped because the disk under DATA_DIR was full.',
    registers: [registry],
  })
  return {
    setLag: (topic: string, partition: number, n: number): void => {
      lag.set({ topic, partition: String(partition) }, n)
    },
    setCaughtUp: (value: boolean): void => {
      caughtUp.set(value ? 1 : 0)
    },
    setDiskFull: (full: boolean): void => {
      if (full) diskFullStops.inc()
      diskFull.set(full ? 1 : 0)
    },
  }
}
