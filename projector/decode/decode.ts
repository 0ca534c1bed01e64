// Decoding one Kafka record into a change of a source row: pure, no I/O.
//
// Dispatch is on `payload.source.table`, not on the topic name (topics can be re-routed).
// Debezium traps handled here: tombstones (null value), which follow deletes and, once
// compaction has removed the delete, are all that is left of it; deletes whose `before`
// holds only the key (REPLICA IDENTITY DEFAULT zero-fills the other NOT NULL columns, so its
// organization_id is not to be trusted: deletes are routed by the routing index instead);
// unchanged TOASTed columns (see schema/events.ts); heartbeat and transaction topics.
import { z } from 'zod'
import {
  decodeRow,
  envelope,
  isPlainEnvelope,
  isSourceTable,
  keepLongIntegers,
  neverStoredTables,
  type SourceRow,
  type SourceTable,
} from '../../schema/events.ts'
import { WrapperPrefixes } from './wrapped-json.ts'

/** One Kafka record, from Kafka itself or from a line of an NDJSON file. */
export interface SourceRecord {
  topic: string
  partition: number
  /** Kafka offsets are int64 decimal strings. */
  offset: string
  key: unknown
  /** Raw bytes or text from Kafka, already-parsed JSON from a file, null for a tombstone. */
  value: unknown
  headers?: Record<string, Buffer | string | undefined>
}

export interface Position {
  /** `source.lsn`; 0 when the event carries none. */
  lsn: number
  /** A snapshot read (`op: r`): streamed changes of the same row win over it. */
  snapshot: boolean
  /** `source.ts_ms`: when the change was committed in the source. */
  committedAtMs: number | undefined
}

export type RowChange = {
  [T in SourceTable]:
    | { kind: 'upsert'; table: T; id: string; row: SourceRow<T>; position: Position }
    | {
        kind: 'delete'
        table: T
        id: string
        position: Position
        /**
         * From a tombstone (a null value): it carries no source position, but in its partition it
         * follows every version of its key, so it removes whatever is stored, unguarded.
         */
        tombstone?: true
      }
    | { kind: 'truncate'; table: T; position: Position }
}[SourceTable]

export type BadEventReason =
  'unparseable' | 'schema_mismatch' | 'unknown_table' | 'missing_organization'

export type Decoded =
  | { kind: 'change'; change: RowChange }
  | { kind: 'skipped'; reason: 'tombstone' | 'not_a_change_topic' | 'never_stored' }
  | { kind: 'bad'; reason: BadEventReason; message: string; table: string | undefined }

const HEARTBEAT_TOPIC = /^__debezium-heartbeat\./

export function isChangeTopic(topic: string, topicPrefix: string): boolean {
  // Compared in parts: no string built per record.
  const transaction =
    topic.length === topicPrefix.length + 12 &&
    topic.startsWith(topicPrefix) &&
    topic.endsWith('.transaction')
  return !transaction && !HEARTBEAT_TOPIC.test(topic)
}

const idOnly = z.object({
  id: z
    .string()
    .regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i, 'expected a uuid')
    .transform((s) => s.toLowerCase()),
})

export function decodeRecord(record: SourceRecord, topicPrefix: string): Decoded {
  if (!isChangeTopic(record.topic, topicPrefix))
    return { kind: 'skipped', reason: 'not_a_change_topic' }
  if (record.value === null || record.value === undefined) return tombstone(record, topicPrefix)

  const parsed = parseValue(record.topic, record.value)
  if (!parsed.ok) return bad('unparseable', parsed.message, undefined)
  const payload = unwrap(parsed.value)
  if (payload === null) return tombstone(record, topicPrefix)

  let envelopeData
  if (isPlainEnvelope(payload)) envelopeData = payload
  else {
    const env = envelope.safeParse(payload)
    if (!env.success) {
      const table = tableHint(payload)
      if (table !== undefined && neverStoredTables.has(table))
        return { kind: 'skipped', reason: 'never_stored' }
      return bad('schema_mismatch', `envelope: ${describe(env.error)}`, table)
    }
    envelopeData = env.data
  }
  const { op, before, after, source } = envelopeData
  const table = source.table
  // Checked before anything else is read: nothing of these tables may travel on, not even into a
  // dead letter.
  if (neverStoredTables.has(table)) return { kind: 'skipped', reason: 'never_stored' }
  if (!isSourceTable(table)) return bad('unknown_table', `unknown table "${table}"`, table)

  const position: Position = {
    lsn: source.lsn ?? (op === 'r' ? incrementalReadLsn(source.sequence) : 0),
    snapshot: op === 'r',
    committedAtMs: source.ts_ms,
  }

  switch (op) {
    case 't':
      return { kind: 'change', change: { kind: 'truncate', table, position } }
    case 'd': {
      const key = idOnly.safeParse(before ?? unwrap(parseJsonOrNull(record.key)))
      if (!key.success) return bad('schema_mismatch', `delete: ${describe(key.error)}`, table)
      return { kind: 'change', change: { kind: 'delete', table, id: key.data.id, position } }
    }
    case 'c':
    case 'u':
    case 'r': {
      if (after === null || after === undefined) {
        return bad('schema_mismatch', `op "${op}" without "after"`, table)
      }
      const row = decodeRow(table, after)
      if (!row.success) {
        const reason = row.error.issues.some((i) => i.path[0] === 'organization_id')
          ? 'missing_organization'
          : 'schema_mismatch'
        return bad(reason, `${table}: ${describe(row.error)}`, table)
      }
      const change = {
        kind: 'upsert',
        table,
        id: row.data.id,
        row: row.data,
        position,
      } as RowChange
      return { kind: 'change', change }
    }
  }
}

/**
 * The position of a read of Debezium's incremental snapshot (`verify --repair` asks for one): its
 * `source.lsn` is null, and `source.sequence` holds `["<last commit lsn>","<lsn>"]`, the streaming
 * position when the chunk's window closed. Every change streamed before it is at or below that
 * position, and a row changed while the window was open is left out of the chunk by Debezium, so
 * the read orders after what it saw by the usual guards. Without it the read would be at 0 and
 * lose to any stored version (its content never applied). Pure; 0 when there is none.
 */
export function incrementalReadLsn(sequence: string | null | undefined): number {
  if (typeof sequence !== 'string') return 0
  let parsed: unknown
  try {
    parsed = JSON.parse(sequence)
  } catch {
    return 0
  }
  if (!Array.isArray(parsed)) return 0
  const [lastCommit, current] = parsed as unknown[]
  for (const value of [current, lastCommit]) {
    if (typeof value === 'string' && /^\d{1,15}$/.test(value)) return Number(value)
  }
  return 0
}

/**
 * A tombstone is a delete by key. Right after its delete it finds the row gone and does nothing;
 * on a compacted topic the delete before it may be gone (compaction keeps a key's last record
 * only), and then it is the delete. It has no `source`, so its table is the one its topic is
 * named after (`<prefix>.public.<table>`), the one place a topic name is read for it.
 */
function tombstone(record: SourceRecord, topicPrefix: string): Decoded {
  const schemaPrefix = `${topicPrefix}.public.`
  if (!record.topic.startsWith(schemaPrefix)) return { kind: 'skipped', reason: 'tombstone' }
  const table = record.topic.slice(schemaPrefix.length)
  if (neverStoredTables.has(table)) return { kind: 'skipped', reason: 'never_stored' }
  if (!isSourceTable(table)) return { kind: 'skipped', reason: 'tombstone' }
  const key = idOnly.safeParse(unwrap(parseJsonOrNull(record.key)))
  if (!key.success) return bad('schema_mismatch', `tombstone key: ${describe(key.error)}`, table)
  const position: Position = { lsn: 0, snapshot: false, committedAtMs: undefined }
  return {
    kind: 'change',
    change: { kind: 'delete', table, id: key.data.id, position, tombstone: true },
  }
}

function bad(reason: BadEventReason, message: string, table: string | undefined): Decoded {
  return { kind: 'bad', reason, message, table }
}

type Parsed = { ok: true; value: unknown } | { ok: false; message: string }

function parseJson(value: unknown): Parsed {
  if (typeof value === 'string' || Buffer.isBuffer(value)) {
    try {
      return { ok: true, value: JSON.parse(keepLongIntegers(value.toString())) as unknown }
    } catch {
      return { ok: false, message: 'value is not valid JSON' }
    }
  }
  return { ok: true, value }
}

/** The prefixes of the schema blocks of wrapped values, by topic (see wrapped-json.ts). */
const wrappers = new WrapperPrefixes()

/** parseJson for a record's value: bytes and text with a known schema block skip parsing it. */
function parseValue(topic: string, value: unknown): Parsed {
  if (typeof value !== 'string' && !Buffer.isBuffer(value)) return { ok: true, value }
  const wrapped = wrappers.parse(topic, value)
  if (wrapped !== undefined) return { ok: true, value: wrapped }
  const parsed = parseJson(value)
  if (parsed.ok) wrappers.learn(topic, value, 0, parsed.value)
  return parsed
}

function parseJsonOrNull(value: unknown): unknown {
  const parsed = parseJson(value)
  return parsed.ok ? parsed.value : null
}

/** The JsonConverter wraps with `{schema, payload}` when schemas are enabled. */
function unwrap(value: unknown): unknown {
  if (isObject(value) && 'payload' in value && 'schema' in value) return value.payload
  return value
}

function tableHint(payload: unknown): string | undefined {
  if (isObject(payload) && isObject(payload.source) && typeof payload.source.table === 'string') {
    return payload.source.table
  }
  return undefined
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** A short, value-free description of what failed: no row content reaches logs or headers. */
function describe(error: z.ZodError): string {
  return error.issues
    .slice(0, 5)
    .map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`)
    .join('; ')
}

/**
 * The later of a batch's latest source commit time so far and an event's (what the replication
 * lag is measured from); an event without one changes nothing.
 */
export function laterCommit(
  latestMs: number | undefined,
  committedAtMs: number | undefined,
): number | undefined {
  return committedAtMs !== undefined && committedAtMs > (latestMs ?? 0) ? committedAtMs : latestMs
}
