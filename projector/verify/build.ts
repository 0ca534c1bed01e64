// The replica as PostgreSQL says it should be: every table read in the snapshot (control.db's too),
// each row applied as a Debezium snapshot read through the projector's own applier into a
// scratch generation (DATA_DIR/verify/<run>/), and the documents built once at the end, as an
// initial load builds them. The live replica is not read or written here.
import { join } from 'node:path'
import type { Logger } from 'pino'
import { controlTables, sourceTables } from '../../schema/events.ts'
import type { ProjectorConfig } from '../../src/config.ts'
import { prepareGeneration, type Generation } from '../../src/layout.ts'
import { createApplier } from '../lanes/apply.ts'
import type { SourceRecord } from '../decode/decode.ts'
import { snapshotRecord } from './records.ts'
import type { ProductDatabase } from './source.ts'

export interface ExpectedReplica {
  readonly generation: Generation
  /** The organizations with a file: those with at least one row. */
  readonly organizations: string[]
  readonly rows: number
  /** Rows the projector refuses (their Debezium events are dead letters): served by no one. */
  readonly refused: RefusedRow[]
}

/** A row PostgreSQL holds that the projector refuses, and why. */
export interface RefusedRow {
  organizationId: string
  table: string
  id: string
  reason: string
}

export interface BuildExpectedDeps {
  config: ProjectorConfig
  logger: Logger
  database: ProductDatabase
  /** The scratch folder; the caller removes it. */
  dir: string
  /** Only these organizations' rows of organization tables; absent: every one. */
  organizations?: readonly string[]
  /** Only these organizations' rows of control.db's tables; absent: every one. */
  controlScope?: readonly string[]
  onRows?: (rows: number) => void
  signal?: AbortSignal
}

export class VerifyStopped extends Error {
  override name = 'VerifyStopped'
}

export async function buildExpected(deps: BuildExpectedDeps): Promise<ExpectedReplica> {
  const { config, logger, database } = deps
  const generation = prepareGeneration(join(deps.dir, 'data'), 'expected')
  const applier = createApplier({
    generation,
    topicPrefix: config.topicPrefix,
    logger,
    // Not Kafka: there are no offsets to guard.
    offsetGuard: false,
    walCheckpointBytes: config.walCheckpointBytes,
    deferDocumentsUntilCaughtUp: true,
    // Built aside: no api serves it, so there is no catch-up to announce.
    announceCaughtUp: false,
    loadCommitEvents: 50_000,
    maxOpenFiles: config.openFilesMax,
    cacheBudgetBytes: config.sqliteCacheBytes,
    documentBuildWorkers: config.documentBuildWorkers,
  })
  const position = {
    lsn: database.snapshot.lsnNumber,
    tsMs: database.snapshot.at.getTime(),
  }
  let rows = 0
  const refused: RefusedRow[] = []
  try {
    for (const table of sourceTables) {
      const only = controlTables.has(table) ? deps.controlScope : deps.organizations
      await database.readTable(table, only, (page) => {
        if (deps.signal?.aborted === true) throw new VerifyStopped('verify was stopped')
        const records = page.map((row, i) =>
          snapshotRecord(config.topicPrefix, table, row, position, rows + i),
        )
        const outcome = applier.applyBatch(records)
        for (const letter of outcome.deadLetters) {
          const row = refusedRow(table, letter.record, letter.message)
          refused.push(row)
          logger.warn({ ...row, reason: letter.reason }, 'a row the projector refuses')
        }
        rows += page.length
        deps.onRows?.(page.length)
      })
    }
    await applier.markCaughtUp()
    if (deps.signal?.aborted === true) throw new VerifyStopped('verify was stopped')
    return { generation, organizations: applier.knownOrganizations(), rows, refused }
  } finally {
    applier.close()
  }
}

/** Which row a dead letter of `snapshotRecord` is: its `after` holds the row read. */
function refusedRow(table: string, record: SourceRecord, reason: string): RefusedRow {
  const after = (record.value as { after: Record<string, unknown> }).after
  const owner = table === 'organizations' ? after.id : after.organization_id
  return { organizationId: String(owner), table, id: String(after.id), reason }
}
