// What a dry run (or a per-organization rebuild) reports: per organization and resource, how many
// documents would change, appear and disappear, with the first ids of each. A table for people,
// JSON for scripts. Pure: the command prints what these return.
import { hasDifferences, type ResourceDiff } from '../documents/index.ts'

export interface OrganizationReport {
  organizationId: string
  resources: ResourceDiff[]
  /** Set once a rebuilt file was handed over: it is being served. */
  swapped?: { file: string }
}

export interface RebuildReport {
  dryRun: boolean
  /** Whether any served document would change (dry run) or did (rebuild). */
  changed: boolean
  events: number
  seconds: number
  organizations: OrganizationReport[]
}

export function rebuildReport(
  dryRun: boolean,
  organizations: OrganizationReport[],
  events: number,
  seconds: number,
): RebuildReport {
  return {
    dryRun,
    changed: organizations.some((o) => hasDifferences(o.resources)),
    events,
    seconds: Math.round(seconds * 10) / 10,
    organizations,
  }
}

export function reportJson(report: RebuildReport): string {
  return JSON.stringify(report)
}

/**
 * A report's rows as aligned text: the first two columns (organization, resource) to the left,
 * the counts to the right, two spaces between. The first row is the header.
 */
export function alignedRows(rows: readonly string[][]): string[] {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)))
  return rows.map((row) =>
    row.map((cell, i) => (i < 2 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join('  '),
  )
}

/** One row per organization and resource with any difference, then the ids; a verdict last. */
export function reportTable(report: RebuildReport): string {
  const verb = report.dryRun ? 'would' : 'did'
  const rows: string[][] = [['organization', 'resource', 'equal', 'changed', 'new', 'removed']]
  const details: string[] = []
  for (const organization of report.organizations) {
    for (const r of organization.resources) {
      if (r.changed.count + r.appeared.count + r.disappeared.count === 0) continue
      rows.push([
        organization.organizationId,
        r.resource,
        String(r.equal),
        String(r.changed.count),
        String(r.appeared.count),
        String(r.disappeared.count),
      ])
      for (const [what, sample] of [
        ['changed', r.changed],
        ['new', r.appeared],
        ['removed', r.disappeared],
      ] as const) {
        if (sample.count === 0) continue
        const more =
          sample.count > sample.ids.length ? ` (+${sample.count - sample.ids.length})` : ''
        details.push(
          `${organization.organizationId} ${r.resource} ${what}: ${sample.ids.join(' ')}${more}`,
        )
      }
    }
  }
  const lines: string[] = []
  if (rows.length > 1) lines.push(...alignedRows(rows), '', ...details, '')
  const organizations = report.organizations.length
  const unchanged = report.organizations.filter((o) => !hasDifferences(o.resources)).length
  lines.push(
    report.changed
      ? `${organizations - unchanged} of ${organizations} organizations ${verb} change (${report.events} events replayed in ${report.seconds} s).`
      : `No served document ${verb} change in ${organizations} organizations (${report.events} events replayed in ${report.seconds} s).`,
  )
  for (const organization of report.organizations) {
    if (organization.swapped !== undefined) {
      lines.push(`${organization.organizationId}: now serving ${organization.swapped.file}`)
    }
  }
  return `${lines.join('\n')}\n`
}
