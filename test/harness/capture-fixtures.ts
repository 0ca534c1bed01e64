// Regenerates test/fixtures/debezium/: real Debezium change events, captured from a real
// PostgreSQL -> Debezium -> Kafka pipeline started by the harness, one Kafka record per line in
// the projector's file-source format. Run: npx tsx test/harness/capture-fixtures.ts
//
// Scenarios (ids are fixed; see test/fixtures/debezium/README.md):
//  - snapshot reads (op r) of one row in every table, written before the connector starts;
//  - inserts (op c) of a second organization with a row in every table, in one transaction;
//  - updates (op u), deletes (op d, then a tombstone), a TRUNCATE (op t);
//  - updates that leave TOASTed values unchanged (text, text[], jsonb larger than 2 KB);
//  - changes to payer_portal_logins, which must produce nothing at all.
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { startConnect } from './connect.ts'
import { collectRecords, type CapturedRecord } from './consume.ts'
import { kafkaClient, startKafka } from './kafka.ts'
import { repoRoot } from './paths.ts'
import { startPostgres } from './postgres.ts'
import { HarnessError } from './process.ts'
import { afterConnectorStarts, beforeConnectorStarts, FINAL_MARKER, ids } from './fixture-sql.ts'

const PREFIX = 'product'
const outDir = join(repoRoot, 'test/fixtures/debezium')

async function highWatermarks(brokers: string[]): Promise<Map<string, number>> {
  const admin = kafkaClient(brokers).admin()
  await admin.connect()
  try {
    // Not the heartbeat table's topic: it grows every second, and holds no fixture.
    const topics = (await admin.listTopics()).filter(
      (t) => t.startsWith(`${PREFIX}.`) && t !== `${PREFIX}.public.replica_heartbeat`,
    )
    const marks = new Map<string, number>()
    for (const topic of topics) {
      const offsets = await admin.fetchTopicOffsets(topic)
      marks.set(
        topic,
        offsets.reduce((sum, p) => sum + Number(p.high), 0),
      )
    }
    return marks
  } finally {
    await admin.disconnect()
  }
}

/** Waits until no topic grows for two consecutive looks: Debezium has caught up. */
async function settle(brokers: string[]): Promise<Map<string, number>> {
  let previous = ''
  for (let stable = 0; stable < 2;) {
    await sleep(1500)
    const marks = await highWatermarks(brokers)
    const now = JSON.stringify([...marks].sort())
    stable = now === previous ? stable + 1 : 0
    previous = now
  }
  return highWatermarks(brokers)
}

interface Payload {
  op?: string
  source?: { lsn?: number; snapshot?: string }
}

function payloadOf(record: CapturedRecord): Payload | undefined {
  const value = record.value as { payload?: Payload } | null
  return value?.payload
}

/**
 * One order a replay can use: snapshot reads first, table by table as Debezium reads them
 * (table.include.list order), then streamed changes by LSN. A tombstone stays right after the
 * delete it follows.
 */
function replayOrder(records: CapturedRecord[], tables: string[]): CapturedRecord[] {
  const tableIndex = (topic: string): number => tables.indexOf(topic.split('.').at(-1) ?? '')
  const byOffset = [...records].sort(
    (a, b) => a.topic.localeCompare(b.topic) || Number(a.offset) - Number(b.offset),
  )
  const sortKey = new Map<CapturedRecord, number[]>()
  let previous: { topic: string; phase: number; lsn: number } | undefined
  for (const record of byOffset) {
    const payload = payloadOf(record)
    let phase: number
    let lsn: number
    if (payload === undefined && previous?.topic === record.topic) {
      ;({ phase, lsn } = previous)
    } else {
      phase = payload?.op === 'r' ? 0 : 1
      lsn = phase === 0 ? 0 : (payload?.source?.lsn ?? 0)
    }
    previous = { topic: record.topic, phase, lsn }
    sortKey.set(record, [phase, lsn, tableIndex(record.topic), Number(record.offset)])
  }
  return byOffset.sort((a, b) => {
    const [x, y] = [sortKey.get(a) ?? [], sortKey.get(b) ?? []]
    const i = x.findIndex((v, j) => v !== y[j])
    return i === -1 ? 0 : (x[i] ?? 0) - (y[i] ?? 0)
  })
}

/** File-source lines, with key and value spliced in as the exact JSON text Kafka holds. */
function ndjson(records: CapturedRecord[]): string {
  const json = (text: string | null): string => {
    if (text === null) return 'null'
    JSON.parse(text) // a non-JSON record would corrupt the file: fail here instead
    return text
  }
  return records
    .map(
      (r) =>
        `{"topic":${JSON.stringify(r.topic)},"partition":${r.partition},"offset":${JSON.stringify(r.offset)},"key":${json(r.keyText)},"value":${json(r.valueText)}}`,
    )
    .join('\n')
    .concat('\n')
}

function check(condition: boolean, message: string): void {
  if (!condition) throw new HarnessError(`fixture capture: ${message}`)
}

async function main(): Promise<void> {
  const started = Date.now()
  const log = (message: string): void =>
    console.log(`[capture ${((Date.now() - started) / 1000).toFixed(1)}s] ${message}`)

  log('starting PostgreSQL and Kafka')
  const [postgres, kafka] = await Promise.all([startPostgres(), startKafka()])
  const stops = [() => kafka.stop(), () => postgres.stop()]
  try {
    await postgres.query(beforeConnectorStarts)
    log('starting Kafka Connect + Debezium (snapshot of the rows written so far)')
    // The fixtures keep the schema-wrapped envelope they were captured in: the connector ships
    // schemaless, and the decoder's tests read both (test/fixtures/debezium/README.md).
    const connect = await startConnect({
      brokers: kafka.brokers,
      postgres,
      topicPrefix: PREFIX,
      // The fixtures keep a TRUNCATE event, which the projector still applies (for topics kept
      // with the delete policy): the shipped connector skips them, since its compacted topics
      // refuse keyless records (projector/sources/topic-config.ts).
      overrides: {
        'skipped.operations': 'none',
        'topic.creation.default.cleanup.policy': 'delete',
        'topic.creation.default.retention.ms': '-1',
        'key.converter.schemas.enable': 'true',
        'value.converter.schemas.enable': 'true',
      },
    })
    stops.unshift(() => connect.stop())
    log('streaming changes')
    for (const statement of afterConnectorStarts) await postgres.query(statement)

    log('waiting for the final marker and for every topic to settle')
    await collectRecords(
      kafka.brokers,
      [`${PREFIX}.public.organizations`],
      (records) => records.some((r) => JSON.stringify(payloadOf(r) ?? null).includes(FINAL_MARKER)),
      120_000,
    )
    const marks = await settle(kafka.brokers)
    const total = [...marks.values()].reduce((a, b) => a + b, 0)
    const topics = [...marks.keys()].filter((t) => !t.startsWith('__')).sort()
    check(
      topics.every((t) => !t.includes('payer_portal_logins')),
      'a payer_portal_logins topic exists',
    )
    const records = await collectRecords(kafka.brokers, topics, (r) => r.length >= total, 120_000)
    const included = connect.connector.config['table.include.list'] ?? ''
    const ordered = replayOrder(
      records,
      included.split(',').map((t) => t.replace(/^public\./, '')),
    )

    const ops = new Map<string, Set<string>>()
    for (const r of ordered) {
      const table = r.topic.split('.').at(-1) ?? r.topic
      const op = payloadOf(r)?.op ?? 'tombstone'
      ops.set(table, (ops.get(table) ?? new Set()).add(op))
    }
    for (const [table, set] of ops) log(`${table}: ${[...set].sort().join(' ')}`)
    check(ops.size === 15, `expected 15 tables, got ${ops.size}`)
    check(
      [...ops.values()].every((s) => s.has('r') && s.has('c')),
      'every table has r and c',
    )

    mkdirSync(outDir, { recursive: true })
    writeFileSync(join(outDir, 'changes.ndjson'), ndjson(ordered))
    log(
      `wrote ${ordered.length} records to ${join(outDir, 'changes.ndjson')} (ids: ${ids.orgA}, ${ids.orgB})`,
    )
  } finally {
    for (const stop of stops) await stop().catch(() => undefined)
  }
}

main().catch((error: unknown) => {
  console.error(error)
  process.exit(1)
})
