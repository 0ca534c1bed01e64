// A deterministic, realistic credentialing dataset as Debezium change events (NDJSON, one Kafka
// record a line): a snapshot of several organizations, then streamed changes. Used by the demo
// (the projector's file source) and by the projector benchmark (a million events and more).
//
// Same options, same bytes: a seeded generator, no clock, no Math.random().
import { open } from 'node:fs/promises'
import type { Op } from './debezium.ts'
import { Emitter, type RecordParts, recordLine } from './emitter.ts'
import * as M from './model.ts'
import { UUID_LIMITS } from './prng.ts'
import { snapshot } from './snapshot.ts'
import { stream } from './stream.ts'

export interface DatasetOptions {
  organizations: number
  providersPerOrganization: number
  /** PRNG seed (uint32). Default 1. */
  seed?: number
  /** Expirations are spread around this instant. Default 2026-11-21T10:00:00Z. */
  now?: Date
  /** Rounds of streamed changes after the snapshot. Default 3. */
  updateRounds?: number
  /** Debezium's topic.prefix. Default 'product'. */
  topicPrefix?: string
  /**
   * The JsonConverter's schemas.enable: true (default, Debezium's) wraps keys and values in
   * `{schema, payload}`; false writes the payloads alone. Same events either way.
   */
  schemas?: boolean
}

export const DEFAULT_NOW = new Date('2026-11-21T10:00:00.000Z')

/** One line of the output, parsed. */
export interface KafkaRecordLine {
  topic: string
  partition: number
  /** Kafka offsets are int64: written as decimal strings. */
  offset: string
  key: { schema: Record<string, unknown>; payload: { id: string } }
  /** null: the tombstone Debezium writes after a delete. */
  value: { schema: Record<string, unknown>; payload: DebeziumPayload } | null
}

export interface DebeziumPayload {
  before: Record<string, unknown> | null
  after: Record<string, unknown> | null
  source: {
    version: string
    connector: string
    name: string
    ts_ms: number
    snapshot: string
    db: string
    sequence: string
    ts_us: number
    ts_ns: number
    schema: string
    table: string
    txId: number
    lsn: number
    xmin: null
  }
  transaction: null
  op: Op
  ts_ms: number
  ts_us: number
  ts_ns: number
}

export interface DatasetSummary {
  events: number
  organizations: Array<{
    id: string
    name: string
    keys: Array<{ id: string; rawKey: string; scopes: string[] }>
  }>
  /** Records per topic, by op ('tombstone' for the null records after deletes). */
  topics: Record<string, Partial<Record<Op | 'tombstone', number>>>
}

interface Resolved {
  ctx: M.Ctx
  prefix: string
  rounds: number
  onboardPerRound: number
}

function resolve(options: DatasetOptions): Resolved {
  const { organizations, providersPerOrganization: providers } = options
  const seed = options.seed ?? 1
  const rounds = options.updateRounds ?? 3
  const prefix = options.topicPrefix ?? 'product'
  const now = options.now ?? DEFAULT_NOW
  const int = (name: string, v: number, min: number, max: number) => {
    if (!Number.isInteger(v) || v < min || v > max) {
      throw new RangeError(`${name} must be an integer in [${min}, ${max}], got ${v}`)
    }
  }
  int('organizations', organizations, 1, UUID_LIMITS.org - 1)
  int('providersPerOrganization', providers, 1, M.GROUP_DOCUMENT_BASE - 1)
  int('seed', seed, 0, 0xffffffff)
  int('updateRounds', rounds, 0, 1000)
  if (!/^[A-Za-z0-9._-]+$/.test(prefix)) throw new RangeError('topicPrefix: letters, digits, . _ -')
  if (Number.isNaN(now.getTime())) throw new RangeError('now is not a valid date')

  // Providers onboarded while streaming: about 0.4% of an organization per round.
  const onboardPerRound = providers >= 50 ? Math.ceil(providers * 0.004) : 0
  const providerSlots = providers + onboardPerRound * rounds
  if (providerSlots >= M.GROUP_DOCUMENT_BASE)
    throw new RangeError('too many providers per organization')
  if (organizations * providerSlots >= 100_000_000) throw new RangeError('more providers than NPIs')
  const nowUs = now.getTime() * 1000
  const ctx: M.Ctx = {
    seed,
    organizations,
    providers,
    providerSlots,
    groups: Math.max(1, Math.round(providers / 18)),
    nowDay: Math.floor(now.getTime() / 86_400_000),
    // The snapshot is taken half a day before `now`; changes stream in after it.
    snapshotUs: nowUs - 12 * 3_600_000_000,
  }
  if (organizations * ctx.groups >= 100_000_000) throw new RangeError('more groups than NPIs')
  return { ctx, prefix, rounds, onboardPerRound }
}

/** Every record in output order, in batches, in parts (the writer copies constant parts). */
function* generateBatches(options: DatasetOptions): Generator<RecordParts[]> {
  const { ctx, prefix, rounds, onboardPerRound } = resolve(options)
  // About one transaction per provider and round: spread them over the 12 hours to `now`.
  const transactions = ctx.organizations * ctx.providerSlots * Math.max(1, rounds)
  const gapUs = Math.max(1000, Math.min(200_000, Math.floor((11 * 3_600_000_000) / transactions)))
  const emitter = new Emitter(prefix, ctx.seed, ctx.snapshotUs, gapUs, {
    schemas: options.schemas ?? true,
  })
  yield* snapshot(ctx, emitter)
  yield* stream(ctx, emitter, { rounds, onboardPerRound })
}

/** Every record in output order, in parts. */
export function* generateRecords(options: DatasetOptions): Generator<RecordParts> {
  for (const batch of generateBatches(options)) yield* batch
}

/** The dataset as NDJSON lines (without the newline). */
export function* generateDataset(options: DatasetOptions): Generator<string> {
  for (const parts of generateRecords(options)) yield recordLine(parts)
}

/** Organizations and their API keys (raw keys included): what a demo needs to call the API. */
export function datasetOrganizations(options: DatasetOptions): DatasetSummary['organizations'] {
  const { ctx } = resolve(options)
  return Array.from({ length: ctx.organizations }, (_, o) => {
    const org = M.orgPlan(ctx, o)
    return {
      id: org.id,
      name: org.name,
      keys: org.keys.map((k) => ({ id: k.id, rawKey: k.rawKey, scopes: [...k.scopes] })),
    }
  })
}

const CHUNK_BYTES = 4 * 1024 * 1024

/**
 * Streams the dataset to a file. Records are copied into a 4 MiB buffer and written a chunk at a
 * time, at most one write in flight: memory stays flat at any size.
 */
export async function writeDataset(path: string, options: DatasetOptions): Promise<DatasetSummary> {
  const organizations = datasetOrganizations(options)
  const topics: DatasetSummary['topics'] = {}
  const schemas = new Map<string, Buffer>()
  const file = await open(path, 'w')
  let events = 0
  try {
    let buffers = [Buffer.allocUnsafe(CHUNK_BYTES), Buffer.allocUnsafe(CHUNK_BYTES)]
    let buf = buffers[0]!
    let at = 0
    let inFlight: Promise<unknown> = Promise.resolve()
    const flush = async () => {
      await inFlight
      inFlight = file.write(buf, 0, at)
      buffers = [buffers[1]!, buffers[0]!]
      buf = buffers[0]!
      at = 0
    }
    for (const batch of generateBatches(options)) {
      for (const parts of batch) {
        const { codec } = parts
        let schema = schemas.get(codec.topic)
        if (schema === undefined) {
          schema = Buffer.from(codec.valuePrefix)
          schemas.set(codec.topic, schema)
        }
        // Three calls a record: the head as text, the value schema as bytes, the payload as text.
        const head =
          codec.linePrefix + parts.offset + '"' + codec.keyPrefix + parts.id + codec.keySuffix
        const tail =
          parts.payload === null ? ',"value":null}\n' : parts.payload + codec.valueSuffix + '\n'
        if (at + head.length + schema.length + tail.length * 3 > CHUNK_BYTES) await flush()
        at += buf.write(head, at)
        if (parts.payload !== null) at += schema.copy(buf, at)
        at += buf.write(tail, at)
        const counts = (topics[codec.topic] ??= {})
        counts[parts.op] = (counts[parts.op] ?? 0) + 1
        events++
      }
    }
    if (at > 0) await flush()
    await inFlight
  } finally {
    await file.close()
  }
  return { events, organizations, topics }
}

/** Snapshot plus streamed events per provider at the default mix, measured (see tests). */
export const EVENTS_PER_PROVIDER = { snapshot: 27.5, perRound: 1.23 } as const

/** Largest organization the size picker makes: a big customer, not the whole dataset in one. */
const MAX_PROVIDERS_PER_ORGANIZATION = 5000

/**
 * Organization and provider counts for about `targetEvents` events with `updateRounds` rounds
 * (default 3): organizations of up to 5,000 providers, at least two organizations once there is
 * room for them.
 */
export function datasetSizeFor(
  targetEvents: number,
  updateRounds = 3,
): { organizations: number; providersPerOrganization: number; updateRounds: number } {
  if (!Number.isFinite(targetEvents) || targetEvents <= 0)
    throw new RangeError('targetEvents must be positive')
  const perProvider = EVENTS_PER_PROVIDER.snapshot + EVENTS_PER_PROVIDER.perRound * updateRounds
  const providers = Math.max(1, Math.round(targetEvents / perProvider))
  const organizations = Math.max(
    providers >= 200 ? 2 : 1,
    Math.ceil(providers / MAX_PROVIDERS_PER_ORGANIZATION),
  )
  return {
    organizations,
    providersPerOrganization: Math.max(1, Math.round(providers / organizations)),
    updateRounds,
  }
}
