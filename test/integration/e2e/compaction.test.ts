// Compacted change topics end to end (projector/sources/topic-config.ts): PostgreSQL, Debezium and
// a real broker whose cleaner is set to compact at once (the shipped settings, then an hour of
// min.compaction.lag.ms taken down to 0, segments rolled every 200 ms and any dirty ratio
// cleanable, as an operator would alter the topics; the harness's broker checks for work every
// second). Many updates and deletes per row happen while the live projector is stopped; the
// test checks that the broker really compacted (the first offsets are gone, and each deleted
// row's op:d with them, its tombstone left), then:
// - the projector, started again, catches up to the same documents a fresh replay serves;
// - a whole rebuild (its dry run: same replay, same comparison) and a per-organization rebuild
//   find nothing to change;
// - verify finds no drift; then a TRUNCATE, which the connector skips (a compacted topic refuses
//   its keyless event), is drift that verify reports.
import { ConfigResourceTypes } from 'kafkajs'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { RebuildReport } from '../../../projector/rebuild/report.ts'
import { changeTopics } from '../../../projector/sources/kafka.ts'
import { CHANGE_TOPIC_CONFIG } from '../../../projector/sources/topic-config.ts'
import type { VerifyReport } from '../../../projector/verify/report.ts'
import { collectRecords, type CapturedRecord } from '../../harness/consume.ts'
import { kafkaClient } from '../../harness/kafka.ts'
import {
  Pipeline,
  servedState,
  stateDifferences,
  TOPIC_PREFIX,
  topicEnd,
} from '../../support/e2e.ts'
import {
  deleteRow,
  insertApiKey,
  insertOrganization,
  insertProvider,
  insertProviderIdentifier,
  updateRow,
} from '../../support/e2e-sql.ts'
import { runEntry } from '../../support/processes.ts'

interface Organization {
  id: string
  key: string
  providers: string[]
  /** provider id -> its identifier */
  identifiers: Map<string, string>
}

const UPDATES_PER_ROW = 10
let pipeline: Pipeline
const organizations: Organization[] = []
/** Providers (and their identifiers) deleted while the projector was stopped. */
const deleted: string[] = []

beforeAll(async () => {
  pipeline = await Pipeline.start({
    beforeConnector: async (sql) => {
      for (let n = 0; n < 2; n++) {
        const organization = await insertOrganization(sql, { name: `Compaction ${n}` })
        const key = await insertApiKey(sql, organization.id)
        const entry: Organization = {
          id: organization.id,
          key: key.raw,
          providers: [],
          identifiers: new Map(),
        }
        for (let i = 0; i < 8; i++) {
          const provider = await insertProvider(sql, organization.id, { last_name: `Start ${i}` })
          entry.providers.push(provider.id)
          const identifier = await insertProviderIdentifier(sql, organization.id, provider.id)
          entry.identifiers.set(provider.id, identifier.id)
        }
        organizations.push(entry)
      }
    },
  })
  await pipeline.caughtUp(pipeline.projector!)
}, 300_000)

afterAll(async () => {
  await pipeline?.stop()
})

function operatorEnv(): Record<string, string> {
  return {
    DATA_DIR: pipeline.dataDir,
    KAFKA_BROKERS: pipeline.kafka.brokers.join(','),
    KAFKA_GROUP_ID: 'e2e-replica',
    TOPIC_PREFIX,
    LOG_LEVEL: 'warn',
  }
}

/** The shipped topic settings, with the cleaner told to act at once. */
async function compactAtOnce(): Promise<void> {
  const admin = kafkaClient(pipeline.kafka.brokers).admin()
  await admin.connect()
  try {
    const existing = new Set(await admin.listTopics())
    const config = {
      ...CHANGE_TOPIC_CONFIG,
      'min.compaction.lag.ms': '0',
      'segment.ms': '200',
      'min.cleanable.dirty.ratio': '0.01',
    }
    // alterConfigs replaces a topic's settings whole: the shipped ones are given again.
    await admin.alterConfigs({
      validateOnly: false,
      resources: changeTopics(TOPIC_PREFIX)
        .filter((topic) => existing.has(topic))
        .map((name) => ({
          type: ConfigResourceTypes.TOPIC,
          name,
          configEntries: Object.entries(config).map(([n, value]) => ({ name: n, value })),
        })),
    })
  } finally {
    await admin.disconnect()
  }
}

/** Every record a topic holds now, from its first to its last offset. */
async function readAll(topic: string): Promise<CapturedRecord[]> {
  const end = await topicEnd(pipeline.kafka.brokers, topic)
  return collectRecords(
    pipeline.kafka.brokers,
    [topic],
    (seen) => seen.some((r) => Number(r.offset) >= end - 1),
    60_000,
  )
}

function idOf(record: CapturedRecord): string | undefined {
  const key = record.key as { payload?: { id?: string }; id?: string } | null
  return key?.payload?.id ?? key?.id
}

function opOf(record: CapturedRecord): string | undefined {
  const value = record.value as { payload?: { op?: string }; op?: string } | null
  return value?.payload?.op ?? value?.op
}

describe('compacted change topics', { timeout: 600_000 }, () => {
  it('the broker compacts history while the projector is stopped; it catches up to what a fresh replay serves', async () => {
    await compactAtOnce()
    await pipeline.projector!.stop()
    const sql = pipeline.sql
    for (let round = 1; round <= UPDATES_PER_ROW; round++) {
      for (const organization of organizations) {
        for (const provider of organization.providers) {
          await updateRow(sql, 'providers', provider, { last_name: `Round ${round}` })
          await updateRow(sql, 'provider_identifiers', organization.identifiers.get(provider)!, {
            value: `LIC-${round}`,
          })
        }
      }
    }
    for (const organization of organizations) {
      for (const provider of organization.providers.slice(0, 2)) {
        await deleteRow(sql, 'provider_identifiers', organization.identifiers.get(provider)!)
        await deleteRow(sql, 'providers', provider)
        deleted.push(provider)
      }
      await updateRow(sql, 'organizations', organization.id, {
        name: `Compacted ${organization.id}`,
      })
    }
    const survivors = organizations.flatMap((o) => o.providers.filter((p) => !deleted.includes(p)))
    const touched = ['providers', 'provider_identifiers'].map((t) => `${TOPIC_PREFIX}.public.${t}`)

    // Compaction leaves the active segment alone: later writes roll the segments holding the
    // history, until the cleaner has removed each deleted row's op:d (its tombstone stays for
    // delete.retention.ms, 8 days) and the first offsets.
    let providers: CapturedRecord[] = []
    const deadline = Date.now() + 180_000
    for (let n = 0; ; n++) {
      await sleep(500)
      await updateRow(sql, 'providers', survivors[n % survivors.length]!, { suffix: `S${n}` })
      await updateRow(
        sql,
        'provider_identifiers',
        organizations[0]!.identifiers.get(survivors[0]!)!,
        {
          value: `LIC-roll-${n}`,
        },
      )
      providers = await readAll(touched[0]!)
      // Every deleted row's tombstone has arrived (Debezium may still be sending), and the
      // op:d before it is gone.
      const ofDeleted = providers.filter((r) => deleted.includes(idOf(r) ?? ''))
      const tombstones = ofDeleted.filter((r) => r.value === null).length
      const deletes = ofDeleted.filter((r) => opOf(r) === 'd').length
      if (tombstones === deleted.length && deletes === 0 && Number(providers[0]!.offset) > 0) {
        break
      }
      if (Date.now() > deadline) {
        throw new Error(
          `the broker did not compact ${touched[0]}: ${providers.length} records, ${tombstones} tombstones, ${deletes} deletes left, first offset ${providers[0]!.offset}`,
        )
      }
    }
    const end = await topicEnd(pipeline.kafka.brokers, touched[0]!)
    // Each row's history is down to its last record (a few more in segments not cleaned yet).
    expect(providers.length).toBeLessThan(end / 2)
    for (const id of deleted) {
      const left = providers.filter((r) => idOf(r) === id)
      expect(left.map((r) => r.value)).toEqual([null])
    }

    const main = await pipeline.startMainProjector()
    await pipeline.caughtUp(main)
    const clean = await pipeline.startCleanProjector()
    await pipeline.caughtUp(clean)
    const live = servedState(pipeline.dataDir)
    expect(stateDifferences(servedState(clean.dataDir), live)).toEqual([])
    await clean.stop()
    // Equal, and right: the deleted providers are gone, the others at their last update.
    for (const organization of organizations) {
      const client = pipeline.client(organization.key)
      const served = await client.list<{ id: string; lastName: string }>('/providers')
      expect(served.map((p) => p.id).sort()).toEqual(
        organization.providers.filter((p) => !deleted.includes(p)).sort(),
      )
      expect(new Set(served.map((p) => p.lastName))).toEqual(new Set([`Round ${UPDATES_PER_ROW}`]))
    }
  })

  it('a whole rebuild (dry run) and a per-organization rebuild from the compacted topics change nothing', async () => {
    const whole = await runEntry(
      'projector/main.ts',
      ['--rebuild', '--dry-run', '--json'],
      operatorEnv(),
      240_000,
    )
    expect(whole.code, whole.stderr).toBe(0)
    const report = JSON.parse(whole.stdout) as RebuildReport
    expect(report.organizations.length).toBeGreaterThanOrEqual(2)

    const before = servedState(pipeline.dataDir)
    const [a] = organizations as [Organization]
    const one = await runEntry(
      'projector/main.ts',
      ['--rebuild', '--org', a.id, '--json'],
      operatorEnv(),
      240_000,
    )
    expect(one.code, one.stderr).toBe(0)
    const oneReport = JSON.parse(one.stdout) as RebuildReport
    expect(oneReport.organizations.map((o) => o.organizationId)).toEqual([a.id])
    // Swapped in (a new file), serving the same content.
    expect(stateDifferences(before, servedState(pipeline.dataDir))).toEqual([])
  })

  it('verify finds no drift; a TRUNCATE the connector skipped is drift it reports', async () => {
    const env = {
      ...operatorEnv(),
      DATABASE_URL: pipeline.postgres.url,
      VERIFY_CATCH_UP_TIMEOUT_MS: '60000',
    }
    const clean = await runEntry('projector/verify/main.ts', ['--json'], env, 240_000)
    expect(clean.code, clean.stderr).toBe(0)
    expect((JSON.parse(clean.stdout) as VerifyReport).drift).toBe(false)

    await pipeline.sql.query('truncate provider_identifiers')
    // Nothing reaches Kafka for it: give the connector time to have sent it, were it sent.
    await sleep(3_000)
    const truncated = await runEntry('projector/verify/main.ts', ['--json'], env, 240_000)
    expect(truncated.code, truncated.stderr).toBe(1)
    const report = JSON.parse(truncated.stdout) as VerifyReport
    expect(report.drift).toBe(true)
    // Every organization still serves its providers with the identifiers PostgreSQL no longer has.
    for (const organization of organizations) {
      const entry = report.organizations.find((o) => o.organizationId === organization.id)!
      const providers = entry.resources.find((r) => r.resource === 'providers')!
      expect(providers.differing.count).toBe(organization.providers.length - 2)
    }
    // The connector kept running: a keyless event did not reach a compacted topic.
    expect(JSON.stringify(await pipeline.connect.status())).not.toContain('FAILED')
  })
})
