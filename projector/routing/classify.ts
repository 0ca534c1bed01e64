// A record as an applier takes it: skipped, a dead letter, an event for control.db, or an event
// for an organization's file. Used by the main thread's routing of a batch (lanes/pack.ts) for
// what the bytes did not route, whichever applier runs it. Pure.
import { controlTables } from '../../schema/events.ts'
import type { ControlEvent } from '../storage/control-file.ts'
import { decodeRecord, type BadEventReason, type SourceRecord } from '../decode/decode.ts'
import type { OrganizationEvent } from '../storage/organization-file.ts'

export type ClassifiedRecord =
  | { kind: 'skipped' }
  | { kind: 'bad'; reason: BadEventReason; message: string; table: string }
  | { kind: 'control'; event: ControlEvent; committedAtMs: number | undefined }
  | { kind: 'organization'; event: OrganizationEvent; committedAtMs: number | undefined }

export function classifyRecord(record: SourceRecord, topicPrefix: string): ClassifiedRecord {
  const decoded = decodeRecord(record, topicPrefix)
  if (decoded.kind === 'skipped') return { kind: 'skipped' }
  if (decoded.kind === 'bad') {
    const { reason, message } = decoded
    return { kind: 'bad', reason, message, table: decoded.table ?? 'unknown' }
  }
  const { change } = decoded
  const origin = { topic: record.topic, partition: record.partition, offset: Number(record.offset) }
  const committedAtMs = change.position.committedAtMs
  return controlTables.has(change.table)
    ? {
        kind: 'control',
        event: { change: change as ControlEvent['change'], origin },
        committedAtMs,
      }
    : {
        kind: 'organization',
        event: { change: change as OrganizationEvent['change'], origin },
        committedAtMs,
      }
}
