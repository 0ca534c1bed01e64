// The repair of control.db's organizations and API keys, handed to the live projector.
//
// control.db has one writer, the live projector, and the api reads a key's state from it on every
// request (any commit to it empties the api's key cache). `verify --repair` replays the
// organizations and api_keys topics aside (aside.ts) up to a Kafka position P and leaves the rows
// they hold in a request here; the live projector, between two batches:
//   1. claims it (renames it `.taking`; a repair that gives up renames it `.withdrawn` instead:
//      whichever rename comes first wins);
//   2. if control.db has applied a control event at or past P, the replayed rows may be older
//      than its own: it sets the request aside as `.stale` (the repair replays again);
//   3. else replaces the rows of the request's organizations with the replayed ones, in one
//      transaction: from that commit on the api honours exactly what the topics hold;
//   4. removes the request.
// A kill at any point leaves control.db either as it was or repaired, never half of it.
import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Logger } from 'pino'
import { z } from 'zod'
import type { Generation } from '../../src/layout.ts'
import type { SqliteDatabase } from '../../src/sqlite.ts'
import type { PartitionPosition } from '../storage/handover.ts'

const row = z.record(z.string(), z.union([z.string(), z.number(), z.null()]))

const controlRepairRequest = z.object({
  /** The organizations whose rows are replaced; null: every one. */
  organizations: z.array(z.string()).nullable(),
  /** Where the replay ended: the next offset of every partition of the two topics. */
  position: z.array(
    z.object({
      topic: z.string(),
      partition: z.number().int().nonnegative(),
      offset: z.string().regex(/^\d+$/),
    }),
  ),
  rows: z.object({ organizations: z.array(row), api_keys: z.array(row) }),
  requestedAt: z.string(),
  requestedBy: z.string(),
})
export type ControlRepairRequest = z.infer<typeof controlRepairRequest>

/** What the live projector did with a request: `stale`: control.db had moved past the replay. */
export type ControlRepairOutcome = 'none' | 'repaired' | 'stale' | 'rejected'

type RequestState = 'json' | 'taking' | 'withdrawn' | 'stale' | 'rejected'

function requestPath(generation: Generation, state: RequestState = 'json'): string {
  return join(generation.dir, `control-repair.${state}`)
}

/** The column that says whose row it is, per table. */
const owner = { organizations: 'id', api_keys: 'organization_id' } as const

/** Leaves a request for the live projector, atomically (a reader never sees half of one). */
export function requestControlRepair(generation: Generation, request: ControlRepairRequest): void {
  const path = requestPath(generation)
  const tmp = `${path}.${process.pid}.tmp`
  writeFileSync(tmp, `${JSON.stringify(request)}\n`)
  renameSync(tmp, path)
}

/**
 * Where a request stands, for the repair that made it: `waiting` (not taken yet, or being
 * taken), `stale` or `rejected` (set aside, and cleared here), else `done`.
 */
export function controlRepairState(
  generation: Generation,
): 'waiting' | 'done' | 'stale' | 'rejected' {
  if (existsSync(requestPath(generation)) || existsSync(requestPath(generation, 'taking'))) {
    return 'waiting'
  }
  for (const state of ['stale', 'rejected'] as const) {
    if (existsSync(requestPath(generation, state))) {
      rmSync(requestPath(generation, state), { force: true })
      return state
    }
  }
  return 'done'
}

/** Takes back a request not claimed yet: true if withdrawn, false if the projector has it. */
export function withdrawControlRepair(generation: Generation): boolean {
  try {
    renameSync(requestPath(generation), requestPath(generation, 'withdrawn'))
    rmSync(requestPath(generation, 'withdrawn'), { force: true })
    return true
  } catch {
    return false
  }
}

/**
 * The live projector's side: claims a waiting request (or one claimed before a crash) and
 * applies it to control.db, between two batches. Synchronous: nothing else writes meanwhile.
 */
export function takeControlRepair(
  generation: Generation,
  control: SqliteDatabase,
  logger: Logger,
): ControlRepairOutcome {
  const taking = requestPath(generation, 'taking')
  if (!existsSync(taking)) {
    try {
      renameSync(requestPath(generation), taking)
    } catch {
      return 'none' // none waiting, or withdrawn meanwhile
    }
  }
  const outcome = applyRequest(control, readRequest(taking), logger)
  if (outcome === 'repaired') rmSync(taking, { force: true })
  else renameSync(taking, requestPath(generation, outcome))
  return outcome
}

function readRequest(path: string): ControlRepairRequest | undefined {
  try {
    const parsed = controlRepairRequest.safeParse(JSON.parse(readFileSync(path, 'utf8')))
    return parsed.success ? parsed.data : undefined
  } catch {
    return undefined
  }
}

function applyRequest(
  control: SqliteDatabase,
  request: ControlRepairRequest | undefined,
  logger: Logger,
): Exclude<ControlRepairOutcome, 'none'> {
  if (request === undefined) {
    logger.error('set aside an invalid control.db repair request')
    return 'rejected'
  }
  if (movedPast(control, request.position)) {
    logger.info(
      'control.db applied changes past the replay of its topics: the repair replays again',
    )
    return 'stale'
  }
  const only = request.organizations === null ? null : JSON.stringify(request.organizations)
  try {
    control.transaction(() => {
      for (const table of ['api_keys', 'organizations'] as const) {
        control
          .prepare(
            `DELETE FROM ${table}
              WHERE @only IS NULL OR ${owner[table]} IN (SELECT value FROM json_each(@only))`,
          )
          .run({ only })
      }
      for (const table of ['organizations', 'api_keys'] as const) {
        const columns = tableColumns(control, table)
        const insert = control.prepare(
          `INSERT INTO ${table} (${columns.map((c) => `"${c}"`).join(', ')})
           VALUES (${columns.map((c) => `@${c}`).join(', ')})`,
        )
        for (const r of request.rows[table]) {
          insert.run(Object.fromEntries(columns.map((c) => [c, r[c] ?? null])))
        }
      }
    })()
  } catch (error) {
    logger.error({ err: error }, 'could not apply a control.db repair request: set aside')
    return 'rejected'
  }
  logger.info(
    {
      organizations: request.organizations ?? 'all',
      rows: request.rows.organizations.length + request.rows.api_keys.length,
      requestedBy: request.requestedBy,
    },
    "control.db's organizations and API keys repaired from their topics",
  )
  return 'repaired'
}

/** Whether control.db applied an event of these topics at or past `position`. */
function movedPast(control: SqliteDatabase, position: readonly PartitionPosition[]): boolean {
  const next = new Map(position.map((p) => [`${p.topic}\u0000${p.partition}`, BigInt(p.offset)]))
  const topics = new Set(position.map((p) => p.topic))
  const applied = control
    .prepare('SELECT topic, partition, offset FROM applied_offsets')
    .all() as Array<{ topic: string; partition: number; offset: number }>
  return applied.some((a) => {
    if (!topics.has(a.topic)) return false
    const end = next.get(`${a.topic}\u0000${a.partition}`)
    return end === undefined || BigInt(a.offset) >= end
  })
}

function tableColumns(control: SqliteDatabase, table: string): string[] {
  return (control.prepare(`PRAGMA table_info(${table})`).all() as Array<{ name: string }>).map(
    (c) => c.name,
  )
}
