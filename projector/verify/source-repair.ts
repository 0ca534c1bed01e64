// `verify --repair` from the source: what a replay of the topics cannot mend (a change the
// connector never saw: it was stopped and its slot dropped; a row a skipped truncate left
// behind), mended through the topics themselves, so that the topics stay the source of truth and
// a later rebuild, or any other consumer, agrees with the replica.
//
//   1. Rows the replica holds that PostgreSQL lacks: an incremental snapshot emits no delete, so
//      verify produces a tombstone for each (key `{"id":...}`, as Debezium's schemaless key
//      converter writes it: byte for byte, so compaction takes the row's earlier records with it).
//      The replica's ids are read first, PostgreSQL's in a snapshot taken after: a row the
//      replica held was committed before that snapshot, so one the snapshot lacks was deleted.
//   2. Then an `execute-snapshot` signal (an incremental snapshot) through Debezium's signalling
//      table, restricted by `additional-conditions` to the organizations' rows: every product
//      table carries organization_id (schema/source.sql), organizations its own id, so one
//      condition a table selects exactly them and nothing else is re-read. The signal goes after
//      the tombstones: a row that exists again (a re-used id) is read after its tombstone.
//   3. A wait, bounded, for Debezium's notification that the snapshot completed (its sink
//      channel, a topic; an incremental snapshot's notifications carry the signal's id).
// The snapshot's `op: r` events interleave with streaming by Debezium's watermarks (a row changed
// while its chunk is open is dropped from the chunk; the streamed change carries it), and carry
// the position of the window's close, past anything streamed before: the projector applies them
// with its usual order guards (storage/mirror.ts `supersedes`), nothing special.
import Database from 'better-sqlite3'
import { Kafka, logLevel as kafkaLogLevel, Partitioners, type Consumer } from 'kafkajs'
import { randomUUID } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import pg from 'pg'
import type { Logger } from 'pino'
import {
  controlTables,
  organizationTables,
  sourceTables,
  type SourceTable,
} from '../../schema/events.ts'
import type { VerifyConfig } from '../../src/config.ts'
import { isOrganizationId, type Generation } from '../../src/layout.ts'
import { organizationKeyIn, scopeConnection } from '../../src/organization-scope.ts'
import { liveOrganizationPaths } from '../rebuild/run.ts'
import { CHANGE_TOPIC_CONFIG } from '../sources/topic-config.ts'
import { describeUrl, openProductDatabase, VerifyRefused } from './source.ts'

/** What to re-read from PostgreSQL: these organizations' rows, and maybe control.db's tables. */
export interface SourceScope {
  /** Every table's rows of these organizations. */
  organizations: readonly string[]
  /**
   * control.db drifted with no organization to name (a whole-replica verify): the organizations
   * and api_keys tables whole. They are small, and read by no organization file.
   */
  controlTablesWhole: boolean
}

/** Debezium's `execute-snapshot` signal data (its documented format). */
export interface SnapshotSignal {
  type: 'incremental'
  'data-collections': string[]
  'additional-conditions': { 'data-collection': string; filter: string }[]
}

/**
 * The signal for `scope`, or undefined when it names nothing. Pure. The filters are SQL that
 * Debezium appends to its chunk queries, so no parameter can carry the ids: each must be a
 * canonical uuid (already validated where it came from; checked again, as this is where it
 * becomes SQL), and is quoted as a literal.
 */
export function snapshotSignal(scope: SourceScope): SnapshotSignal | undefined {
  for (const id of scope.organizations) {
    if (!isOrganizationId(id)) throw new Error(`not an organization id: ${JSON.stringify(id)}`)
  }
  const ids = [...new Set(scope.organizations)].sort()
  const collections: string[] = []
  const conditions: SnapshotSignal['additional-conditions'] = []
  for (const table of sourceTables) {
    const whole = scope.controlTablesWhole && controlTables.has(table)
    if (!whole && ids.length === 0) continue
    const collection = `public.${table}`
    collections.push(collection)
    if (whole) continue
    const owner = table === 'organizations' ? 'id' : 'organization_id'
    conditions.push({
      'data-collection': collection,
      filter: `${owner} IN (${ids.map((id) => `'${id}'`).join(', ')})`,
    })
  }
  if (collections.length === 0) return undefined
  return {
    type: 'incremental',
    'data-collections': collections,
    'additional-conditions': conditions,
  }
}

/** A row to delete through the topics: its table and primary key. */
export interface RowKey {
  table: SourceTable
  id: string
}

/**
 * The rows of `replica` that `source` lacks, by table. Pure. `replica` must have been read before
 * `source`'s snapshot was taken (see the header).
 */
export function rowsToDelete(
  replica: ReadonlyMap<SourceTable, ReadonlySet<string>>,
  source: ReadonlyMap<SourceTable, ReadonlySet<string>>,
): RowKey[] {
  const rows: RowKey[] = []
  for (const [table, ids] of replica) {
    const present = source.get(table) ?? new Set<string>()
    for (const id of [...ids].sort()) if (!present.has(id)) rows.push({ table, id })
  }
  return rows
}

/** The tombstone Debezium would write after a delete of `row`: same topic, same key bytes. */
export function tombstoneFor(
  topicPrefix: string,
  row: RowKey,
): { topic: string; key: string; value: null } {
  return {
    topic: `${topicPrefix}.public.${row.table}`,
    key: JSON.stringify({ id: row.id }),
    value: null,
  }
}

export interface SourceRepairDeps {
  config: VerifyConfig
  logger: Logger
  live: Generation
  signal?: AbortSignal
}

/** What the repair from the source did, for the report. */
export interface SourceRepair {
  organizations: string[]
  controlTablesWhole: boolean
  /** The signal's id: Debezium's notifications, and its signalling table's row, carry it. */
  signalId: string
  /** Rows the replica held that PostgreSQL lacks, deleted through tombstones. */
  tombstones: RowKey[]
  /** From the signal to Debezium's notification that the snapshot completed. */
  waitedSeconds: number
}

/** Steps 1 to 3 of the header; throws VerifyRefused (exit 2) when one cannot be done. */
export async function repairFromSource(
  deps: SourceRepairDeps,
  scope: SourceScope,
): Promise<SourceRepair> {
  const { config, logger } = deps
  const signal = snapshotSignal(scope)
  if (signal === undefined) throw new Error('repairFromSource: nothing to re-read')
  const signalId = randomUUID()
  await preflight(config)
  const tombstones = await extraRows(deps, scope)
  const kafka = new Kafka({
    clientId: `${config.projector.kafka.clientId}.verify-repair`,
    brokers: config.projector.kafka.brokers,
    logLevel: kafkaLogLevel.NOTHING,
    connectionTimeout: 5_000,
  })
  if (tombstones.length > 0) {
    logger.info(
      { rows: tombstones.length },
      'repairing from the source: tombstones for the rows PostgreSQL no longer has',
    )
    // kafkajs's default partitioner is Java's (murmur2 of the key): the partition Debezium's
    // producer chose for the row's key. A duplicate tombstone is harmless: not idempotent.
    const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner })
    await producer.connect()
    try {
      const byTopic = new Map<string, { key: string; value: null }[]>()
      for (const row of tombstones) {
        const { topic, key, value } = tombstoneFor(config.projector.topicPrefix, row)
        byTopic.set(topic, [...(byTopic.get(topic) ?? []), { key, value }])
      }
      await producer.sendBatch({
        acks: -1,
        topicMessages: [...byTopic].map(([topic, messages]) => ({ topic, messages })),
      })
    } finally {
      await producer.disconnect()
    }
  }
  // Subscribed before the signal: the notification cannot be missed whatever the timing.
  const waiter = await notificationWaiter(kafka, config, signalId)
  try {
    const started = performance.now()
    await insertSignal(config, signalId, signal)
    logger.info(
      {
        signalId,
        organizations: scope.organizations,
        controlTablesWhole: scope.controlTablesWhole,
      },
      "repairing from the source: signalled Debezium's incremental snapshot, waiting for it",
    )
    await waiter.completed(config.snapshot.timeoutMs, deps.signal)
    const waitedSeconds = Math.round((performance.now() - started) / 100) / 10
    logger.info({ signalId, waitedSeconds }, 'the incremental snapshot completed')
    return {
      organizations: [...scope.organizations].sort(),
      controlTablesWhole: scope.controlTablesWhole,
      signalId,
      tombstones,
      waitedSeconds,
    }
  } finally {
    await waiter.close()
  }
}

/** The rows of the scope the replica holds that PostgreSQL lacks (replica read first). */
async function extraRows(deps: SourceRepairDeps, scope: SourceScope): Promise<RowKey[]> {
  const { config, live } = deps
  const orgs = [...scope.organizations]
  const replica = new Map<SourceTable, Set<string>>()
  const add = (table: SourceTable, ids: string[]) => {
    const set = replica.get(table) ?? new Set<string>()
    for (const id of ids) set.add(id)
    replica.set(table, set)
  }
  const livePath = liveOrganizationPaths(live)
  for (const organizationId of orgs) {
    const path = livePath(organizationId)
    if (path === undefined) continue
    const db = new Database(path, { readonly: true, fileMustExist: true })
    try {
      // Its own rows only, in a file organizations share (read through the scope's views).
      const scope = scopeConnection(db)
      if (scope.layout === 'shared') {
        const key = organizationKeyIn(db, organizationId)
        if (key === undefined) continue
        scope.enter(key)
      }
      for (const table of organizationTables) {
        add(table, db.prepare(`SELECT id FROM "${table}"`).pluck().all() as string[])
      }
    } finally {
      db.close()
    }
  }
  const control = new Database(live.controlPath, { readonly: true, fileMustExist: true })
  try {
    const only = scope.controlTablesWhole ? null : JSON.stringify(orgs)
    const read = (table: 'organizations' | 'api_keys', owner: string) =>
      control
        .prepare(
          `SELECT id FROM ${table} WHERE @only IS NULL OR ${owner} IN (SELECT value FROM json_each(@only))`,
        )
        .pluck()
        .all({ only }) as string[]
    add('organizations', read('organizations', 'id'))
    add('api_keys', read('api_keys', 'organization_id'))
  } finally {
    control.close()
  }

  const database = await openProductDatabase(config.databaseUrl, { pageRows: config.pageRows })
  try {
    const source = new Map<SourceTable, Set<string>>()
    for (const table of replica.keys()) {
      const ids = new Set<string>()
      const whole = scope.controlTablesWhole && controlTables.has(table)
      await database.readTable(table, whole ? undefined : orgs, (rows) => {
        for (const row of rows) ids.add(String(row.id))
      })
      source.set(table, ids)
    }
    return rowsToDelete(replica, source)
  } finally {
    await database.close()
  }
}

interface Preflight {
  /** Whether a replication slot of that name exists, and is in use (a connector streams). */
  slot: 'active' | 'inactive' | 'missing'
  present: boolean
  may_insert: boolean | null
}

/**
 * Refuses before anything is written (tombstones included) when the snapshot could not be had: no
 * connector streaming from Debezium's slot (none would read the signal, and a new slot starts
 * past it), no signalling table, or no INSERT on it for verify's role.
 */
async function preflight(config: VerifyConfig): Promise<void> {
  const client = new pg.Client({ connectionString: config.databaseUrl })
  const table = config.snapshot.signalTable
  let state: Preflight
  try {
    await client.connect()
    const result = await client.query<Preflight>(
      `SELECT CASE (SELECT active FROM pg_replication_slots WHERE slot_name = $2)
                WHEN true THEN 'active' WHEN false THEN 'inactive' ELSE 'missing' END AS slot,
              to_regclass($1) IS NOT NULL AS present,
              CASE WHEN to_regclass($1) IS NULL THEN NULL
                   ELSE has_table_privilege(to_regclass($1), 'INSERT') END AS may_insert`,
      [table, config.slotName],
    )
    state = result.rows[0]!
  } catch (error) {
    throw new VerifyRefused(
      `cannot check the signalling table through ${describeUrl(config.databaseUrl)}: ${(error as Error).message}`,
    )
  } finally {
    await client.end().catch(() => undefined)
  }
  const role = decodeURIComponent(new URL(config.databaseUrl).username)
  if (state.slot !== 'active') {
    throw new VerifyRefused(
      `cannot repair from the source: Debezium's replication slot ${config.slotName} is ${state.slot === 'missing' ? 'missing' : 'not in use'}, so no connector is streaming to read the snapshot signal (VERIFY_SLOT_NAME). Start the connector, then run verify --repair again`,
    )
  }
  if (!state.present) throw new VerifyRefused(noSignalTable(config))
  if (state.may_insert !== true) throw new VerifyRefused(noSignalGrant(table, role))
}

const noSignalTable = (config: VerifyConfig) =>
  `no signalling table ${config.snapshot.signalTable} in ${describeUrl(config.databaseUrl)}: create it (schema/source.sql) and set the connector's signal.data.collection to it (VERIFY_SIGNAL_TABLE)`

const noSignalGrant = (table: string, role: string) =>
  `role ${role} may not signal Debezium: GRANT INSERT ON ${table} TO ${role} (VERIFY_SIGNAL_TABLE)`

/** The signal row, in its own connection (verify's snapshot is read-only), by parameters. */
async function insertSignal(
  config: VerifyConfig,
  id: string,
  signal: SnapshotSignal,
): Promise<void> {
  const client = new pg.Client({ connectionString: config.databaseUrl })
  const where = describeUrl(config.databaseUrl)
  const [schema, table] = config.snapshot.signalTable.split('.') as [string, string]
  try {
    await client.connect()
    await client.query(
      `INSERT INTO "${schema}"."${table}" (id, type, data) VALUES ($1, 'execute-snapshot', $2)`,
      [id, JSON.stringify(signal)],
    )
  } catch (error) {
    const code = (error as { code?: string }).code
    const role = decodeURIComponent(new URL(config.databaseUrl).username)
    if (code === '42501') throw new VerifyRefused(noSignalGrant(config.snapshot.signalTable, role))
    if (code === '42P01') throw new VerifyRefused(noSignalTable(config))
    throw new VerifyRefused(`cannot signal Debezium through ${where}: ${(error as Error).message}`)
  } finally {
    await client.end().catch(() => undefined)
  }
}

interface NotificationWaiter {
  /** Resolves once Debezium notifies the snapshot COMPLETED; throws VerifyRefused otherwise. */
  completed(timeoutMs: number, signal: AbortSignal | undefined): Promise<void>
  close(): Promise<void>
}

/** Debezium's notification as its sink channel writes it (schemaless JSON). */
interface Notification {
  id?: string
  aggregate_type?: string
  type?: string
  additional_data?: Record<string, string>
}

/**
 * Reads the notification topic (from its beginning: it is small, and the ids tell runs apart) in
 * a consumer group of its own, deleted after.
 */
async function notificationWaiter(
  kafka: Kafka,
  config: VerifyConfig,
  signalId: string,
): Promise<NotificationWaiter> {
  const topic = config.snapshot.notificationTopic
  const admin = kafka.admin()
  await admin.connect()
  // Connect creates it with the first notification; created here first, as it would be.
  if (!(await admin.listTopics()).includes(topic)) {
    await admin
      .createTopics({
        topics: [
          {
            topic,
            configEntries: Object.entries(CHANGE_TOPIC_CONFIG).map(([name, value]) => ({
              name,
              value,
            })),
          },
        ],
        waitForLeaders: true,
      })
      .catch(() => undefined)
  }
  const groupId = `${config.projector.kafka.groupId}.verify-snapshot-${signalId}`
  const consumer: Consumer = kafka.consumer({ groupId })
  let outcome: 'COMPLETED' | 'ABORTED' | undefined
  const seen: string[] = []
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  await consumer.run({
    eachMessage: async ({ message }) => {
      if (message.value === null) return
      let n: Notification
      try {
        n = JSON.parse(message.value.toString()) as Notification
      } catch {
        return
      }
      if (n.id !== signalId || n.aggregate_type !== 'Incremental Snapshot') return
      if (n.type !== undefined) seen.push(n.type)
      if (n.type === 'COMPLETED' || n.type === 'ABORTED') outcome = n.type
    },
  })
  return {
    async completed(timeoutMs, signal) {
      const deadline = performance.now() + timeoutMs
      while (outcome === undefined) {
        if (signal?.aborted === true) {
          throw new VerifyRefused(
            `stopped while waiting for Debezium's incremental snapshot ${signalId}: it may still complete; run verify again`,
          )
        }
        if (performance.now() > deadline) {
          throw new VerifyRefused(
            `Debezium did not complete the incremental snapshot ${signalId} within ${Math.round(timeoutMs / 1000)} s (VERIFY_SNAPSHOT_TIMEOUT_MS; notifications seen: ${seen.length > 0 ? seen.join(', ') : 'none'}): is the connector running, with signal.enabled.channels=source and notification.enabled.channels=sink to ${topic}? It may still complete: run verify again later`,
          )
        }
        await sleep(200)
      }
      if (outcome === 'ABORTED') {
        throw new VerifyRefused(
          `Debezium aborted the incremental snapshot ${signalId} (its log says why): run verify --repair again`,
        )
      }
    },
    async close() {
      await consumer.disconnect().catch(() => undefined)
      await admin.deleteGroups([groupId]).catch(() => undefined)
      await admin.disconnect().catch(() => undefined)
    },
  }
}
