// The projector's freshness over a real Kafka broker (docs/freshness.md), with heartbeat events
// produced by hand in Debezium's shape: a beat becomes freshness.json's instant once every
// change partition is applied up to the ends fetched after it; a quiet stream advances on beats
// alone; with no beat at all, one warning and nothing claimed. A group routed past a beat's ends
// claims that beat, before it is applied, for every organization it leaves alone.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Producer } from 'kafkajs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { emptyOutcome } from '../../../projector/lanes/pack.ts'
import { createProjector } from '../../../projector/projector.ts'
import { FreshnessTracker, type PartitionEnds } from '../../../projector/sources/freshness.ts'
import { loadProjectorConfig } from '../../../src/config.ts'
import { freshnessOf, readFreshness, type FreshnessRecord } from '../../../src/freshness.ts'
import { currentGeneration } from '../../../src/layout.ts'
import { createLogger } from '../../../src/log.ts'
import { kafkaClient, startKafka, type StartedKafka } from '../../harness/kafka.ts'
import { testKafkaSource } from '../../support/kafka-source.ts'
import { ORG_A, ORG_B, organizationRow, providerRow, record, uuid } from '../../support/debezium.ts'

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

async function produce(prefix: string, records: ReturnType<typeof record>[]): Promise<void> {
  for (const r of records) {
    await producer.send({
      topic: r.topic.replace(/^product\./, `${prefix}.`),
      messages: [{ key: JSON.stringify(r.key), value: JSON.stringify(r.value) }],
    })
  }
}

function beat(tsMs: number) {
  return record({
    table: 'replica_heartbeat',
    op: 'u',
    after: { id: 'credentialing_replica', beat_at: tsMs * 1000 },
    tsMs,
    wrapped: false,
  })
}

function projectorFor(prefix: string, lines: Record<string, unknown>[]) {
  const dataDir = mkdtempSync(join(tmpdir(), 'replica-freshness-'))
  dirs.push(dataDir)
  const config = loadProjectorConfig({
    DATA_DIR: dataDir,
    KAFKA_BROKERS: kafka.brokers.join(','),
    KAFKA_GROUP_ID: `${prefix}-group`,
    TOPIC_PREFIX: prefix,
    ADMIN_PORT: '0',
    LANES: '1',
    FRESHNESS_SETTLE_MS: '100',
    HEARTBEAT_MISSING_WARN_MS: '1000',
  })
  const logger = createLogger('test', 'info', {
    write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>),
  })
  return { dataDir, projector: createProjector({ config, logger }) }
}

async function eventually<T>(probe: () => T | undefined, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error('timed out')
    await new Promise((r) => setTimeout(r, 100))
  }
}

describe('freshness over Kafka', { timeout: 120_000 }, () => {
  it('a beat becomes the instant after the catch-up; then beats alone move it, never back', async () => {
    const prefix = 'fresh'
    await produce(prefix, [
      record({ table: 'organizations', op: 'r', after: organizationRow(ORG_A), wrapped: false }),
      record({ table: 'providers', op: 'r', after: providerRow(uuid(1), ORG_A), wrapped: false }),
    ])
    const lines: Record<string, unknown>[] = []
    const { dataDir, projector } = projectorFor(prefix, lines)
    await projector.startKafka()
    try {
      const instant = () => {
        const gen = currentGeneration(dataDir)
        return gen === undefined ? undefined : readFreshness(gen.dir)?.completeThroughMs
      }
      const now = Date.now()
      await produce(prefix, [beat(now - 1_000)])
      expect(await eventually(() => instant() ?? undefined)).toBe(now - 1_000)
      // A quiet stream: beats alone move it, never back.
      await produce(prefix, [beat(now - 500)])
      await eventually(() => (instant() === now - 500 ? true : undefined))
      await produce(prefix, [beat(now - 2_000)])
      await new Promise((r) => setTimeout(r, 500))
      expect(instant()).toBe(now - 500)
      const metrics = await (await fetch(`${projector.adminAddress()}/metrics`)).text()
      expect(metrics).toMatch(/^replica_projector_staleness_seconds \d/m)
      expect(lines.some((l) => String(l.msg).startsWith('no heartbeat'))).toBe(false)
    } finally {
      await projector.stop()
    }
  })

  it('without heartbeats: one warning, and no instant claimed', async () => {
    const prefix = 'silent'
    await produce(prefix, [
      record({ table: 'organizations', op: 'r', after: organizationRow(ORG_A), wrapped: false }),
    ])
    const lines: Record<string, unknown>[] = []
    const { dataDir, projector } = projectorFor(prefix, lines)
    await projector.startKafka()
    try {
      const warned = () => lines.filter((l) => String(l.msg).startsWith('no heartbeat'))
      await eventually(() => (warned().length > 0 ? true : undefined))
      await new Promise((r) => setTimeout(r, 2_500))
      expect(warned()).toHaveLength(1)
      expect(warned()[0]).toMatchObject({ level: 40, topic: 'silent.public.replica_heartbeat' })
      const gen = currentGeneration(dataDir)
      expect(gen === undefined ? undefined : readFreshness(gen.dir)).toBeUndefined()
    } finally {
      await projector.stop()
    }
  })
})

/** A gate the test opens: `wait` resolves once `open` is called. */
function gate() {
  let open!: () => void
  const wait = new Promise<void>((resolve) => (open = resolve))
  return { open, wait }
}

describe('freshness for the organizations a group leaves alone', { timeout: 120_000 }, () => {
  it('a group routed past a beat claims it for every other organization before it is applied', async () => {
    const prefix = 'claim'
    const providers = `${prefix}.public.providers`
    await produce(prefix, [
      record({ table: 'providers', op: 'r', after: providerRow(uuid(1), ORG_A), wrapped: false }),
    ])
    let endsFetched = 0
    class WatchedTracker extends FreshnessTracker {
      override setEnds(ends: Map<string, PartitionEnds> | undefined): void {
        super.setEnds(ends)
        if (ends !== undefined) endsFetched++
      }
    }
    const tracker = new WatchedTracker({ settleMs: 50 })
    const published: FreshnessRecord[] = []
    let held: { entered: ReturnType<typeof gate>; route: ReturnType<typeof gate> } | undefined
    const apply = gate()
    const { source, ready } = testKafkaSource({
      brokers: kafka.brokers,
      topicPrefix: prefix,
      topics: [providers],
      applier: {
        // Every group changes ORG_A's provider; once held, the group waits before its routing
        // is told, then before it is reported applied.
        applyBatch: async (_records, onRouted) => {
          const hold = held
          if (hold !== undefined) {
            hold.entered.open()
            await hold.route.wait
          }
          onRouted?.(new Set([ORG_A]))
          if (hold !== undefined) await apply.wait
          return emptyOutcome()
        },
        commit: () => ({}),
        buildInProgress: () => undefined,
      },
      freshness: {
        heartbeatTopic: `${prefix}.public.replica_heartbeat`,
        tracker,
        publish: () => published.push(tracker.record(Date.now())),
      },
    })
    await source.start()
    try {
      await ready
      const now = Date.now()
      await produce(prefix, [beat(now - 2_000)])
      await eventually(() => (tracker.completeThroughMs === now - 2_000 ? true : undefined))
      // A change of ORG_A, held before its routing is told; then a beat behind it, whose ends
      // (fetched while the group waits) include the change.
      held = { entered: gate(), route: gate() }
      await produce(prefix, [
        record({ table: 'providers', op: 'u', after: providerRow(uuid(1), ORG_A), wrapped: false }),
      ])
      await held.entered.wait
      const fetched = endsFetched
      await produce(prefix, [beat(now - 1_000)])
      await eventually(() => (endsFetched > fetched ? true : undefined))
      expect(tracker.completeThroughMs).toBe(now - 2_000)
      const last = () => published.at(-1)!
      expect(last().untouchedThroughMs).toBeUndefined()
      // Routed: every organization but ORG_A is complete through the new beat, ORG_A is not yet.
      held.route.open()
      await eventually(() => (last().untouchedThroughMs === now - 1_000 ? true : undefined))
      expect(last()).toMatchObject({
        completeThroughMs: now - 2_000,
        touchedOrganizations: [ORG_A],
      })
      const at = (organizationId: string) =>
        freshnessOf(last(), { organizationId, file: null }, Date.now()).completeThroughMs
      expect(at(ORG_B)).toBe(now - 1_000)
      expect(at(ORG_A)).toBe(now - 2_000)
      // Applied and committed: the beat is proved for everyone, the claim gone with it.
      apply.open()
      await eventually(() => (last().completeThroughMs === now - 1_000 ? true : undefined))
      expect(last().untouchedThroughMs).toBeUndefined()
      expect(at(ORG_A)).toBe(now - 1_000)
    } finally {
      held?.route.open()
      apply.open()
      await source.stop()
    }
  })
})
