// `verify --repair` for control.db: its organizations and API keys replayed from their two topics
// aside, then handed to the live projector, which replaces its rows with them in one transaction
// (rebuild/control-repair.ts has the protocol). No whole rebuild: the other topics are not read
// and no organization file is touched. A repair that finds control.db moved past its replay
// (a control change arrived meanwhile) replays again, up to three times.
import Database from 'better-sqlite3'
import { randomBytes } from 'node:crypto'
import { mkdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Logger } from 'pino'
import { controlTables } from '../../schema/events.ts'
import type { ProjectorConfig } from '../../src/config.ts'
import type { Generation } from '../../src/layout.ts'
import { buildAside } from '../rebuild/aside.ts'
import {
  controlRepairState,
  requestControlRepair,
  withdrawControlRepair,
  type ControlRepairRequest,
} from '../rebuild/control-repair.ts'
import { acquireRebuildLock, describeHolder } from '../rebuild/lock.ts'
import { RebuildRefused } from '../rebuild/run.ts'

const ATTEMPTS = 3

export interface RepairControlDeps {
  config: ProjectorConfig
  logger: Logger
  live: Generation
  signal?: AbortSignal
}

/** Replaces control.db's rows of `organizations` (absent: all) with what their topics hold. */
export async function repairControl(
  deps: RepairControlDeps,
  organizations: readonly string[] | undefined,
): Promise<void> {
  const { config, logger, live } = deps
  for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
    const lock = acquireRebuildLock(config.dataDir, 'verify --repair (control.db)', new Date())
    if (!lock.held) {
      throw new RebuildRefused(`another rebuild is running: ${describeHolder(lock.holder)}`)
    }
    const run = `${new Date().toISOString().replace(/[-:.TZ]/g, '')}-${randomBytes(3).toString('hex')}`
    // Under rebuilds/: a killed run's folder is cleared as a killed rebuild's is.
    const dir = join(config.dataDir, 'rebuilds', run)
    try {
      mkdirSync(dir, { recursive: true })
      const built = await buildAside({
        config,
        logger,
        dir,
        groupId: `${config.kafka.groupId}.repair-${run}`,
        // No organization's rows: control.db's alone.
        organizations: new Set(),
        topics: [...controlTables].map((table) => `${config.topicPrefix}.public.${table}`),
        ...(deps.signal === undefined ? {} : { signal: deps.signal }),
      })
      requestControlRepair(live, {
        organizations: organizations === undefined ? null : [...organizations],
        position: built.position,
        rows: controlRows(built.generation.controlPath, organizations),
        requestedAt: new Date().toISOString(),
        requestedBy: `verify --repair, pid ${process.pid}`,
      })
      const state = await taken(deps)
      if (state === 'done') {
        logger.info({ attempt }, "the live projector replaced control.db's rows with the topics'")
        return
      }
      if (state === 'rejected') {
        throw new RebuildRefused(
          'the live projector set the control.db repair aside (its log says why): nothing was changed',
        )
      }
      logger.info(
        { attempt },
        'control.db changed during the replay of its topics: replaying again',
      )
    } finally {
      rmSync(dir, { recursive: true, force: true })
      lock.release()
    }
  }
  throw new RebuildRefused(
    `control.db kept changing during ${ATTEMPTS} replays of its topics: run verify --repair again`,
  )
}

/** control.db's rows as a replay left them, of `organizations` only when given. */
function controlRows(
  path: string,
  organizations: readonly string[] | undefined,
): ControlRepairRequest['rows'] {
  const only = organizations === undefined ? null : JSON.stringify(organizations)
  const db = new Database(path, { readonly: true, fileMustExist: true })
  try {
    const read = (table: string, owner: string) =>
      db
        .prepare(
          `SELECT * FROM ${table}
            WHERE @only IS NULL OR ${owner} IN (SELECT value FROM json_each(@only)) ORDER BY id`,
        )
        .all({ only }) as Record<string, string | number | null>[]
    return {
      organizations: read('organizations', 'id'),
      api_keys: read('api_keys', 'organization_id'),
    }
  } finally {
    db.close()
  }
}

/** Waits until the live projector has taken the request, or withdraws it (exit 2). */
async function taken(deps: RepairControlDeps): Promise<'done' | 'stale' | 'rejected'> {
  const deadline = performance.now() + deps.config.handoverTimeoutMs
  for (;;) {
    const state = controlRepairState(deps.live)
    if (state !== 'waiting') return state
    if (performance.now() > deadline || deps.signal?.aborted === true) {
      if (withdrawControlRepair(deps.live)) {
        throw new RebuildRefused(
          'the live projector did not take the control.db repair in time: is it running? (nothing was changed)',
        )
      }
    }
    await sleep(200)
  }
}
