// What `verify` reports: per organization and resource, documents equal, differing, missing in
// the replica and extra in it, with the first ids of each; how far behind the replica was at the
// snapshot; and after `--repair`, what the rebuild did and the check that followed. A table for
// people, JSON for scripts. Pure: the command prints what these return.
import type { IdSample, ResourceDiff } from '../documents/index.ts'
import { alignedRows } from '../rebuild/report.ts'
import type { RefusedRow } from './build.ts'
import type { ControlTableDiff } from './control.ts'
import type { SourceRepair } from './source-repair.ts'

export interface ResourceVerdict {
  resource: ResourceDiff['resource']
  equal: number
  /** In both, with different content. */
  differing: IdSample
  /** Built from PostgreSQL, not served by the replica. */
  missing: IdSample
  /** Served by the replica, not built from PostgreSQL. */
  extra: IdSample
  /** Changed after every snapshot taken (settle.ts): may be lag, not counted as drift. */
  changing: IdSample
}

export type OrganizationStatus = 'equal' | 'drifted' | 'unsettled'

export interface OrganizationVerdict {
  organizationId: string
  /**
   * `unsettled`: some of its documents changed after every snapshot taken (they kept changing),
   * so their differences could be lag and are not counted as drift.
   */
  status: OrganizationStatus
  resources: ResourceVerdict[]
}

/** control.db's organizations and API keys against PostgreSQL's (control.ts). */
export interface ControlVerdict {
  /** `unsettled`: control.db applied changes made after every snapshot taken (as above). */
  status: OrganizationStatus
  tables: ControlTableDiff[]
}

export interface LagReport {
  /** The snapshot's WAL position and time. */
  snapshotLsn: string
  snapshotAt: string
  /** Change events in Kafka the replica had not applied when the snapshot was taken. */
  eventsBehind: number
  /** How long verify waited for the replica to apply everything before the snapshot. */
  waitedSeconds: number
  /**
   * What showed Debezium had written every change before the snapshot: its slot's confirmed
   * position, a heartbeat after the snapshot, or nothing (no slot: lag not told from drift).
   */
  debezium: 'slot' | 'heartbeat' | 'no-slot'
}

export interface VerifyReport {
  /** Whether any organization, or control.db, drifted. */
  drift: boolean
  /** Organizations that kept changing through every pass (their differences not counted). */
  unsettled: string[]
  rowsRead: number
  /**
   * Rows PostgreSQL holds that the projector refuses (dead letters), each once: served by no one,
   * so a difference too, that no rebuild mends.
   */
  refused: RefusedRow[]
  /** Passes: 1, plus one per re-check of organizations that changed after the snapshot. */
  passes: number
  seconds: number
  lag: LagReport
  organizations: OrganizationVerdict[]
  control: ControlVerdict
  /**
   * With --repair: the organizations rebuilt, whether control.db's rows were replaced with their
   * topics', and the check made after.
   */
  repair?: {
    rebuilt: string[]
    control: boolean
    after: VerifyReport
    /**
     * Drift the replay left: tombstones for rows PostgreSQL lacks, Debezium's incremental snapshot
     * of the organizations' rows (source-repair.ts), and the check made after it.
     */
    source?: SourceRepair & { after: VerifyReport }
  }
}

/** Whether any of these (a resource's documents, a control.db table's rows) differs. */
export function hasDrift(
  parts: readonly Pick<ResourceVerdict, 'differing' | 'missing' | 'extra'>[],
): boolean {
  return parts.some((p) => p.differing.count + p.missing.count + p.extra.count > 0)
}

/**
 * 0: no drift; 1: drift found, a row refused by the projector, or some organization that could
 * not be settled; 2 is for refusals to run.
 */
export function exitCode(report: VerifyReport): 0 | 1 {
  const final = report.repair?.source?.after ?? report.repair?.after ?? report
  const unsettled = final.unsettled.length > 0 || final.control.status === 'unsettled'
  return final.drift || unsettled || report.refused.length > 0 || final.refused.length > 0 ? 1 : 0
}

export function reportJson(report: VerifyReport): string {
  return JSON.stringify(report)
}

export function reportTable(report: VerifyReport): string {
  const lines = tableLines(report, 'Checked')
  if (report.repair !== undefined) {
    const done = [
      ...(report.repair.rebuilt.length > 0
        ? [`rebuilt ${report.repair.rebuilt.join(', ')} from the topics`]
        : []),
      ...(report.repair.control
        ? ["replaced control.db's organizations and API keys with their topics' rows"]
        : []),
    ]
    lines.push(
      '',
      `Repair: ${done.join('; ')}; checked again:`,
      '',
      ...tableLines(report.repair.after, 'Re-checked'),
    )
    const source = report.repair.source
    if (source !== undefined) {
      lines.push('', `Repair from the source: ${sourceRepairLine(source)}; checked again:`, '')
      lines.push(...tableLines(source.after, 'Re-checked'))
    }
  }
  return `${lines.join('\n')}\n`
}

/** What the repair from the source did, in one line. */
function sourceRepairLine(source: SourceRepair): string {
  const subjects = [
    ...(source.organizations.length > 0 ? [source.organizations.join(', ')] : []),
    ...(source.controlTablesWhole ? ['the organizations and api_keys tables whole'] : []),
  ].join(' and ')
  const tombstones = source.tombstones.length
  const deleted =
    tombstones === 0
      ? 'no row to delete'
      : `${tombstones} row${tombstones === 1 ? '' : 's'} PostgreSQL lacks deleted by tombstones (${source.tombstones.map((r) => `${r.table} ${r.id}`).join(', ')})`
  return `Debezium re-read ${subjects} (incremental snapshot ${source.signalId}, completed in ${source.waitedSeconds.toFixed(1)} s); ${deleted}`
}

function tableLines(report: VerifyReport, verb: string): string[] {
  const lines: string[] = []
  const { lag } = report
  const events = `${lag.eventsBehind} change event${lag.eventsBehind === 1 ? '' : 's'}`
  lines.push(
    `PostgreSQL snapshot at ${lag.snapshotAt} (WAL ${lag.snapshotLsn}). The replica was ${events} behind; ` +
      (lag.debezium === 'no-slot'
        ? `Debezium's replication slot was not found, so changes it has not sent could not be told from drift.`
        : `it had applied everything before the snapshot ${lag.waitedSeconds.toFixed(1)} s later (Debezium: ${lag.debezium === 'slot' ? 'its slot confirmed' : 'a heartbeat after the snapshot'}).`),
    '',
  )
  const header = ['organization', 'resource', 'equal', 'differing', 'missing', 'extra']
  const rows: string[][] = [header]
  const details: string[] = []
  for (const o of report.organizations) {
    const parts = o.resources.map((r) => ({ name: r.resource, ...r }))
    subjectLines(o.organizationId, o.status, parts, rows, details)
  }
  const controlParts = report.control.tables.map((t) => ({ name: t.table, ...t }))
  subjectLines('control.db', report.control.status, controlParts, rows, details)
  // Listed once: a re-check after a repair finds them again (no rebuild mends them).
  const refused = verb === 'Checked' ? report.refused : []
  for (const r of refused) {
    details.push(`${r.organizationId} ${r.table} refused by the replica: ${r.id} (${r.reason})`)
  }
  if (rows.length > 1) lines.push(...alignedRows(rows), '')
  if (details.length > 0) lines.push(...details, '')
  const total = report.organizations.length
  const drifted = report.organizations.filter((o) => o.status === 'drifted').length
  const tail = `${report.rowsRead} rows read in ${report.seconds} s${report.passes > 1 ? `, ${report.passes} passes` : ''}${refused.length > 0 ? `; ${refused.length} row${refused.length === 1 ? '' : 's'} PostgreSQL holds refused by the replica` : ''}`
  const controlDrift = report.control.status === 'drifted'
  lines.push(
    report.drift
      ? drifted > 0
        ? `Drift: ${drifted} of ${organizationsCount(total)} ${drifted === 1 ? 'differs' : 'differ'} from PostgreSQL${controlDrift ? ', and so does control.db' : ''} (${tail}).`
        : `Drift: control.db differs from PostgreSQL; the documents of ${organizationsCount(total)} do not (${tail}).`
      : report.unsettled.length > 0
        ? `No drift found, but ${report.unsettled.length} of ${organizationsCount(total)} kept changing and could not be checked (${tail}).`
        : `${verb} ${organizationsCount(total)}: no drift (${tail}).`,
  )
  if (controlDrift && report.repair === undefined && verb === 'Checked') {
    lines.push(
      `--repair replaces control.db's organizations and API keys with what their topics hold.`,
    )
  }
  return lines
}

function organizationsCount(n: number): string {
  return `${n} organization${n === 1 ? '' : 's'}`
}

/** What one line of the table counts: a resource's documents, or a control.db table's rows. */
interface Counted {
  name: string
  equal: number
  differing: IdSample
  missing: IdSample
  extra: IdSample
  changing?: IdSample
}

/**
 * The table's lines of one organization (or of control.db): one `(all)` row when nothing differs,
 * else a row per part and the ids that differ; and whether it kept changing.
 */
function subjectLines(
  subject: string,
  status: OrganizationStatus,
  parts: readonly Counted[],
  rows: string[][],
  details: string[],
): void {
  const drifted = hasDrift(parts)
  if (!drifted) {
    const equal = parts.reduce((sum, p) => sum + p.equal, 0)
    rows.push([subject, '(all)', String(equal), '0', '0', '0'])
  }
  for (const p of parts) {
    const changing = p.changing
    if (changing === undefined || changing.count === 0) continue
    const more =
      changing.count > changing.ids.length ? ` (+${changing.count - changing.ids.length} more)` : ''
    details.push(`${subject} ${p.name} kept changing: ${changing.ids.join(' ')}${more}`)
  }
  for (const p of drifted ? parts : []) {
    rows.push([
      subject,
      p.name,
      String(p.equal),
      String(p.differing.count),
      String(p.missing.count),
      String(p.extra.count),
    ])
    for (const [what, sample] of [
      ['differing', p.differing],
      ['missing in replica', p.missing],
      ['extra in replica', p.extra],
    ] as const) {
      if (sample.count === 0) continue
      const more =
        sample.count > sample.ids.length ? ` (+${sample.count - sample.ids.length} more)` : ''
      details.push(`${subject} ${p.name} ${what}: ${sample.ids.join(' ')}${more}`)
    }
  }
  if (status === 'unsettled') {
    details.push(
      `${subject}: changed after every snapshot taken: its differences may be lag, not counted`,
    )
  }
}
