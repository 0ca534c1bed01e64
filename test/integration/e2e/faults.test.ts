// End to end under faults: the projector killed mid-stream, Kafka missing at start and lost
// mid-stream, and a schema change in PostgreSQL. The pipeline is real (PostgreSQL, Debezium,
// Kafka, the projector and api processes); every check goes through HTTP, and the final files are
// compared with a clean replay of the same topics. One pipeline serves the file; tests run in
// order (the first one starts the projector).
import { readFileSync } from 'node:fs'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import type { Provider } from '../../../schema/resources.ts'
import {
  ApiClient,
  DEAD_LETTER_TOPIC,
  DelayStats,
  Pipeline,
  duplicates,
  metricValue,
  servedState,
  stateDifferences,
  topicEnd,
  type ErrorBody,
  type ProjectorProcess,
} from '../../support/e2e.ts'
import {
  insertApiKey,
  insertOrganization,
  insertProvider,
  insertSmallOrganizations,
  renameAcross,
  updateRow,
  writeBulk,
  type BulkExpectation,
  type OrganizationRow,
  type ProviderRow,
  type SpreadProvider,
} from '../../support/e2e-sql.ts'

/** A bulk expectation as comparable text, whatever the order of its entries. */
function canonical(bulk: BulkExpectation): string {
  return JSON.stringify([...bulk].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
}

// Each test waits out a fault (a consumer-group session, a broker restart): minutes, not seconds.
describe('end to end under faults', { timeout: 300_000 }, () => {
  let pipeline: Pipeline
  let org: OrganizationRow
  let rawKey: string
  let api: ApiClient
  /** Written before the connector starts: arrives as snapshot reads. */
  let seeded: ProviderRow
  /** How long the replica took to show a change after its fault was over. */
  const recoveries = new DelayStats()
  /**
   * Many small organizations beside the one the api reads (ISSUE 22): their changes interleave,
   * so the projector's batches touch many files; fewer may be open than there are (OPEN_FILES_MAX
   * below), so files close and reopen between batches, under every fault.
   */
  let small: SpreadProvider[] = []
  const SMALL_ORGANIZATIONS = 300

  beforeAll(async () => {
    pipeline = await Pipeline.start({
      startProjector: false,
      projectorEnv: { OPEN_FILES_MAX: '64' },
      beforeConnector: async (sql) => {
        small = await insertSmallOrganizations(sql, SMALL_ORGANIZATIONS, 2)
        org = await insertOrganization(sql, { name: 'Faulty Health' })
        rawKey = (await insertApiKey(sql, org.id)).raw
        seeded = await insertProvider(sql, org.id, {
          first_name: 'Seeded',
          last_name: 'Before',
          personal_fax: '555-0199',
        })
      },
    })
    api = pipeline.client(rawKey)
  })

  // Every test but the first (which starts the projector itself, with the broker away) begins
  // with the broker and the main projector running, so that one failed test leaves the next one
  // a working pipeline instead of failing it too.
  beforeEach(async (context) => {
    if (context.task.name.startsWith('the projector started before Kafka')) return
    if (!pipeline.kafka.brokerRunning()) await pipeline.startBroker()
    if (pipeline.projector === undefined || pipeline.projector.proc.exitCode() !== null) {
      await pipeline.startMainProjector()
    }
  })

  afterAll(async () => {
    console.log(recoveries.line().replace('e2e delay ms', 'e2e recovery ms'))
    await pipeline?.stop()
  })

  const providerOf = (id: string) => api.detail<Provider>(`/providers/${id}`)
  const projector = (): ProjectorProcess => {
    if (pipeline.projector === undefined) throw new Error('the projector is not running')
    return pipeline.projector
  }
  const applied = async (table: string): Promise<number> =>
    metricValue(await projector().metrics(), 'replica_projector_events_total', {
      table,
      outcome: 'applied',
    })

  /** The providers of a bulk run as the API lists them, and the ids listed more than once. */
  async function servedBulk(tag: string): Promise<{ served: BulkExpectation; repeated: string[] }> {
    const listed = (await api.list<Provider>('/providers')).filter((p) => p.firstName === tag)
    return {
      served: new Map(
        listed.map((p) => [p.id, { name: p.name, identifiers: p.providerIds.length }]),
      ),
      repeated: duplicates(listed.map((p) => p.id)),
    }
  }

  /**
   * Waits until the API serves exactly what a bulk run wrote (its last statements touch several
   * topics, so no single row says "everything arrived"), then checks that nothing is listed
   * twice and that the projector has committed everything.
   */
  async function expectBulkServed(tag: string, expected: BulkExpectation): Promise<void> {
    const wanted = canonical(expected)
    let last = ''
    await pipeline
      .eventually(
        `the ${expected.size} providers of the '${tag}' run`,
        async () => {
          const { served } = await servedBulk(tag)
          const missing = [...expected.keys()].filter((id) => !served.has(id)).length
          const extra = [...served.keys()].filter((id) => !expected.has(id)).length
          last = `${served.size} served, ${missing} missing, ${extra} extra`
          return canonical(served) === wanted ? true : undefined
        },
        { timeoutMs: 180_000, intervalMs: 500 },
      )
      .catch((error: unknown) => {
        throw new Error(`${last}\n${(error as Error).message}`)
      })
    const { served, repeated } = await servedBulk(tag)
    expect(repeated).toEqual([])
    expect(served).toEqual(expected)
    await pipeline.caughtUp(projector())
  }

  /**
   * A clean replay of every topic (fresh data directory and consumer group) must serve exactly
   * what the faulted run serves, text for text, apart from the visibility stamps.
   */
  async function expectEqualToCleanRun(): Promise<void> {
    await pipeline.caughtUp(projector())
    const clean = await pipeline.startCleanProjector()
    try {
      await pipeline.caughtUp(clean, 180_000)
      const expected = servedState(clean.dataDir)
      const actual = servedState(pipeline.dataDir)
      expect(expected.size).toBeGreaterThan(0)
      expect(stateDifferences(expected, actual)).toEqual([])
      expect(actual.size).toBe(expected.size)
    } finally {
      await clean.stop()
    }
  }

  it('the projector started before Kafka retries, then catches up once the broker is up', async () => {
    await pipeline.provisionTopics()
    await pipeline.kafka.stopBroker()
    // Changes made while the broker is away wait in Debezium (and PostgreSQL's slot).
    const during = await insertProvider(pipeline.sql, org.id, {
      first_name: 'Written',
      last_name: 'While Kafka was down',
    })
    const started = await pipeline.startMainProjector()
    await pipeline.eventually(
      'the projector to fail to reach Kafka',
      async () =>
        /ECONNREFUSED/.test(readFileSync(started.proc.logFile, 'utf8')) ? true : undefined,
      { timeoutMs: 60_000, intervalMs: 200 },
    )
    // Logged as type and message: no stack trace reaches the logs (kafkajs adds one).
    expect(readFileSync(started.proc.logFile, 'utf8')).not.toMatch(/"stack"|\\n\s+at /)
    // Nothing caught up yet: the api says so instead of serving an empty replica.
    const early = await api.get<ErrorBody>('/providers')
    expect(early.status).toBe(503)
    expect(early.body.error.code).toBe('api_temporarily_unavailable')
    expect(started.proc.exitCode()).toBeNull()

    await pipeline.startBroker()
    const brokerUp = performance.now()
    await pipeline.eventually(
      'the snapshot row and the row written while Kafka was down',
      async () =>
        (await providerOf(seeded.id)) !== undefined && (await providerOf(during.id)) !== undefined
          ? true
          : undefined,
      { timeoutMs: 180_000, intervalMs: 200 },
    )
    recoveries.add('kafka-late-start', performance.now() - brokerUp)
    expect((await providerOf(seeded.id))?.name).toBe('Seeded Before')
  })

  /** The providers' last names as the replica's files hold them (no key reads these orgs). */
  function servedLastNames(): Map<string, string> {
    const names = new Map<string, string>()
    for (const [key, row] of servedState(pipeline.dataDir)) {
      if (!key.includes('/doc_providers/')) continue
      const body = JSON.parse((JSON.parse(row) as { body: string }).body) as Provider
      names.set(body.id, body.lastName ?? '')
    }
    return names
  }

  it('a projector killed with SIGKILL mid-stream resumes to the same documents as a clean run', async () => {
    const before = await applied('providers')
    let done = 0
    // Meanwhile, renames spread over the small organizations, one after another.
    const spreading = renameAcross(pipeline.sql, small, {
      count: 1_200,
      perSecond: 100,
      tag: 'Spread',
    })
    // Paced over ~13 s: the projector, a second or two behind Debezium, reaches 300 events
    // with most of the run still to write.
    const writing = writeBulk(pipeline.sql, org.id, {
      tag: 'Killed',
      count: 2000,
      perSecond: 150,
      onProgress: (n) => (done = n),
    })
    // Kill while both sides work: the projector has applied part of the run, the run goes on.
    const appliedAtKill = await pipeline.eventually(
      'the projector to be into the run',
      async () => {
        const n = (await applied('providers')) - before
        return n >= 300 ? n : undefined
      },
      { timeoutMs: 60_000 },
    )
    const writtenAtKill = done
    await projector().kill()
    const killedAt = performance.now()
    console.log(
      `SIGKILL with ${writtenAtKill} of 2000 iterations written, ${appliedAtKill} provider events applied`,
    )
    expect(writtenAtKill).toBeLessThan(2000)
    await pipeline.startMainProjector()
    await expectBulkServed('Killed', await writing)
    recoveries.add('sigkill-restart', performance.now() - killedAt)
    // Every small organization's last rename served, none lost across the kill.
    const renamed = await spreading
    await pipeline.eventually('the last rename of every small organization', async () => {
      const served = servedLastNames()
      return [...renamed].every(([id, name]) => served.get(id) === name) ? true : undefined
    })
    await expectEqualToCleanRun()
  })

  it('Kafka lost mid-stream: the api serves what it has, and the projector resumes without loss or duplicates', async () => {
    const before = await applied('providers')
    const firstHalf = writeBulk(pipeline.sql, org.id, { tag: 'Outage', count: 800 })
    await pipeline.eventually(
      'the projector to be into the run',
      async () => ((await applied('providers')) - before >= 200 ? true : undefined),
      { timeoutMs: 60_000 },
    )
    await pipeline.kafka.stopBroker()
    // Some of the run is served; the api goes on serving it, unchanged, without Kafka. A batch
    // fetched before the broker went may still be applying (its files commit without Kafka): the
    // served list is taken once it has settled.
    const servedBefore = await pipeline.eventually(
      'the served list to settle without Kafka',
      async () => {
        const first = await api.list<Provider>('/providers')
        await new Promise((resolve) => setTimeout(resolve, 1_500))
        const second = await api.list<Provider>('/providers')
        return JSON.stringify(first) === JSON.stringify(second) ? second : undefined
      },
      { timeoutMs: 60_000 },
    )
    expect(servedBefore.length).toBeGreaterThan(0)

    const expected = await firstHalf
    // More writes while the broker is away: they wait in Debezium and PostgreSQL's slot.
    for (const [id, value] of await writeBulk(pipeline.sql, org.id, {
      tag: 'Outage',
      count: 200,
    })) {
      expected.set(id, value)
    }
    expect(await api.list<Provider>('/providers')).toEqual(servedBefore)
    const sample = servedBefore[0]!
    expect(await providerOf(sample.id)).toEqual(sample)
    expect(projector().proc.exitCode()).toBeNull()

    await pipeline.startBroker()
    const brokerUp = performance.now()
    await expectBulkServed('Outage', expected)
    recoveries.add('kafka-restart', performance.now() - brokerUp)
  })

  it('a column added and another dropped in PostgreSQL: changes keep flowing, no dead letters', async () => {
    const sql = pipeline.sql
    const deadLettersBefore = await topicEnd(pipeline.kafka.brokers, DEAD_LETTER_TOPIC)

    await sql.query('alter table providers add column favourite_colour text')
    await updateRow(sql, 'providers', seeded.id, {
      favourite_colour: 'teal',
      specialty: 'Cardiology',
    })
    await pipeline.eventually('the update after the added column', async () =>
      (await providerOf(seeded.id))?.specialty === 'Cardiology' ? true : undefined,
    )
    const afterAdd = (await providerOf(seeded.id))!
    expect(afterAdd.personalFax).toBe('555-0199')
    expect(JSON.stringify(afterAdd)).not.toContain('teal')

    await sql.query('alter table providers drop column personal_fax')
    await updateRow(sql, 'providers', seeded.id, { specialty: 'Neurology' })
    const newcomer = await insertProvider(sql, org.id, {
      first_name: 'After',
      last_name: 'The Drop',
      favourite_colour: 'red',
    })
    await pipeline.eventually('the changes after the dropped column', async () =>
      (await providerOf(seeded.id))?.specialty === 'Neurology' &&
      (await providerOf(newcomer.id)) !== undefined
        ? true
        : undefined,
    )
    // A nullable column that disappears from the events reads as null (docs/design.md).
    const afterDrop = (await providerOf(seeded.id))!
    expect(afterDrop.personalFax).toBeNull()
    expect(afterDrop.updatedAt > afterAdd.updatedAt).toBe(true)
    expect((await providerOf(newcomer.id))?.name).toBe('After The Drop')

    await pipeline.caughtUp(projector())
    expect(await topicEnd(pipeline.kafka.brokers, DEAD_LETTER_TOPIC)).toBe(deadLettersBefore)
    const metrics = await projector().metrics()
    expect(
      metricValue(metrics, 'replica_projector_events_total', { outcome: 'dead_lettered' }),
    ).toBe(0)
    expect(projector().proc.exitCode()).toBeNull()
    expect((await pipeline.connect.status()).tasks.map((t) => t.state)).toEqual(['RUNNING'])
  })

  it('after every fault, the served documents equal a clean replay of the topics', async () => {
    await expectEqualToCleanRun()
  })
})
