// The projector against a real Kafka broker: consumer group, dead-letter topic, offsets committed
// after the files, graceful stop and restart without duplicate effects.
import Database from 'better-sqlite3'
import type { Producer } from 'kafkajs'
import { mkdtempSync, rmSync } from 'node:fs'
import { PassThrough } from 'node:stream'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { SourceRecord } from '../../../projector/decode/decode.ts'
import { emptyOutcome } from '../../../projector/lanes/pack.ts'
import { UNPARSEABLE_VALUE_OMITTED } from '../../../projector/sources/dead-letters.ts'
import {
  type BatchApplier,
  LIVE_GROUP_BOUNDS,
  LOAD_GROUP_BOUNDS,
} from '../../../projector/sources/kafka.ts'
import { committedOffsets, partitionKey } from '../../../projector/sources/topic-admin.ts'
import { createProjector, type Projector } from '../../../projector/projector.ts'
import { loadProjectorConfig } from '../../../src/config.ts'
import { currentGeneration } from '../../../src/layout.ts'
import { createLogger } from '../../../src/log.ts'
import { createProgress } from '../../../src/progress.ts'
import { createTopics, kafkaClient, startKafka, type StartedKafka } from '../../harness/kafka.ts'
import { testKafkaSource } from '../../support/kafka-source.ts'
import {
  ORG_A,
  identifierRow,
  organizationRow,
  providerRow,
  record,
  uuid,
} from '../../support/debezium.ts'

let kafka: StartedKafka
let producer: Producer
const dirs: string[] = []

beforeAll(async () => {
  kafka = await startKafka()
  producer = kafkaClient(kafka.brokers).producer()
  await producer.connect()
})

afterAll(async () => {
  await producer?.disconnect()
  await kafka?.stop()
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

async function produce(records: ReturnType<typeof record>[]): Promise<void> {
  for (const r of records) {
    await producer.send({
      topic: r.topic,
      messages: [
        {
          key: JSON.stringify(r.key),
          value: typeof r.value === 'string' ? r.value : JSON.stringify(r.value),
        },
      ],
    })
  }
}

function projectorFor(dataDir: string, groupId: string): Projector {
  const config = loadProjectorConfig({
    DATA_DIR: dataDir,
    KAFKA_BROKERS: kafka.brokers.join(','),
    KAFKA_GROUP_ID: groupId,
    ADMIN_PORT: '0',
  })
  return createProjector({ config, logger: pino({ level: 'silent' }) })
}

async function eventually<T>(
  probe: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error('condition not reached in time')
    await new Promise((r) => setTimeout(r, 200))
  }
}

function providerDoc(dataDir: string, id: string): { body: string; updatedAt: string } | undefined {
  const generation = currentGeneration(dataDir)
  if (generation === undefined) return undefined
  try {
    const db = new Database(generation.organizationPath(ORG_A), {
      readonly: true,
      fileMustExist: true,
    })
    try {
      return db
        .prepare('SELECT body, updated_at AS updatedAt FROM doc_providers WHERE id = ?')
        .get(id) as { body: string; updatedAt: string } | undefined
    } finally {
      db.close()
    }
  } catch {
    return undefined
  }
}

/** Sends `n` small records to `topic`, keyed k0, k1... */
function sendNumbered(topic: string, n: number) {
  return producer.send({
    topic,
    messages: Array.from({ length: n }, (_, i) => ({ key: `k${i}`, value: `{"n":${i}}` })),
  })
}

/** One record to the first topic; once it is applied, two to the second and three to the third. */
async function sendAfterFirstBatch(topics: string[], calls: ReadonlyArray<unknown>) {
  await sendNumbered(topics[0]!, 1)
  await eventually(() => (calls.length === 1 ? true : undefined))
  await sendNumbered(topics[1]!, 2)
  await sendNumbered(topics[2]!, 3)
}

/**
 * A Kafka source on `topics` under `prefix`, started, whose applier holds its first batch until
 * `release()` (unless `hold` is false): what arrives meanwhile is delivered and waits. `calls`:
 * each batch applied, and `calledAt` when (performance.now()). `commit`: the applier's commit of
 * its files (by default, nothing to commit).
 */
async function heldSource(
  prefix: string,
  topics: string[],
  {
    hold = true,
    liveApplyIntervalMs = 0,
    commit = () => ({}),
  }: { hold?: boolean; liveApplyIntervalMs?: number; commit?: BatchApplier['commit'] } = {},
) {
  const calls: Array<readonly SourceRecord[]> = []
  const calledAt: number[] = []
  let release!: () => void
  const gate = new Promise<void>((resolve) => (release = resolve))
  const { source, ready } = testKafkaSource({
    brokers: kafka.brokers,
    topicPrefix: prefix,
    topics,
    applier: {
      applyBatch: async (records) => {
        calls.push(records)
        calledAt.push(performance.now())
        if (hold && calls.length === 1) await gate
        return emptyOutcome()
      },
      commit,
      buildInProgress: () => undefined,
    },
    liveApplyIntervalMs,
  })
  await source.start()
  return { source, calls, calledAt, release, ready }
}

describe('projector on Kafka', () => {
  it('projects, dead-letters, becomes ready, and survives a restart without duplicate effects', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'replica-kafka-'))
    dirs.push(dataDir)
    const bad = { ...providerRow(uuid(2), ORG_A) } as Record<string, unknown>
    delete bad.npi
    await produce([
      record({ table: 'organizations', op: 'r', after: organizationRow(ORG_A) }),
      record({
        table: 'provider_identifiers',
        op: 'r',
        after: identifierRow(uuid(3), uuid(1), ORG_A),
      }),
      record({ table: 'providers', op: 'r', after: providerRow(uuid(1), ORG_A), lsn: 5 }),
      record({ table: 'providers', op: 'c', after: bad, lsn: 6 }),
      // Not JSON, with a secret in it: dead-lettered without its value, which cannot be redacted.
      {
        ...record({ table: 'providers', op: 'c', after: providerRow(uuid(4), ORG_A) }),
        value: '{"payload": {"after": {"ssn": "123-45-6789"',
      },
    ])

    const projector = projectorFor(dataDir, 'it-group')
    await projector.startKafka()
    const admin = projector.adminAddress()!
    await eventually(async () =>
      (await fetch(`${admin}/readyz`)).status === 200 ? true : undefined,
    )

    const first = await eventually(() => providerDoc(dataDir, uuid(1)))
    expect(JSON.parse(first.body)).toMatchObject({
      name: 'Ada Lovelace',
      providerIds: [{ id: uuid(3) }],
    })

    // The bad event went to the dead-letter topic, with its origin.
    const consumer = kafkaClient(kafka.brokers).consumer({ groupId: 'dlq-reader' })
    await consumer.connect()
    await consumer.subscribe({ topics: ['product.dlq'], fromBeginning: true })
    const letters: Array<{ headers: Record<string, string>; value: string | null }> = []
    await consumer.run({
      eachMessage: async ({ message }) => {
        letters.push({
          headers: Object.fromEntries(
            Object.entries(message.headers ?? {}).map(([k, v]) => [k, String(v)]),
          ),
          value: message.value === null ? null : message.value.toString(),
        })
      },
    })
    await eventually(() => (letters.length >= 2 ? true : undefined))
    await consumer.disconnect()
    expect(letters.map((l) => l.headers)).toMatchObject([
      {
        'dlq.reason': 'schema_mismatch',
        'dlq.origin.topic': 'product.public.providers',
        'dlq.origin.offset': '1',
      },
      {
        'dlq.reason': 'unparseable',
        'dlq.origin.offset': '2',
        'dlq.value': UNPARSEABLE_VALUE_OMITTED,
      },
    ])
    // The replayable letter is the event as Debezium wrote it, less the never-stored columns.
    expect(JSON.parse(letters[0]!.value!)).toMatchObject({ payload: { op: 'c' } })
    expect(letters[0]!.value).not.toMatch(/ssn|internal_notes/)
    expect(letters[1]!.value).toBeNull()

    // The letters are produced before the batch that holds them is counted.
    const metrics = await eventually(async () => {
      const text = await (await fetch(`${admin}/metrics`)).text()
      return text.includes('outcome="dead_lettered"') && text.includes('caught_up 1')
        ? text
        : undefined
    })
    expect(metrics).toMatch(
      /replica_projector_events_total\{table="providers",outcome="dead_lettered"\} 1/,
    )
    expect(metrics).toMatch(/replica_projector_caught_up 1/)

    // A change moves updatedAt; a graceful stop commits; a restart re-applies nothing.
    await produce([
      record({
        table: 'providers',
        op: 'u',
        after: providerRow(uuid(1), ORG_A, { last_name: 'King' }),
        lsn: 7,
      }),
    ])
    const renamed = await eventually(() => {
      const doc = providerDoc(dataDir, uuid(1))
      return doc !== undefined && doc.body.includes('Ada King') ? doc : undefined
    })
    expect(renamed.updatedAt > first.updatedAt).toBe(true)
    await projector.stop()

    const again = projectorFor(dataDir, 'it-group')
    await again.startKafka()
    await eventually(async () =>
      (await fetch(`${again.adminAddress()!}/readyz`)).status === 200 ? true : undefined,
    )
    // A marker after the committed position: once it is applied, the restarted consumer has
    // fetched past everything before it, and every providers event it counted is the marker.
    await produce([
      record({ table: 'providers', op: 'c', after: providerRow(uuid(2), ORG_A), lsn: 8 }),
    ])
    const afterRestart = await eventually(async () => {
      const text = await (await fetch(`${again.adminAddress()!}/metrics`)).text()
      return providerDoc(dataDir, uuid(2)) !== undefined &&
        text.includes('{table="providers",outcome="applied"}')
        ? text
        : undefined
    })
    expect(
      afterRestart.match(/replica_projector_events_total\{table="providers",outcome="\w+"\} \d+/g),
    ).toEqual(['replica_projector_events_total{table="providers",outcome="applied"} 1'])
    await again.stop()
    expect(providerDoc(dataDir, uuid(1))).toEqual(renamed)
  })

  it('rebuilds into a new generation, keeps unchanged stamps, publishes it, and goes on', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'replica-kafka-rebuild-'))
    dirs.push(dataDir)
    const provider = uuid(50)
    await produce([
      record({ table: 'organizations', op: 'r', after: organizationRow(ORG_A) }),
      record({ table: 'providers', op: 'r', after: providerRow(provider, ORG_A), lsn: 50 }),
    ])
    const serving = projectorFor(dataDir, 'it-rebuild-first')
    await serving.startKafka()
    await eventually(async () =>
      (await fetch(`${serving.adminAddress()!}/readyz`)).status === 200 ? true : undefined,
    )
    const before = await eventually(() => providerDoc(dataDir, provider))
    const firstGeneration = currentGeneration(dataDir)!.name
    await serving.stop()

    const rebuilding = projectorFor(dataDir, 'it-rebuild')
    // Progress as --rebuild shows it when stderr is not a terminal.
    const progressLines: Record<string, unknown>[] = []
    const progress = createProgress({
      label: 'rebuild',
      unit: 'events',
      stream: new PassThrough(),
      logger: createLogger('test', 'info', {
        write: (line: string) => progressLines.push(JSON.parse(line) as Record<string, unknown>),
      }),
      intervalMs: 1,
    })
    await rebuilding.startKafka({ rebuild: true, progress })
    try {
      // Published once caught up: the api's pointer moves, the content and its stamp are kept.
      await eventually(() =>
        currentGeneration(dataDir)!.name !== firstGeneration ? true : undefined,
      )
      expect(providerDoc(dataDir, provider)).toEqual(before)
      // Every event in the topics at the start, counted once caught up.
      const finished = progressLines.filter((l) => l.msg === 'progress finished')
      expect(finished).toHaveLength(1)
      expect(finished[0]).toMatchObject({ task: 'rebuild', unit: 'events', etaSeconds: 0 })
      expect(finished[0]!.total).toBeGreaterThanOrEqual(2)
      expect(finished[0]!.done).toBe(finished[0]!.total)

      // And the rebuilt generation goes on following the topics.
      await produce([
        record({
          table: 'providers',
          op: 'u',
          after: providerRow(provider, ORG_A, { last_name: 'Byron' }),
          lsn: 51,
        }),
      ])
      const changed = await eventually(() => {
        const doc = providerDoc(dataDir, provider)
        return doc !== undefined && doc.body.includes('Ada Byron') ? doc : undefined
      }, 20_000)
      expect(changed.updatedAt > before.updatedAt).toBe(true)
      // Changed back to the content the previous generation holds: served now, so it is stamped
      // after every stamp the file holds, not with the previous generation's older one (a poller
      // past the change would never see it go back).
      await produce([
        record({ table: 'providers', op: 'u', after: providerRow(provider, ORG_A), lsn: 52 }),
      ])
      const back = await eventually(() => {
        const doc = providerDoc(dataDir, provider)
        return doc !== undefined && !doc.body.includes('Ada Byron') ? doc : undefined
      }, 20_000)
      expect(back.body.replace(back.updatedAt, '')).toBe(before.body.replace(before.updatedAt, ''))
      expect(back.updatedAt > changed.updatedAt).toBe(true)
      // Progress ended at the catch-up: what follows is not counted.
      expect(progressLines.at(-1)).toBe(finished[0])
    } finally {
      await rebuilding.stop()
    }
  })

  it('builds a load of many organizations as its last round commits, not again at the catch-up', async () => {
    // More organizations than a lane holds in a load's transaction (LOAD_DIRECT_FILES, 16): most
    // go through its spool and are opened once, at the round's commit. A Kafka load's last round
    // commits before its lag says it caught up; that commit builds their documents.
    const dataDir = mkdtempSync(join(tmpdir(), 'replica-kafka-many-'))
    dirs.push(dataDir)
    const organizations = Array.from({ length: 40 }, (_, n) => uuid(0x7000 + n))
    await produce(
      organizations.flatMap((org, n) => [
        record({ table: 'organizations', op: 'r', after: organizationRow(org) }),
        record({
          table: 'providers',
          op: 'r',
          after: providerRow(uuid(0x8000 + n), org),
          lsn: 60 + n,
        }),
      ]),
    )
    const lines: Record<string, unknown>[] = []
    const config = loadProjectorConfig({
      DATA_DIR: dataDir,
      KAFKA_BROKERS: kafka.brokers.join(','),
      KAFKA_GROUP_ID: 'it-many-organizations',
      ADMIN_PORT: '0',
      LANES: '1',
    })
    const logger = createLogger('test', 'info', {
      write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>),
    })
    const projector = createProjector({ config, logger })
    await projector.startKafka()
    try {
      await eventually(async () =>
        (await fetch(`${projector.adminAddress()!}/readyz`)).status === 200 ? true : undefined,
      )
      const atCommit = lines.filter(
        (l) =>
          l.msg ===
          'built the documents of organizations loaded in bulk as their last round committed',
      )
      expect(atCommit).toHaveLength(1)
      // Every organization in the topics: these, and the earlier tests'.
      expect(atCommit[0]!.files).toBeGreaterThanOrEqual(organizations.length)
      // The catch-up build (one line per organization it opens) had nothing left to build.
      expect(
        lines.filter((l) => l.msg === 'built the documents of an organization loaded in bulk'),
      ).toEqual([])
      const generation = currentGeneration(dataDir)!
      for (const [n, org] of organizations.entries()) {
        const db = new Database(generation.organizationPath(org), { readonly: true })
        try {
          const ids = db.prepare('SELECT id FROM doc_providers').pluck().all()
          expect(ids).toEqual([uuid(0x8000 + n)])
        } finally {
          db.close()
        }
      }
    } finally {
      await projector.stop()
    }
  })

  it('applies what arrives on several topics while a batch applies as one batch, and commits it', async () => {
    // Live, kafkajs hands over one batch per partition; a transaction's changes span several
    // tables' topics. Whatever arrives while the applier is busy goes to it as one batch: one
    // commit of the files and one of the offsets, not one per topic.
    const topics = ['grouping.public.a', 'grouping.public.b', 'grouping.public.c']
    const groupId = 'it-grouping'
    // The first batch holds the applier until the others have arrived.
    const { source, calls, release, ready } = await heldSource('grouping', topics)
    const admin = kafkaClient(kafka.brokers).admin()
    await admin.connect()
    try {
      await ready
      await sendAfterFirstBatch(topics, calls)
      // Both delivered while the first batch applies: kafkajs fetched on meanwhile.
      await new Promise((r) => setTimeout(r, 1_500))
      expect(calls).toHaveLength(1)
      release()
      await eventually(() => (calls.length === 2 ? true : undefined))
      expect(calls[1]!.map((r) => r.topic)).toEqual([
        topics[1],
        topics[1],
        topics[2],
        topics[2],
        topics[2],
      ])
      // And the offsets of all three, committed after it.
      const committed = await eventually(async () => {
        const offsets = await committedOffsets(admin, groupId, topics)
        const at = topics.map((t) => offsets.get(partitionKey(t, 0)))
        return at.every((o) => o !== undefined) ? at : undefined
      })
      expect(committed).toEqual([1n, 2n, 3n])
      await new Promise((r) => setTimeout(r, 500))
      expect(calls).toHaveLength(2)
    } finally {
      release()
      await admin.disconnect()
      await source.stop()
    }
  })

  it('reads again what was delivered behind a group that failed to settle: none of it is lost', async () => {
    // The first group's files fail to commit, once: it is not recorded, and nor is what was
    // delivered behind it while it applied. kafkajs fetches on from past those (their offsets were
    // resolved as they arrived), so the source sends the consumer back to the first of them.
    const topic = 'reread.public.a'
    const groupId = 'it-reread' // heldSource's
    await createTopics(kafka.brokers, [topic])
    let commits = 0
    const { source, calls, release, ready } = await heldSource('reread', [topic], {
      commit: () => {
        if (++commits === 1) throw new Error('the files could not commit')
        return {}
      },
    })
    const admin = kafkaClient(kafka.brokers).admin()
    await admin.connect()
    try {
      await ready
      await sendNumbered(topic, 1)
      await eventually(() => (calls.length === 1 ? true : undefined))
      for (let n = 1; n <= 5; n++) {
        await producer.send({ topic, messages: [{ key: `k${n}`, value: `{"n":${n}}` }] })
      }
      // Delivered behind the held group, waiting.
      await new Promise((r) => setTimeout(r, 1_500))
      release()
      const applied = () => new Set(calls.flatMap((records) => records.map((r) => r.offset)))
      await eventually(() =>
        ['0', '1', '2', '3', '4', '5'].every((offset) => applied().has(offset)) ? true : undefined,
      )
      const committed = await eventually(async () => {
        const offset = (await committedOffsets(admin, groupId, [topic])).get(partitionKey(topic, 0))
        return offset === 6n ? offset : undefined
      })
      expect(committed).toBe(6n)
    } finally {
      release()
      await admin.disconnect()
      await source.stop()
    }
  })

  it('live, applies what arrives within LIVE_APPLY_INTERVAL_MS of the last batch with the next', async () => {
    // A batch costs the projector milliseconds however small: live, the next batch is taken no
    // sooner than the interval after the last, and whatever arrived meanwhile is applied with it.
    const topics = ['paced.public.a', 'paced.public.b', 'paced.public.c']
    const intervalMs = 1_500
    const { source, calls, calledAt, ready } = await heldSource('paced', topics, {
      hold: false,
      liveApplyIntervalMs: intervalMs,
    })
    try {
      await ready
      // The first batch is applied at once: nothing was applied for longer than the interval.
      await sendAfterFirstBatch(topics, calls)
      await eventually(() => (calls.length === 2 ? true : undefined))
      const [, b, c] = topics
      expect(calls[1]!.map((r) => r.topic)).toEqual([b, b, c, c, c])
      expect(calledAt[1]! - calledAt[0]!).toBeGreaterThanOrEqual(intervalMs - 50)
      await new Promise((r) => setTimeout(r, 500))
      expect(calls).toHaveLength(2)
    } finally {
      await source.stop()
    }
  })

  it('bounds what it holds and applies at once by bytes, not only by records', async () => {
    // Records of 900 KB, a third more than a live group's bytes in all, arrive while the applier is
    // held on a first one: far fewer than a group's records. They go to the applier in groups
    // within the bytes' bound (a live one: the source has caught up), all of them, in order.
    const topic = 'bytes.public.a'
    const { source, calls, release, ready } = await heldSource('bytes', [topic])
    const bound = LIVE_GROUP_BOUNDS.bytes
    const count = Math.ceil((bound * 4) / 3 / (900 * 1024))
    try {
      await ready
      const value = (n: number) => `{"n":${n},"pad":"${'x'.repeat(900 * 1024)}"}`
      await producer.send({ topic, messages: [{ key: 'k0', value: value(0) }] })
      await eventually(() => (calls.length === 1 ? true : undefined))
      // One a request: the broker refuses a request over its 1 MB message limit.
      for (let n = 1; n <= count; n++) {
        await producer.send({ topic, messages: [{ key: `k${n}`, value: value(n) }] })
      }
      await new Promise((r) => setTimeout(r, 1_500))
      release()
      const applied = () => calls.slice(1).flatMap((records) => records)
      await eventually(() => (applied().length === count ? true : undefined))
      const bytes = (records: readonly SourceRecord[]) =>
        records.reduce((sum, r) => sum + (r.value as Buffer).length + (r.key as Buffer).length, 0)
      const groups = calls.slice(1).map(bytes)
      for (const group of groups) expect(group).toBeLessThanOrEqual(bound)
      expect(groups.length).toBeGreaterThan(1)
      // Live groups are larger than a load's (kafka.ts `LIVE_GROUP_BOUNDS`).
      expect(Math.max(...groups)).toBeGreaterThan(LOAD_GROUP_BOUNDS.bytes)
      expect(applied().map((r) => r.offset)).toEqual(
        Array.from({ length: count }, (_, i) => String(i + 1)),
      )
    } finally {
      release()
      await source.stop()
    }
  })
})
