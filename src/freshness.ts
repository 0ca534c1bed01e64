// How fresh a generation is, as the projector publishes it and the api states it on every
// response (docs/freshness.md). One small JSON file per generation, `freshness.json`, replaced
// whole (written aside, then renamed over), so a reader sees one version or the next, never a mix.
//
// It lives outside control.db on purpose: the api drops its cache of key lookups at every commit
// to control.db, and this record changes about once a second even when nothing else does.
import { readFileSync, renameSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { z } from 'zod'

export const FRESHNESS_FILE = 'freshness.json'

export const freshnessRecord = z.object({
  /**
   * PostgreSQL commit time (epoch ms) up to which every organization file of the generation holds
   * every change, except the files in `behindFiles`; null: not known yet (no heartbeat applied).
   */
  completeThroughMs: z.number().int().nullable(),
  /** The projector's clock when this record was written. */
  publishedAtMs: z.number().int(),
  /**
   * How far the projector's clock was seen behind PostgreSQL's (a heartbeat that arrived before it
   * was committed, by the local clock), added to every lag so that skew never flatters it.
   */
  clockBehindMs: z.number().int().min(0),
  /**
   * Organization files (control.db's organization_files names) swapped in by a per-organization
   * rebuild and not yet brought up to `completeThroughMs`: their instant is unknown meanwhile.
   */
  behindFiles: z.array(z.string()),
  /**
   * A later commit time than `completeThroughMs`, through which every organization not in
   * `touchedOrganizations` is complete: claimed as the projector takes a group whose records
   * reach a beat's ends, before the group is applied (only the organizations it changes wait for
   * it). Absent: no such claim (and in records written before it existed).
   */
  untouchedThroughMs: z.number().int().optional(),
  /** The organizations the group in hand changes: `untouchedThroughMs` does not cover them. */
  touchedOrganizations: z.array(z.string()).optional(),
})

export type FreshnessRecord = z.infer<typeof freshnessRecord>

export function freshnessPath(generationDir: string): string {
  return join(generationDir, FRESHNESS_FILE)
}

/**
 * Replaces the record. Not synced: a record lost in a power cut leaves an older one (or none),
 * which claims less, never more.
 */
export function writeFreshness(generationDir: string, record: FreshnessRecord): void {
  const path = freshnessPath(generationDir)
  const aside = `${path}.${process.pid}.tmp`
  writeFileSync(aside, JSON.stringify(record))
  renameSync(aside, path)
}

/** The record, or undefined when there is none or it cannot be read (then nothing is claimed). */
export function readFreshness(generationDir: string): FreshnessRecord | undefined {
  let text: string
  try {
    text = readFileSync(freshnessPath(generationDir), 'utf8')
  } catch {
    return undefined
  }
  try {
    const parsed = freshnessRecord.safeParse(JSON.parse(text))
    return parsed.success ? parsed.data : undefined
  } catch {
    return undefined
  }
}

/** What a response says about its organization's freshness. */
export interface Freshness {
  /** Commit time (epoch ms) through which the organization is complete; undefined: unknown. */
  completeThroughMs: number | undefined
  /** Milliseconds from that instant to now, never negative; undefined: unknown. */
  lagMs: number | undefined
}

export const UNKNOWN_FRESHNESS: Freshness = { completeThroughMs: undefined, lagMs: undefined }

/** Whose freshness: an organization (its id and file), or the whole generation (none). */
export interface FreshnessSubject {
  organizationId: string
  file: string | null
}

/**
 * An organization's freshness from the generation's record: unknown without a record, before the
 * first heartbeat, or while its file is one a rebuild swapped in and the projector has not
 * brought up to the record's instant yet. An organization the group in hand does not change is
 * complete through the record's later `untouchedThroughMs`. Without a subject, the generation's
 * (every organization's) instant. `skewed` is told when the clock reads before the instant (the
 * lag is then 0, never negative).
 */
export function freshnessOf(
  record: FreshnessRecord | undefined,
  subject: FreshnessSubject | undefined,
  nowMs: number,
  skewed?: () => void,
): Freshness {
  if (record === undefined) return UNKNOWN_FRESHNESS
  const file = subject?.file ?? null
  if (file !== null && record.behindFiles.includes(file)) return UNKNOWN_FRESHNESS
  const through = instantOf(record, subject?.organizationId)
  if (through === null) return UNKNOWN_FRESHNESS
  const lag = nowMs - through + record.clockBehindMs
  if (lag < 0) skewed?.()
  return { completeThroughMs: through, lagMs: Math.max(0, Math.round(lag)) }
}

function instantOf(record: FreshnessRecord, organizationId: string | undefined): number | null {
  const { completeThroughMs, untouchedThroughMs, touchedOrganizations } = record
  const untouched =
    organizationId !== undefined &&
    untouchedThroughMs !== undefined &&
    touchedOrganizations !== undefined &&
    !touchedOrganizations.includes(organizationId)
  if (!untouched) return completeThroughMs
  return completeThroughMs === null
    ? untouchedThroughMs
    : Math.max(completeThroughMs, untouchedThroughMs)
}
