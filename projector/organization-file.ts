// One organization's file as the projector writes it: the mirror rows, the documents built from
// them, and the Kafka offsets applied, all committed in one transaction per batch.
import * as tables from '../schema/organization-db.ts'
import type { OrganizationTable } from '../schema/events.ts'
import { openForWriting, type SqliteDatabase } from '../src/sqlite.ts'
import type { RowChange } from './decode.ts'
import {
  createDocumentRefresher,
  type DocumentKind,
  type MirrorChange as DocumentsMirrorChange,
  type RefreshStats,
} from './documents/index.ts'
import { createMirror, type ApplyOutcome, type MirrorChange } from './mirror.ts'
import { coalesce } from './coalesce.ts'
import { nextStamp } from './stamp.ts'
import { boundWal } from './wal.ts'

export interface Origin {
  topic: string
  partition: number
  offset: number
}

export interface OrganizationEvent {
  change: RowChange & { table: OrganizationTable }
  origin: Origin
}

/** Counts one event's outcome, by source table. */
export type Tally = (table: string, outcome: ApplyOutcome | 'duplicate') => void

export interface OrganizationApplyResult {
  documents: RefreshStats
}

export interface OrganizationFileOptions {
  /** Skip records at or below the file's applied offset (Kafka). Off for files, which are replayed. */
  offsetGuard: boolean
  /** For rebuilds: the previous generation's stamp of an unchanged document. */
  priorStamp?: (kind: DocumentKind, id: string, hash: string) => string | undefined
}

const mirroredTables = {
  providers: tables.providers,
  provider_identifiers: tables.providerIdentifiers,
  provider_groups: tables.providerGroups,
  group_memberships: tables.groupMemberships,
  service_locations: tables.serviceLocations,
  group_identifiers: tables.groupIdentifiers,
  enrollments: tables.enrollments,
  enrollment_requirements: tables.enrollmentRequirements,
  enrollment_lines_of_business: tables.enrollmentLinesOfBusiness,
  enrollment_location_participations: tables.enrollmentLocationParticipations,
  group_enrollments: tables.groupEnrollments,
  group_enrollment_lines_of_business: tables.groupEnrollmentLinesOfBusiness,
  documents: tables.documents,
} satisfies Record<OrganizationTable, unknown>

export interface OrganizationFile {
  readonly organizationId: string
  readonly path: string
  apply(events: readonly OrganizationEvent[], now: Date, tally: Tally): OrganizationApplyResult
  /** Checkpoints the WAL back to zero when it has grown past `maxBytes`; true if it did. */
  boundWal(maxBytes: number): boolean
  close(): void
}

export function openOrganizationFile(
  organizationId: string,
  path: string,
  options: OrganizationFileOptions,
): OrganizationFile {
  const db: SqliteDatabase = openForWriting(path, 'organization')
  const mirror = createMirror(db, mirroredTables)
  const refresher = createDocumentRefresher(
    db,
    options.priorStamp === undefined ? {} : { priorStamp: options.priorStamp },
  )

  const readMeta = db.prepare<[string], { value: string }>(
    'SELECT value FROM replica_meta WHERE key = ?',
  )
  const writeMeta = db.prepare<[string, string]>(
    'INSERT INTO replica_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
  )
  const readOffsets = db.prepare<[], { topic: string; partition: number; offset: number }>(
    'SELECT topic, partition, offset FROM applied_offsets',
  )
  const writeOffset = db.prepare<[string, number, number]>(
    `INSERT INTO applied_offsets (topic, partition, offset) VALUES (?, ?, ?)
     ON CONFLICT (topic, partition) DO UPDATE SET offset = excluded.offset`,
  )

  if (readMeta.get('organization_id') === undefined)
    writeMeta.run('organization_id', organizationId)
  const appliedOffsets = new Map<string, number>()
  for (const row of readOffsets.all())
    appliedOffsets.set(`${row.topic}\u0000${row.partition}`, row.offset)
  let lastStamp = readMeta.get('last_stamp')?.value

  const applyInTransaction = db.transaction(
    (events: readonly OrganizationEvent[], now: Date, tally: Tally): OrganizationApplyResult => {
      const changes: MirrorChange[] = []
      const offsets = new Map<string, Origin>()
      for (const event of events) {
        const { topic, partition, offset } = event.origin
        const key = `${topic}\u0000${partition}`
        if (options.offsetGuard) {
          const applied = appliedOffsets.get(key)
          if (applied !== undefined && offset <= applied) {
            tally(event.change.table, 'duplicate')
            continue
          }
          offsets.set(key, event.origin)
        }
        tally(event.change.table, mirror.apply(event.change, changes))
      }
      let documents: RefreshStats = { rewritten: 0, unchanged: 0, removed: 0 }
      if (changes.length > 0) {
        const stamp = nextStamp(now, lastStamp)
        documents = refresher.refresh(
          coalesce(changes) as unknown as DocumentsMirrorChange[],
          stamp,
        )
        // Only a stamp some document now carries is the last one: a batch that rewrote nothing
        // must not push the next batch's stamp ahead of the clock.
        if (documents.rewritten > 0) {
          writeMeta.run('last_stamp', stamp)
          lastStamp = stamp
        }
      }
      for (const [key, origin] of offsets) {
        writeOffset.run(origin.topic, origin.partition, origin.offset)
        appliedOffsets.set(key, origin.offset)
      }
      return { documents }
    },
  )

  return {
    organizationId,
    path,
    apply(events, now, tally) {
      try {
        return applyInTransaction(events, now, tally)
      } catch (error) {
        // The transaction rolled back: forget the offsets it would have recorded.
        appliedOffsets.clear()
        for (const row of readOffsets.all())
          appliedOffsets.set(`${row.topic}\u0000${row.partition}`, row.offset)
        lastStamp = readMeta.get('last_stamp')?.value
        throw error
      }
    },
    boundWal: (maxBytes) => boundWal(db, path, maxBytes),
    close() {
      db.close()
    },
  }
}
